/*
 * The sum of a 16-lane fp32 vector in one fixed order (halves, then quarters, then a tree over the last four lanes),
 * shared by the AVX-512 int8 kernels so that a (row, token)'s final reduction never depends on the build's choice of
 * instructions. x86 only; include after <immintrin.h>.
 */
#ifndef RILL_HSUM16_H
#define RILL_HSUM16_H

__attribute__((target("avx512f,avx512dq"), always_inline)) static inline float hsum16_z(__m512 v) {
  const __m256 h = _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

#endif /* RILL_HSUM16_H */
