/* The EAGLE-3 head's kernels (kernels_eagle3.cuh). Norms sum squares in double and RoPE takes cos/sin in double of
 * an fp32 angle, as the CPU device's head does, so the two differ only in the order of fp32 sums. */
#include <math.h>

#include "block_reduce.cuh"
#include "kernels_eagle3.cuh"

namespace {

constexpr int kThreads = 128; /* the attention's tile of positions and its threads; ≥ head_dim / 2 */

__device__ inline size_t slot_of(const int32_t *tables, int table_stride, int block_size, int32_t seq, int32_t pos) {
  return (size_t)tables[(size_t)seq * table_stride + pos / block_size] * block_size + (size_t)(pos % block_size);
}

} // namespace

__global__ void e3_tap_kernel(const float *x, int Ht, int slot, float *tap) {
  const int t = blockIdx.x;
  for (int i = threadIdx.x; i < Ht; i += blockDim.x) tap[((size_t)t * 3 + slot) * Ht + i] = x[(size_t)t * Ht + i];
}

cudaError_t rill_k_e3_tap(cudaStream_t s, const float *x, int T, int Ht, int slot, float *tap) {
  if (T == 0) return cudaSuccess;
  RILL_LAUNCH(e3_tap_kernel, T, 256, s, x, Ht, slot, tap);
  return cudaGetLastError();
}

__global__ void e3_store_features_kernel(const float *g, int H, const int32_t *positions, const int32_t *tok_seq,
                                         const int32_t *tables, int table_stride, int block_size, float *feat) {
  const int t = blockIdx.x;
  float *dst = feat + slot_of(tables, table_stride, block_size, tok_seq[t], positions[t]) * H;
  for (int i = threadIdx.x; i < H; i += blockDim.x) dst[i] = g[(size_t)t * H + i];
}

cudaError_t rill_k_e3_store_features(cudaStream_t s, const float *g, int T, int H, const int32_t *positions,
                                     const int32_t *tok_seq, const int32_t *tables, int table_stride, int block_size,
                                     float *feat) {
  if (T == 0) return cudaSuccess;
  RILL_LAUNCH(e3_store_features_kernel, T, 256, s, g, H, positions, tok_seq, tables, table_stride, block_size, feat);
  return cudaGetLastError();
}

__global__ void e3_round_rows_kernel(int n, const int32_t *row_seq, int j, const int32_t *cur_tok,
                                     const int32_t *cur_pos, int32_t *row_tok, int32_t *row_pos) {
  const int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= n) return;
  row_tok[r] = cur_tok[row_seq[r]];
  row_pos[r] = cur_pos[row_seq[r]] + j;
}

cudaError_t rill_k_e3_round_rows(cudaStream_t s, int n, const int32_t *row_seq, int j, const int32_t *cur_tok,
                                 const int32_t *cur_pos, int32_t *row_tok, int32_t *row_pos) {
  if (n == 0) return cudaSuccess;
  RILL_LAUNCH(e3_round_rows_kernel, (n + 127) / 128, 128, s, n, row_seq, j, cur_tok, cur_pos, row_tok, row_pos);
  return cudaGetLastError();
}

__global__ void e3_input_kernel(const int32_t *row_tok, const int32_t *row_pos, const int32_t *row_seq,
                                const int32_t *tables, int table_stride, int block_size, const float *feat,
                                const float *hprev, const __nv_bfloat16 *embed, const float *in_norm,
                                const float *hid_norm, float eps, int H, float *hs, float *in) {
  __shared__ double scratch[32];
  const int r = blockIdx.x;
  const int32_t pos = row_pos[r], seq = row_seq[r];
  float *h = hs + (size_t)r * H, *o = in + (size_t)r * 2 * H;
  if (pos == 0) { /* the whole block returns together */
    for (int i = threadIdx.x; i < H; i += blockDim.x) h[i] = o[i] = o[H + i] = 0.0f;
    return;
  }
  const float *src = hprev != nullptr ? hprev + (size_t)seq * H
                                      : feat + slot_of(tables, table_stride, block_size, seq, pos - 1) * H;
  const __nv_bfloat16 *e = embed + (size_t)row_tok[r] * H;
  double se = 0.0, sh = 0.0;
  for (int i = threadIdx.x; i < H; i += blockDim.x) {
    const double a = (double)__bfloat162float(e[i]), b = (double)src[i];
    se += a * a;
    sh += b * b;
  }
  se = rill_block_sum(se, scratch);
  sh = rill_block_sum(sh, scratch);
  const float inv_e = (float)(1.0 / sqrt(se / H + (double)eps)), inv_h = (float)(1.0 / sqrt(sh / H + (double)eps));
  for (int i = threadIdx.x; i < H; i += blockDim.x) {
    const float v = src[i];
    o[i] = in_norm[i] * (__bfloat162float(e[i]) * inv_e);
    o[H + i] = hid_norm[i] * (v * inv_h);
    h[i] = v;
  }
}

