/* y = x · Wᵀ for bf16 W (kernels.cuh): a weight-streaming kernel for small batches, with RMSNorm or SiLU·mul fused
 * into how it loads x, and a shared-memory tiled kernel for prefill-sized batches. Both accumulate in fp32 and own
 * each output element in one thread, so the epilogue's read-modify-write of y (residual add) needs no atomics. */
#include <math.h>

#include "block_reduce.cuh"
#include "kernels.cuh"

namespace {

constexpr int kSkinnyTokens = 8; /* tokens per pass over W in the streaming kernel */
constexpr int kSkinnyWarps = 4;
/* 16-byte loads of W each lane issues before using any: rows per warp × chunks of each row. 128 bytes per lane keep
 * 16-32 KiB in flight per SM at 4-8 resident warps, above the ~15 KiB an H100 SM needs to cover HBM latency. */
constexpr int kSkinnyLoads = 8;
/* Rows of W per warp: every x value (and its fused norm or SiLU·mul, computed once per warp) serves all of them, so
 * more rows cut the prologue's work and x's L1 traffic per byte of W; fewer rows give small N enough warps. */
constexpr int kSkinnyRowsWide = 4, kSkinnyRowsNarrow = 2;
constexpr int kSkinnyWideN = 4096; /* N from which a warp takes kSkinnyRowsWide rows */

__device__ inline void bf16x8_to_float(const uint4 &u, float *f) {
  const __nv_bfloat162 *p = reinterpret_cast<const __nv_bfloat162 *>(&u);
#pragma unroll
  for (int i = 0; i < 4; i++) {
    const float2 v = __bfloat1622float2(p[i]);
    f[2 * i] = v.x;
    f[2 * i + 1] = v.y;
  }
}

__device__ inline void load8(const float *p, float *f) {
  const float4 a = reinterpret_cast<const float4 *>(p)[0], b = reinterpret_cast<const float4 *>(p)[1];
  f[0] = a.x, f[1] = a.y, f[2] = a.z, f[3] = a.w, f[4] = b.x, f[5] = b.y, f[6] = b.z, f[7] = b.w;
}

/* How the streaming kernel reads x (kernels.cuh): as stored; RMSNorm of a residual row (the row's inverse RMS comes
 * from the same pass, applied in the epilogue); silu(gate) · up of a gate_up row. */
enum class prologue { plain, norm, silu_mul };

/* silu(g) · u; the device's fast exponential and division (a few ulps, far inside the GEMV path's bound): the
 * accurate ones would make the prologue, redone by every warp, cost more than streaming W at 8 tokens. */
__device__ inline float silu_mul(float g, float u) { return __fdividef(g, 1.0f + __expf(-g)) * u; }

/* One warp per R rows of W starting at n0, kSkinnyTokens tokens per block row. Every lane keeps kSkinnyLoads 16-byte
 * loads of W in flight, then reads x for them from L1/L2 (x is T × K floats, small beside W: it stays fp32, so the
 * GEMV path adds no rounding the CPU device lacks, and bf16 x would only halve L1 traffic that R already divides). */
template <prologue P, int R>
__global__ void skinny_kernel(const float *x, const int32_t *rows, const float *norm_w, float eps, int T, int K,
                              const __nv_bfloat16 *W, int N, const float *bias, int accumulate, float *y) {
  constexpr int U = kSkinnyLoads / R; /* chunks of each row per lane in flight */
  const int lane = threadIdx.x & 31;
  const int n0 = (blockIdx.x * kSkinnyWarps + (threadIdx.x >> 5)) * R;
  const int t0 = blockIdx.y * kSkinnyTokens;
  if (n0 >= N) return; /* the whole warp: the reductions below need every lane */
  const int nt = T - t0 < kSkinnyTokens ? T - t0 : kSkinnyTokens;
  /* x row of token t: rows[t] when gathering (norm), the gate_up row (2K wide) for silu_mul. */
  const float *xr[kSkinnyTokens];
#pragma unroll
  for (int t = 0; t < kSkinnyTokens; t++) {
    const int tt = t0 + (t < nt ? t : 0);
    const size_t row = rows != nullptr ? (size_t)rows[tt] : (size_t)tt;
    xr[t] = x + row * (P == prologue::silu_mul ? 2 * (size_t)K : (size_t)K);
  }
  float acc[R][kSkinnyTokens], ss[kSkinnyTokens];
#pragma unroll
  for (int t = 0; t < kSkinnyTokens; t++) {
    ss[t] = 0.0f;
#pragma unroll
    for (int r = 0; r < R; r++) acc[r][t] = 0.0f;
  }
  /* A row past N (N odd) re-reads row n0; its sums are never written. */
  const uint4 *wrow[R];
#pragma unroll
  for (int r = 0; r < R; r++) {
    wrow[r] = reinterpret_cast<const uint4 *>(W + (size_t)(n0 + r < N ? n0 + r : n0) * K);
  }
  const int chunks = K / 8;
  for (int c0 = lane; c0 < chunks; c0 += 32 * U) {
    uint4 wv[U][R];
#pragma unroll
    for (int u = 0; u < U; u++) {
      /* Past the end (the last pass only) a lane re-reads its last chunk, unused: no branch between the loads. */
      const int c = c0 + 32 * u < chunks ? c0 + 32 * u : chunks - 1;
#pragma unroll
      for (int r = 0; r < R; r++) wv[u][r] = __ldg(wrow[r] + c);
    }
#pragma unroll
    for (int u = 0; u < U; u++) {
      const int c = c0 + 32 * u;
      if (c >= chunks) break;
      float w[R][8];
#pragma unroll
      for (int r = 0; r < R; r++) bf16x8_to_float(wv[u][r], w[r]);
      float g[8];
      if (P == prologue::norm) load8(norm_w + (size_t)c * 8, g);
#pragma unroll
      for (int t = 0; t < kSkinnyTokens; t++) {
        if (t >= nt) break;
        float a[8];
        load8(xr[t] + (size_t)c * 8, a);
        if (P == prologue::norm) {
#pragma unroll
          for (int i = 0; i < 8; i++) {
            ss[t] += a[i] * a[i];
            a[i] *= g[i];
          }
        } else if (P == prologue::silu_mul) {
          float up[8];
          load8(xr[t] + (size_t)K + (size_t)c * 8, up);
#pragma unroll
          for (int i = 0; i < 8; i++) a[i] = silu_mul(a[i], up[i]);
        }
#pragma unroll
        for (int r = 0; r < R; r++) {
          acc[r][t] += a[0] * w[r][0] + a[1] * w[r][1] + a[2] * w[r][2] + a[3] * w[r][3] + a[4] * w[r][4] +
                       a[5] * w[r][5] + a[6] * w[r][6] + a[7] * w[r][7];
        }
      }
    }
  }
  /* Reductions leave every lane with every sum; lane r × kSkinnyTokens + t writes row n0 + r, token t. */
  float scale[kSkinnyTokens];
#pragma unroll
  for (int t = 0; t < kSkinnyTokens; t++) {
#pragma unroll
    for (int r = 0; r < R; r++) acc[r][t] = rill_warp_sum(acc[r][t]);
    scale[t] = 1.0f;
    if (P == prologue::norm) {
      /* As the CPU device and rms_norm_kernel: the root in double. */
      const float sq = rill_warp_sum(ss[t]);
      scale[t] = (float)(1.0 / sqrt((double)sq / K + (double)eps));
    }
  }
  static_assert(R * kSkinnyTokens <= 32 && kSkinnyLoads % R == 0, "one lane per output of the warp");
  const int r = lane / kSkinnyTokens, t = lane % kSkinnyTokens;
  if (r >= R || t >= nt || n0 + r >= N) return;
  float v = 0.0f, sc = 1.0f;
#pragma unroll
  for (int rr = 0; rr < R; rr++) {
#pragma unroll
    for (int tt = 0; tt < kSkinnyTokens; tt++) {
      v = rr == r && tt == t ? acc[rr][tt] : v;
      sc = rr == r && tt == t ? scale[tt] : sc;
    }
  }
  const int n = n0 + r;
  float *out = y + (size_t)(t0 + t) * N + n;
  *out = (accumulate ? *out : 0.0f) + v * sc + (bias != nullptr ? bias[n] : 0.0f);
}

template <prologue P>
cudaError_t launch_skinny(cudaStream_t s, const float *x, const int32_t *rows, const float *norm_w, float eps, int T,
                          int K, const __nv_bfloat16 *W, int N, const float *bias, int accumulate, float *y) {
  if (T == 0) return cudaSuccess;
  static_assert(kGemvMaxTokens == 2 * kSkinnyTokens, "two passes over W at most on the GEMV path");
  if (T > kGemvMaxTokens) return cudaErrorInvalidValue;
  const unsigned tblocks = (unsigned)((T + kSkinnyTokens - 1) / kSkinnyTokens);
  const bool wide = N >= kSkinnyWideN;
  const int per_block = kSkinnyWarps * (wide ? kSkinnyRowsWide : kSkinnyRowsNarrow);
  const dim3 grid((unsigned)((N + per_block - 1) / per_block), tblocks);
  auto *kernel = wide ? skinny_kernel<P, kSkinnyRowsWide> : skinny_kernel<P, kSkinnyRowsNarrow>;
  RILL_LAUNCH(kernel, grid, 32 * kSkinnyWarps, s, x, rows, norm_w, eps, T, K, W, N, bias, accumulate, y);
  return cudaGetLastError();
}

constexpr int kTile = 64, kTileK = 32;

__device__ inline float to_float(float v) { return v; }
__device__ inline float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }

