#include "bf16.h"
#include "kernels.h"

/* Only x86 processors have these instructions; elsewhere rill_kernels_select never names this table. */
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#include <string.h>

/* Tiles of up to TILE_R weight rows × TILE_T tokens: each weight vector is loaded once per tile and used for every
 * token in it; tokens are walked in chunks of CHUNK_T so a chunk's activations stay in cache while rows stream. */
#define TILE_R 4
#define TILE_T 4
#define CHUNK_T 64
/* Tiles of several tokens keep the core busy enough that the hardware prefetcher falls behind: each weight line is
 * prefetched into L2 from PF_ROWS rows ahead, once per 64-byte line. */
#define PF_ROWS 4

#define TGT __attribute__((target("avx2,fma,f16c"), always_inline)) static inline
#define TGT_FN __attribute__((target("avx2,fma,f16c"))) static
#define TGT_VNNI __attribute__((target("avx2,fma,f16c,avxvnni"), always_inline)) static inline
#define TGT_VNNI_FN __attribute__((target("avx2,fma,f16c,avxvnni"))) static

TGT __m256 load_bf16(const uint16_t *p) {
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p)), 16));
}

/* Sum of the 8 lanes in a fixed order. */
TGT float hsum256(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

TGT void tile_f32(const int NR, const int NT, const float *x, size_t ldx, const float *w, size_t ldw, int cols,
                  float *y, size_t ldy) {
  __m256 acc[TILE_R][TILE_T];
#pragma GCC unroll 4
  for (int r = 0; r < NR; r++) {
#pragma GCC unroll 4
    for (int t = 0; t < NT; t++) acc[r][t] = _mm256_setzero_ps();
  }
  int c = 0;
  for (; c + 8 <= cols; c += 8) {
    __m256 xv[TILE_T];
#pragma GCC unroll 4
    for (int t = 0; t < NT; t++) xv[t] = _mm256_loadu_ps(x + (size_t)t * ldx + c);
#pragma GCC unroll 4
    for (int r = 0; r < NR; r++) {
      if (NT > 1 && (c & 15) == 0) _mm_prefetch((const char *)(w + (size_t)(r + PF_ROWS) * ldw + c), _MM_HINT_T1);
      __m256 wv = _mm256_loadu_ps(w + (size_t)r * ldw + c);
#pragma GCC unroll 4
      for (int t = 0; t < NT; t++) acc[r][t] = _mm256_fmadd_ps(wv, xv[t], acc[r][t]);
    }
  }
  for (int r = 0; r < NR; r++) {
    for (int t = 0; t < NT; t++) {
      float s = hsum256(acc[r][t]);
      for (int k = c; k < cols; k++) s += x[(size_t)t * ldx + k] * w[(size_t)r * ldw + k];
      y[(size_t)t * ldy + (size_t)r] = s;
    }
  }
}

TGT void tile_bf16(const int NR, const int NT, const float *x, size_t ldx, const uint16_t *w, size_t ldw, int cols,
                   float *y, size_t ldy) {
  __m256 acc[TILE_R][TILE_T];
#pragma GCC unroll 4
  for (int r = 0; r < NR; r++) {
#pragma GCC unroll 4
    for (int t = 0; t < NT; t++) acc[r][t] = _mm256_setzero_ps();
  }
  int c = 0;
  for (; c + 8 <= cols; c += 8) {
    __m256 xv[TILE_T];
#pragma GCC unroll 4
    for (int t = 0; t < NT; t++) xv[t] = _mm256_loadu_ps(x + (size_t)t * ldx + c);
#pragma GCC unroll 4
    for (int r = 0; r < NR; r++) {
      if (NT > 1 && (c & 31) == 0) _mm_prefetch((const char *)(w + (size_t)(r + PF_ROWS) * ldw + c), _MM_HINT_T1);
      __m256 wv = load_bf16(w + (size_t)r * ldw + c);
#pragma GCC unroll 4
      for (int t = 0; t < NT; t++) acc[r][t] = _mm256_fmadd_ps(wv, xv[t], acc[r][t]);
    }
  }
  for (int r = 0; r < NR; r++) {
    for (int t = 0; t < NT; t++) {
      float s = hsum256(acc[r][t]);
      for (int k = c; k < cols; k++) s += x[(size_t)t * ldx + k] * rill_bf16_to_f32(w[(size_t)r * ldw + k]);
      y[(size_t)t * ldy + (size_t)r] = s;
    }
  }
}

/* A single token takes one row at a time: one sequential stream, prefetched ROW_PF bytes ahead into L2 (the hardware
 * prefetcher alone, restarting at every 4 KB page, falls short of the bandwidth). Same operations per output as the
 * tiles: one accumulator over the 8-column chunks, hsum256, the scalar tail. (int8 rows take their 1-row tile, which
 * prefetches the same way; its tiles of several rows prefetch PF_ROWS rows ahead.) */
#define ROW_PF 4096

TGT float row_f32(const float *x, const float *w, int cols) {
  __m256 acc = _mm256_setzero_ps();
  int c = 0;
  for (; c + 8 <= cols; c += 8) {
    if ((c & 15) == 0) _mm_prefetch((const char *)(w + c) + ROW_PF, _MM_HINT_T1);
    acc = _mm256_fmadd_ps(_mm256_loadu_ps(w + c), _mm256_loadu_ps(x + c), acc);
  }
  float s = hsum256(acc);
  for (int k = c; k < cols; k++) s += x[k] * w[k];
  return s;
}

TGT float row_bf16(const float *x, const uint16_t *w, int cols) {
  __m256 acc = _mm256_setzero_ps();
  int c = 0;
  for (; c + 8 <= cols; c += 8) {
    if ((c & 31) == 0) _mm_prefetch((const char *)(w + c) + ROW_PF, _MM_HINT_T1);
    acc = _mm256_fmadd_ps(load_bf16(w + c), _mm256_loadu_ps(x + c), acc);
  }
  float s = hsum256(acc);
  for (int k = c; k < cols; k++) s += x[k] * rill_bf16_to_f32(w[k]);
  return s;
}

/* Signed int8 dot products of 32 bytes into 8 int32 lanes: |x| (unsigned) times w carrying x's sign. */
TGT __m256i dot_q8_madd(__m256i x, __m256i w) {
  __m256i ax = _mm256_sign_epi8(x, x), sw = _mm256_sign_epi8(w, x);
  return _mm256_madd_epi16(_mm256_maddubs_epi16(ax, sw), _mm256_set1_epi16(1));
}
TGT_VNNI __m256i dot_q8_vnni(__m256i x, __m256i w) {
  __m256i ax = _mm256_sign_epi8(x, x), sw = _mm256_sign_epi8(w, x);
  return _mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), ax, sw);
}

