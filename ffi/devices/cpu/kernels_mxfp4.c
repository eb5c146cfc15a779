/*
 * MXFP4 weights times fp32 activations, computed from the packed bytes (never widened in memory): each 32-element
 * block is decoded in registers (E2M1 code → value by table, times the block's power-of-two scale, which is exact) and
 * multiplied into fp32 accumulators. Activations arrive in MXFP4 order (kernels.h rill_mxfp4_xpos), so a block's low
 * nibbles pair with 16 consecutive activations and its high nibbles with the next 16. One function per instruction
 * set; each keeps, for every (token, row), the same sequence of operations whatever the number of tokens or rows
 * computed alongside, so results are batch invariant.
 */
#include <string.h>

#include "kernels.h"

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

/* Every code's value under every scale byte, E2M1 × 2^(s − 127) rounded once as fp32 (exact but where it overflows):
 * a block's table is one aligned 64-byte row, loaded where the kernels would otherwise multiply a table by its scale.
 * Filled when the library loads. */
static float mxfp4_values[256][16] __attribute__((aligned(64)));

__attribute__((constructor)) static void mxfp4_values_init(void) {
  for (int s = 0; s < 256; s++) {
    for (int c = 0; c < 16; c++) mxfp4_values[s][c] = rill_e2m1_values[c] * e8m0((uint8_t)s);
  }
}

/* Eight partial sums, reduced by a fixed pairwise tree. */
static float reduce8(const float a[8]) { return ((a[0] + a[4]) + (a[2] + a[6])) + ((a[1] + a[5]) + (a[3] + a[7])); }

