/* Causal attention of fed tokens over the paged KV cache (kernels.cuh), with an online softmax over chunks of
 * positions so any context length runs in fixed shared memory. The grouped kernel gives one block to a (token, KV
 * head) and all the query heads that share it, so each K/V row is read from memory once per token; shapes whose
 * query group does not fit its shared memory run the per-head kernel. */
#include "block_reduce.cuh"
#include "kernels.cuh"

namespace {

constexpr int kThreads = 128;   /* also the positions per chunk */
constexpr int kMaxHeadDim = 256; /* head_dim ≤ 2 × kThreads: each thread owns d = tid and tid + kThreads */

__global__ void attention_kernel(const float *qkv, int num_heads, const int32_t *positions, const int32_t *tok_seq,
                                 const int32_t *tables, rill_kv_geom g, int layer, const __nv_bfloat16 *kc,
                                 const __nv_bfloat16 *vc, float *out) {
  __shared__ float q[kMaxHeadDim];
  __shared__ float p[kThreads];
  __shared__ float scratch[32];
  const int t = blockIdx.x, h = blockIdx.y, D = g.head_dim, tid = threadIdx.x;
  const int kh = h / (num_heads / g.kv_heads);
  const int qkv_dim = (num_heads + 2 * g.kv_heads) * D;
  const float scale = 1.0f / sqrtf((float)D);
  for (int d = tid; d < D; d += kThreads) q[d] = qkv[(size_t)t * qkv_dim + (size_t)h * D + d];
  __syncthreads();
  const int n = positions[t] + 1;
  const int32_t *table = tables + (size_t)tok_seq[t] * g.table_stride;
  const size_t head_stride = (size_t)g.block_size * D;
  float m = -INFINITY, l = 0.0f, acc0 = 0.0f, acc1 = 0.0f;
  for (int c0 = 0; c0 < n; c0 += kThreads) {
    const int pos = c0 + tid;
    float score = -INFINITY;
    if (pos < n) {
      const int32_t block = table[pos / g.block_size];
      const __nv_bfloat16 *k = kc + (((size_t)layer * g.num_blocks + block) * g.kv_heads + kh) * head_stride +
                               (size_t)(pos % g.block_size) * D;
      float dot = 0.0f;
      for (int d = 0; d < D; d += 2) {
        const float2 kv = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162 *>(k + d));
        dot += q[d] * kv.x + q[d + 1] * kv.y;
      }
      score = dot * scale;
    }
    const float cmax = rill_block_max(score, scratch);
    const float m_new = fmaxf(m, cmax);
    const float e = pos < n ? expf(score - m_new) : 0.0f;
    const float correction = expf(m - m_new); /* 0 on the first chunk (m = -inf) */
    __syncthreads();
    p[tid] = e;
    const float csum = rill_block_sum(e, scratch); /* its barriers also publish p */
    l = l * correction + csum;
    acc0 *= correction;
    acc1 *= correction;
    const int cnt = n - c0 < kThreads ? n - c0 : kThreads;
    for (int j = 0; j < cnt; j++) {
      const int pj = c0 + j;
      const int32_t block = table[pj / g.block_size];
      const __nv_bfloat16 *v = vc + (((size_t)layer * g.num_blocks + block) * g.kv_heads + kh) * head_stride +
                               (size_t)(pj % g.block_size) * D;
      if (tid < D) acc0 += p[j] * __bfloat162float(v[tid]);
      if (tid + kThreads < D) acc1 += p[j] * __bfloat162float(v[tid + kThreads]);
    }
    m = m_new;
    __syncthreads(); /* p is rewritten by the next chunk */
  }
  float *o = out + (size_t)t * num_heads * D + (size_t)h * D;
  const float inv = 1.0f / l;
  if (tid < D) o[tid] = acc0 * inv;
  if (tid + kThreads < D) o[tid + kThreads] = acc1 * inv;
}

constexpr int kGroupChunk = 32;       /* positions per chunk: one warp lane each */
constexpr int kGroupMaxElems = 2048;  /* query heads per KV head × head_dim held in shared memory */
constexpr int kGroupPerThread = kGroupMaxElems / kThreads;
constexpr int kGroupMaxHeads = 16;

