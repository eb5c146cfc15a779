/* bf16 for the CUDA emulation (cuda_runtime.h here): the device's round-to-nearest-even conversions, which are the
 * library's own (bf16.h). */
#ifndef RILL_CUDA_EMU_BF16_H
#define RILL_CUDA_EMU_BF16_H

#include <stdint.h>

#include "bf16.h"
#include "cuda_runtime.h"

struct __nv_bfloat16 {
  uint16_t bits;
};
struct __nv_bfloat162 {
  __nv_bfloat16 x, y;
};

inline float __bfloat162float(__nv_bfloat16 h) { return rill_bf16_to_f32(h.bits); }

inline __nv_bfloat16 __float2bfloat16_rn(float f) { return __nv_bfloat16{rill_f32_to_bf16(f)}; }

inline float2 __bfloat1622float2(__nv_bfloat162 h) { return float2{__bfloat162float(h.x), __bfloat162float(h.y)}; }

#endif /* RILL_CUDA_EMU_BF16_H */