void rill_gemm_mxfp4_portable(const float *x, size_t ldx, int T, const uint8_t *blocks, const uint8_t *scales, int nb,
                              int r0, int r1, float *y, size_t ldy) {
  for (int r = r0; r < r1; r++) {
    const uint8_t *br = blocks + (size_t)r * (size_t)nb * 16, *sr = scales + (size_t)r * (size_t)nb;
    for (int t = 0; t < T; t++) {
      const float *xt = x + (size_t)t * ldx;
      float acc[8] = {0};
      for (int b = 0; b < nb; b++) {
        const float *w = mxfp4_values[sr[b]];
        const uint8_t *q = br + (size_t)b * 16;
        const float *xe = xt + (size_t)b * 32, *xo = xe + 16;
        for (int j = 0; j < 16; j++) {
          acc[j & 7] += xe[j] * w[q[j] & 15];
          acc[j & 7] += xo[j] * w[q[j] >> 4];
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
/* Rows are short streams (a 2880-wide row is 1.5 KB); the row MX_PF_ROWS ahead is prefetched into L2. */
#define MX_PF_ROWS 4

#define TGT512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,fma"), always_inline)) static inline
#define TGT512_FN __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,fma")))
#define TGT2 __attribute__((target("avx2,fma"), always_inline)) static inline
#define TGT2_FN __attribute__((target("avx2,fma")))

/* One token, NR rows side by side: each row's two accumulators take one FMA per block, so one row alone would wait on
 * the FMA latency; NR rows keep 2 · NR chains in flight. A row's sum is the same sequence of operations whatever NR
 * (permutexvar reads only the low 4 bits of each index: a byte's dword indexes its low nibble as it is, and shifted
 * right by 4 its high one). */
#define MX_ROWS 4

TGT512 void rows_mxfp4_512(const int NR, const float *x, const uint8_t *blocks, const uint8_t *scales, int nb, int r,
                           int r1, float *y) {
  const size_t rb = (size_t)nb * 16;
  __m512 a0[MX_ROWS], a1[MX_ROWS];
#pragma GCC unroll 4
  for (int i = 0; i < NR; i++) a0[i] = a1[i] = _mm512_setzero_ps();
  const uint8_t *pf = r + NR + MX_PF_ROWS <= r1 ? blocks + (size_t)(r + MX_PF_ROWS) * rb : blocks + (size_t)r * rb;
  for (int b = 0; b < nb; b++) {
    if ((b & 3) == 0) {
#pragma GCC unroll 4
      for (int i = 0; i < NR; i++) _mm_prefetch((const char *)(pf + (size_t)i * rb + (size_t)b * 16), _MM_HINT_T1);
    }
    const __m512 xe = _mm512_loadu_ps(x + (size_t)b * 32), xo = _mm512_loadu_ps(x + (size_t)b * 32 + 16);
#pragma GCC unroll 4
    for (int i = 0; i < NR; i++) {
      const uint8_t *q = blocks + (size_t)(r + i) * rb + (size_t)b * 16;
      const __m512i v = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)q));
      const __m512 lut_s = _mm512_load_ps(mxfp4_values[scales[(size_t)(r + i) * nb + b]]);
      a0[i] = _mm512_fmadd_ps(xe, _mm512_permutexvar_ps(v, lut_s), a0[i]);
      a1[i] = _mm512_fmadd_ps(xo, _mm512_permutexvar_ps(_mm512_srli_epi32(v, 4), lut_s), a1[i]);
    }
  }
#pragma GCC unroll 4
  for (int i = 0; i < NR; i++) y[r + i] = _mm512_reduce_add_ps(_mm512_add_ps(a0[i], a1[i]));
}

/* Several tokens: their activations for a whole row would not stay in L1 (8 tokens × 2880 floats is 92 KB), so
 * blocks of MX_KB_ROWS rows are walked MX_KC blocks of columns at a time, each row's accumulators kept in memory
 * between column chunks. Every (row, token) still sums its blocks in order into the same two vectors as
 * rows_mxfp4_512, so the bits match the single-token path. */
#define MX_KB_ROWS 16
#define MX_KC 8

TGT512 void rows_blocked_512(const int NT, const float *x, size_t ldx, const uint8_t *blocks, const uint8_t *scales,
                             int nb, int r0, int r1, float *y, size_t ldy) {
  const size_t rb = (size_t)nb * 16;
  __m512 acc[MX_KB_ROWS][MX_TILE_T][2];
  for (int q0 = r0; q0 < r1; q0 += MX_KB_ROWS) {
    const int nr = r1 - q0 < MX_KB_ROWS ? r1 - q0 : MX_KB_ROWS;
    for (int i = 0; i < nr; i++) {
#pragma GCC unroll 8
      for (int t = 0; t < NT; t++) acc[i][t][0] = acc[i][t][1] = _mm512_setzero_ps();
    }
    for (int c0 = 0; c0 < nb; c0 += MX_KC) {
      const int c1 = nb - c0 < MX_KC ? nb : c0 + MX_KC;
      for (int i = 0; i < nr; i++) {
        const uint8_t *br = blocks + (size_t)(q0 + i) * rb, *sr = scales + (size_t)(q0 + i) * (size_t)nb;
        _mm_prefetch((const char *)(br + (size_t)c1 * 16), _MM_HINT_T0);
        _mm_prefetch((const char *)(br + (size_t)c1 * 16 + 64), _MM_HINT_T0);
        __m512 a0[MX_TILE_T], a1[MX_TILE_T];
#pragma GCC unroll 8
        for (int t = 0; t < NT; t++) {
          a0[t] = acc[i][t][0];
          a1[t] = acc[i][t][1];
        }
        for (int b = c0; b < c1; b++) {
          const __m512i v = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(br + (size_t)b * 16)));
          const __m512 lut_s = _mm512_load_ps(mxfp4_values[sr[b]]);
          const __m512 we = _mm512_permutexvar_ps(v, lut_s), wo = _mm512_permutexvar_ps(_mm512_srli_epi32(v, 4), lut_s);
#pragma GCC unroll 8
          for (int t = 0; t < NT; t++) {
            const float *xb = x + (size_t)t * ldx + (size_t)b * 32;
            a0[t] = _mm512_fmadd_ps(_mm512_loadu_ps(xb), we, a0[t]);
            a1[t] = _mm512_fmadd_ps(_mm512_loadu_ps(xb + 16), wo, a1[t]);
          }
        }
#pragma GCC unroll 8
        for (int t = 0; t < NT; t++) {
          acc[i][t][0] = a0[t];
          acc[i][t][1] = a1[t];
        }
      }
    }
    for (int i = 0; i < nr; i++) {
      for (int t = 0; t < NT; t++) {
        y[(size_t)t * ldy + (size_t)(q0 + i)] = _mm512_reduce_add_ps(_mm512_add_ps(acc[i][t][0], acc[i][t][1]));
      }
    }
  }
}

