/* cuBLASLt GEMM (gemm_lt.cuh). */
#include <stdio.h>
#include <string.h>

#include "gemm_lt.cuh"
#include "kernels.cuh"

#ifdef RILL_CUDA_EMU
/* The host emulation has no cuBLASLt: the CUDA device's forward takes the tiled kernel there. */
rill_status rill_gemm_lt_create(rill_gemm_lt *g, size_t, char *why, size_t why_cap) {
  memset(g, 0, sizeof *g);
  snprintf(why, why_cap, "host emulation");
  return RILL_ERR_UNSUPPORTED;
}
void rill_gemm_lt_destroy(rill_gemm_lt *g) { memset(g, 0, sizeof *g); }
cudaError_t rill_gemm_lt_linear(rill_gemm_lt *, cudaStream_t, const float *, int, int, const __nv_bfloat16 *, int,
                                const float *, int, float *) {
  return cudaErrorNotSupported;
}
cudaError_t rill_gemm_lt_linear_bf16x(rill_gemm_lt *, cudaStream_t, const __nv_bfloat16 *, int, int,
                                      const __nv_bfloat16 *, int, const float *, int, float *) {
  return cudaErrorNotSupported;
}
#else
#include <library_types.h>

namespace {

/* Values of cublasLt.h / cublas_api.h (CUDA 12 and 13 headers; ggerganov/llama.cpp include/cuda/cublasLt.h holds a
 * verbatim copy of NVIDIA's cublasLt.h): */
constexpr int kComputeF32 = 68;      /* cublas_api.h: cublasComputeType_t CUBLAS_COMPUTE_32F = 68 */
constexpr int kDescTransA = 3;       /* cublasLt.h: cublasLtMatmulDescAttributes_t CUBLASLT_MATMUL_DESC_TRANSA = 3 */
constexpr int kDescTransB = 4;       /* cublasLt.h: CUBLASLT_MATMUL_DESC_TRANSB = 4 */
constexpr int kPrefMaxWorkspace = 1; /* cublasLt.h: CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES = 1 (uint64_t) */
constexpr int kOpN = 0, kOpT = 1;    /* cublas_api.h: cublasOperation_t CUBLAS_OP_N = 0, CUBLAS_OP_T = 1 */
/* Layouts keep the default order, CUBLASLT_ORDER_COL = 0 (column-major, ld = stride between columns). */

/* cublasLt.h: cublasLtMatmulHeuristicResult_t = { cublasLtMatmulAlgo_t algo (uint64_t data[8]); size_t
 * workspaceSize; cublasStatus_t state; float wavesCount; int reserved[4]; }. */
struct heuristic_result {
  unsigned long long algo[8];
  size_t workspace_size;
  int state;
  float waves;
  int reserved[4];
};
static_assert(sizeof(heuristic_result) == 96, "cublasLtMatmulHeuristicResult_t is 96 bytes");

constexpr size_t kWorkspaceBytes = (size_t)32 << 20; /* NVIDIA's recommendation for Hopper; ample on Ampere */

__global__ void to_bf16_kernel(const float *x, size_t n, __nv_bfloat16 *out) {
  const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = __float2bfloat16(x[i]);
}

__global__ void add_bias_kernel(float *y, int T, int N, const float *bias) {
  const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < (size_t)T * N) y[i] += bias[i % (size_t)N];
}

int bucket_of(int T) {
  int m = 32;
  while (m < T) m *= 2;
  return m;
}

} // namespace

void rill_gemm_lt_destroy(rill_gemm_lt *g) {
  if (g->api.lib != nullptr) {
    if (g->pref != nullptr) g->api.pref_destroy(g->pref);
    if (g->desc != nullptr) g->api.desc_destroy(g->desc);
    if (g->handle != nullptr) g->api.destroy(g->handle);
  }
  cudaFree(g->workspace);
  cudaFree(g->xb);
  rill_cublaslt_unload(&g->api);
  memset(g, 0, sizeof *g);
}

rill_status rill_gemm_lt_create(rill_gemm_lt *g, size_t max_elems, char *why, size_t why_cap) {
  memset(g, 0, sizeof *g);
  rill_status s = rill_cublaslt_load(&g->api, why, why_cap);
  if (s != RILL_OK) return s;
  const int f32 = CUDA_R_32F, opT = kOpT, opN = kOpN;
  const uint64_t ws = kWorkspaceBytes;
  const char *step = nullptr;
  if (g->api.create(&g->handle) != 0) step = "cublasLtCreate";
  else if (g->api.desc_create(&g->desc, kComputeF32, f32) != 0) step = "cublasLtMatmulDescCreate";
  else if (g->api.desc_set(g->desc, kDescTransA, &opT, sizeof opT) != 0 ||
           g->api.desc_set(g->desc, kDescTransB, &opN, sizeof opN) != 0)
    step = "cublasLtMatmulDescSetAttribute";
  else if (g->api.pref_create(&g->pref) != 0) step = "cublasLtMatmulPreferenceCreate";
  else if (g->api.pref_set(g->pref, kPrefMaxWorkspace, &ws, sizeof ws) != 0) step = "cublasLtMatmulPreferenceSetAttribute";
  else if (cudaMalloc(&g->workspace, kWorkspaceBytes) != cudaSuccess ||
           cudaMalloc(reinterpret_cast<void **>(&g->xb), max_elems * sizeof(__nv_bfloat16)) != cudaSuccess)
    step = "cudaMalloc";
  if (step != nullptr) {
    cudaGetLastError(); /* a failed cudaMalloc is not sticky; clear it so the next check does not see it */
    snprintf(why, why_cap, "%s failed", step);
    rill_gemm_lt_destroy(g);
    return RILL_ERR_UNSUPPORTED;
  }
  g->workspace_bytes = kWorkspaceBytes;
  g->max_elems = max_elems;
  return RILL_OK;
}

