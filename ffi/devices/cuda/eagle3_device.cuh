/*
 * The EAGLE-3 head on the CUDA device (eagle3.h describes the method; this is its device side). The target's forward
 * pass (cuda_device.cu) hands over its residual stream at the tapped layer inputs (rill_cuda_e3_tap) and, after its
 * layers, the fed tokens' metadata (rill_cuda_e3_follow): fc over the concatenated taps into the paged feature store,
 * and the head's K/V of every fed position p > 0 (the pair g_{p-1}, token p at RoPE position p − 1) into its own
 * one-layer bf16 KV pool, both addressed through the step's block tables, one block more than the engine's (the
 * target's scratch block, which a graph's padding tokens at position 0 address). Those calls only enqueue, so they
 * run inside the target's CUDA graphs too. rill_cuda_e3_propose then chains k greedy rounds for all proposing
 * sequences at once on the device and copies back only the proposed ids.
 */
#ifndef RILL_CUDA_EAGLE3_DEVICE_CUH
#define RILL_CUDA_EAGLE3_DEVICE_CUH

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>

#include "cuda_device.h"
#include "gemm_lt.cuh"

struct rill_cuda_e3;

/* Checks the head's shapes against the kernels, uploads its weights as bf16 (fp32 heads rounded once) and allocates
 * every step buffer for lim (max_batch_tokens, max_seqs, max_drafts, block_size, max_positions). embed: the target's
 * embeddings on the device, read when the head has none. lt: cuBLASLt for rows above the GEMV threshold, or NULL. */
rill_status rill_cuda_e3_create(const struct rill_eagle3_head *h, const float *inv_freq, const __nv_bfloat16 *embed,
                                const rill_limits *lim, rill_gemm_lt *lt, rill_cuda_e3 **out, char *err,
                                size_t err_cap);
void rill_cuda_e3_destroy(rill_cuda_e3 *x);
/* Bytes of the head's KV and features per KV block. */
size_t rill_cuda_e3_block_bytes(const rill_cuda_e3 *x);
/* The head's KV pool and feature store over `blocks` blocks (the engine's and its scratch block). */
rill_status rill_cuda_e3_alloc_pool(rill_cuda_e3 *x, int32_t blocks, char *err, size_t err_cap);
int64_t rill_cuda_e3_weight_bytes(const rill_cuda_e3 *x);
int64_t rill_cuda_e3_state_bytes(const rill_cuda_e3 *x);

/* Enqueues the copy of resid ([T × target hidden]) for each tap at target layer input `layer_input`. */
cudaError_t rill_cuda_e3_tap(rill_cuda_e3 *x, cudaStream_t st, int layer_input, const float *resid, int T);
/* Enqueues fc, the feature store and the head's K/V for the T fed tokens (device metadata; tables table_stride
 * apart, the head's stride). */
cudaError_t rill_cuda_e3_follow(rill_cuda_e3 *x, cudaStream_t st, int T, const int32_t *tokens,
                                const int32_t *positions, const int32_t *tok_seq, const int32_t *tables);
/* rill_draft_propose's contract for a validated batch after its step: r->counts and r->tokens give each sequence's
 * last accepted token. Synchronises st. */
rill_status rill_cuda_e3_propose(rill_cuda_e3 *x, cudaStream_t st, const rill_step_batch *b, rill_step_result *r,
                                 char *err, size_t err_cap);
/* The last proposal round's rows (rill_cuda_head_rows). */
rill_status rill_cuda_e3_last_rows(rill_cuda_e3 *x, cudaStream_t st, float *logits, float *hidden, int32_t cap,
                                   int32_t *rows, char *err, size_t err_cap);

#endif /* RILL_CUDA_EAGLE3_DEVICE_CUH */