/* Block b's fp16 weight scale in a q8 row (see rill_q8_row_bytes). */
TGT float row_scale(const int8_t *row, int nblocks, int b) {
  uint16_t h;
  memcpy(&h, row + (size_t)nblocks * RILL_Q8_BLOCK + (size_t)b * 2, sizeof h);
  return _cvtsh_ss(h);
}

#define Q8_TILE(NAME, ATTR, DOT)                                                                                   \
  ATTR void NAME(const int NR, const int NT, const int8_t *xq, const float *xs, const int8_t *w, size_t ldw,       \
                 int nblocks, float *y, size_t ldy) {                                                               \
    size_t ld = (size_t)nblocks * RILL_Q8_BLOCK;                                                                    \
    __m256 acc[TILE_R][TILE_T];                                                                                     \
    _Pragma("GCC unroll 4") for (int r = 0; r < NR; r++) {                                                          \
      _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) acc[r][t] = _mm256_setzero_ps();                         \
    }                                                                                                               \
    for (int b = 0; b < nblocks; b++) {                                                                             \
      __m256i xv[TILE_T];                                                                                           \
      _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) xv[t] =                                                  \
          _mm256_loadu_si256((const __m256i *)(xq + (size_t)t * ld + (size_t)b * RILL_Q8_BLOCK));                   \
      _Pragma("GCC unroll 4") for (int r = 0; r < NR; r++) {                                                        \
        const int8_t *wr = w + (size_t)r * ldw;                                                                     \
        const int8_t *wb = wr + (size_t)b * RILL_Q8_BLOCK;                                                         \
        if ((b & 1) == 0) {                                                                                         \
          _mm_prefetch(NR == 1 ? (const char *)wb + ROW_PF : (const char *)(wb + PF_ROWS * ldw), _MM_HINT_T1);      \
        }                                                                                                           \
        __m256i wv = _mm256_loadu_si256((const __m256i *)wb);                                                       \
        float wsb = row_scale(wr, nblocks, b);                                                                      \
        _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) {                                                      \
          __m256 d = _mm256_cvtepi32_ps(DOT(xv[t], wv));                                                            \
          acc[r][t] = _mm256_fmadd_ps(d, _mm256_set1_ps(xs[(size_t)t * (size_t)nblocks + (size_t)b] * wsb),        \
                                      acc[r][t]);                                                                   \
        }                                                                                                           \
      }                                                                                                             \
    }                                                                                                               \
    for (int r = 0; r < NR; r++) {                                                                                  \
      for (int t = 0; t < NT; t++) y[(size_t)t * ldy + (size_t)r] = hsum256(acc[r][t]);                             \
    }                                                                                                               \
  }