/* Positions per split of a token with n positions: a function of n alone, so a token's result does not depend on the
 * batch around it (the merge adds exact zeros for empty splits). */
__device__ inline int split_length(int n) {
  const int per = (n + kMaxSplits - 1) / kMaxSplits;
  const int len = (per + kGroupChunk - 1) / kGroupChunk * kGroupChunk;
  return len < 2 * kGroupChunk ? 2 * kGroupChunk : len;
}

/* Split-KV: with gridDim.z > 1, block z covers positions [z × len, (z + 1) × len) (len = split_length(n)) and writes
 * its unnormalised partial (running max, sum, weighted values) for merge_kernel; an empty range writes max −∞ and
 * zeros. */
__global__ void grouped_attention_kernel(const float *qkv, int num_heads, const int32_t *positions,
                                         const int32_t *tok_seq, const int32_t *tables, rill_kv_geom g, int layer,
                                         const __nv_bfloat16 *kc, const __nv_bfloat16 *vc, float *out,
                                         float *part_ml, float *part_acc) {
  __shared__ float q[kGroupMaxElems];
  __shared__ __nv_bfloat16 ks[kGroupChunk * kMaxHeadDim];
  __shared__ __nv_bfloat16 vs[kGroupChunk * kMaxHeadDim];
  __shared__ float p[kGroupMaxHeads][kGroupChunk];
  __shared__ float m[kGroupMaxHeads], l[kGroupMaxHeads], corr[kGroupMaxHeads];
  const int t = blockIdx.x, kh = blockIdx.y, D = g.head_dim, tid = threadIdx.x;
  const int G = num_heads / g.kv_heads, GD = G * D;
  const int lane = tid & 31, warp = tid >> 5, warps = kThreads / 32;
  const int qkv_dim = (num_heads + 2 * g.kv_heads) * D;
  const float scale = 1.0f / sqrtf((float)D);
  for (int i = tid; i < GD; i += kThreads) q[i] = qkv[(size_t)t * qkv_dim + (size_t)kh * GD + i];
  if (tid < G) {
    m[tid] = -INFINITY;
    l[tid] = 0.0f;
  }
  float acc[kGroupPerThread];
#pragma unroll
  for (int k = 0; k < kGroupPerThread; k++) acc[k] = 0.0f;
  const int n = positions[t] + 1;
  const bool split = gridDim.z > 1;
  const int len = split ? split_length(n) : n;
  const int begin = split ? (int)blockIdx.z * len : 0;
  const int end = begin + len < n ? begin + len : n;
  const int32_t *table = tables + (size_t)tok_seq[t] * g.table_stride;
  const size_t head_stride = (size_t)g.block_size * D;
  for (int c0 = begin; c0 < end; c0 += kGroupChunk) {
    const int cnt = end - c0 < kGroupChunk ? end - c0 : kGroupChunk;
    __syncthreads(); /* the previous chunk's K/V and p are no longer read */
    for (int i = tid; i < cnt * D; i += kThreads) {
      const int j = i / D, d = i % D, pos = c0 + j;
      const size_t at = (((size_t)layer * g.num_blocks + table[pos / g.block_size]) * g.kv_heads + kh) * head_stride +
                        (size_t)(pos % g.block_size) * D + d;
      ks[i] = kc[at];
      vs[i] = vc[at];
    }
    __syncthreads();
    /* One warp per query head (several heads per warp when G > warps): lane j scores position c0 + j. */
    for (int h = warp; h < G; h += warps) {
      const float m_old = m[h];
      float score = -INFINITY;
      if (lane < cnt) {
        float dot = 0.0f;
        for (int d = 0; d < D; d++) dot += q[h * D + d] * __bfloat162float(ks[lane * D + d]);
        score = dot * scale;
      }
      const float m_new = fmaxf(m_old, rill_warp_max(score));
      const float e = lane < cnt ? expf(score - m_new) : 0.0f;
      const float sum = rill_warp_sum(e);
      p[h][lane] = e;
      if (lane == 0) {
        corr[h] = expf(m_old - m_new); /* 0 on the first chunk (m = -inf) */
        l[h] = l[h] * corr[h] + sum;
        m[h] = m_new;
      }
    }
    __syncthreads();
#pragma unroll
    for (int k = 0; k < kGroupPerThread; k++) {
      const int i = tid + k * kThreads;
      if (i < GD) {
        const int h = i / D, d = i % D;
        float a = acc[k] * corr[h];
        for (int j = 0; j < cnt; j++) a += p[h][j] * __bfloat162float(vs[j * D + d]);
        acc[k] = a;
      }
    }
  }
  __syncthreads(); /* m and l are final */
  if (split) {
    const size_t part = ((size_t)t * num_heads + (size_t)kh * G) * gridDim.z; /* first head of the group, split 0 */
    if (tid < G) {
      part_ml[(part + (size_t)tid * gridDim.z + blockIdx.z) * 2] = m[tid];
      part_ml[(part + (size_t)tid * gridDim.z + blockIdx.z) * 2 + 1] = l[tid];
    }
#pragma unroll
    for (int k = 0; k < kGroupPerThread; k++) {
      const int i = tid + k * kThreads;
      if (i < GD) part_acc[(part + (size_t)(i / D) * gridDim.z + blockIdx.z) * D + i % D] = acc[k];
    }
    return;
  }
  float *o = out + (size_t)t * num_heads * D + (size_t)kh * GD;
#pragma unroll
  for (int k = 0; k < kGroupPerThread; k++) {
    const int i = tid + k * kThreads;
    if (i < GD) o[i] = acc[k] / l[i / D];
  }
}

