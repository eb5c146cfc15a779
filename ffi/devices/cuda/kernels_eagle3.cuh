/*
 * The EAGLE-3 head's kernels on the CUDA device (kernels_eagle3.cu), beside the target's (kernels.cuh): the taps of
 * the residual stream, the paged feature store, the head's input (two RMSNorms side by side), its RoPE and KV write at
 * position − 1, its attention over slots 1..pos of its own one-layer KV pool, and the greedy pick through d2t. As in
 * kernels.cuh, launchers check nothing: eagle3_device.cu passes shapes it validated at create and indices the host
 * validated per batch. A row's slot p of a sequence is tables[seq × table_stride + p / block_size] × block_size +
 * p % block_size, in the head's pool (geometry rill_kv_geom, layer 0) and in the feature store ([slots × hidden]).
 */
#ifndef RILL_CUDA_KERNELS_EAGLE3_CUH
#define RILL_CUDA_KERNELS_EAGLE3_CUH

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include "kernels.cuh"

/* tap[t][slot × Ht .. (slot + 1) × Ht) = x[t] for t < T: one of the three tapped rows fc reads concatenated. */
cudaError_t rill_k_e3_tap(cudaStream_t s, const float *x, int T, int Ht, int slot, float *tap);

/* feat[slot of (tok_seq[t], positions[t])] = g[t] for t < T (rows of H floats). */
cudaError_t rill_k_e3_store_features(cudaStream_t s, const float *g, int T, int H, const int32_t *positions,
                                     const int32_t *tok_seq, const int32_t *tables, int table_stride, int block_size,
                                     float *feat);

/* A proposal round j's rows: row r serves sequence row_seq[r], feeds cur_tok[seq] at cur_pos[seq] + j. */
cudaError_t rill_k_e3_round_rows(cudaStream_t s, int n, const int32_t *row_seq, int j, const int32_t *cur_tok,
                                 const int32_t *cur_pos, int32_t *row_tok, int32_t *row_pos);

/* Per row r < n with pos = row_pos[r] > 0: the fed hidden state h (hprev[row_seq[r]] when hprev, else the feature at
 * pos − 1) into hs[r], and in[r] = [in_norm ⊙ norm(embed[row_tok[r]]) ‖ hid_norm ⊙ norm(h)] (2H). pos 0 (no pair,
 * and a graph's padding rows): both rows zero, nothing read. */
cudaError_t rill_k_e3_input(cudaStream_t s, int n, const int32_t *row_tok, const int32_t *row_pos,
                            const int32_t *row_seq, const int32_t *tables, int table_stride, int block_size,
                            const float *feat, const float *hprev, const __nv_bfloat16 *embed, const float *in_norm,
                            const float *hid_norm, float eps, int H, float *hs, float *in);

/* Per row with pos = row_pos[r] > 0: RoPE at pos − 1 on q's heads (q non-NULL, rows ldq apart, rotated in place) and
 * on k, then k and v (kv: k heads then v heads, rows ldkv apart) into slot pos of the head's pool. */
cudaError_t rill_k_e3_rope_kv(cudaStream_t s, int n, float *q, int ldq, const float *kv, int ldkv, int num_heads,
                              const float *inv_freq, const int32_t *row_pos, const int32_t *row_seq,
                              const int32_t *tables, rill_kv_geom g, __nv_bfloat16 *kc, __nv_bfloat16 *vc);

/* out[r][h] = softmax(q[r][h] · K[1..pos]ᵀ / √D) · V over the row's sequence (slot 0 holds no pair), q rows ldq
 * apart; query head h reads KV head h / (num_heads / kv_heads). */
cudaError_t rill_k_e3_attention(cudaStream_t s, int n, const float *q, int ldq, int num_heads, const int32_t *row_pos,
                                const int32_t *row_seq, const int32_t *tables, rill_kv_geom g,
                                const __nv_bfloat16 *kc, const __nv_bfloat16 *vc, float *out);

/* Per row r of round j: a = the first index of the largest of logits[r][0..VD), tok = d2t[a]; proposed[seq × KD + j]
 * = cur_tok[seq] = tok and hprev[seq] = hs[r] (seq = row_seq[r]). */
cudaError_t rill_k_e3_pick(cudaStream_t s, int n, const float *logits, int VD, const int32_t *d2t,
                           const int32_t *row_seq, int j, int KD, const float *hs, int H, int32_t *cur_tok,
                           float *hprev, int32_t *proposed);

/* out[i] = bf16(x[i]) for i < count (a GEMM's input above the GEMV threshold). */
cudaError_t rill_k_e3_to_bf16(cudaStream_t s, const float *x, size_t count, __nv_bfloat16 *out);

#endif /* RILL_CUDA_KERNELS_EAGLE3_CUH */
