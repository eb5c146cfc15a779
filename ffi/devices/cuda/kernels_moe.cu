/* gpt-oss's mixture of experts on the CUDA device (kernels.cuh): router top-k, the MXFP4 expert products read
 * straight from the packed blocks, the clamped SwiGLU and the weighted sum into the residual stream. Every launch
 * shape depends only on the step's token count, and the chosen experts reach the kernels through device memory, so a
 * step's routing needs no host round trip and the layers stay inside the CUDA graphs. Each (token, expert) product is
 * computed in the same order whichever kernel runs it: a token's output does not depend on what else is in the step.
 * Several tokens' pairs are grouped by expert on the device (rill_k_moe_group), so each expert's weights are read once
 * per step for all the tokens routed to it (rill_k_mxfp4_experts_grouped). */
#include <math.h>

#include "block_reduce.cuh"
#include "kernels.cuh"

namespace {

__device__ const float kE2m1[16] = {0.0f,  0.5f,  1.0f,  1.5f,  2.0f,  3.0f,  4.0f,  6.0f,
                                    -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};

/* 2^(s − 127), exact (s = 0: the subnormal 2^-127). */
__device__ inline float e8m0(uint8_t s) { return ldexpf(1.0f, (int)s - 127); }

/* As the CPU device: sum of squares in double. */
__global__ void rms_norm_f32_kernel(const float *x, const float *w, int n, float eps, float *out) {
  __shared__ double scratch[32];
  const int r = blockIdx.x;
  const float *xr = x + (size_t)r * n;
  double ss = 0.0;
  for (int i = threadIdx.x; i < n; i += blockDim.x) ss += (double)xr[i] * (double)xr[i];
  ss = rill_block_sum(ss, scratch);
  const float inv = (float)(1.0 / sqrt(ss / n + (double)eps));
  for (int i = threadIdx.x; i < n; i += blockDim.x) out[(size_t)r * n + i] = w[i] * (xr[i] * inv);
}

/* One thread per token: the k largest biased logits (ties to the lower index), softmax over them, largest first. */
__global__ void route_kernel(const float *logits, const float *bias, int T, int E, int K, int32_t *sel, float *weight) {
  const int t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= T) return;
  const float *l = logits + (size_t)t * E;
  int32_t *st = sel + (size_t)t * K;
  float *wt = weight + (size_t)t * K;
  for (int j = 0; j < K; j++) {
    int best = -1;
    float bv = 0.0f;
    for (int e = 0; e < E; e++) {
      bool taken = false;
      for (int i = 0; i < j; i++) taken = taken || st[i] == e;
      const float v = l[e] + bias[e];
      if (!taken && (best < 0 || v > bv)) {
        best = e;
        bv = v;
      }
    }
    st[j] = best;
    wt[j] = bv;
  }
  const float top = wt[0];
  float sum = 0.0f;
  for (int j = 0; j < K; j++) {
    wt[j] = expf(wt[j] - top);
    sum += wt[j];
  }
  for (int j = 0; j < K; j++) wt[j] /= sum;
}

/* Block (row chunk, pair): one warp per output row, lanes over the row's blocks (each lane decodes whole blocks),
 * then a warp sum in a fixed tree. Pair p = t · K + j uses expert sel[p] and input row (per_token ? t : p). */
constexpr int kRowsPerBlock = 8;

__global__ void experts_kernel(const float *x, int ldx, int per_token, int K, const int32_t *sel,
                               const uint8_t *blocks, const uint8_t *scales, const float *bias, int rows, int nb,
                               float *y) {
  const int p = blockIdx.y, lane = threadIdx.x & 31, r = blockIdx.x * kRowsPerBlock + (threadIdx.x >> 5);
  if (r >= rows) return;
  const int e = sel[p];
  const float *xr = x + (size_t)(per_token ? p / K : p) * ldx;
  const size_t row = (size_t)e * rows + (size_t)r;
  const uint8_t *br = blocks + row * (size_t)nb * 16, *sr = scales + row * (size_t)nb;
  float acc = 0.0f;
  for (int b = lane; b < nb; b += 32) {
    const float d = e8m0(sr[b]);
    const uint4 qv = *reinterpret_cast<const uint4 *>(br + (size_t)b * 16); /* one 16-byte load per block */
    const uint32_t words[4] = {qv.x, qv.y, qv.z, qv.w};
    const float *xb = xr + (size_t)b * 32;
    float part = 0.0f;
    for (int j = 0; j < 16; j++) {
      const uint32_t q = (words[j / 4] >> (8 * (j % 4))) & 0xFFu;
      part = fmaf(xb[2 * j], kE2m1[q & 15] * d, part);
      part = fmaf(xb[2 * j + 1], kE2m1[q >> 4] * d, part);
    }
    acc += part;
  }
  acc = rill_warp_sum(acc);
  if (lane == 0) y[(size_t)p * rows + r] = acc + bias[row];
}