/* One block per (token, query head): out = Σ_s e^(m_s − M) acc_s / Σ_s e^(m_s − M) l_s over the splits. */
__global__ void merge_kernel(int num_heads, int D, int splits, const float *part_ml, const float *part_acc,
                             float *out) {
  const int t = blockIdx.x, h = blockIdx.y;
  const size_t part = ((size_t)t * num_heads + h) * splits;
  float M = -INFINITY;
  for (int z = 0; z < splits; z++) M = fmaxf(M, part_ml[(part + z) * 2]);
  float L = 0.0f;
  for (int z = 0; z < splits; z++) L += expf(part_ml[(part + z) * 2] - M) * part_ml[(part + z) * 2 + 1];
  for (int d = threadIdx.x; d < D; d += blockDim.x) {
    float a = 0.0f;
    for (int z = 0; z < splits; z++) a += expf(part_ml[(part + z) * 2] - M) * part_acc[(part + z) * D + d];
    out[((size_t)t * num_heads + h) * D + d] = a / L;
  }
}

} // namespace

int rill_attention_splits(int T) { return T <= kSplitMaxTokens ? kMaxSplits : 1; }

cudaError_t rill_k_attention(cudaStream_t s, const float *qkv, int T, int num_heads, const int32_t *positions,
                             const int32_t *tok_seq, const int32_t *tables, rill_kv_geom g, int layer,
                             const __nv_bfloat16 *kc, const __nv_bfloat16 *vc, float *out, int splits,
                             float *part_ml, float *part_acc) {
  if (T == 0) return cudaSuccess;
  const int G = num_heads / g.kv_heads;
  if (G <= kGroupMaxHeads && G * g.head_dim <= kGroupMaxElems) {
    if (splits <= 1) {
      RILL_LAUNCH(grouped_attention_kernel, dim3((unsigned)T, (unsigned)g.kv_heads), kThreads, s, qkv, num_heads,
                  positions, tok_seq, tables, g, layer, kc, vc, out, nullptr, nullptr);
      return cudaGetLastError();
    }
    RILL_LAUNCH(grouped_attention_kernel, dim3((unsigned)T, (unsigned)g.kv_heads, (unsigned)splits), kThreads, s, qkv,
                num_heads, positions, tok_seq, tables, g, layer, kc, vc, out, part_ml, part_acc);
    const cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) return e;
    RILL_LAUNCH(merge_kernel, dim3((unsigned)T, (unsigned)num_heads), 128, s, num_heads, g.head_dim, splits, part_ml,
                part_acc, out);
    return cudaGetLastError();
  }
  RILL_LAUNCH(attention_kernel, dim3((unsigned)T, (unsigned)num_heads), kThreads, s, qkv, num_heads, positions, tok_seq,
                                                                               tables, g, layer, kc, vc, out);
  return cudaGetLastError();
}
