/*
 * One token's int8 activations laid out for weights regrouped in groups of 16 blocks (the int8 rows of
 * kernels_q8_g16.c and the MXFP4 experts of mxfp4_q8_g16.h): per group, x[j] lane k = dword j (bytes 4j to 4j + 3)
 * of the group's block k, so a vpdpbusd against a 64-byte load of the weights' dword j sums block k in lane k; off
 * lane k = −bias · Σ of block k's 32 activations, where the weights are stored + bias (unsigned). Lanes past a
 * partial last group are zero. x86 only; include after <immintrin.h>.
 */
#ifndef RILL_G16_PREP_H
#define RILL_G16_PREP_H

#include <stddef.h>
#include <stdint.h>

typedef struct g16_prepped {
  __m512i x[8], off;
} g16_prepped;

/* Scratch for one call's prepared activations: at least one token's groups of the widest row either kernel takes. */
#define G16_PREP_BYTES 65536

/* Prepares the (nb + 15) / 16 groups of the token whose quants (nb blocks of 32) start at xq. */
__attribute__((target("avx512f,avx512bw,avx512vnni"), always_inline)) static inline void
prep_g16(const int8_t *xq, int nb, uint8_t bias, g16_prepped *p) {
  const __m512i b = _mm512_set1_epi8((char)bias), zero = _mm512_setzero_si512();
  /* Dword j of block k sits at dword 8k + j of the token's quants. */
  const __m512i base = _mm512_mullo_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                                          _mm512_set1_epi32(8));
  for (int g = 0; g < nb; g += 16, p++) {
    const int n = nb - g < 16 ? nb - g : 16;
    const __mmask16 gm = (__mmask16)((1u << n) - 1u);
    const void *src = xq + (size_t)g * 32;
    __m512i sum = zero;
    for (int j = 0; j < 8; j++) {
      p->x[j] = _mm512_mask_i32gather_epi32(zero, gm, _mm512_add_epi32(base, _mm512_set1_epi32(j)), src, 4);
      sum = _mm512_dpbusd_epi32(sum, b, p->x[j]);
    }
    p->off = _mm512_sub_epi32(zero, sum);
  }
}

#endif /* RILL_G16_PREP_H */
