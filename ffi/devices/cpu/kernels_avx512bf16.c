#include "kernels.h"

/* Only x86 processors have these instructions; elsewhere rill_kernels_select never names the table using this. */
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

/*
 * gemm_bf16 on AVX512-BF16: each activation row is rounded to bf16 (round to nearest even, vcvtne2ps2bf16) and
 * multiplied with vdpbf16ps, which takes 32 products per instruction into 16 fp32 lanes (twice the terms of an fp32
 * FMA, and the weights need no widening). A tile is NR weight rows × NT tokens: each weight vector is loaded once per
 * tile and each token's 32 activations converted once per tile and column chunk.
 *
 * Batch invariance: output (t, r) has its own accumulator, which sees the 32-column chunks in order (the last one
 * zero-padded by masked loads, so there is no scalar tail), then the same 16-lane tree; neither depends on NR, NT, the
 * row range or the other tokens.
 */

#define TGT __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,fma"), always_inline)) static inline
#define TGT_FN __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,fma")))

/* The most accumulators a tile keeps (plus NT activation vectors and a weight vector: within 32 registers). */
#define MAX_ACC 16
/* Decode steps of up to MAX_NT tokens take all their tokens in one tile; larger batches go in groups of GROUP_NT. */
#define MAX_NT 8
#define GROUP_NT 4
/* Tokens walked CHUNK_T at a time so a chunk's activations stay in cache while the rows stream. */
#define CHUNK_T 64
/* Rows of at least PF_COLS columns (models of more than a few MB) prefetch the next tile's rows at the same columns;
 * shorter rows stay in L3, where prefetch instructions only compete with the loads. */
#define PF_COLS 768
/* The widest rows whose activations (up to MAX_NT tokens, 16 KB) are converted once per call on the stack. */
#define XB_COLS 1024

#define MIN(a, b) ((a) < (b) ? (a) : (b))

TGT __mmask16 lanes16(int n) { return n >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (n > 0 ? n : 0)) - 1u); }

/* 32 activations from column c (zeros past cols), rounded to bf16. */
TGT __m512bh load_x(const float *x, int c, int cols) {
  const int n = cols - c;
  const __m512 lo = _mm512_maskz_loadu_ps(lanes16(n), x + c), hi = _mm512_maskz_loadu_ps(lanes16(n - 16), x + c + 16);
  return _mm512_cvtne2ps_pbh(hi, lo);
}

/* 32 bf16 weights from column c (zeros past cols). */
TGT __m512bh load_w(const uint16_t *w, int c, int cols) {
  const int n = cols - c;
  const __mmask32 m = n >= 32 ? (__mmask32)0xFFFFFFFFu : (__mmask32)((1u << n) - 1u);
  return (__m512bh)_mm512_maskz_loadu_epi16(m, w + c);
}

/* sums[i] = the sum of v[i]'s lanes for i < n ≤ 16, by one fixed tree per vector (halves of 256, 128, 64, 32 bits
 * added), vectors paired so 16 sums take 15 adds: each sum's bits depend on its own vector only. */
TGT void reduce(int n, __m512 v[MAX_ACC], float *sums) {
  for (int i = n; i < MAX_ACC; i++) v[i] = _mm512_setzero_ps();
  __m512 a[8], b[4], c[2];
#pragma GCC unroll 8
  for (int i = 0; i < 8; i++) {
    a[i] = _mm512_add_ps(_mm512_shuffle_f32x4(v[2 * i], v[2 * i + 1], 0x44),
                         _mm512_shuffle_f32x4(v[2 * i], v[2 * i + 1], 0xEE));
  }
#pragma GCC unroll 4
  for (int i = 0; i < 4; i++) {
    b[i] = _mm512_add_ps(_mm512_shuffle_f32x4(a[2 * i], a[2 * i + 1], 0x88),
                         _mm512_shuffle_f32x4(a[2 * i], a[2 * i + 1], 0xDD));
  }
  /* b[i] holds, per 128-bit quarter q, the 4-lane partial sums of vector 4i + q. */
#pragma GCC unroll 2
  for (int i = 0; i < 2; i++) {
    const __m512 lo = _mm512_unpacklo_ps(b[2 * i], b[2 * i + 1]), hi = _mm512_unpackhi_ps(b[2 * i], b[2 * i + 1]);
    c[i] = _mm512_add_ps(lo, hi);
  }
  /* c[i] quarter q: lanes (s0 + s2, t0 + t2, s1 + s3, t1 + t3) of vectors s = 8i + q and t = 8i + 4 + q. */
  const __m512 d = _mm512_add_ps(_mm512_unpacklo_ps(c[0], c[1]), _mm512_unpackhi_ps(c[0], c[1]));
  /* d quarter q: sums of vectors q, 8 + q, 4 + q, 12 + q. */
  float out[16];
  _mm512_storeu_ps(out, d);
  for (int i = 0; i < n; i++) sums[i] = out[(i & 3) * 4 + ((i >> 3) & 1) + ((i >> 2) & 1) * 2];
}

/* A tile reads its activations either as fp32 rows (x, ldx), converting each chunk, or, where xb is not NULL, as bf16
 * rows already converted (xb, ldb: the same bf16 values, zero-padded to whole chunks). */
