/* bf16 for the CUDA emulation (cuda_runtime.h here): round-to-nearest-even conversions, as the device's. */
#ifndef RILL_CUDA_EMU_BF16_H
#define RILL_CUDA_EMU_BF16_H

#include <stdint.h>
#include <string.h>

#include "cuda_runtime.h"

struct __nv_bfloat16 {
  uint16_t bits;
};
struct __nv_bfloat162 {
  __nv_bfloat16 x, y;
};

inline float __bfloat162float(__nv_bfloat16 h) {
  uint32_t u = (uint32_t)h.bits << 16;
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

inline __nv_bfloat16 __float2bfloat16_rn(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  if ((u & 0x7fffffffu) > 0x7f800000u) return __nv_bfloat16{(uint16_t)((u >> 16) | 0x40)}; /* quiet NaN */
  u += 0x7fffu + ((u >> 16) & 1u);
  return __nv_bfloat16{(uint16_t)(u >> 16)};
}

inline float2 __bfloat1622float2(__nv_bfloat162 h) { return float2{__bfloat162float(h.x), __bfloat162float(h.y)}; }

#endif /* RILL_CUDA_EMU_BF16_H */