/* The algorithm for (bucket, N, K), from the heuristic on first use; nullptr when it has none. */
static const rill_lt_entry *algo_for(rill_gemm_lt *g, int m_bucket, int N, int K, void *a, void *b, void *c) {
  for (int i = 0; i < g->used; i++) {
    const rill_lt_entry *e = &g->cache[i];
    if (e->m_bucket == m_bucket && e->n == N && e->k == K) return e->valid > 0 ? e : nullptr;
  }
  heuristic_result r;
  int found = 0;
  const int st = g->api.heuristic(g->handle, g->desc, a, b, c, c, g->pref, 1, &r, &found);
  rill_lt_entry fresh = {m_bucket, N, K, st == 0 && found > 0 && r.state == 0 ? 1 : -1, {}};
  if (fresh.valid > 0) memcpy(fresh.algo, r.algo, sizeof fresh.algo);
  if (g->used < kLtCacheEntries) {
    g->cache[g->used] = fresh;
    return g->cache[g->used++].valid > 0 ? &g->cache[g->used - 1] : nullptr;
  }
  /* A full cache (more shapes than a model has) leaves the shape on the tiled kernel rather than re-asking. */
  return nullptr;
}

/* y = x · Wᵀ for bf16 x, or for fp32 xf cast into g->xb first (x == nullptr); the cast is enqueued only once an
 * algorithm is known, so cudaErrorNotSupported leaves nothing enqueued. */
static cudaError_t lt_linear(rill_gemm_lt *g, cudaStream_t s, const float *xf, const __nv_bfloat16 *x, int T, int K,
                             const __nv_bfloat16 *W, int N, const float *bias, int accumulate, float *y) {
  if (g->api.lib == nullptr) return cudaErrorNotSupported;
  /* Row-major y[T×N] = x[T×K] · W[N×K]ᵀ is column-major D (N × T, ld N) = op(A) · B with A = W stored K × N (ld K)
   * and transposed, B = x stored K × T (ld K). The heuristic sees the bucket's column count; the call the real one. */
  const int m_bucket = bucket_of(T);
  void *la = nullptr, *lb = nullptr, *lc = nullptr, *hb = nullptr;
  cudaError_t result = cudaErrorNotSupported;
  if (g->api.layout_create(&la, CUDA_R_16BF, (uint64_t)K, (uint64_t)N, K) == 0 &&
      g->api.layout_create(&hb, CUDA_R_16BF, (uint64_t)K, (uint64_t)m_bucket, K) == 0 &&
      g->api.layout_create(&lb, CUDA_R_16BF, (uint64_t)K, (uint64_t)T, K) == 0 &&
      g->api.layout_create(&lc, CUDA_R_32F, (uint64_t)N, (uint64_t)T, N) == 0) {
    void *hc = nullptr;
    const rill_lt_entry *e = nullptr;
    if (g->api.layout_create(&hc, CUDA_R_32F, (uint64_t)N, (uint64_t)m_bucket, N) == 0) {
      e = algo_for(g, m_bucket, N, K, la, hb, hc);
      g->api.layout_destroy(hc);
    }
    if (e != nullptr) {
      result = cudaSuccess;
      if (x == nullptr) {
        const size_t n = (size_t)T * (size_t)K;
        RILL_LAUNCH(to_bf16_kernel, (unsigned)((n + 255) / 256), 256, s, xf, n, g->xb);
        result = cudaGetLastError();
        x = g->xb;
      }
      const float alpha = 1.0f, beta = accumulate ? 1.0f : 0.0f;
      if (result == cudaSuccess &&
          g->api.matmul(g->handle, g->desc, &alpha, W, la, x, lb, &beta, y, lc, y, lc, e->algo, g->workspace,
                        g->workspace_bytes, s) != 0) {
        /* A cast left enqueued is harmless: the tiled kernel reads xf, not xb. */
        result = cudaErrorNotSupported;
      }
      if (result == cudaSuccess && bias != nullptr) {
        const size_t tn = (size_t)T * (size_t)N;
        RILL_LAUNCH(add_bias_kernel, (unsigned)((tn + 255) / 256), 256, s, y, T, N, bias);
        result = cudaGetLastError();
      }
    }
  }
  void *layouts[] = {la, hb, lb, lc};
  for (void *l : layouts) {
    if (l != nullptr) g->api.layout_destroy(l);
  }
  return result;
}

cudaError_t rill_gemm_lt_linear(rill_gemm_lt *g, cudaStream_t s, const float *x, int T, int K,
                                const __nv_bfloat16 *W, int N, const float *bias, int accumulate, float *y) {
  if ((size_t)T * (size_t)K > g->max_elems) return cudaErrorNotSupported;
  return lt_linear(g, s, x, nullptr, T, K, W, N, bias, accumulate, y);
}

cudaError_t rill_gemm_lt_linear_bf16x(rill_gemm_lt *g, cudaStream_t s, const __nv_bfloat16 *x, int T, int K,
                                      const __nv_bfloat16 *W, int N, const float *bias, int accumulate, float *y) {
  return lt_linear(g, s, nullptr, x, T, K, W, N, bias, accumulate, y);
}
#endif /* RILL_CUDA_EMU */
