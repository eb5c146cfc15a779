/* cuBLASLt loader (cublaslt_loader.h). */
#include "cublaslt_loader.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Each function's exported name and where its pointer goes in rill_cublaslt. */
static const struct {
  const char *name;
  size_t offset;
} SYMBOLS[] = {
    {"cublasLtCreate", offsetof(rill_cublaslt, create)},
    {"cublasLtDestroy", offsetof(rill_cublaslt, destroy)},
    {"cublasLtMatmulDescCreate", offsetof(rill_cublaslt, desc_create)},
    {"cublasLtMatmulDescSetAttribute", offsetof(rill_cublaslt, desc_set)},
    {"cublasLtMatmulDescDestroy", offsetof(rill_cublaslt, desc_destroy)},
    {"cublasLtMatrixLayoutCreate", offsetof(rill_cublaslt, layout_create)},
    {"cublasLtMatrixLayoutDestroy", offsetof(rill_cublaslt, layout_destroy)},
    {"cublasLtMatmulPreferenceCreate", offsetof(rill_cublaslt, pref_create)},
    {"cublasLtMatmulPreferenceSetAttribute", offsetof(rill_cublaslt, pref_set)},
    {"cublasLtMatmulPreferenceDestroy", offsetof(rill_cublaslt, pref_destroy)},
    {"cublasLtMatmulAlgoGetHeuristic", offsetof(rill_cublaslt, heuristic)},
    {"cublasLtMatmul", offsetof(rill_cublaslt, matmul)},
};

rill_status rill_cublaslt_load_from(const char *const *candidates, int n, rill_cublaslt *lt, char *why,
                                    size_t why_cap) {
  memset(lt, 0, sizeof *lt);
  if (why_cap > 0) why[0] = '\0';
  const char *opened = NULL;
  char last[160] = "no candidates";
  for (int i = 0; i < n && lt->lib == NULL; i++) {
    if (candidates[i] == NULL) continue;
    lt->lib = dlopen(candidates[i], RTLD_NOW | RTLD_LOCAL);
    if (lt->lib != NULL) {
      opened = candidates[i];
    } else {
      const char *e = dlerror();
      snprintf(last, sizeof last, "%s", e != NULL ? e : candidates[i]);
    }
  }
  if (lt->lib == NULL) {
    snprintf(why, why_cap, "no libcublasLt (%s)", last);
    return RILL_ERR_UNSUPPORTED;
  }
  for (size_t i = 0; i < sizeof SYMBOLS / sizeof SYMBOLS[0]; i++) {
    void *sym = dlsym(lt->lib, SYMBOLS[i].name);
    if (sym == NULL) {
      snprintf(why, why_cap, "%s: missing symbol %s", opened, SYMBOLS[i].name);
      dlclose(lt->lib);
      memset(lt, 0, sizeof *lt);
      return RILL_ERR_UNSUPPORTED;
    }
    /* POSIX guarantees a function's address survives the trip through void *. */
    memcpy((char *)lt + SYMBOLS[i].offset, &sym, sizeof sym);
  }
  return RILL_OK;
}

rill_status rill_cublaslt_load(rill_cublaslt *lt, char *why, size_t why_cap) {
  static const char *const NAMES[] = {"libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so"};
  enum { NAMES_N = sizeof NAMES / sizeof NAMES[0] };
  char in_dir[NAMES_N][4096];
  const char *candidates[2 * NAMES_N];
  int n = 0;
  const char *dir = getenv("RILL_CUBLASLT_DIR");
  if (dir != NULL && dir[0] != '\0') {
    for (int i = 0; i < NAMES_N; i++) {
      const int len = snprintf(in_dir[i], sizeof in_dir[i], "%s/%s", dir, NAMES[i]);
      if (len > 0 && (size_t)len < sizeof in_dir[i]) candidates[n++] = in_dir[i];
    }
  }
  for (int i = 0; i < NAMES_N; i++) candidates[n++] = NAMES[i];
  return rill_cublaslt_load_from(candidates, n, lt, why, why_cap);
}

void rill_cublaslt_unload(rill_cublaslt *lt) {
  if (lt->lib != NULL) dlclose(lt->lib);
  memset(lt, 0, sizeof *lt);
}