cudaError_t rill_k_e3_input(cudaStream_t s, int n, const int32_t *row_tok, const int32_t *row_pos,
                            const int32_t *row_seq, const int32_t *tables, int table_stride, int block_size,
                            const float *feat, const float *hprev, const __nv_bfloat16 *embed, const float *in_norm,
                            const float *hid_norm, float eps, int H, float *hs, float *in) {
  if (n == 0) return cudaSuccess;
  RILL_LAUNCH(e3_input_kernel, n, 256, s, row_tok, row_pos, row_seq, tables, table_stride, block_size, feat, hprev,
              embed, in_norm, hid_norm, eps, H, hs, in);
  return cudaGetLastError();
}

/* One block per (row, head): q heads first when q is given, then the KV heads. */
__global__ void e3_rope_kv_kernel(float *q, int ldq, const float *kv, int ldkv, int num_heads, const float *inv_freq,
                                  const int32_t *row_pos, const int32_t *row_seq, const int32_t *tables,
                                  rill_kv_geom g, __nv_bfloat16 *kc, __nv_bfloat16 *vc) {
  const int r = blockIdx.x, qh = q != nullptr ? num_heads : 0, h = blockIdx.y, D = g.head_dim, half = D / 2;
  const int32_t pos = row_pos[r];
  if (pos == 0) return;
  const float p = (float)(pos - 1);
  if (h < qh) {
    float *x = q + (size_t)r * ldq + (size_t)h * D;
    for (int j = threadIdx.x; j < half; j += blockDim.x) {
      const float angle = p * inv_freq[j];
      const float c = (float)cos((double)angle), sn = (float)sin((double)angle);
      const float a = x[j], b = x[j + half];
      const float ac = a * c, bs = b * sn, bc = b * c, as = a * sn;
      x[j] = ac - bs;
      x[j + half] = bc + as;
    }
    return;
  }
  const int kh = h - qh;
  const float *k = kv + (size_t)r * ldkv + (size_t)kh * D, *v = kv + (size_t)r * ldkv + (size_t)(g.kv_heads + kh) * D;
  const int32_t block = tables[(size_t)row_seq[r] * g.table_stride + pos / g.block_size];
  const size_t at = ((size_t)block * g.kv_heads + kh) * (size_t)g.block_size * D + (size_t)(pos % g.block_size) * D;
  for (int j = threadIdx.x; j < half; j += blockDim.x) {
    const float angle = p * inv_freq[j];
    const float c = (float)cos((double)angle), sn = (float)sin((double)angle);
    const float a = k[j], b = k[j + half];
    const float ac = a * c, bs = b * sn, bc = b * c, as = a * sn;
    kc[at + j] = __float2bfloat16_rn(ac - bs);
    kc[at + j + half] = __float2bfloat16_rn(bc + as);
  }
  for (int d = threadIdx.x; d < D; d += blockDim.x) vc[at + d] = __float2bfloat16_rn(v[d]);
}

cudaError_t rill_k_e3_rope_kv(cudaStream_t s, int n, float *q, int ldq, const float *kv, int ldkv, int num_heads,
                              const float *inv_freq, const int32_t *row_pos, const int32_t *row_seq,
                              const int32_t *tables, rill_kv_geom g, __nv_bfloat16 *kc, __nv_bfloat16 *vc) {
  if (n == 0) return cudaSuccess;
  const unsigned heads = (unsigned)((q != nullptr ? num_heads : 0) + g.kv_heads);
  RILL_LAUNCH(e3_rope_kv_kernel, dim3((unsigned)n, heads), kThreads, s, q, ldq, kv, ldkv, num_heads, inv_freq,
              row_pos, row_seq, tables, g, kc, vc);
  return cudaGetLastError();
}

/* One block per (row, query head), kThreads threads: positions in tiles of kThreads (one score per thread), an online
 * softmax across tiles; thread i accumulates dimensions i and i + kThreads of the output. */
