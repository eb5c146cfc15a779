/*
 * The CUDA device's kernels, each behind a host launcher that enqueues it on a stream and returns the launch status.
 * Activations are fp32 (the CPU device's accumulation type, so the two devices agree closely); weights and the KV
 * cache are bf16. Every launcher checks nothing about its arguments: the forward pass (cuda_device.cu) passes only
 * shapes it validated at create and indices the host validated per batch.
 */
#ifndef RILL_CUDA_KERNELS_CUH
#define RILL_CUDA_KERNELS_CUH

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stdint.h>

/* Kernel launches go through this macro so the kernels also build for the host emulation (emu/cuda_runtime.h). */
#ifdef RILL_CUDA_EMU
#define RILL_LAUNCH(kernel, grid, block, stream, ...) \
  rill_emu_launch((stream), (grid), (block), [=] { kernel(__VA_ARGS__); })
#else
#define RILL_LAUNCH(kernel, grid, block, stream, ...) kernel<<<(grid), (block), 0, (stream)>>>(__VA_ARGS__)
#endif

/* Geometry of the paged KV pool on the device: K and V tiles of [block_size][head_dim] per (layer, block, kv head),
 * element (slot, d) of (layer, block, head) at ((layer × num_blocks + block) × kv_heads + head) × block_size × D +
 * slot × D + d. */
struct rill_kv_geom {
  int32_t num_blocks, block_size, kv_heads, head_dim;
  int32_t table_stride; /* entries per sequence in the device's block table */
};

/* x[t] = embed[tokens[t]] as fp32. */
cudaError_t rill_k_embed(cudaStream_t s, const __nv_bfloat16 *embed, int H, const int32_t *tokens, int T, float *x);

/* out[r] = w ⊙ x[src(r)] / rms(x[src(r)]), src(r) = rows ? rows[r] : r; rows of n values, eps inside the root. */
cudaError_t rill_k_rms_norm(cudaStream_t s, const float *x, const int32_t *rows, const float *w, int n, float eps,
                            int R, float *out);

/* Steps of at most this many fed tokens stream W (the GEMV path); larger ones use a GEMM. */
constexpr int kGemvMaxTokens = 16;

/* y[t][n] = (accumulate ? y[t][n] : 0) + Σ_k x[t][k] · W[n][k] + (bias ? bias[n] : 0), for t < T, n < N; K % 8 == 0.
 * Small T streams W once per 8 tokens with 16-byte loads; larger T uses shared-memory tiles. */
cudaError_t rill_k_linear(cudaStream_t s, const float *x, int T, int K, const __nv_bfloat16 *W, int N,
                          const float *bias, int accumulate, float *y);

/* Per fed token: per-head RMSNorm of q and k (when q_norm), RoPE at positions[t] (angles as the CPU device computes
 * them: fp32 angle, cos/sin in double), then k and v written into the token's KV slot of `layer`. */
cudaError_t rill_k_qk_rope_kv(cudaStream_t s, float *qkv, int T, int num_heads, int kv_heads, int head_dim,
                              const float *q_norm, const float *k_norm, float eps, const float *inv_freq,
                              const int32_t *positions, const int32_t *tok_seq, const int32_t *tables,
                              rill_kv_geom g, int layer, __nv_bfloat16 *kc, __nv_bfloat16 *vc);

/* Split-KV: steps of at most kSplitMaxTokens fed tokens (decode and verify) split each token's positions into
 * kMaxSplits ranges whose lengths depend on that token's context alone, so small batches fill the GPU and a token's
 * logits are the same whatever else is in the step. Scratch for the partials: part_ml [kSplitMaxTokens × kMaxSplits
 * × num_heads × 2], part_acc [kSplitMaxTokens × kMaxSplits × num_heads × head_dim] floats. */
constexpr int kMaxSplits = 16;
constexpr int kSplitMaxTokens = 16;
constexpr int kSplitTokenBudget = kSplitMaxTokens * kMaxSplits;

/* Splits for a step of T fed tokens: kMaxSplits, or 1 (no split) for larger steps. */
int rill_attention_splits(int T);

/* out[t][h] = softmax(q[t][h] · K[0..positions[t]]ᵀ / √D) · V over the token's sequence, read through its block
 * table; q heads h share kv head h / (num_heads / kv_heads). With splits > 1 (rill_attention_splits), ranges of
 * positions run in parallel and a merge kernel combines them. */
cudaError_t rill_k_attention(cudaStream_t s, const float *qkv, int T, int num_heads, const int32_t *positions,
                             const int32_t *tok_seq, const int32_t *tables, rill_kv_geom g, int layer,
                             const __nv_bfloat16 *kc, const __nv_bfloat16 *vc, float *out, int splits,
                             float *part_ml, float *part_acc);

/* act[t][i] = silu(gu[t][i]) · gu[t][I + i]. */
cudaError_t rill_k_silu_mul(cudaStream_t s, const float *gu, int T, int I, float *act);

#endif /* RILL_CUDA_KERNELS_CUH */