/* One block. start[e] .. start[e + 1] index the pairs routed to expert e in order[], ascending: thread e counts them
 * into start[e + 1], one thread sums the counts, thread e places them (deterministic: no atomics). */
__global__ void group_kernel(const int32_t *sel, int P, int E, int32_t *start, int32_t *order) {
  for (int e = threadIdx.x; e < E; e += blockDim.x) {
    int32_t n = 0;
    for (int p = 0; p < P; p++) n += sel[p] == e;
    start[e + 1] = n;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    start[0] = 0;
    for (int e = 0; e < E; e++) start[e + 1] += start[e];
  }
  __syncthreads();
  for (int e = threadIdx.x; e < E; e += blockDim.x) {
    int32_t at = start[e];
    for (int p = 0; p < P; p++)
      if (sel[p] == e) order[at++] = p;
  }
}

/* Block (row chunk, expert e): one warp per output row as experts_kernel, over e's pairs kGroupTile at a time; each
 * lane decodes a weight block once for every pair of the tile. A pair's sum is experts_kernel's, term for term (the
 * same blocks per lane, the same fmaf order, the same warp tree), so grouping changes no bit of it. */
constexpr int kGroupTile = 8;

__global__ void grouped_experts_kernel(const float *x, int ldx, int per_token, int K, const int32_t *start,
                                       const int32_t *order, const uint8_t *blocks, const uint8_t *scales,
                                       const float *bias, int rows, int nb, float *y) {
  const int e = blockIdx.y, lane = threadIdx.x & 31, r = blockIdx.x * kRowsPerBlock + (threadIdx.x >> 5);
  const int p0 = start[e], p1 = start[e + 1];
  if (r >= rows || p0 == p1) return;
  const size_t row = (size_t)e * rows + (size_t)r;
  const uint8_t *br = blocks + row * (size_t)nb * 16, *sr = scales + row * (size_t)nb;
  for (int q0 = p0; q0 < p1; q0 += kGroupTile) {
    const int n = p1 - q0 < kGroupTile ? p1 - q0 : kGroupTile;
    float acc[kGroupTile];
    const float *xr[kGroupTile];
#pragma unroll
    for (int i = 0; i < kGroupTile; i++) {
      acc[i] = 0.0f;
      const int p = i < n ? order[q0 + i] : order[q0];
      xr[i] = x + (size_t)(per_token ? p / K : p) * ldx;
    }
    for (int b = lane; b < nb; b += 32) {
      const float d = e8m0(sr[b]);
      const uint4 qv = *reinterpret_cast<const uint4 *>(br + (size_t)b * 16);
      const uint32_t words[4] = {qv.x, qv.y, qv.z, qv.w};
      float w[32];
#pragma unroll
      for (int j = 0; j < 16; j++) {
        const uint32_t q = (words[j / 4] >> (8 * (j % 4))) & 0xFFu;
        w[2 * j] = kE2m1[q & 15] * d;
        w[2 * j + 1] = kE2m1[q >> 4] * d;
      }
#pragma unroll
      for (int i = 0; i < kGroupTile; i++) {
        if (i >= n) break;
        const float *xb = xr[i] + (size_t)b * 32;
        float part = 0.0f;
        for (int j = 0; j < 16; j++) {
          part = fmaf(xb[2 * j], w[2 * j], part);
          part = fmaf(xb[2 * j + 1], w[2 * j + 1], part);
        }
        acc[i] += part;
      }
    }
#pragma unroll
    for (int i = 0; i < kGroupTile; i++) {
      if (i >= n) break;
      const float sum = rill_warp_sum(acc[i]);
      if (lane == 0) y[(size_t)order[q0 + i] * rows + r] = sum + bias[row];
    }
  }
}

