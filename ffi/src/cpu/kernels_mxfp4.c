/*
 * MXFP4 weights times fp32 activations, computed from the packed bytes (never widened in memory): each 32-element
 * block is decoded in registers (E2M1 code → value by table, times the block's power-of-two scale, which is exact) and
 * multiplied into fp32 accumulators. One function per instruction set; each keeps, for every (token, row), the same
 * sequence of operations whatever the number of tokens or rows computed alongside, so results are batch invariant.
 */
#include <string.h>

#include "cpu/kernels.h"

const float rill_e2m1_values[16] = {0.0f,  0.5f,  1.0f,  1.5f,  2.0f,  3.0f,  4.0f,  6.0f,
                                    -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};

/* 2^(s − 127): s = 0 is the subnormal 2^-127; 255 (NaN in the format) reads as infinity, and loaders refuse it. */
static inline float e8m0(uint8_t s) {
  uint32_t u = s == 0 ? 0x00400000u : (uint32_t)s << 23;
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

float rill_e8m0_to_f32(uint8_t s) { return e8m0(s); }

/* Eight partial sums (lane = element index mod 8), reduced by a fixed pairwise tree. */
static float reduce8(const float a[8]) { return ((a[0] + a[4]) + (a[2] + a[6])) + ((a[1] + a[5]) + (a[3] + a[7])); }

void rill_gemm_mxfp4_portable(const float *x, size_t ldx, int T, const uint8_t *blocks, const uint8_t *scales, int nb,
                              int r0, int r1, float *y, size_t ldy) {
  for (int r = r0; r < r1; r++) {
    const uint8_t *br = blocks + (size_t)r * (size_t)nb * 16, *sr = scales + (size_t)r * (size_t)nb;
    for (int t = 0; t < T; t++) {
      const float *xt = x + (size_t)t * ldx;
      float acc[8] = {0};
      for (int b = 0; b < nb; b++) {
        const float d = e8m0(sr[b]);
        const uint8_t *q = br + (size_t)b * 16;
        const float *xb = xt + (size_t)b * 32;
        for (int j = 0; j < 16; j++) {
          acc[(2 * j) & 7] += xb[2 * j] * (rill_e2m1_values[q[j] & 15] * d);
          acc[(2 * j + 1) & 7] += xb[2 * j + 1] * (rill_e2m1_values[q[j] >> 4] * d);
        }
      }
      y[(size_t)t * ldy + (size_t)r] = reduce8(acc);
    }
  }
}

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

/* Tokens per pass over a row: each block is decoded once and used for all of them. */
#define MX_TILE_T 8
/* Rows are short streams (a 2880-wide row is 1.5 KB); prefetching the row MX_PF_ROWS ahead keeps loads in flight. */
#define MX_PF_ROWS 4

#define TGT512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,fma"), always_inline)) static inline
#define TGT512_FN __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,fma")))
#define TGT2 __attribute__((target("avx2,fma"), always_inline)) static inline
#define TGT2_FN __attribute__((target("avx2,fma")))

/* The block's 32 codes in element order: element 2j is the low nibble of byte j, 2j + 1 its high nibble. */
static inline void codes_in_order(const uint8_t *q, __m128i *lo16, __m128i *hi16) {
  const __m128i v = _mm_loadu_si128((const __m128i *)q), m = _mm_set1_epi8(0x0F);
  const __m128i lo = _mm_and_si128(v, m), hi = _mm_and_si128(_mm_srli_epi16(v, 4), m);
  *lo16 = _mm_unpacklo_epi8(lo, hi); /* elements 0..15 */
  *hi16 = _mm_unpackhi_epi8(lo, hi); /* elements 16..31 */
}

TGT512 void rows_mxfp4_512(const int NT, const float *x, size_t ldx, const uint8_t *br, const uint8_t *sr,
                           const uint8_t *pf, int nb, float *y, size_t ldy) {
  const __m512 lut = _mm512_loadu_ps(rill_e2m1_values);
  __m512 a0[MX_TILE_T], a1[MX_TILE_T];
#pragma GCC unroll 8
  for (int t = 0; t < NT; t++) a0[t] = a1[t] = _mm512_setzero_ps();
  for (int b = 0; b < nb; b++) {
    if ((b & 3) == 0) _mm_prefetch((const char *)(pf + (size_t)b * 16), _MM_HINT_T1);
    __m128i c0, c1;
    codes_in_order(br + (size_t)b * 16, &c0, &c1);
    const __m512 d = _mm512_set1_ps(e8m0(sr[b]));
    const __m512 w0 = _mm512_mul_ps(_mm512_permutexvar_ps(_mm512_cvtepu8_epi32(c0), lut), d);
    const __m512 w1 = _mm512_mul_ps(_mm512_permutexvar_ps(_mm512_cvtepu8_epi32(c1), lut), d);
#pragma GCC unroll 8
    for (int t = 0; t < NT; t++) {
      const float *xb = x + (size_t)t * ldx + (size_t)b * 32;
      a0[t] = _mm512_fmadd_ps(_mm512_loadu_ps(xb), w0, a0[t]);
      a1[t] = _mm512_fmadd_ps(_mm512_loadu_ps(xb + 16), w1, a1[t]);
    }
  }
#pragma GCC unroll 8
  for (int t = 0; t < NT; t++) y[(size_t)t * ldy] = _mm512_reduce_add_ps(_mm512_add_ps(a0[t], a1[t]));
}

TGT512_FN void rill_gemm_mxfp4_avx512(const float *x, size_t ldx, int T, const uint8_t *blocks, const uint8_t *scales,
                                      int nb, int r0, int r1, float *y, size_t ldy) {
  const size_t rb = (size_t)nb * 16;
  for (int r = r0; r < r1; r++) {
    const uint8_t *br = blocks + (size_t)r * rb, *sr = scales + (size_t)r * (size_t)nb;
    const uint8_t *pf = r + MX_PF_ROWS < r1 ? br + MX_PF_ROWS * rb : br;
    int t = 0;
    for (; t + MX_TILE_T <= T; t += MX_TILE_T) {
      rows_mxfp4_512(MX_TILE_T, x + (size_t)t * ldx, ldx, br, sr, pf, nb, y + (size_t)t * ldy + r, ldy);
    }
    switch (T - t) {
    case 0: break;
    case 1: rows_mxfp4_512(1, x + (size_t)t * ldx, ldx, br, sr, pf, nb, y + (size_t)t * ldy + r, ldy); break;
    case 2: rows_mxfp4_512(2, x + (size_t)t * ldx, ldx, br, sr, pf, nb, y + (size_t)t * ldy + r, ldy); break;
    case 3: rows_mxfp4_512(3, x + (size_t)t * ldx, ldx, br, sr, pf, nb, y + (size_t)t * ldy + r, ldy); break;
    case 4: rows_mxfp4_512(4, x + (size_t)t * ldx, ldx, br, sr, pf, nb, y + (size_t)t * ldy + r, ldy); break;
    case 5: rows_mxfp4_512(5, x + (size_t)t * ldx, ldx, br, sr, pf, nb, y + (size_t)t * ldy + r, ldy); break;
    case 6: rows_mxfp4_512(6, x + (size_t)t * ldx, ldx, br, sr, pf, nb, y + (size_t)t * ldy + r, ldy); break;
    default: rows_mxfp4_512(7, x + (size_t)t * ldx, ldx, br, sr, pf, nb, y + (size_t)t * ldy + r, ldy); break;
    }
  }
}

/* Sum of the 8 lanes in a fixed order. */
TGT2 float hsum8(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

/* Eight codes (bytes) to values: magnitude by an 8-entry table, sign from bit 3. */
TGT2 __m256 decode8(__m128i codes8, __m256 lut, __m256 d) {
  const __m256i c = _mm256_cvtepu8_epi32(codes8);
  const __m256i sign = _mm256_slli_epi32(_mm256_and_si256(c, _mm256_set1_epi32(8)), 28);
  const __m256 mag = _mm256_permutevar8x32_ps(lut, c); /* uses the low 3 bits */
  return _mm256_mul_ps(_mm256_xor_ps(mag, _mm256_castsi256_ps(sign)), d);
}

#define MX2_TILE_T 4

TGT2 void rows_mxfp4_256(const int NT, const float *x, size_t ldx, const uint8_t *br, const uint8_t *sr,
                         const uint8_t *pf, int nb, float *y, size_t ldy) {
  const __m256 lut = _mm256_loadu_ps(rill_e2m1_values);
  __m256 a0[MX2_TILE_T], a1[MX2_TILE_T];
#pragma GCC unroll 4
  for (int t = 0; t < NT; t++) a0[t] = a1[t] = _mm256_setzero_ps();
  for (int b = 0; b < nb; b++) {
    if ((b & 3) == 0) _mm_prefetch((const char *)(pf + (size_t)b * 16), _MM_HINT_T1);
    __m128i c0, c1;
    codes_in_order(br + (size_t)b * 16, &c0, &c1);
    const __m256 d = _mm256_set1_ps(e8m0(sr[b]));
    const __m256 w0 = decode8(c0, lut, d), w1 = decode8(_mm_srli_si128(c0, 8), lut, d);
    const __m256 w2 = decode8(c1, lut, d), w3 = decode8(_mm_srli_si128(c1, 8), lut, d);
#pragma GCC unroll 4
    for (int t = 0; t < NT; t++) {
      const float *xb = x + (size_t)t * ldx + (size_t)b * 32;
      a0[t] = _mm256_fmadd_ps(_mm256_loadu_ps(xb), w0, a0[t]);
      a1[t] = _mm256_fmadd_ps(_mm256_loadu_ps(xb + 8), w1, a1[t]);
      a0[t] = _mm256_fmadd_ps(_mm256_loadu_ps(xb + 16), w2, a0[t]);
      a1[t] = _mm256_fmadd_ps(_mm256_loadu_ps(xb + 24), w3, a1[t]);
    }
  }
#pragma GCC unroll 4
  for (int t = 0; t < NT; t++) y[(size_t)t * ldy] = hsum8(_mm256_add_ps(a0[t], a1[t]));
}

TGT2_FN void rill_gemm_mxfp4_avx2(const float *x, size_t ldx, int T, const uint8_t *blocks, const uint8_t *scales,
                                  int nb, int r0, int r1, float *y, size_t ldy) {
  const size_t rb = (size_t)nb * 16;
  for (int r = r0; r < r1; r++) {
    const uint8_t *br = blocks + (size_t)r * rb, *sr = scales + (size_t)r * (size_t)nb;
    const uint8_t *pf = r + MX_PF_ROWS < r1 ? br + MX_PF_ROWS * rb : br;
    int t = 0;
    for (; t + MX2_TILE_T <= T; t += MX2_TILE_T) {
      rows_mxfp4_256(MX2_TILE_T, x + (size_t)t * ldx, ldx, br, sr, pf, nb, y + (size_t)t * ldy + r, ldy);
    }
    switch (T - t) {
    case 0: break;
    case 1: rows_mxfp4_256(1, x + (size_t)t * ldx, ldx, br, sr, pf, nb, y + (size_t)t * ldy + r, ldy); break;
    case 2: rows_mxfp4_256(2, x + (size_t)t * ldx, ldx, br, sr, pf, nb, y + (size_t)t * ldy + r, ldy); break;
    default: rows_mxfp4_256(3, x + (size_t)t * ldx, ldx, br, sr, pf, nb, y + (size_t)t * ldy + r, ldy); break;
    }
  }
}
#endif
