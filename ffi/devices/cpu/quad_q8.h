/*
 * Four 32-byte int8 blocks regrouped for vpdpbusd on 512-bit vectors, shared by the int8 GEMM (kernels_avx512.c) and
 * the MXFP4 × int8 kernel (kernels_mxfp4_q8.c): the blocks' first 16 bytes in one register, their last 16 in another,
 * so int32 lanes 4k to 4k + 3 of both belong to block k. x86 only; include after <immintrin.h>.
 */
#ifndef RILL_QUAD_Q8_H
#define RILL_QUAD_Q8_H

#include <stdint.h>

/* n ≤ 4 blocks of 32 bytes at p regrouped: *lo their first 16 bytes each, *hi their last 16 (absent blocks zero). */
__attribute__((target("avx512f,avx512bw"), always_inline)) static inline void quad_q8(const int8_t *p, int n,
                                                                                     __m512i *lo, __m512i *hi) {
  const __m512i firsts = _mm512_set_epi64(13, 12, 9, 8, 5, 4, 1, 0);
  const __m512i seconds = _mm512_set_epi64(15, 14, 11, 10, 7, 6, 3, 2);
  const __m512i a = n >= 2 ? _mm512_loadu_si512((const void *)p)
                           : _mm512_maskz_loadu_epi8(((__mmask64)1 << (32 * n)) - 1u, p);
  const __m512i b = n >= 4   ? _mm512_loadu_si512((const void *)(p + 64))
                    : n == 3 ? _mm512_maskz_loadu_epi8((__mmask64)0xFFFFFFFFu, p + 64)
                             : _mm512_setzero_si512();
  *lo = _mm512_permutex2var_epi64(a, firsts, b);
  *hi = _mm512_permutex2var_epi64(a, seconds, b);
}

#endif /* RILL_QUAD_Q8_H */
