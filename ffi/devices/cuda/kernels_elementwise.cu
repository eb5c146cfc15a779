/* Embedding, RMSNorm, SiLU·mul and the fused per-head q/k norm + RoPE + KV write (kernels.cuh). */
#include <math.h>

#include "block_reduce.cuh"
#include "kernels.cuh"

__global__ void embed_kernel(const __nv_bfloat16 *embed, int H, const int32_t *tokens, float *x) {
  const int t = blockIdx.x;
  const __nv_bfloat16 *row = embed + (size_t)tokens[t] * H;
  for (int i = threadIdx.x; i < H; i += blockDim.x) x[(size_t)t * H + i] = __bfloat162float(row[i]);
}

cudaError_t rill_k_embed(cudaStream_t s, const __nv_bfloat16 *embed, int H, const int32_t *tokens, int T, float *x) {
  if (T == 0) return cudaSuccess;
  RILL_LAUNCH(embed_kernel, T, 256, s, embed, H, tokens, x);
  return cudaGetLastError();
}

/* The CPU device sums squares in double; so does this, so the two agree to the last bit of the scale. */
__global__ void rms_norm_kernel(const float *x, const int32_t *rows, const float *w, int n, float eps,
                                __nv_bfloat16 *out) {
  __shared__ double scratch[32];
  const int r = blockIdx.x;
  const float *xr = x + (size_t)(rows != nullptr ? rows[r] : r) * n;
  double ss = 0.0;
  for (int i = threadIdx.x; i < n; i += blockDim.x) ss += (double)xr[i] * (double)xr[i];
  ss = rill_block_sum(ss, scratch);
  const float inv = (float)(1.0 / sqrt(ss / n + (double)eps));
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    out[(size_t)r * n + i] = __float2bfloat16_rn(w[i] * (xr[i] * inv));
  }
}

cudaError_t rill_k_rms_norm(cudaStream_t s, const float *x, const int32_t *rows, const float *w, int n, float eps,
                            int R, __nv_bfloat16 *out) {
  if (R == 0) return cudaSuccess;
  RILL_LAUNCH(rms_norm_kernel, R, 256, s, x, rows, w, n, eps, out);
  return cudaGetLastError();
}

__global__ void silu_mul_kernel(const float *gu, int I, __nv_bfloat16 *act) {
  const int t = blockIdx.y;
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= I) return;
  const float g = gu[(size_t)t * 2 * I + i], u = gu[(size_t)t * 2 * I + I + i];
  act[(size_t)t * I + i] = __float2bfloat16_rn(g / (1.0f + expf(-g)) * u);
}

cudaError_t rill_k_silu_mul(cudaStream_t s, const float *gu, int T, int I, __nv_bfloat16 *act) {
  if (T == 0) return cudaSuccess;
  RILL_LAUNCH(silu_mul_kernel, dim3((unsigned)((I + 255) / 256), (unsigned)T), 256, s, gu, I, act);
  return cudaGetLastError();
}

/* One block per (token, head) over q heads then k heads; blockDim.x = 128 ≥ head_dim / 2 threads rotate pairs. */
__global__ void qk_rope_kv_kernel(float *qkv, int num_heads, int kv_heads, int D, const float *q_norm,
                                  const float *k_norm, float eps, const float *inv_freq, float rope_scale,
                                  const int32_t *positions, const int32_t *tok_seq, const int32_t *tables,
                                  rill_kv_geom g, int layer, __nv_bfloat16 *kc, __nv_bfloat16 *vc) {
  __shared__ double scratch[32];
  const int t = blockIdx.x, h = blockIdx.y, half = D / 2;
  const bool is_k = h >= num_heads;
  const int qkv_dim = (num_heads + 2 * kv_heads) * D;
  float *row = qkv + (size_t)t * qkv_dim;
  float *x = row + (size_t)h * D; /* k heads follow the q heads */
  const float *nw = is_k ? k_norm : q_norm;
  float inv = 1.0f;
  if (nw != nullptr) {
    double ss = 0.0;
    for (int d = threadIdx.x; d < D; d += blockDim.x) ss += (double)x[d] * (double)x[d];
    ss = rill_block_sum(ss, scratch);
    inv = (float)(1.0 / sqrt(ss / D + (double)eps));
  }
  const int32_t pos = positions[t];
  for (int j = threadIdx.x; j < half; j += blockDim.x) {
    float a = x[j], b = x[j + half];
    if (nw != nullptr) {
      a = nw[j] * (a * inv);
      b = nw[j + half] * (b * inv);
    }
    const float angle = (float)pos * inv_freq[j];
    const float c = (float)cos((double)angle) * rope_scale, sn = (float)sin((double)angle) * rope_scale;
    const float ac = a * c, bs = b * sn, bc = b * c, as = a * sn;
    x[j] = ac - bs;
    x[j + half] = bc + as;
  }
  if (!is_k) return;
  __syncthreads();
  const int kh = h - num_heads;
  const int32_t block = tables[(size_t)tok_seq[t] * g.table_stride + pos / g.block_size];
  const size_t at = (((size_t)layer * g.num_blocks + block) * g.kv_heads + kh) * (size_t)g.block_size * D +
                    (size_t)(pos % g.block_size) * D;
  const float *v = row + (size_t)(num_heads + kv_heads + kh) * D;
  for (int d = threadIdx.x; d < D; d += blockDim.x) {
    kc[at + d] = __float2bfloat16_rn(x[d]);
    vc[at + d] = __float2bfloat16_rn(v[d]);
  }
}

cudaError_t rill_k_qk_rope_kv(cudaStream_t s, float *qkv, int T, int num_heads, int kv_heads, int head_dim,
                              const float *q_norm, const float *k_norm, float eps, const float *inv_freq,
                              float rope_scale, const int32_t *positions, const int32_t *tok_seq,
                              const int32_t *tables, rill_kv_geom g, int layer, __nv_bfloat16 *kc, __nv_bfloat16 *vc) {
  if (T == 0) return cudaSuccess;
  RILL_LAUNCH(qk_rope_kv_kernel, dim3((unsigned)T, (unsigned)(num_heads + kv_heads)), 128, s, qkv, num_heads,
              kv_heads, head_dim, q_norm, k_norm, eps, inv_freq, rope_scale, positions, tok_seq, tables, g, layer, kc,
              vc);
  return cudaGetLastError();
}