/* a = (clamp(up, ±limit) + 1) · g · σ(1.702 · g), g = min(gate, limit); gate and up interleaved (2i, 2i + 1). */
__global__ void act_kernel(const float *gu, int I, float limit, float *act) {
  const int p = blockIdx.y, i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= I) return;
  float g = gu[(size_t)p * 2 * I + 2 * i], u = gu[(size_t)p * 2 * I + 2 * i + 1];
  g = fminf(g, limit);
  u = fminf(fmaxf(u, -limit), limit);
  act[(size_t)p * I + i] = (u + 1.0f) * (g / (1.0f + expf(-1.702f * g)));
}

/* x[t] += Σ_j w[t][j] · y[t · K + j], j in the order the experts were picked. */
__global__ void combine_kernel(const float *y, const float *weight, int K, int H, float *x) {
  const int t = blockIdx.y, i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= H) return;
  float acc = 0.0f;
  for (int j = 0; j < K; j++) acc += weight[(size_t)t * K + j] * y[((size_t)t * K + j) * H + i];
  x[(size_t)t * H + i] += acc;
}

} // namespace

cudaError_t rill_k_rms_norm_f32(cudaStream_t s, const float *x, const float *w, int n, float eps, int T, float *out) {
  if (T == 0) return cudaSuccess;
  RILL_LAUNCH(rms_norm_f32_kernel, T, 256, s, x, w, n, eps, out);
  return cudaGetLastError();
}

cudaError_t rill_k_moe_route(cudaStream_t s, const float *logits, const float *bias, int T, int E, int K, int32_t *sel,
                             float *weight) {
  if (T == 0) return cudaSuccess;
  RILL_LAUNCH(route_kernel, (unsigned)((T + 63) / 64), 64, s, logits, bias, T, E, K, sel, weight);
  return cudaGetLastError();
}

cudaError_t rill_k_mxfp4_experts(cudaStream_t s, const float *x, int ldx, int per_token, int pairs, int K,
                                 const int32_t *sel, const uint8_t *blocks, const uint8_t *scales, const float *bias,
                                 int rows, int cols, float *y) {
  if (pairs == 0) return cudaSuccess;
  RILL_LAUNCH(experts_kernel, dim3((unsigned)((rows + kRowsPerBlock - 1) / kRowsPerBlock), (unsigned)pairs),
              32 * kRowsPerBlock, s, x, ldx, per_token, K, sel, blocks, scales, bias, rows, cols / 32, y);
  return cudaGetLastError();
}

cudaError_t rill_k_moe_group(cudaStream_t s, const int32_t *sel, int pairs, int E, int32_t *start, int32_t *order) {
  if (E < 1) return cudaErrorInvalidValue;
  RILL_LAUNCH(group_kernel, 1, 256, s, sel, pairs, E, start, order);
  return cudaGetLastError();
}

cudaError_t rill_k_mxfp4_experts_grouped(cudaStream_t s, const float *x, int ldx, int per_token, int E, int K,
                                         const int32_t *start, const int32_t *order, const uint8_t *blocks,
                                         const uint8_t *scales, const float *bias, int rows, int cols, float *y) {
  if (E < 1) return cudaErrorInvalidValue;
  RILL_LAUNCH(grouped_experts_kernel, dim3((unsigned)((rows + kRowsPerBlock - 1) / kRowsPerBlock), (unsigned)E),
              32 * kRowsPerBlock, s, x, ldx, per_token, K, start, order, blocks, scales, bias, rows, cols / 32, y);
  return cudaGetLastError();
}

cudaError_t rill_k_moe_act(cudaStream_t s, const float *gu, int pairs, int I, float limit, float *act) {
  if (pairs == 0) return cudaSuccess;
  RILL_LAUNCH(act_kernel, dim3((unsigned)((I + 255) / 256), (unsigned)pairs), 256, s, gu, I, limit, act);
  return cudaGetLastError();
}

cudaError_t rill_k_moe_combine(cudaStream_t s, const float *y, const float *weight, int T, int K, int H, float *x) {
  if (T == 0) return cudaSuccess;
  RILL_LAUNCH(combine_kernel, dim3((unsigned)((H + 255) / 256), (unsigned)T), 256, s, y, weight, K, H, x);
  return cudaGetLastError();
}
