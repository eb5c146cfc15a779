/*
 * bf16 ↔ fp32, the one definition every part of the library (and the CUDA emulation's __nv_bfloat16) converts by:
 * bf16 is the high half of an fp32. static inline so the CPU kernels' inner loops inline it.
 */
#ifndef RILL_BF16_H
#define RILL_BF16_H

#include <stdint.h>
#include <string.h>

static inline float rill_bf16_to_f32(uint16_t v) {
  const uint32_t u = (uint32_t)v << 16;
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

/* Round to nearest even, as torch (and CUDA's __float2bfloat16_rn) convert fp32 to bf16; a NaN stays a quiet NaN. */
static inline uint16_t rill_f32_to_bf16(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return (uint16_t)((u >> 16) | 0x40);
  u += 0x7FFFu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}

#endif /* RILL_BF16_H */