TGT void tile(const int NR, const int NT, const int PF, const float *x, size_t ldx, const uint16_t *xb, size_t ldb,
              const uint16_t *w, size_t ldw, int cols, float *y, size_t ldy) {
  __m512 acc[MAX_ACC];
#pragma GCC unroll 16
  for (int i = 0; i < NR * NT; i++) acc[i] = _mm512_setzero_ps();
  for (int c = 0; c < cols; c += 32) {
    __m512bh xv[MAX_NT];
#pragma GCC unroll 8
    for (int t = 0; t < NT; t++) {
      xv[t] = xb != NULL ? (__m512bh)_mm512_loadu_si512(xb + (size_t)t * ldb + c)
                         : load_x(x + (size_t)t * ldx, c, cols);
    }
#pragma GCC unroll 16
    for (int r = 0; r < NR; r++) {
      if (PF) _mm_prefetch((const char *)(w + (size_t)(r + NR) * ldw + c), _MM_HINT_T0);
      const __m512bh wv = load_w(w + (size_t)r * ldw, c, cols);
#pragma GCC unroll 8
      for (int t = 0; t < NT; t++) acc[r * NT + t] = _mm512_dpbf16_ps(acc[r * NT + t], wv, xv[t]);
    }
  }
  float sums[MAX_ACC];
  reduce(NR * NT, acc, sums);
  for (int r = 0; r < NR; r++) {
    for (int t = 0; t < NT; t++) y[(size_t)t * ldy + (size_t)r] = sums[r * NT + t];
  }
}

/* Rows r0..r1 for NT tokens: full tiles of NR rows (16 for one token, else as many as keep NR × NT within MAX_ACC, at
 * most 8), then the rest one row at a time (each output's sum has the same bits either way). Measured on Zen 4 with
 * 192-wide rows: one token over 768 rows 5.9 µs with 8 rows a tile, 3.9 with 16 (fewer, fuller reductions). */
TGT void rows(const int NT, const float *x, size_t ldx, const uint16_t *w, size_t ldw, int cols, int r0, int r1,
              float *y, size_t ldy, uint16_t *xbuf) {
  const int NR = NT == 1 ? 16 : NT == 2 ? 8 : MAX_ACC / NT;
  /* Several tokens over rows of up to XB_COLS columns convert their activations once per call, not once per tile. */
  const uint16_t *xb = NULL;
  const size_t ldb = ((size_t)cols + 31) & ~(size_t)31;
  if (NT > 1 && cols <= XB_COLS) {
    for (int t = 0; t < NT; t++) {
      for (int c = 0; c < cols; c += 32) {
        _mm512_storeu_si512(xbuf + (size_t)t * ldb + c, (__m512i)load_x(x + (size_t)t * ldx, c, cols));
      }
    }
    xb = xbuf;
  }
  int r = r0;
  if (cols >= PF_COLS) {
    for (; r + NR <= r1; r += NR) tile(NR, NT, 1, x, ldx, xb, ldb, w + (size_t)r * ldw, ldw, cols, y + r, ldy);
  } else {
    for (; r + NR <= r1; r += NR) tile(NR, NT, 0, x, ldx, xb, ldb, w + (size_t)r * ldw, ldw, cols, y + r, ldy);
  }
  for (; r < r1; r++) tile(1, NT, 0, x, ldx, xb, ldb, w + (size_t)r * ldw, ldw, cols, y + r, ldy);
}

TGT_FN void rill_gemm_bf16_avx512bf16(const float *x, size_t ldx, int T, const uint16_t *w, size_t ldw, int cols,
                                      int r0, int r1, float *y, size_t ldy) {
  /* Room for MAX_NT tokens' activations of XB_COLS columns in bf16 (see rows). */
  uint16_t xbuf[MAX_NT * XB_COLS] __attribute__((aligned(64)));
  for (int tc = 0; tc < T; tc += CHUNK_T) {
    const int te = MIN(T, tc + CHUNK_T);
    for (int t = tc; t < te;) {
      const int nt = te - t <= MAX_NT ? te - t : GROUP_NT;
      const float *xt = x + (size_t)t * ldx;
      float *yt = y + (size_t)t * ldy;
      switch (nt) {
      case 1: rows(1, xt, ldx, w, ldw, cols, r0, r1, yt, ldy, xbuf); break;
      case 2: rows(2, xt, ldx, w, ldw, cols, r0, r1, yt, ldy, xbuf); break;
      case 3: rows(3, xt, ldx, w, ldw, cols, r0, r1, yt, ldy, xbuf); break;
      case 4: rows(4, xt, ldx, w, ldw, cols, r0, r1, yt, ldy, xbuf); break;
      case 5: rows(5, xt, ldx, w, ldw, cols, r0, r1, yt, ldy, xbuf); break;
      case 6: rows(6, xt, ldx, w, ldw, cols, r0, r1, yt, ldy, xbuf); break;
      case 7: rows(7, xt, ldx, w, ldw, cols, r0, r1, yt, ldy, xbuf); break;
      default: rows(8, xt, ldx, w, ldw, cols, r0, r1, yt, ldy, xbuf); break;
      }
      t += nt;
    }
  }
}
#endif