TGT512_FN void rill_gemm_mxfp4_avx512(const float *x, size_t ldx, int T, const uint8_t *blocks, const uint8_t *scales,
                                      int nb, int r0, int r1, float *y, size_t ldy) {
  for (int t = 0; t < T; t += MX_TILE_T) {
    const int nt = T - t < MX_TILE_T ? T - t : MX_TILE_T;
    const float *xt = x + (size_t)t * ldx;
    float *yt = y + (size_t)t * ldy;
    switch (nt) {
    case 1: {
      int r = r0;
      for (; r + MX_ROWS <= r1; r += MX_ROWS) rows_mxfp4_512(MX_ROWS, xt, blocks, scales, nb, r, r1, yt);
      switch (r1 - r) {
      case 0: break;
      case 1: rows_mxfp4_512(1, xt, blocks, scales, nb, r, r1, yt); break;
      case 2: rows_mxfp4_512(2, xt, blocks, scales, nb, r, r1, yt); break;
      default: rows_mxfp4_512(3, xt, blocks, scales, nb, r, r1, yt); break;
      }
      break;
    }
    case 2: rows_blocked_512(2, xt, ldx, blocks, scales, nb, r0, r1, yt, ldy); break;
    case 3: rows_blocked_512(3, xt, ldx, blocks, scales, nb, r0, r1, yt, ldy); break;
    case 4: rows_blocked_512(4, xt, ldx, blocks, scales, nb, r0, r1, yt, ldy); break;
    case 5: rows_blocked_512(5, xt, ldx, blocks, scales, nb, r0, r1, yt, ldy); break;
    case 6: rows_blocked_512(6, xt, ldx, blocks, scales, nb, r0, r1, yt, ldy); break;
    case 7: rows_blocked_512(7, xt, ldx, blocks, scales, nb, r0, r1, yt, ldy); break;
    default: rows_blocked_512(8, xt, ldx, blocks, scales, nb, r0, r1, yt, ldy); break;
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

/* Eight codes, one per dword: magnitude by the 8-entry table (permutevar8x32 reads the low 3 bits), bit 3 the sign. */
TGT2 __m256 decode8(__m256i c, __m256 lut_s) {
  const __m256i sign = _mm256_slli_epi32(_mm256_and_si256(c, _mm256_set1_epi32(8)), 28);
  return _mm256_xor_ps(_mm256_permutevar8x32_ps(lut_s, c), _mm256_castsi256_ps(sign));
}

#define MX2_TILE_T 4

TGT2 void row_mxfp4_256(const int NT, const float *x, size_t ldx, const uint8_t *br, const uint8_t *sr,
                        const uint8_t *pf, int nb, float *y, size_t ldy) {
  __m256 a0[MX2_TILE_T], a1[MX2_TILE_T];
#pragma GCC unroll 4
  for (int t = 0; t < NT; t++) a0[t] = a1[t] = _mm256_setzero_ps();
  for (int b = 0; b < nb; b++) {
    if ((b & 3) == 0) _mm_prefetch((const char *)(pf + (size_t)b * 16), _MM_HINT_T1);
    const __m128i q = _mm_loadu_si128((const __m128i *)(br + (size_t)b * 16));
    const __m256i v0 = _mm256_cvtepu8_epi32(q), v1 = _mm256_cvtepu8_epi32(_mm_srli_si128(q, 8));
    const __m256 lut_s = _mm256_load_ps(mxfp4_values[sr[b]]); /* the 8 magnitudes */
    const __m256 e0 = decode8(v0, lut_s), e1 = decode8(v1, lut_s);
    const __m256 o0 = decode8(_mm256_srli_epi32(v0, 4), lut_s), o1 = decode8(_mm256_srli_epi32(v1, 4), lut_s);
#pragma GCC unroll 4
    for (int t = 0; t < NT; t++) {
      const float *xb = x + (size_t)t * ldx + (size_t)b * 32;
      /* Low nibbles into a0, high ones into a1 (as the AVX-512 kernel keeps them apart). */
      a0[t] = _mm256_fmadd_ps(_mm256_loadu_ps(xb), e0, a0[t]);
      a1[t] = _mm256_fmadd_ps(_mm256_loadu_ps(xb + 16), o0, a1[t]);
      a0[t] = _mm256_fmadd_ps(_mm256_loadu_ps(xb + 8), e1, a0[t]);
      a1[t] = _mm256_fmadd_ps(_mm256_loadu_ps(xb + 24), o1, a1[t]);
    }
  }
#pragma GCC unroll 4
  for (int t = 0; t < NT; t++) y[(size_t)t * ldy] = hsum8(_mm256_add_ps(a0[t], a1[t]));
}

/* One token, NR ≤ 2 rows side by side (one row's accumulators alone wait on the FMA latency); each row takes the
 * operations row_mxfp4_256 gives it. */
TGT2 void rows_mxfp4_256(const int NR, const float *x, const uint8_t *blocks, const uint8_t *scales, int nb, int r,
                         int r1, float *y) {
  const size_t rb = (size_t)nb * 16;
  __m256 a0[2], a1[2];
#pragma GCC unroll 2
  for (int i = 0; i < NR; i++) a0[i] = a1[i] = _mm256_setzero_ps();
  const uint8_t *pf = r + NR + MX_PF_ROWS <= r1 ? blocks + (size_t)(r + MX_PF_ROWS) * rb : blocks + (size_t)r * rb;
  for (int b = 0; b < nb; b++) {
    if ((b & 3) == 0) {
#pragma GCC unroll 2
      for (int i = 0; i < NR; i++) _mm_prefetch((const char *)(pf + (size_t)i * rb + (size_t)b * 16), _MM_HINT_T1);
    }
    const float *xb = x + (size_t)b * 32;
#pragma GCC unroll 2
    for (int i = 0; i < NR; i++) {
      const __m128i q = _mm_loadu_si128((const __m128i *)(blocks + (size_t)(r + i) * rb + (size_t)b * 16));
      const __m256i v0 = _mm256_cvtepu8_epi32(q), v1 = _mm256_cvtepu8_epi32(_mm_srli_si128(q, 8));
      const __m256 lut_s = _mm256_load_ps(mxfp4_values[scales[(size_t)(r + i) * nb + b]]);
      a0[i] = _mm256_fmadd_ps(_mm256_loadu_ps(xb), decode8(v0, lut_s), a0[i]);
      a1[i] = _mm256_fmadd_ps(_mm256_loadu_ps(xb + 16), decode8(_mm256_srli_epi32(v0, 4), lut_s), a1[i]);
      a0[i] = _mm256_fmadd_ps(_mm256_loadu_ps(xb + 8), decode8(v1, lut_s), a0[i]);
      a1[i] = _mm256_fmadd_ps(_mm256_loadu_ps(xb + 24), decode8(_mm256_srli_epi32(v1, 4), lut_s), a1[i]);
    }
  }
#pragma GCC unroll 2
  for (int i = 0; i < NR; i++) y[r + i] = hsum8(_mm256_add_ps(a0[i], a1[i]));
}

TGT2_FN void rill_gemm_mxfp4_avx2(const float *x, size_t ldx, int T, const uint8_t *blocks, const uint8_t *scales,
                                  int nb, int r0, int r1, float *y, size_t ldy) {
  const size_t rb = (size_t)nb * 16;
  for (int t = 0; t < T; t += MX2_TILE_T) {
    const int nt = T - t < MX2_TILE_T ? T - t : MX2_TILE_T;
    const float *xt = x + (size_t)t * ldx;
    if (nt == 1) {
      float *yt = y + (size_t)t * ldy;
      int r = r0;
      for (; r + 2 <= r1; r += 2) rows_mxfp4_256(2, xt, blocks, scales, nb, r, r1, yt);
      if (r < r1) rows_mxfp4_256(1, xt, blocks, scales, nb, r, r1, yt);
      continue;
    }
    for (int r = r0; r < r1; r++) {
      const uint8_t *br = blocks + (size_t)r * rb, *sr = scales + (size_t)r * (size_t)nb;
      const uint8_t *pf = r + MX_PF_ROWS < r1 ? br + MX_PF_ROWS * rb : br;
      float *yr = y + (size_t)t * ldy + (size_t)r;
      switch (nt) {
      case 2: row_mxfp4_256(2, xt, ldx, br, sr, pf, nb, yr, ldy); break;
      case 3: row_mxfp4_256(3, xt, ldx, br, sr, pf, nb, yr, ldy); break;
      default: row_mxfp4_256(4, xt, ldx, br, sr, pf, nb, yr, ldy); break;
      }
    }
  }
}
#endif
