/*
 * The CUDA device's kernels, each behind a host launcher that enqueues it on a stream and returns the launch status.
 * Weights and the KV cache are bf16; every product accumulates in fp32. The residual stream and the projections'
 * outputs are fp32 (the residual accumulates across layers). Steps of at most kGemvMaxTokens tokens read fp32 x in the
 * weight-streaming kernel, with RMSNorm and SiLU·mul applied as x is loaded; larger steps feed bf16 activations
 * (normed rows, SiLU·mul) to a bf16 × bf16 GEMM. Every launcher checks nothing about its arguments: the forward pass (cuda_device.cu) passes only
 * shapes it validated at create and indices the host validated per batch.
 */
#ifndef RILL_CUDA_KERNELS_CUH
#define RILL_CUDA_KERNELS_CUH

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stdint.h>

/* Kernel launches go through this macro so the kernels also build for the host emulation
 * (ffi/tests/cuda_emu/cuda_runtime.h). */
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
  int32_t granule;      /* attention's unit of positions (rill_attention_granule), fixed at create */
};

/* x[t] = embed[tokens[t]] as fp32. */
cudaError_t rill_k_embed(cudaStream_t s, const __nv_bfloat16 *embed, int H, const int32_t *tokens, int T, float *x);

/* out[r] = bf16(w ⊙ x[src(r)] / rms(x[src(r)])), src(r) = rows ? rows[r] : r; rows of n values, eps inside the
 * root. The GEMM's input above the GEMV threshold (below it rill_k_linear_norm fuses the norm). */
cudaError_t rill_k_rms_norm(cudaStream_t s, const float *x, const int32_t *rows, const float *w, int n, float eps,
                            int R, __nv_bfloat16 *out);

/* Steps of at most this many fed tokens stream W (the GEMV path); larger ones use a GEMM. */
constexpr int kGemvMaxTokens = 16;

/* y[t][n] = (accumulate ? y[t][n] : 0) + Σ_k x[t][k] · W[n][k] + (bias ? bias[n] : 0), for t < T, n < N; K % 8 == 0.
 * Small T streams W once per 8 tokens (each lane keeps several 16-byte loads of W in flight); larger T uses
 * shared-memory tiles. */
cudaError_t rill_k_linear(cudaStream_t s, const float *x, int T, int K, const __nv_bfloat16 *W, int N,
                          const float *bias, int accumulate, float *y);

/* rill_k_linear's contract for bf16 x on the tiled kernel (any T): the fallback when cuBLASLt is absent or has no
 * algorithm for a shape. */
cudaError_t rill_k_linear_bf16x(cudaStream_t s, const __nv_bfloat16 *x, int T, int K, const __nv_bfloat16 *W, int N,
                                const float *bias, int accumulate, float *y);

/* rill_k_linear of the RMSNorm of x's rows (rill_k_rms_norm's src(r), weight norm_w, eps), without writing them:
 * y = inv_rms(x) · Σ_k (x[k] · norm_w[k]) · W[n][k], the sum of squares taken in the same pass over x.
 * T ≤ kGemvMaxTokens (cudaErrorInvalidValue otherwise). */
cudaError_t rill_k_linear_norm(cudaStream_t s, const float *x, const int32_t *rows, const float *norm_w, float eps,
                               int T, int K, const __nv_bfloat16 *W, int N, const float *bias, int accumulate,
                               float *y);

/* y[t] += silu(gu[t][0..I)) ⊙ gu[t][I..2I) · Wᵀ (the down projection with the residual add), the product computed as
 * x is loaded. T ≤ kGemvMaxTokens (cudaErrorInvalidValue otherwise); I % 8 == 0. */
cudaError_t rill_k_linear_silu_mul(cudaStream_t s, const float *gu, int T, int I, const __nv_bfloat16 *W, int N,
                                   float *y);

/* Per fed token: per-head RMSNorm of q and k (when q_norm), RoPE at positions[t] (angles as the CPU device computes
 * them: fp32 angle, cos/sin in double, each times rope_scale), then k and v written into the token's KV slot of
 * `layer`. */
cudaError_t rill_k_qk_rope_kv(cudaStream_t s, float *qkv, int T, int num_heads, int kv_heads, int head_dim,
                              const float *q_norm, const float *k_norm, float eps, const float *inv_freq,
                              float rope_scale, const int32_t *positions, const int32_t *tok_seq,
                              const int32_t *tables, rill_kv_geom g, int layer, __nv_bfloat16 *kc, __nv_bfloat16 *vc);

/* Attention (kernels_attention.cu). Steps of at most kSplitMaxTokens fed tokens (decode and draft verification)
 * run split-KV: one block per (tile of a sequence's fed tokens, KV head, granule of positions) serving every query
 * head of the KV head, then a merge; larger steps (prefill, chunked prefill after cached prefix blocks) run one block
 * per (tile, KV head) over all its granules. Granule boundaries are fixed multiples of g.granule, so a token's output
 * depends on its own context alone: bitwise the same whatever else is in the step and whichever kernel runs it. */
