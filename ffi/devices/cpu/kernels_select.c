#include <string.h>

#include "kernels.h"

static int rank_of(const char *name) {
  if (name == NULL) return 3;
  if (strcmp(name, "avx512bf16") == 0) return 4;
  if (strcmp(name, "portable") == 0) return 0;
  if (strcmp(name, "avx2") == 0) return 1;
  if (strcmp(name, "avx512") == 0) return 2;
  return 3;
}

const rill_kernels *rill_kernels_select(const char *prefer) {
  int cap = rank_of(prefer);
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  if (cap >= 2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("fma") &&
      __builtin_cpu_supports("f16c")) {
    /* Only on request: rounding activations to bf16 moves bf16 checkpoints' logits by ~0.5% of their range, past the
     * references' 1e-5 bound for weights as held (ffi/tests/test_model_checkpoints.c). */
    if (cap >= 4 && __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512bf16")) {
      return &rill_kernels_avx512_bf16;
    }
    return __builtin_cpu_supports("avx512vnni") ? &rill_kernels_avx512_vnni : &rill_kernels_avx512;
  }
  if (cap >= 1 && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
      __builtin_cpu_supports("f16c")) {
    return __builtin_cpu_supports("avxvnni") ? &rill_kernels_avx2_vnni : &rill_kernels_avx2;
  }
#endif
  return &rill_kernels_portable;
}
