/*
 * cuBLASLt loaded at run time (dlopen), never linked: the library builds where the CUDA toolkit has no cuBLAS, and a
 * machine without libcublasLt keeps the CUDA device's own tiled GEMM. Handles are opaque pointers and enums plain ints
 * (the C ABI of cublasLt.h: every cublasLt*_t handle is a pointer, every enum an int, cublasStatus_t 0 on success).
 */
#ifndef RILL_CUBLASLT_LOADER_H
#define RILL_CUBLASLT_LOADER_H

#include <stddef.h>
#include <stdint.h>

#include "rill.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct rill_cublaslt {
  void *lib; /* dlopen handle */
  int (*create)(void **handle);
  int (*destroy)(void *handle);
  int (*desc_create)(void **desc, int compute_type, int scale_type);
  int (*desc_set)(void *desc, int attr, const void *buf, size_t size);
  int (*desc_destroy)(void *desc);
  int (*layout_create)(void **layout, int type, uint64_t rows, uint64_t cols, int64_t ld);
  int (*layout_destroy)(void *layout);
  int (*pref_create)(void **pref);
  int (*pref_set)(void *pref, int attr, const void *buf, size_t size);
  int (*pref_destroy)(void *pref);
  int (*heuristic)(void *handle, void *desc, void *a, void *b, void *c, void *d, void *pref, int requested,
                   void *results, int *returned);
  int (*matmul)(void *handle, void *desc, const void *alpha, const void *a, void *a_layout, const void *b,
                void *b_layout, const void *beta, const void *c, void *c_layout, void *d, void *d_layout,
                const void *algo, void *workspace, size_t workspace_bytes, void *stream);
} rill_cublaslt;

/* Tries each path of candidates[0..n) with dlopen in order; the first that opens must export every function above.
 * RILL_OK fills *lt; otherwise *lt is zeroed, and why holds one line: RILL_ERR_UNSUPPORTED "no libcublasLt (...)"
 * when none opened, RILL_ERR_UNSUPPORTED "<path>: missing symbol <name>" when the opened one lacks a function. */
rill_status rill_cublaslt_load_from(const char *const *candidates, int n, rill_cublaslt *lt, char *why,
                                    size_t why_cap);

/* The default search: $RILL_CUBLASLT_DIR/libcublasLt.so.13, .so.12, .so when the variable is set, then the bare
 * names libcublasLt.so.13, libcublasLt.so.12, libcublasLt.so through the dynamic loader's path. */
rill_status rill_cublaslt_load(rill_cublaslt *lt, char *why, size_t why_cap);

/* Closes the library; a zeroed *lt is fine. */
void rill_cublaslt_unload(rill_cublaslt *lt);

#ifdef __cplusplus
}
#endif
#endif /* RILL_CUBLASLT_LOADER_H */