constexpr int kSplitMaxTokens = 16;

/* Positions per granule for max_positions: at most 64 granules per sequence, a multiple of 32, at least 128. */
int rill_attention_granule(int max_positions);

/* Granules per sequence the block table can address (the split grid's depth and the partials' stride). The split
 * partials need part_ml [kSplitMaxTokens × num_heads × granules × 2] and part_acc [kSplitMaxTokens × num_heads ×
 * granules × head_dim] floats. */
int rill_attention_granules(rill_kv_geom g);

/* Whether the kernels take these heads: head_dim even and ≤ 256, query heads per KV head × head_dim ≤ 4096, at most 64
 * query heads per KV head. */
int rill_attention_supports(int num_heads, int kv_heads, int head_dim);

/* out[t][h] = softmax(q[t][h] · K[0..positions[t]]ᵀ / √D) · V over the token's sequence, read through its block
 * table; query head h reads KV head h / (num_heads / kv_heads). window > 0: only positions[t] − window + 1 ..
 * positions[t]; sinks (or NULL): head h's logit sinks[h] joins the softmax as one more column with no value. Sequence s feeds tokens [query_start[s],
 * query_start[s + 1]) (num_seqs + 1 entries on the device). T and num_seqs only bound the launch
 * shapes (T ≤ kSplitMaxTokens picks split-KV): a larger bound with query_start padded by its last entry is the same
 * computation. */
cudaError_t rill_k_attention(cudaStream_t s, const float *qkv, int T, int num_seqs, int num_heads,
                             const int32_t *positions, const int32_t *query_start, const int32_t *tables,
                             rill_kv_geom g, int layer, int window, const float *sinks, const __nv_bfloat16 *kc,
                             const __nv_bfloat16 *vc, float *out, float *part_ml, float *part_acc);

/* gpt-oss's mixture of experts (kernels_moe.cu). out[t] = w ⊙ x[t] / rms(x[t]) in fp32 (the experts' input). */
cudaError_t rill_k_rms_norm_f32(cudaStream_t s, const float *x, const float *w, int n, float eps, int T, float *out);
/* Per token: the K largest of logits[t] + bias (ties to the lower index) into sel[t · K ..], largest first, and the
 * softmax over those K into weight. */
cudaError_t rill_k_moe_route(cudaStream_t s, const float *logits, const float *bias, int T, int E, int K, int32_t *sel,
                             float *weight);
/* For each pair p < pairs (p = t · K + j): y[p][r] = Σ_c x_row[c] · W_e[r][c] + bias[e][r] with e = sel[p] and x_row
 * row t (per_token) or p of x; W_e in MXFP4 as held (mxfp4.h: [E][rows][cols / 32] blocks of 16 bytes, E8M0 scales
 * [E][rows][cols / 32]), cols % 32 == 0. */
cudaError_t rill_k_mxfp4_experts(cudaStream_t s, const float *x, int ldx, int per_token, int pairs, int K,
                                 const int32_t *sel, const uint8_t *blocks, const uint8_t *scales, const float *bias,
                                 int rows, int cols, float *y);
/* The pairs p < pairs grouped by expert: order[start[e] .. start[e + 1]) are the pairs with sel[p] == e, ascending
 * (start [E + 1], order [pairs]); computed on the device, so no host round trip. */
cudaError_t rill_k_moe_group(cudaStream_t s, const int32_t *sel, int pairs, int E, int32_t *start, int32_t *order);
/* rill_k_mxfp4_experts for the pairs rill_k_moe_group grouped, each expert's weights read once for all its pairs; every
 * y[p] is bit for bit rill_k_mxfp4_experts's. The launch shape depends on E and rows only. */
cudaError_t rill_k_mxfp4_experts_grouped(cudaStream_t s, const float *x, int ldx, int per_token, int E, int K,
                                         const int32_t *start, const int32_t *order, const uint8_t *blocks,
                                         const uint8_t *scales, const float *bias, int rows, int cols, float *y);
/* act[p][i] = (clamp(up, ±limit) + 1) · g · σ(1.702 · g), g = min(gate, limit), gate = gu[p][2i], up = gu[p][2i + 1]. */
cudaError_t rill_k_moe_act(cudaStream_t s, const float *gu, int pairs, int I, float limit, float *act);
/* x[t] += Σ_j weight[t][j] · y[t · K + j] for t < T. */
cudaError_t rill_k_moe_combine(cudaStream_t s, const float *y, const float *weight, int T, int K, int H, float *x);

/* act[t][i] = bf16(silu(gu[t][i]) · gu[t][I + i]): the down GEMM's input above the GEMV threshold. */
cudaError_t rill_k_silu_mul(cudaStream_t s, const float *gu, int T, int I, __nv_bfloat16 *act);

#endif /* RILL_CUDA_KERNELS_CUH */