/* 64 tokens × 64 outputs per block of 256 threads, 4 × 4 outputs per thread. */
template <typename X>
__global__ void tiled_kernel(const X *x, int T, int K, const __nv_bfloat16 *W, int N, const float *bias,
                             int accumulate, float *y) {
  __shared__ float xs[kTileK][kTile + 1];
  __shared__ float ws[kTileK][kTile + 1];
  const int tb = blockIdx.y * kTile, nb = blockIdx.x * kTile;
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  float acc[4][4] = {};
  for (int k0 = 0; k0 < K; k0 += kTileK) {
    for (int i = threadIdx.x; i < kTile * kTileK; i += blockDim.x) {
      const int r = i / kTileK, kk = i % kTileK, k = k0 + kk;
      xs[kk][r] = (tb + r < T && k < K) ? to_float(x[(size_t)(tb + r) * K + k]) : 0.0f;
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

template <typename X>
cudaError_t launch_tiled(cudaStream_t s, const X *x, int T, int K, const __nv_bfloat16 *W, int N, const float *bias,
                         int accumulate, float *y) {
  if (T == 0) return cudaSuccess;
  const dim3 grid((unsigned)((N + kTile - 1) / kTile), (unsigned)((T + kTile - 1) / kTile));
  RILL_LAUNCH(tiled_kernel<X>, grid, 256, s, x, T, K, W, N, bias, accumulate, y);
  return cudaGetLastError();
}

} // namespace

cudaError_t rill_k_linear(cudaStream_t s, const float *x, int T, int K, const __nv_bfloat16 *W, int N,
                          const float *bias, int accumulate, float *y) {
  if (T <= kGemvMaxTokens) {
    return launch_skinny<prologue::plain>(s, x, nullptr, nullptr, 0.0f, T, K, W, N, bias, accumulate, y);
  }
  return launch_tiled(s, x, T, K, W, N, bias, accumulate, y);
}

cudaError_t rill_k_linear_bf16x(cudaStream_t s, const __nv_bfloat16 *x, int T, int K, const __nv_bfloat16 *W, int N,
                                const float *bias, int accumulate, float *y) {
  return launch_tiled(s, x, T, K, W, N, bias, accumulate, y);
}

cudaError_t rill_k_linear_norm(cudaStream_t s, const float *x, const int32_t *rows, const float *norm_w, float eps,
                               int T, int K, const __nv_bfloat16 *W, int N, const float *bias, int accumulate,
                               float *y) {
  return launch_skinny<prologue::norm>(s, x, rows, norm_w, eps, T, K, W, N, bias, accumulate, y);
}

cudaError_t rill_k_linear_silu_mul(cudaStream_t s, const float *gu, int T, int I, const __nv_bfloat16 *W, int N,
                                   float *y) {
  return launch_skinny<prologue::silu_mul>(s, gu, nullptr, nullptr, 0.0f, T, I, W, N, nullptr, 1, y);
}
