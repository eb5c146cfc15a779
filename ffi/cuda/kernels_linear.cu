/* y = x · Wᵀ for bf16 W (kernels.cuh): a weight-streaming kernel for small batches and a shared-memory tiled kernel
 * for prefill-sized batches. Both accumulate in fp32 and own each output element in one thread, so the epilogue's
 * read-modify-write of y (residual add) needs no atomics. */
#include "block_reduce.cuh"
#include "kernels.cuh"

namespace {

constexpr int kSkinnyTokens = 8; /* tokens per pass over W in the streaming kernel */
constexpr int kSkinnyWarps = 8;

__device__ inline void bf16x8_to_float(const uint4 &u, float *f) {
  const __nv_bfloat162 *p = reinterpret_cast<const __nv_bfloat162 *>(&u);
#pragma unroll
  for (int i = 0; i < 4; i++) {
    const float2 v = __bfloat1622float2(p[i]);
    f[2 * i] = v.x;
    f[2 * i + 1] = v.y;
  }
}

/* One warp per output row n, kSkinnyTokens tokens per block row; each lane reads 16 bytes of W per step. */
__global__ void skinny_kernel(const float *x, int T, int K, const __nv_bfloat16 *W, int N, const float *bias,
                              int accumulate, float *y) {
  const int lane = threadIdx.x & 31;
  const int n = blockIdx.x * kSkinnyWarps + (threadIdx.x >> 5);
  const int t0 = blockIdx.y * kSkinnyTokens;
  if (n >= N) return;
  const int nt = T - t0 < kSkinnyTokens ? T - t0 : kSkinnyTokens;
  float acc[kSkinnyTokens];
#pragma unroll
  for (int t = 0; t < kSkinnyTokens; t++) acc[t] = 0.0f;
  const uint4 *wrow = reinterpret_cast<const uint4 *>(W + (size_t)n * K);
  const int chunks = K / 8;
#pragma unroll 4
  for (int c = lane; c < chunks; c += 32) {
    const uint4 wv = __ldg(wrow + c);
    float w[8];
    bf16x8_to_float(wv, w);
#pragma unroll
    for (int t = 0; t < kSkinnyTokens; t++) {
      if (t < nt) {
        const float4 *xp = reinterpret_cast<const float4 *>(x + (size_t)(t0 + t) * K + (size_t)c * 8);
        const float4 a = xp[0], b = xp[1];
        acc[t] += a.x * w[0] + a.y * w[1] + a.z * w[2] + a.w * w[3] + b.x * w[4] + b.y * w[5] + b.z * w[6] +
                  b.w * w[7];
      }
    }
  }
#pragma unroll
  for (int t = 0; t < kSkinnyTokens; t++) acc[t] = rill_warp_sum(acc[t]);
  if (lane < nt) {
    float v = 0.0f;
#pragma unroll
    for (int t = 0; t < kSkinnyTokens; t++) v = t == lane ? acc[t] : v;
    float *out = y + (size_t)(t0 + lane) * N + n;
    *out = (accumulate ? *out : 0.0f) + v + (bias != nullptr ? bias[n] : 0.0f);
  }
}

constexpr int kTile = 64, kTileK = 32;

/* 64 tokens × 64 outputs per block of 256 threads, 4 × 4 outputs per thread. */
__global__ void tiled_kernel(const float *x, int T, int K, const __nv_bfloat16 *W, int N, const float *bias,
                             int accumulate, float *y) {
  __shared__ float xs[kTileK][kTile + 1];
  __shared__ float ws[kTileK][kTile + 1];
  const int tb = blockIdx.y * kTile, nb = blockIdx.x * kTile;
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  float acc[4][4] = {};
  for (int k0 = 0; k0 < K; k0 += kTileK) {
    for (int i = threadIdx.x; i < kTile * kTileK; i += blockDim.x) {
      const int r = i / kTileK, kk = i % kTileK, k = k0 + kk;
      xs[kk][r] = (tb + r < T && k < K) ? x[(size_t)(tb + r) * K + k] : 0.0f;
      ws[kk][r] = (nb + r < N && k < K) ? __bfloat162float(W[(size_t)(nb + r) * K + k]) : 0.0f;
    }
    __syncthreads();
#pragma unroll 8
    for (int kk = 0; kk < kTileK; kk++) {
      float a[4], b[4];
#pragma unroll
      for (int i = 0; i < 4; i++) {
        a[i] = xs[kk][ty * 4 + i];
        b[i] = ws[kk][tx * 4 + i];
      }
#pragma unroll
      for (int i = 0; i < 4; i++) {
#pragma unroll
        for (int j = 0; j < 4; j++) acc[i][j] += a[i] * b[j];
      }
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < 4; i++) {
    const int t = tb + ty * 4 + i;
    if (t >= T) continue;
#pragma unroll
    for (int j = 0; j < 4; j++) {
      const int n = nb + tx * 4 + j;
      if (n >= N) continue;
      float *out = y + (size_t)t * N + n;
      *out = (accumulate ? *out : 0.0f) + acc[i][j] + (bias != nullptr ? bias[n] : 0.0f);
    }
  }
}

} // namespace

cudaError_t rill_k_linear(cudaStream_t s, const float *x, int T, int K, const __nv_bfloat16 *W, int N,
                          const float *bias, int accumulate, float *y) {
  if (T == 0) return cudaSuccess;
  static_assert(kGemvMaxTokens == 2 * kSkinnyTokens, "two passes over W at most on the GEMV path");
  if (T <= kGemvMaxTokens) {
    const dim3 grid((unsigned)((N + kSkinnyWarps - 1) / kSkinnyWarps), (unsigned)((T + kSkinnyTokens - 1) / kSkinnyTokens));
    RILL_LAUNCH(skinny_kernel, grid, 32 * kSkinnyWarps, s, x, T, K, W, N, bias, accumulate, y);
  } else {
    const dim3 grid((unsigned)((N + kTile - 1) / kTile), (unsigned)((T + kTile - 1) / kTile));
    RILL_LAUNCH(tiled_kernel, grid, 256, s, x, T, K, W, N, bias, accumulate, y);
  }
  return cudaGetLastError();
}