__global__ void e3_attention_kernel(const float *q, int ldq, int num_heads, const int32_t *row_pos,
                                    const int32_t *row_seq, const int32_t *tables, rill_kv_geom g,
                                    const __nv_bfloat16 *kc, const __nv_bfloat16 *vc, float *out) {
  __shared__ float scores[kThreads];
  __shared__ float scratch[32];
  const int r = blockIdx.x, h = blockIdx.y, D = g.head_dim, tid = threadIdx.x;
  const int kh = h / (num_heads / g.kv_heads);
  const int32_t pos = row_pos[r];
  const int32_t *table = tables + (size_t)row_seq[r] * g.table_stride;
  const float *qr = q + (size_t)r * ldq + (size_t)h * D;
  const float scale = 1.0f / sqrtf((float)D);
  float m = -INFINITY, l = 0.0f, acc0 = 0.0f, acc1 = 0.0f;
  for (int p0 = 1; p0 <= pos; p0 += kThreads) {
    const int p = p0 + tid, cnt = pos - p0 + 1 < kThreads ? pos - p0 + 1 : kThreads;
    float sc = -INFINITY;
    if (p <= pos) {
      const __nv_bfloat16 *k =
          kc + (((size_t)table[p / g.block_size] * g.kv_heads + kh) * g.block_size + (size_t)(p % g.block_size)) * D;
      float dot = 0.0f;
      for (int d = 0; d < D; d++) dot += qr[d] * __bfloat162float(k[d]);
      sc = dot * scale;
    }
    scores[tid] = sc;
    const float mx = fmaxf(m, rill_block_max(sc, scratch)); /* a barrier: every score of the tile is written */
    const float corr = expf(m - mx);
    l *= corr;
    acc0 *= corr;
    acc1 *= corr;
    for (int i = 0; i < cnt; i++) {
      const float w = expf(scores[i] - mx);
      l += w;
      const int pp = p0 + i;
      const __nv_bfloat16 *v =
          vc + (((size_t)table[pp / g.block_size] * g.kv_heads + kh) * g.block_size + (size_t)(pp % g.block_size)) * D;
      if (tid < D) acc0 += w * __bfloat162float(v[tid]);
      if (tid + kThreads < D) acc1 += w * __bfloat162float(v[tid + kThreads]);
    }
    m = mx;
    __syncthreads(); /* the next tile rewrites scores */
  }
  float *o = out + ((size_t)r * num_heads + h) * D;
  const float inv = pos > 0 ? 1.0f / l : 0.0f;
  if (tid < D) o[tid] = acc0 * inv;
  if (tid + kThreads < D) o[tid + kThreads] = acc1 * inv;
}

cudaError_t rill_k_e3_attention(cudaStream_t s, int n, const float *q, int ldq, int num_heads, const int32_t *row_pos,
                                const int32_t *row_seq, const int32_t *tables, rill_kv_geom g,
                                const __nv_bfloat16 *kc, const __nv_bfloat16 *vc, float *out) {
  if (n == 0) return cudaSuccess;
  RILL_LAUNCH(e3_attention_kernel, dim3((unsigned)n, (unsigned)num_heads), kThreads, s, q, ldq, num_heads, row_pos,
              row_seq, tables, g, kc, vc, out);
  return cudaGetLastError();
}

/* One block of kThreads per row: each thread's best (largest value, then lowest index), then a tree over the block. */
__global__ void e3_pick_kernel(const float *logits, int VD, const int32_t *d2t, const int32_t *row_seq, int j, int KD,
                               const float *hs, int H, int32_t *cur_tok, float *hprev, int32_t *proposed) {
  __shared__ float best_v[kThreads];
  __shared__ int best_i[kThreads];
  const int r = blockIdx.x, tid = threadIdx.x;
  const float *x = logits + (size_t)r * VD;
  float bv = -INFINITY;
  int bi = -1;
  for (int i = tid; i < VD; i += kThreads) {
    if (bi < 0 || x[i] > bv) {
      bv = x[i];
      bi = i;
    }
  }
  best_v[tid] = bv;
  best_i[tid] = bi;
  __syncthreads();
  for (int w = kThreads / 2; w > 0; w >>= 1) {
    if (tid < w) {
      const float ov = best_v[tid + w];
      const int oi = best_i[tid + w];
      if (oi >= 0 && (best_i[tid] < 0 || ov > best_v[tid] || (ov == best_v[tid] && oi < best_i[tid]))) {
        best_v[tid] = ov;
        best_i[tid] = oi;
      }
    }
    __syncthreads();
  }
  const int32_t seq = row_seq[r];
  if (tid == 0) {
    const int32_t tok = d2t[best_i[0]];
    proposed[(size_t)seq * KD + j] = tok;
    cur_tok[seq] = tok;
  }
  for (int i = tid; i < H; i += kThreads) hprev[(size_t)seq * H + i] = hs[(size_t)r * H + i];
}

cudaError_t rill_k_e3_pick(cudaStream_t s, int n, const float *logits, int VD, const int32_t *d2t,
                           const int32_t *row_seq, int j, int KD, const float *hs, int H, int32_t *cur_tok,
                           float *hprev, int32_t *proposed) {
  if (n == 0) return cudaSuccess;
  RILL_LAUNCH(e3_pick_kernel, n, kThreads, s, logits, VD, d2t, row_seq, j, KD, hs, H, cur_tok, hprev, proposed);
  return cudaGetLastError();
}

__global__ void e3_to_bf16_kernel(const float *x, size_t count, __nv_bfloat16 *out) {
  const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < count) out[i] = __float2bfloat16_rn(x[i]);
}

cudaError_t rill_k_e3_to_bf16(cudaStream_t s, const float *x, size_t count, __nv_bfloat16 *out) {
  if (count == 0) return cudaSuccess;
  RILL_LAUNCH(e3_to_bf16_kernel, (unsigned)((count + 255) / 256), 256, s, x, count, out);
  return cudaGetLastError();
}