Q8_TILE(tile_q8_madd, TGT, dot_q8_madd)
Q8_TILE(tile_q8_vnni, TGT_VNNI, dot_q8_vnni)

/* Expands to a switch calling TILE with compile-time row and token counts, so each tile keeps its accumulators in
 * registers. */
#define DISPATCH(TILE, nr, nt, ...)              \
  switch ((nr) * 8 + (nt)) {                     \
  case 9: TILE(1, 1, __VA_ARGS__); break;        \
  case 10: TILE(1, 2, __VA_ARGS__); break;       \
  case 11: TILE(1, 3, __VA_ARGS__); break;       \
  case 12: TILE(1, 4, __VA_ARGS__); break;       \
  case 17: TILE(2, 1, __VA_ARGS__); break;       \
  case 18: TILE(2, 2, __VA_ARGS__); break;       \
  case 19: TILE(2, 3, __VA_ARGS__); break;       \
  case 20: TILE(2, 4, __VA_ARGS__); break;       \
  case 25: TILE(3, 1, __VA_ARGS__); break;       \
  case 26: TILE(3, 2, __VA_ARGS__); break;       \
  case 27: TILE(3, 3, __VA_ARGS__); break;       \
  case 28: TILE(3, 4, __VA_ARGS__); break;       \
  case 33: TILE(4, 1, __VA_ARGS__); break;       \
  case 34: TILE(4, 2, __VA_ARGS__); break;       \
  case 35: TILE(4, 3, __VA_ARGS__); break;       \
  case 36: TILE(4, 4, __VA_ARGS__); break;       \
  default: break;                                \
  }

#define MIN(a, b) ((a) < (b) ? (a) : (b))

TGT_FN void gemm_f32(const float *x, size_t ldx, int T, const float *w, size_t ldw, int cols, int r0, int r1, float *y,
                     size_t ldy) {
  if (T == 1) {
    for (int r = r0; r < r1; r++) y[r] = row_f32(x, w + (size_t)r * ldw, cols);
    return;
  }
  for (int tc = 0; tc < T; tc += CHUNK_T) {
    int te = MIN(T, tc + CHUNK_T);
    for (int r = r0; r < r1; r += TILE_R) {
      int nr = MIN(TILE_R, r1 - r);
      for (int t = tc; t < te; t += TILE_T) {
        int nt = MIN(TILE_T, te - t);
        DISPATCH(tile_f32, nr, nt, x + (size_t)t * ldx, ldx, w + (size_t)r * ldw, ldw, cols,
                 y + (size_t)t * ldy + (size_t)r, ldy)
      }
    }
  }
}

