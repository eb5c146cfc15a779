/*
 * y = x · Wᵀ through cuBLASLt (loaded at run time, cublaslt_loader.h) for steps above the GEMV threshold: one
 * bf16 × bf16 GEMM with fp32 compute writes fp32 y, so the kernels after it are the same as on the tiled path. x comes
 * as bf16 from the kernel before (normed rows, SiLU·mul), or fp32 (attention output) cast into a buffer sized at
 * create.
 */
#ifndef RILL_CUDA_GEMM_LT_CUH
#define RILL_CUDA_GEMM_LT_CUH

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stddef.h>

#include "cublaslt_loader.h"

struct rill_lt_entry {
  int m_bucket, n, k, valid; /* valid: 1 algo found, -1 heuristic found none (use the tiled kernel) */
  unsigned long long algo[8]; /* cublasLtMatmulAlgo_t */
};

constexpr int kLtCacheEntries = 128;

struct rill_gemm_lt {
  rill_cublaslt api;
  void *handle, *desc, *pref;
  void *workspace;
  size_t workspace_bytes;
  __nv_bfloat16 *xb; /* [max_elems]: fp32 x cast for rill_gemm_lt_linear */
  size_t max_elems;
  rill_lt_entry cache[kLtCacheEntries];
  int used;
};

/* Loads cuBLASLt and allocates the workspace and a bf16 copy of up to max_elems activations. Not RILL_OK: *g is
 * zeroed (nothing held) and why says in one line why the tiled kernel stays. Under the host emulation it always
 * refuses. */
rill_status rill_gemm_lt_create(rill_gemm_lt *g, size_t max_elems, char *why, size_t why_cap);
void rill_gemm_lt_destroy(rill_gemm_lt *g);

/* rill_k_linear's contract (kernels.cuh) for T × K ≤ max_elems. cudaErrorNotSupported: cuBLASLt has no algorithm for
 * this shape, nothing was enqueued, the caller uses the tiled kernel. */
cudaError_t rill_gemm_lt_linear(rill_gemm_lt *g, cudaStream_t s, const float *x, int T, int K,
                                const __nv_bfloat16 *W, int N, const float *bias, int accumulate, float *y);

/* The same for x already bf16 (no cast, no size limit from max_elems). */
cudaError_t rill_gemm_lt_linear_bf16x(rill_gemm_lt *g, cudaStream_t s, const __nv_bfloat16 *x, int T, int K,
                                      const __nv_bfloat16 *W, int N, const float *bias, int accumulate, float *y);

#endif /* RILL_CUDA_GEMM_LT_CUH */