TGT_FN void gemm_bf16(const float *x, size_t ldx, int T, const uint16_t *w, size_t ldw, int cols, int r0, int r1,
                      float *y, size_t ldy) {
  if (T == 1) {
    for (int r = r0; r < r1; r++) y[r] = row_bf16(x, w + (size_t)r * ldw, cols);
    return;
  }
  for (int tc = 0; tc < T; tc += CHUNK_T) {
    int te = MIN(T, tc + CHUNK_T);
    for (int r = r0; r < r1; r += TILE_R) {
      int nr = MIN(TILE_R, r1 - r);
      for (int t = tc; t < te; t += TILE_T) {
        int nt = MIN(TILE_T, te - t);
        DISPATCH(tile_bf16, nr, nt, x + (size_t)t * ldx, ldx, w + (size_t)r * ldw, ldw, cols,
                 y + (size_t)t * ldy + (size_t)r, ldy)
      }
    }
  }
}

#define GEMM_Q8(NAME, ATTR, TILE)                                                                                  \
  ATTR void NAME(const int8_t *xq, const float *xs, int T, const int8_t *w, size_t ldw, int nblocks, int r0, int r1, \
                 float *y, size_t ldy) {                                                                           \
    size_t ld = (size_t)nblocks * RILL_Q8_BLOCK;                                                                   \
    if (T == 1) {                                                                                                  \
      for (int r = r0; r < r1; r++) TILE(1, 1, xq, xs, w + (size_t)r * ldw, ldw, nblocks, y + (size_t)r, ldy);     \
      return;                                                                                                      \
    }                                                                                                              \
    for (int tc = 0; tc < T; tc += CHUNK_T) {                                                                      \
      int te = MIN(T, tc + CHUNK_T);                                                                               \
      for (int r = r0; r < r1; r += TILE_R) {                                                                      \
        int nr = MIN(TILE_R, r1 - r);                                                                              \
        for (int t = tc; t < te; t += TILE_T) {                                                                    \
          int nt = MIN(TILE_T, te - t);                                                                            \
          DISPATCH(TILE, nr, nt, xq + (size_t)t * ld, xs + (size_t)t * (size_t)nblocks, w + (size_t)r * ldw, ldw, \
                   nblocks, y + (size_t)t * ldy + (size_t)r, ldy)                                                  \
        }                                                                                                          \
      }                                                                                                            \
    }                                                                                                              \
  }

GEMM_Q8(gemm_q8_madd, TGT_FN, tile_q8_madd)
GEMM_Q8(gemm_q8_vnni, TGT_VNNI_FN, tile_q8_vnni)


/* ---- attention over one KV block (8 lanes; see kernels_avx512.c for the layout) ---- */

TGT __m256i lanes8(int n) { return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)); }

TGT __m256 load8_f32(int n, __m256i m, const float *p) {
  return n >= 8 ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, m);
}
TGT __m256 load8_bf16(int n, __m256i m, const uint16_t *p) {
  (void)m;
  __m128i h;
  if (n >= 8) {
    h = _mm_loadu_si128((const __m128i *)p);
  } else {
    uint16_t tmp[8] = {0};
    for (int i = 0; i < n; i++) tmp[i] = p[i];
    h = _mm_loadu_si128((const __m128i *)tmp);
  }
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

#define SCORES_TILE8(NAME, KTYPE, LOAD)                                                                             \
  TGT void NAME(const int GN, const float *q, int D, const KTYPE *kt, int bs, int j0, int cnt, float scale,        \
                float *s, size_t lds) {                                                                             \
    __m256i m = lanes8(cnt);                                                                                        \
    __m256 acc[8];                                                                                                  \
    _Pragma("GCC unroll 8") for (int g = 0; g < GN; g++) acc[g] = _mm256_setzero_ps();                             \
    for (int d = 0; d < D; d++) {                                                                                   \
      __m256 k = LOAD(cnt, m, kt + (size_t)d * bs + j0);                                                            \
      _Pragma("GCC unroll 8") for (int g = 0; g < GN; g++) acc[g] =                                                 \
          _mm256_fmadd_ps(_mm256_set1_ps(q[(size_t)g * D + d]), k, acc[g]);                                         \
    }                                                                                                               \
    _Pragma("GCC unroll 8") for (int g = 0; g < GN; g++)                                                            \
        _mm256_maskstore_ps(s + (size_t)g * lds + j0, m, _mm256_mul_ps(acc[g], _mm256_set1_ps(scale)));             \
  }
SCORES_TILE8(scores_tile8_f32, float, load8_f32)
SCORES_TILE8(scores_tile8_bf16, uint16_t, load8_bf16)

#define DISPATCH_G8(TILE, gn, ...)     \
  switch (gn) {                        \
  case 1: TILE(1, __VA_ARGS__); break; \
  case 2: TILE(2, __VA_ARGS__); break; \
  case 3: TILE(3, __VA_ARGS__); break; \
  case 4: TILE(4, __VA_ARGS__); break; \
  case 5: TILE(5, __VA_ARGS__); break; \
  case 6: TILE(6, __VA_ARGS__); break; \
  case 7: TILE(7, __VA_ARGS__); break; \
  case 8: TILE(8, __VA_ARGS__); break; \
  default: break;                      \
  }

/* Every row sums d in order, so the tokens are simply taken one after another. */
#define SCORES8(NAME, KTYPE, TILE)                                                                                  \
  TGT_FN void NAME(const float *q0, size_t ldq, int NQ, int G, int D, const KTYPE *kt, int bs, int n, float scale, \
                   float *s0, size_t lds) {                                                                         \
    for (int i = 0; i < NQ; i++) {                                                                                  \
      const float *q = q0 + (size_t)i * ldq;                                                                        \
      float *s = s0 + (size_t)i * (size_t)G * lds;                                                                  \
      for (int j0 = 0; j0 < n; j0 += 8) {                                                                           \
        for (int g0 = 0; g0 < G; g0 += 8) {                                                                         \
          DISPATCH_G8(TILE, MIN(8, G - g0), q + (size_t)g0 * D, D, kt, bs, j0, n - j0, scale,                       \
                      s + (size_t)g0 * lds, lds)                                                                    \
        }                                                                                                           \
      }                                                                                                             \
    }                                                                                                               \
  }
SCORES8(attn_scores8_f32, float, scores_tile8_f32)
SCORES8(attn_scores8_bf16, uint16_t, scores_tile8_bf16)

/* GN ≤ 4 query heads × 16 head dimensions, within AVX2's 16 registers. */
#define VALUES_TILE8(NAME, VTYPE, LOAD)                                                                             \
  TGT void NAME(const int GN, const float *p, size_t lds, const VTYPE *v, int n, int D, int d0, float *out) {      \
    int w0 = D - d0, w1 = D - d0 - 8;                                                                               \
    __m256i m0 = lanes8(w0), m1 = lanes8(w1);                                                                       \
    __m256 acc[4][2];                                                                                               \
    _Pragma("GCC unroll 4") for (int g = 0; g < GN; g++) {                                                          \
      acc[g][0] = _mm256_maskload_ps(out + (size_t)g * D + d0, m0);                                                 \
      acc[g][1] = _mm256_maskload_ps(out + (size_t)g * D + d0 + 8, m1);                                             \
    }                                                                                                               \
    for (int j = 0; j < n; j++) {                                                                                   \
      __m256 v0 = LOAD(w0, m0, v + (size_t)j * D + d0);                                                             \
      __m256 v1 = w1 > 0 ? LOAD(w1, m1, v + (size_t)j * D + d0 + 8) : _mm256_setzero_ps();                          \
      _Pragma("GCC unroll 4") for (int g = 0; g < GN; g++) {                                                        \
        __m256 wt = _mm256_set1_ps(p[(size_t)g * lds + (size_t)j]);                                                 \
        acc[g][0] = _mm256_fmadd_ps(wt, v0, acc[g][0]);                                                             \
        acc[g][1] = _mm256_fmadd_ps(wt, v1, acc[g][1]);                                                             \
      }                                                                                                             \
    }                                                                                                               \
    _Pragma("GCC unroll 4") for (int g = 0; g < GN; g++) {                                                          \
      _mm256_maskstore_ps(out + (size_t)g * D + d0, m0, acc[g][0]);                                                 \
      _mm256_maskstore_ps(out + (size_t)g * D + d0 + 8, m1, acc[g][1]);                                             \
    }                                                                                                               \
  }
VALUES_TILE8(values_tile8_f32, float, load8_f32)
VALUES_TILE8(values_tile8_bf16, uint16_t, load8_bf16)

#define DISPATCH_G4(TILE, gn, ...)     \
  switch (gn) {                        \
  case 1: TILE(1, __VA_ARGS__); break; \
  case 2: TILE(2, __VA_ARGS__); break; \
  case 3: TILE(3, __VA_ARGS__); break; \
  case 4: TILE(4, __VA_ARGS__); break; \
  default: break;                      \
  }

#define VALUES8(NAME, VTYPE, TILE)                                                                                  \
  TGT_FN void NAME(const float *p, size_t lds, int NQ, int G1, const VTYPE *v, int n, int D, float *out) {        \
    const int G = NQ * G1; /* every row sums j in order: the rows of all the tokens are one set */                 \
    for (int g0 = 0; g0 < G; g0 += 4) {                                                                             \
      for (int d0 = 0; d0 < D; d0 += 16) {                                                                          \
        DISPATCH_G4(TILE, MIN(4, G - g0), p + (size_t)g0 * lds, lds, v, n, D, d0, out + (size_t)g0 * D)             \
      }                                                                                                             \
    }                                                                                                               \
  }
VALUES8(attn_values8_f32, float, values_tile8_f32)
VALUES8(attn_values8_bf16, uint16_t, values_tile8_bf16)

#define AVX2_ATTENTION                                                                                              \
  .attn_scores_f32 = attn_scores8_f32, .attn_scores_bf16 = attn_scores8_bf16, .attn_values_f32 = attn_values8_f32,  \
  .attn_values_bf16 = attn_values8_bf16, .softmax = rill_softmax

const rill_kernels rill_kernels_avx2 = {
    .isa = "avx2", .gemm_f32 = gemm_f32, .gemm_bf16 = gemm_bf16, .gemm_q8 = gemm_q8_madd,
    .quantize_q8 = rill_quantize_q8, .silu_mul = rill_silu_mul, AVX2_ATTENTION, .gemm_mxfp4 = rill_gemm_mxfp4_avx2,
    .gemm_mxfp4_q8 = rill_gemm_mxfp4_q8_avx2};
const rill_kernels rill_kernels_avx2_vnni = {
    .isa = "avx2vnni", .gemm_f32 = gemm_f32, .gemm_bf16 = gemm_bf16, .gemm_q8 = gemm_q8_vnni,
    .quantize_q8 = rill_quantize_q8, .silu_mul = rill_silu_mul, AVX2_ATTENTION, .gemm_mxfp4 = rill_gemm_mxfp4_avx2,
    .gemm_mxfp4_q8 = rill_gemm_mxfp4_q8_avx2};
#endif
