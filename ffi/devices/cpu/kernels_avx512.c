#include "bf16.h"
#include "kernels.h"

/* Only x86 processors have these instructions; elsewhere rill_kernels_select never names this table. */
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "quad_q8.h"

/* Tiles of up to TILE_R weight rows × TILE_T tokens: each weight vector is loaded once per tile and used for every
 * token in it; tokens are walked in chunks of CHUNK_T so a chunk's activations stay in cache while rows stream. */
#define TILE_R 4
#define TILE_T 4
#define CHUNK_T 64
/* bf16 and int8 rows are short (a 896-wide int8 row is 14 cache lines), too short for the hardware prefetcher to
 * ramp up on each new group of rows; in the tiles of several rows, prefetching the same columns PF_ROWS rows ahead
 * keeps loads in flight. */
#define PF_ROWS 8
/* fp32 tiles: up to 4 rows × 4 tokens, or 2 rows × 8 tokens, so an 8-token decode step streams each weight row once
 * (16 accumulators either way). With several tokens the FMAs keep the core busy enough that the hardware prefetcher
 * falls behind, so weight rows F32_PF_ROWS ahead are prefetched into L2. */
#define F32_TILE_R 4
#define F32_TILE_T 8
#define F32_PF_ROWS 4
/* ...and the same row's lines F32_L1_PF floats ahead are prefetched into L1 from there, so the tile's loads find them
 * in L1 (measured: 4-8% more bandwidth for 8 tokens than prefetching into L2 alone; L1 alone is slower still). */
#define F32_L1_PF 128
/* Wider rows (the down projection's) hold more activations than L1 for 8 tokens: there each block of F32_KB_ROWS rows
 * is walked F32_KC columns at a time, accumulators kept in memory between column chunks, and each row is prefetched
 * F32_KPF columns ahead into L2 and F32_L1_PF columns ahead into L1. */
#define F32_WIDE 2048
/* Software prefetching (F32_PF_ROWS, F32_L1_PF, F32_ROW_PF) only for rows of at least F32_PF_COLS columns. Shorter
 * rows belong to models of a few MB that stay in L3, where the hardware prefetcher keeps up and the two extra
 * prefetch instructions per weight vector compete with the loads for the load ports (measured on the bundled 192-wide
 * models, AMD Zen 4: one token's projections 15% faster without them, two to four tokens' 25-30%). */
#define F32_PF_COLS 768
#define F32_KB_ROWS 16
#define F32_KC 128
#define F32_KPF 256

#define TGT __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,fma"), always_inline)) static inline
#define TGT_FN __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,fma"))) static

TGT __m512 load_bf16(const uint16_t *p) {
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)p)), 16));
}

/* Sums of 16 vectors at once, sums[i] = Σ v[i]: the same pairwise tree as _mm512_reduce_add_ps (lane k + lane k+8,
 * then +4, +2, +1), so a sum has the same bits however many are reduced together, with 15 vector adds instead of 64. */
TGT void reduce16(const __m512 v[16], float sums[16]) {
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
#pragma GCC unroll 2
  for (int i = 0; i < 2; i++) {
    c[i] = _mm512_add_ps(_mm512_shuffle_ps(b[2 * i], b[2 * i + 1], 0x44),
                         _mm512_shuffle_ps(b[2 * i], b[2 * i + 1], 0xEE));
  }
  /* Lane 4m + k now holds the sum of v[m + 4k]. */
  __m512 d = _mm512_add_ps(_mm512_shuffle_ps(c[0], c[1], 0x88), _mm512_shuffle_ps(c[0], c[1], 0xDD));
  const __m512i order = _mm512_set_epi32(15, 11, 7, 3, 14, 10, 6, 2, 13, 9, 5, 1, 12, 8, 4, 0);
  _mm512_storeu_ps(sums, _mm512_permutexvar_ps(order, d));
}

TGT void tile_f32(const int NR, const int NT, const int PF, const float *x, size_t ldx, const float *w, size_t ldw,
                  int cols, float *y, size_t ldy) {
  __m512 acc[F32_TILE_R][F32_TILE_T];
#pragma GCC unroll 4
  for (int r = 0; r < NR; r++) {
#pragma GCC unroll 8
    for (int t = 0; t < NT; t++) acc[r][t] = _mm512_setzero_ps();
  }
  int c = 0;
  for (; c + 16 <= cols; c += 16) {
    __m512 xv[F32_TILE_T];
#pragma GCC unroll 8
    for (int t = 0; t < NT; t++) {
      xv[t] = _mm512_loadu_ps(x + (size_t)t * ldx + c);
      /* Keeps the activations in registers: folded into each row's FMA as a memory operand they would be loaded NR
       * times, and the loads, not the FMAs, would bound the loop. */
      __asm__("" : "+v"(xv[t]));
    }
#pragma GCC unroll 4
    for (int r = 0; r < NR; r++) {
      if (PF && NT > 1) {
        _mm_prefetch((const char *)(w + (size_t)(r + F32_PF_ROWS) * ldw + c), _MM_HINT_T1);
        _mm_prefetch((const char *)(w + (size_t)r * ldw + c + F32_L1_PF), _MM_HINT_T0);
      }
      __m512 wv = _mm512_loadu_ps(w + (size_t)r * ldw + c);
#pragma GCC unroll 8
      for (int t = 0; t < NT; t++) acc[r][t] = _mm512_fmadd_ps(wv, xv[t], acc[r][t]);
    }
  }
  __m512 v[16];
  float sums[16];
#pragma GCC unroll 16
  for (int i = 0; i < 16; i++) v[i] = i < NR * NT ? acc[i / NT][i % NT] : _mm512_setzero_ps();
  reduce16(v, sums);
  for (int r = 0; r < NR; r++) {
    for (int t = 0; t < NT; t++) {
      float s = sums[r * NT + t];
      for (int k = c; k < cols; k++) s += x[(size_t)t * ldx + k] * w[(size_t)r * ldw + k];
      y[(size_t)t * ldy + (size_t)r] = s;
    }
  }
}

/* A single token takes one fp32 row at a time: one sequential stream, prefetched F32_ROW_PF bytes ahead into L2 (as
 * row_bf16 does). One accumulator, then the same 16-lane tree as reduce16, so the bits match tile_f32's. */
#define F32_ROW_PF 8192

TGT float row_f32(const int PF, const float *x, const float *w, int cols) {
  __m512 acc = _mm512_setzero_ps();
  int c = 0;
  for (; c + 16 <= cols; c += 16) {
    if (PF) _mm_prefetch((const char *)(w + c) + F32_ROW_PF, _MM_HINT_T1);
    acc = _mm512_fmadd_ps(_mm512_loadu_ps(w + c), _mm512_loadu_ps(x + c), acc);
  }
  float s = _mm512_reduce_add_ps(acc);
  for (int k = c; k < cols; k++) s += x[k] * w[k];
  return s;
}

/* The tile_f32 of rows × 5..8 tokens over columns [c0, c1) only, its accumulators kept in buf between calls: the first
 * call starts them at zero, the last (c1 = cols rounded down to 16) adds the tail and writes y. Each accumulator lane
 * sees the same FMAs in the same order as in tile_f32, so the sums have the same bits. */
TGT void tile_f32_cols(const int NR, const int NT, const float *x, size_t ldx, const float *w, size_t ldw, int c0,
                       int c1, int cols, __m512 *buf, int first, int last, float *y, size_t ldy) {
  __m512 acc[2][F32_TILE_T];
#pragma GCC unroll 2
  for (int r = 0; r < NR; r++) {
#pragma GCC unroll 8
    for (int t = 0; t < NT; t++) acc[r][t] = first ? _mm512_setzero_ps() : buf[r * NT + t];
  }
  int c = c0;
  for (; c + 16 <= c1; c += 16) {
    __m512 xv[F32_TILE_T];
#pragma GCC unroll 8
    for (int t = 0; t < NT; t++) {
      xv[t] = _mm512_loadu_ps(x + (size_t)t * ldx + c);
      __asm__("" : "+v"(xv[t]));
    }
#pragma GCC unroll 2
    for (int r = 0; r < NR; r++) {
      _mm_prefetch((const char *)(w + (size_t)r * ldw + c + F32_KPF), _MM_HINT_T1);
      _mm_prefetch((const char *)(w + (size_t)r * ldw + c + F32_L1_PF), _MM_HINT_T0);
      __m512 wv = _mm512_loadu_ps(w + (size_t)r * ldw + c);
#pragma GCC unroll 8
      for (int t = 0; t < NT; t++) acc[r][t] = _mm512_fmadd_ps(wv, xv[t], acc[r][t]);
    }
  }
  if (!last) {
#pragma GCC unroll 2
    for (int r = 0; r < NR; r++) {
#pragma GCC unroll 8
      for (int t = 0; t < NT; t++) buf[r * NT + t] = acc[r][t];
    }
    return;
  }
  __m512 v[16];
  float sums[16];
#pragma GCC unroll 16
  for (int i = 0; i < 16; i++) v[i] = i < NR * NT ? acc[i / NT][i % NT] : _mm512_setzero_ps();
  reduce16(v, sums);
  for (int r = 0; r < NR; r++) {
    for (int t = 0; t < NT; t++) {
      float s = sums[r * NT + t];
      for (int k = c; k < cols; k++) s += x[(size_t)t * ldx + k] * w[(size_t)r * ldw + k];
      y[(size_t)t * ldy + (size_t)r] = s;
    }
  }
}

/* bf16 tiles of up to TILE_R rows × TILE_T tokens, for batches over BF16_ROW_T tokens (prefill): each weight and
 * activation vector loaded once serves several FMAs. */
TGT void tile_bf16(const int NR, const int NT, const float *x, size_t ldx, const uint16_t *w, size_t ldw, int cols,
                   float *y, size_t ldy) {
  __m512 acc[TILE_R][TILE_T];
#pragma GCC unroll 4
  for (int r = 0; r < NR; r++) {
#pragma GCC unroll 4
    for (int t = 0; t < NT; t++) acc[r][t] = _mm512_setzero_ps();
  }
  int c = 0;
  for (; c + 16 <= cols; c += 16) {
    __m512 xv[TILE_T];
#pragma GCC unroll 4
    for (int t = 0; t < NT; t++) xv[t] = _mm512_loadu_ps(x + (size_t)t * ldx + c);
#pragma GCC unroll 4
    for (int r = 0; r < NR; r++) {
      _mm_prefetch((const char *)(w + (size_t)(r + PF_ROWS) * ldw + c), _MM_HINT_T0);
      __m512 wv = load_bf16(w + (size_t)r * ldw + c);
#pragma GCC unroll 4
      for (int t = 0; t < NT; t++) acc[r][t] = _mm512_fmadd_ps(wv, xv[t], acc[r][t]);
    }
  }
  for (int r = 0; r < NR; r++) {
    for (int t = 0; t < NT; t++) {
      float s = _mm512_reduce_add_ps(acc[r][t]);
      for (int k = c; k < cols; k++) s += x[(size_t)t * ldx + k] * rill_bf16_to_f32(w[(size_t)r * ldw + k]);
      y[(size_t)t * ldy + (size_t)r] = s;
    }
  }
}

/* Decode steps (up to BF16_ROW_T tokens) take one bf16 row at a time for all their tokens, so the weights stream
 * sequentially and each row is read once; a single stream is only kept ahead by prefetching BF16_PF bytes ahead into
 * L2 (the hardware prefetcher, restarting on every 4 KB page, leaves it ~15% short of the bandwidth). Every output
 * takes the same operations in the same order as in tile_bf16: one accumulator over the 16-column chunks, the 16-lane
 * tree, the scalar tail. */
#define BF16_ROW_T 8
#define BF16_PF 3072

TGT void row_bf16(const int NT, const float *x, size_t ldx, const uint16_t *w, int cols, float *y, size_t ldy) {
  __m512 acc[BF16_ROW_T];
#pragma GCC unroll 8
  for (int t = 0; t < NT; t++) acc[t] = _mm512_setzero_ps();
  int c = 0;
  for (; c + 32 <= cols; c += 32) {
    _mm_prefetch((const char *)(w + c) + BF16_PF, _MM_HINT_T1);
#pragma GCC unroll 2
    for (int j = 0; j < 2; j++) {
      __m512 wv = load_bf16(w + c + 16 * j);
#pragma GCC unroll 8
      for (int t = 0; t < NT; t++) {
        acc[t] = _mm512_fmadd_ps(wv, _mm512_loadu_ps(x + (size_t)t * ldx + c + 16 * j), acc[t]);
      }
    }
  }
  if (c + 16 <= cols) {
    __m512 wv = load_bf16(w + c);
#pragma GCC unroll 8
    for (int t = 0; t < NT; t++) acc[t] = _mm512_fmadd_ps(wv, _mm512_loadu_ps(x + (size_t)t * ldx + c), acc[t]);
    c += 16;
  }
#pragma GCC unroll 8
  for (int t = 0; t < NT; t++) {
    float s = _mm512_reduce_add_ps(acc[t]);
    for (int k = c; k < cols; k++) s += x[(size_t)t * ldx + k] * rill_bf16_to_f32(w[k]);
    y[(size_t)t * ldy] = s;
  }
}

/* Sum of the 8 lanes in a fixed order. */
TGT float hsum256(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

/* The int8 kernels also read fp16 weight scales (F16C). */
#define TGT_Q __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,fma,f16c"), always_inline)) static inline
#define TGT_Q_FN __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,fma,f16c"))) static

/* Signed int8 dot products of 32 bytes into 8 int32 lanes: |x| (unsigned) times w carrying x's sign. */
TGT_Q __m256i dot_q8_madd(__m256i x, __m256i w) {
  __m256i ax = _mm256_sign_epi8(x, x), sw = _mm256_sign_epi8(w, x);
  return _mm256_madd_epi16(_mm256_maddubs_epi16(ax, sw), _mm256_set1_epi16(1));
}

/* Block b's fp16 weight scale in a q8 row (see rill_q8_row_bytes). */
TGT_Q float row_scale(const int8_t *row, int nblocks, int b) {
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
        __m256i wv = _mm256_loadu_si256((const __m256i *)(wr + (size_t)b * RILL_Q8_BLOCK));                         \
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

Q8_TILE(tile_q8_madd, TGT_Q, dot_q8_madd)

/* VNNI on 512-bit vectors, four 32-element blocks per pair of instructions: the blocks' first 16 bytes are regrouped
 * into one register and their last 16 into another (of weights and of activations alike), so int32 lanes 4k to 4k + 3
 * of both dot products belong to block k and the second vpdpbusd adds into the first's lanes. vpdpbusd multiplies
 * unsigned by signed bytes: the weights go in as w + 128 (unsigned) and each lane starts from −128 · Σx over its
 * activations, prepared once per token and four blocks (prep_q8_quad), so a lane ends exactly at Σ x · w of its 8
 * products. Each block's
 * lanes are scaled by its activation scale × weight scale and fused-multiply-added into one 16-lane accumulator per
 * (row, token), blocks in order, reduced by _mm512_reduce_add_ps; the same values in the same order whatever the
 * tile, so a token alone matches its row of a batch. Scales are read 16 blocks at a time and spread by a permute. */
#define TGT_Z __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,fma,f16c,avx512vnni"), always_inline)) \
static inline
#define TGT_Z_FN __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,fma,f16c,avx512vnni"))) static
/* Blocks per scale group. */
#define QG 16
/* A single token takes one row at a time (as bf16 does, see row_bf16): one sequential stream, prefetched Q8_ROW_PF
 * bytes ahead, which covers the next rows' scales too. */
#define Q8_ROW_PF 3072

/* A token's four blocks from block b (n of them present) as the tile reads them: regrouped (quad_q8) with each lane's
 * offset −128 · Σx over its bytes, so that with the weights flipped (w + 128, unsigned) a lane sums exactly to x · w. */
typedef struct q8_prepped {
  __m512i lo, hi, off;
} q8_prepped;

TGT_Z void prep_q8_quad(const int8_t *xq, int b, int n, q8_prepped *p) {
  const __m512i c128 = _mm512_set1_epi8((char)0x80), zero = _mm512_setzero_si512();
  quad_q8(xq + (size_t)b * RILL_Q8_BLOCK, n, &p->lo, &p->hi);
  p->off = _mm512_sub_epi32(zero, _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(zero, c128, p->lo), c128, p->hi));
}

/* NR rows × NT tokens. px: the tokens' prepared quads (gemm_q8_vnni's scratch, token t at px + t · nq), or NULL to prepare
 * each quad here from xq (rows too wide for the caller's scratch). */
TGT_Z void tile_q8_z(const int NR, const int NT, const q8_prepped *px, int nq, const int8_t *xq, const float *xs,
                     const int8_t *w, size_t ldw, int nblocks, float *y, size_t ldy) {
  size_t ld = (size_t)nblocks * RILL_Q8_BLOCK;
  __m512 acc[TILE_R][TILE_T];
#pragma GCC unroll 4
  for (int r = 0; r < NR; r++) {
#pragma GCC unroll 4
    for (int t = 0; t < NT; t++) acc[r][t] = _mm512_setzero_ps();
  }
  const __m512i flip = _mm512_set1_epi8((char)0x80), step = _mm512_set1_epi32(4);
  /* Lanes 4k to 4k + 3 take a group's scale q + k. */
  const __m512i quad0 = _mm512_set_epi32(3, 3, 3, 3, 2, 2, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0);
  for (int g = 0; g < nblocks; g += QG) {
    const int ng = nblocks - g < QG ? nblocks - g : QG;
    const __mmask16 gm = (__mmask16)((1u << ng) - 1u);
    __m512 wsg[TILE_R], xsg[TILE_T];
#pragma GCC unroll 4
    for (int t = 0; t < NT; t++) xsg[t] = _mm512_maskz_loadu_ps(gm, xs + (size_t)t * (size_t)nblocks + (size_t)g);
#pragma GCC unroll 4
    for (int r = 0; r < NR; r++) {
      const int8_t *sp = w + (size_t)r * ldw + ld + (size_t)g * 2;
      wsg[r] = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(gm, sp));
      if (NT == 1) wsg[r] = _mm512_mul_ps(xsg[0], wsg[r]);
      if (NR > 1) _mm_prefetch((const char *)(sp + (size_t)PF_ROWS * ldw), _MM_HINT_T0);
    }
    __m512i idx = quad0;
    for (int q = 0; q < ng; q += 4, idx = _mm512_add_epi32(idx, step)) {
      const int b = g + q, n = ng - q < 4 ? ng - q : 4;
      q8_prepped here[TILE_T];
      const q8_prepped *xt[TILE_T];
      __m512 xsv[TILE_T];
#pragma GCC unroll 4
      for (int t = 0; t < NT; t++) {
        if (px != NULL) {
          xt[t] = px + (size_t)t * (size_t)nq + (size_t)(b / 4);
        } else {
          prep_q8_quad(xq + (size_t)t * ld, b, n, &here[t]);
          xt[t] = &here[t];
        }
        if (NT > 1) xsv[t] = _mm512_permutexvar_ps(idx, xsg[t]);
      }
#pragma GCC unroll 4
      for (int r = 0; r < NR; r++) {
        const int8_t *wp = w + (size_t)r * ldw + (size_t)b * RILL_Q8_BLOCK;
        if (NR > 1) {
          _mm_prefetch((const char *)(wp + (size_t)PF_ROWS * ldw), _MM_HINT_T0);
          _mm_prefetch((const char *)(wp + (size_t)PF_ROWS * ldw) + 64, _MM_HINT_T0);
        } else {
          _mm_prefetch((const char *)wp + Q8_ROW_PF, _MM_HINT_T0);
          _mm_prefetch((const char *)wp + Q8_ROW_PF + 64, _MM_HINT_T0);
        }
        __m512i wl, wh;
        quad_q8(wp, n, &wl, &wh);
        wl = _mm512_xor_si512(wl, flip);
        wh = _mm512_xor_si512(wh, flip);
        const __m512 wsv = _mm512_permutexvar_ps(idx, wsg[r]);
#pragma GCC unroll 4
        for (int t = 0; t < NT; t++) {
          const __m512i d = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(xt[t]->off, wl, xt[t]->lo), wh, xt[t]->hi);
          acc[r][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(d), NT == 1 ? wsv : _mm512_mul_ps(xsv[t], wsv), acc[r][t]);
        }
      }
    }
  }
  for (int r = 0; r < NR; r++) {
    for (int t = 0; t < NT; t++) y[(size_t)t * ldy + (size_t)r] = _mm512_reduce_add_ps(acc[r][t]);
  }
}

/* rill_quantize_q8 on 16 lanes: the same max, the same divisions, and x · inv rounded to nearest even after the same
 * clamp (a NaN product lands on -127 as in the portable loop: max returns its second operand for a NaN), so the bytes
 * and scales are identical; lanes past cols are 0. */
TGT_Q_FN void quantize_q8_z(const float *x, int cols, int nblocks, int8_t *q, float *s) {
  const __m512 lo = _mm512_set1_ps(-127.0f), hi = _mm512_set1_ps(127.0f);
  const __m512 sign = _mm512_castsi512_ps(_mm512_set1_epi32(0x7FFFFFFF));
  for (int b = 0; b < nblocks; b++) {
    const int c0 = b * RILL_Q8_BLOCK, n = cols - c0 < RILL_Q8_BLOCK ? cols - c0 : RILL_Q8_BLOCK;
    const __mmask16 m0 = (__mmask16)(n >= 16 ? 0xFFFFu : (1u << n) - 1u);
    const __mmask16 m1 = (__mmask16)(n >= 32 ? 0xFFFFu : n > 16 ? (1u << (n - 16)) - 1u : 0u);
    const __m512 v0 = _mm512_maskz_loadu_ps(m0, x + c0), v1 = _mm512_maskz_loadu_ps(m1, x + c0 + 16);
    /* NaN lanes never win the portable loop's max: they count as 0 here. */
    const __m512 a0 = _mm512_maskz_and_ps(_mm512_cmp_ps_mask(v0, v0, _CMP_ORD_Q), v0, sign);
    const __m512 a1 = _mm512_maskz_and_ps(_mm512_cmp_ps_mask(v1, v1, _CMP_ORD_Q), v1, sign);
    const float amax = _mm512_reduce_max_ps(_mm512_max_ps(a0, a1));
    const float inv = amax > 0.0f ? 127.0f / amax : 0.0f;
    s[b] = amax / 127.0f;
    const __m512 iv = _mm512_set1_ps(inv);
    __m512i q0 = _mm512_cvtps_epi32(_mm512_min_ps(_mm512_max_ps(_mm512_mul_ps(v0, iv), lo), hi));
    __m512i q1 = _mm512_cvtps_epi32(_mm512_min_ps(_mm512_max_ps(_mm512_mul_ps(v1, iv), lo), hi));
    _mm_storeu_si128((__m128i *)(q + c0), _mm512_maskz_cvtepi32_epi8(m0, q0));
    _mm_storeu_si128((__m128i *)(q + c0 + 16), _mm512_maskz_cvtepi32_epi8(m1, q1));
  }
}

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

/* The fp32 tile shapes: 4 × 1..4 and 2 × 5..8 (rows × tokens). */
#define DISPATCH_F32(TILE, nr, nt, ...)          \
  switch ((nr) * 16 + (nt)) {                    \
  case 17: TILE(1, 1, __VA_ARGS__); break;       \
  case 18: TILE(1, 2, __VA_ARGS__); break;       \
  case 19: TILE(1, 3, __VA_ARGS__); break;       \
  case 20: TILE(1, 4, __VA_ARGS__); break;       \
  case 21: TILE(1, 5, __VA_ARGS__); break;       \
  case 22: TILE(1, 6, __VA_ARGS__); break;       \
  case 23: TILE(1, 7, __VA_ARGS__); break;       \
  case 24: TILE(1, 8, __VA_ARGS__); break;       \
  case 33: TILE(2, 1, __VA_ARGS__); break;       \
  case 34: TILE(2, 2, __VA_ARGS__); break;       \
  case 35: TILE(2, 3, __VA_ARGS__); break;       \
  case 36: TILE(2, 4, __VA_ARGS__); break;       \
  case 37: TILE(2, 5, __VA_ARGS__); break;       \
  case 38: TILE(2, 6, __VA_ARGS__); break;       \
  case 39: TILE(2, 7, __VA_ARGS__); break;       \
  case 40: TILE(2, 8, __VA_ARGS__); break;       \
  case 49: TILE(3, 1, __VA_ARGS__); break;       \
  case 50: TILE(3, 2, __VA_ARGS__); break;       \
  case 51: TILE(3, 3, __VA_ARGS__); break;       \
  case 52: TILE(3, 4, __VA_ARGS__); break;       \
  case 65: TILE(4, 1, __VA_ARGS__); break;       \
  case 66: TILE(4, 2, __VA_ARGS__); break;       \
  case 67: TILE(4, 3, __VA_ARGS__); break;       \
  case 68: TILE(4, 4, __VA_ARGS__); break;       \
  default: break;                                \
  }

/* The tile shapes of tile_f32_cols: 1..2 × 5..8. */
#define DISPATCH_F32_COLS(TILE, nr, nt, ...)     \
  switch ((nr) * 16 + (nt)) {                    \
  case 21: TILE(1, 5, __VA_ARGS__); break;       \
  case 22: TILE(1, 6, __VA_ARGS__); break;       \
  case 23: TILE(1, 7, __VA_ARGS__); break;       \
  case 24: TILE(1, 8, __VA_ARGS__); break;       \
  case 37: TILE(2, 5, __VA_ARGS__); break;       \
  case 38: TILE(2, 6, __VA_ARGS__); break;       \
  case 39: TILE(2, 7, __VA_ARGS__); break;       \
  case 40: TILE(2, 8, __VA_ARGS__); break;       \
  default: break;                                \
  }

/* 5..8 tokens over rows [r0, r1) of a wide matrix: row blocks of F32_KB_ROWS, columns F32_KC at a time. */
TGT void gemm_f32_wide(const float *x, size_t ldx, int nt, const float *w, size_t ldw, int cols, int r0, int r1,
                       float *y, size_t ldy) {
  __m512 buf[F32_KB_ROWS / 2][16];
  const int c16 = cols - cols % 16;
  for (int rb = r0; rb < r1; rb += F32_KB_ROWS) {
    const int re = MIN(r1, rb + F32_KB_ROWS);
    for (int c0 = 0; c0 < c16; c0 += F32_KC) {
      const int c1 = MIN(c16, c0 + F32_KC);
      for (int r = rb; r < re; r += 2) {
        DISPATCH_F32_COLS(tile_f32_cols, MIN(2, re - r), nt, x, ldx, w + (size_t)r * ldw, ldw, c0, c1, cols,
                          buf[(r - rb) / 2], c0 == 0, c1 == c16, y + (size_t)r, ldy)
      }
    }
  }
}

TGT_FN void gemm_f32(const float *x, size_t ldx, int T, const float *w, size_t ldw, int cols, int r0, int r1, float *y,
                     size_t ldy) {
  if (T == 1) {
    if (cols >= F32_PF_COLS) {
      for (int r = r0; r < r1; r++) y[r] = row_f32(1, x, w + (size_t)r * ldw, cols);
    } else {
      for (int r = r0; r < r1; r++) y[r] = row_f32(0, x, w + (size_t)r * ldw, cols);
    }
    return;
  }
  for (int tc = 0; tc < T; tc += CHUNK_T) {
    int te = MIN(T, tc + CHUNK_T);
    /* Tokens in groups of 8 while more than 4 remain, then one group of the rest. */
    for (int t = tc; t < te;) {
      int nt = te - t > 4 ? MIN(F32_TILE_T, te - t) : te - t;
      if (nt > 4 && cols > F32_WIDE) {
        gemm_f32_wide(x + (size_t)t * ldx, ldx, nt, w, ldw, cols, r0, r1, y + (size_t)t * ldy, ldy);
      } else {
        int tile_r = nt > 4 ? 2 : 4;
        for (int r = r0; r < r1; r += tile_r) {
          int nr = MIN(tile_r, r1 - r);
          if (cols >= F32_PF_COLS) {
            DISPATCH_F32(tile_f32, nr, nt, 1, x + (size_t)t * ldx, ldx, w + (size_t)r * ldw, ldw, cols,
                         y + (size_t)t * ldy + (size_t)r, ldy)
          } else {
            DISPATCH_F32(tile_f32, nr, nt, 0, x + (size_t)t * ldx, ldx, w + (size_t)r * ldw, ldw, cols,
                         y + (size_t)t * ldy + (size_t)r, ldy)
          }
        }
      }
      t += nt;
    }
  }
}

TGT_FN void gemm_bf16(const float *x, size_t ldx, int T, const uint16_t *w, size_t ldw, int cols, int r0, int r1,
                      float *y, size_t ldy) {
  if (T <= BF16_ROW_T) {
    for (int r = r0; r < r1; r++) {
      const uint16_t *wr = w + (size_t)r * ldw;
      float *yr = y + (size_t)r;
      switch (T) {
      case 1: row_bf16(1, x, ldx, wr, cols, yr, ldy); break;
      case 2: row_bf16(2, x, ldx, wr, cols, yr, ldy); break;
      case 3: row_bf16(3, x, ldx, wr, cols, yr, ldy); break;
      case 4: row_bf16(4, x, ldx, wr, cols, yr, ldy); break;
      case 5: row_bf16(5, x, ldx, wr, cols, yr, ldy); break;
      case 6: row_bf16(6, x, ldx, wr, cols, yr, ldy); break;
      case 7: row_bf16(7, x, ldx, wr, cols, yr, ldy); break;
      default: row_bf16(8, x, ldx, wr, cols, yr, ldy); break;
      }
    }
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

TGT_Q_FN void gemm_q8_madd(const int8_t *xq, const float *xs, int T, const int8_t *w, size_t ldw, int nblocks, int r0,
                            int r1, float *y, size_t ldy) {
  size_t ld = (size_t)nblocks * RILL_Q8_BLOCK;
  for (int tc = 0; tc < T; tc += CHUNK_T) {
    int te = MIN(T, tc + CHUNK_T);
    for (int r = r0; r < r1; r += TILE_R) {
      int nr = MIN(TILE_R, r1 - r);
      for (int t = tc; t < te; t += TILE_T) {
        int nt = MIN(TILE_T, te - t);
        DISPATCH(tile_q8_madd, nr, nt, xq + (size_t)t * ld, xs + (size_t)t * (size_t)nblocks, w + (size_t)r * ldw,
                 ldw, nblocks, y + (size_t)t * ldy + (size_t)r, ldy)
      }
    }
  }
}

/* The activations are prepared (prep_q8_quad) once per call, per chunk of tokens, into stack scratch, not once per
 * tile; rows too wide for it (more than Q8_PREP_BYTES of one token's quads) prepare each quad in the tile. A single
 * token takes one row at a time (one sequential stream, see Q8_ROW_PF), several take tiles of TILE_R × TILE_T. Every
 * (row, token) gets the same lane integers, scales and order either way, so a token alone matches its row of a
 * batch bit for bit. */
#define Q8_PREP_BYTES 65536

TGT_Z_FN void gemm_q8_vnni(const int8_t *xq, const float *xs, int T, const int8_t *w, size_t ldw, int nblocks, int r0,
                           int r1, float *y, size_t ldy) {
  q8_prepped px[Q8_PREP_BYTES / sizeof(q8_prepped)];
  const int nq = (nblocks + 3) / 4;
  const size_t ld = (size_t)nblocks * RILL_Q8_BLOCK;
  int chunk = Q8_PREP_BYTES / (int)sizeof(q8_prepped) / nq;
  const int prepared = chunk >= 1;
  if (!prepared || chunk > CHUNK_T) chunk = CHUNK_T;
  if (chunk > TILE_T) chunk -= chunk % TILE_T;
  for (int tc = 0; tc < T; tc += chunk) {
    const int te = MIN(T, tc + chunk);
    if (prepared) {
      for (int t = tc; t < te; t++) {
        for (int q = 0; q < nq; q++) {
          prep_q8_quad(xq + (size_t)t * ld, 4 * q, MIN(4, nblocks - 4 * q), px + (size_t)(t - tc) * (size_t)nq + q);
        }
      }
    }
    for (int r = r0; r < r1; r += T == 1 ? 1 : TILE_R) {
      const int nr = T == 1 ? 1 : MIN(TILE_R, r1 - r);
      for (int t = tc; t < te; t += TILE_T) {
        const int nt = MIN(TILE_T, te - t);
        DISPATCH(tile_q8_z, nr, nt, prepared ? px + (size_t)(t - tc) * (size_t)nq : NULL, nq, xq + (size_t)t * ld,
                 xs + (size_t)t * (size_t)nblocks, w + (size_t)r * ldw, ldw, nblocks, y + (size_t)t * ldy + (size_t)r,
                 ldy)
      }
    }
  }
}

/* ---- attention over one KV block ---- */

TGT __mmask16 lanes(int n) { return n >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (n > 0 ? n : 0)) - 1u); }

TGT __m512 load_f32_mask(__mmask16 m, const float *p) { return _mm512_maskz_loadu_ps(m, p); }
TGT __m512 load_bf16_mask(__mmask16 m, const uint16_t *p) {
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, p)), 16));
}

/* GN query rows × 16 positions, the rows GN / GH tokens of GH heads each (row r: token r / GH, head r % GH): each key
 * row (one head dimension across positions) is loaded once for all of them. With PARTS (heads of one or two per KV
 * head: little grouping) a single chain of D dependent FMAs per row would bound the tile by the FMA latency, so the
 * sum over d runs in SCORE_PARTS interleaved partial sums (d mod SCORE_PARTS), added pairwise at the end; otherwise
 * the rows' chains interleave and d is summed in order. Either way a row's order depends only on G (which sets PARTS)
 * and D, never on how many tokens or heads share the tile. */
#define SCORE_PARTS 4
#define SCORES_TILE(NAME, KTYPE, LOAD)                                                                              \
  TGT void NAME(const int GN, const int GH, const int PARTS, const float *q, size_t ldq, int D, const KTYPE *kt,   \
                int bs, int j0, __mmask16 m, float scale, float *s, size_t lds) {                                   \
    const float *qr[8];                                                                                             \
    __m512 acc[8];                                                                                                  \
    _Pragma("GCC unroll 8") for (int r = 0; r < GN; r++) {                                                          \
      qr[r] = q + (size_t)(r / GH) * ldq + (size_t)(r % GH) * D;                                                    \
      acc[r] = _mm512_setzero_ps();                                                                                 \
    }                                                                                                               \
    int d = 0;                                                                                                      \
    if (PARTS) {                                                                                                    \
      __m512 part[4][SCORE_PARTS - 1];                                                                              \
      _Pragma("GCC unroll 4") for (int r = 0; r < GN; r++) {                                                        \
        _Pragma("GCC unroll 4") for (int i = 0; i < SCORE_PARTS - 1; i++) part[r][i] = _mm512_setzero_ps();        \
      }                                                                                                             \
      for (; d + SCORE_PARTS <= D; d += SCORE_PARTS) {                                                              \
        _Pragma("GCC unroll 4") for (int i = 0; i < SCORE_PARTS; i++) {                                             \
          __m512 k = LOAD(m, kt + (size_t)(d + i) * bs + j0);                                                       \
          _Pragma("GCC unroll 4") for (int r = 0; r < GN; r++) {                                                    \
            __m512 qv = _mm512_set1_ps(qr[r][d + i]);                                                               \
            if (i == 0) {                                                                                           \
              acc[r] = _mm512_fmadd_ps(qv, k, acc[r]);                                                              \
            } else {                                                                                                \
              part[r][i - 1] = _mm512_fmadd_ps(qv, k, part[r][i - 1]);                                              \
            }                                                                                                       \
          }                                                                                                         \
        }                                                                                                           \
      }                                                                                                             \
      _Pragma("GCC unroll 4") for (int r = 0; r < GN; r++) {                                                        \
        acc[r] = _mm512_add_ps(_mm512_add_ps(acc[r], part[r][0]), _mm512_add_ps(part[r][1], part[r][2]));           \
      }                                                                                                             \
    }                                                                                                               \
    for (; d < D; d++) {                                                                                            \
      __m512 k = LOAD(m, kt + (size_t)d * bs + j0);                                                                 \
      _Pragma("GCC unroll 8") for (int r = 0; r < GN; r++) acc[r] =                                                 \
          _mm512_fmadd_ps(_mm512_set1_ps(qr[r][d]), k, acc[r]);                                                     \
    }                                                                                                               \
    _Pragma("GCC unroll 8") for (int r = 0; r < GN; r++)                                                            \
        _mm512_mask_storeu_ps(s + (size_t)r * lds + j0, m, _mm512_mul_ps(acc[r], _mm512_set1_ps(scale)));          \
  }
SCORES_TILE(scores_tile_f32, float, load_f32_mask)
SCORES_TILE(scores_tile_bf16, uint16_t, load_bf16_mask)

/* Several tokens of G ≤ 4 heads together (rill_attn_group_tokens of them): up to 4 rows with PARTS (G = 1, 2), up
 * to 8 without (G = 3, 4). */
#define DISPATCH_SCORES(TILE, g, qn, ...)                                 \
  switch ((g) * 8 + (qn)) {                                               \
  case 1 * 8 + 1: TILE(1, 1, 1, __VA_ARGS__); break;                      \
  case 1 * 8 + 2: TILE(2, 1, 1, __VA_ARGS__); break;                      \
  case 1 * 8 + 3: TILE(3, 1, 1, __VA_ARGS__); break;                      \
  case 1 * 8 + 4: TILE(4, 1, 1, __VA_ARGS__); break;                      \
  case 2 * 8 + 1: TILE(2, 2, 1, __VA_ARGS__); break;                      \
  case 2 * 8 + 2: TILE(4, 2, 1, __VA_ARGS__); break;                      \
  case 3 * 8 + 1: TILE(3, 3, 0, __VA_ARGS__); break;                      \
  case 3 * 8 + 2: TILE(6, 3, 0, __VA_ARGS__); break;                      \
  case 4 * 8 + 1: TILE(4, 4, 0, __VA_ARGS__); break;                      \
  case 4 * 8 + 2: TILE(8, 4, 0, __VA_ARGS__); break;                      \
  default: break;                                                         \
  }

/* One token's heads in groups of up to 8, PARTS for a group of one or two. */
#define DISPATCH_HEADS(TILE, gn, ...)              \
  switch (gn) {                                    \
  case 1: TILE(1, 1, 1, __VA_ARGS__); break;       \
  case 2: TILE(2, 2, 1, __VA_ARGS__); break;       \
  case 3: TILE(3, 3, 0, __VA_ARGS__); break;       \
  case 4: TILE(4, 4, 0, __VA_ARGS__); break;       \
  case 5: TILE(5, 5, 0, __VA_ARGS__); break;       \
  case 6: TILE(6, 6, 0, __VA_ARGS__); break;       \
  case 7: TILE(7, 7, 0, __VA_ARGS__); break;       \
  case 8: TILE(8, 8, 0, __VA_ARGS__); break;       \
  default: break;                                  \
  }

#define SCORES(NAME, KTYPE, TILE)                                                                                   \
  TGT_FN void NAME(const float *q, size_t ldq, int NQ, int G, int D, const KTYPE *kt, int bs, int n, float scale,  \
                   float *s, size_t lds) {                                                                          \
    if (NQ > 1 && G <= 4) {                                                                                         \
      const int per = rill_attn_group_tokens(G);                                                                    \
      for (int j0 = 0; j0 < n; j0 += 16) {                                                                          \
        const __mmask16 m = lanes(n - j0);                                                                          \
        for (int i = 0; i < NQ; i += per) {                                                                         \
          DISPATCH_SCORES(TILE, G, MIN(per, NQ - i), q + (size_t)i * ldq, ldq, D, kt, bs, j0, m, scale,             \
                          s + (size_t)i * (size_t)G * lds, lds)                                                     \
        }                                                                                                           \
      }                                                                                                             \
      return;                                                                                                       \
    }                                                                                                               \
    for (int i = 0; i < NQ; i++) {                                                                                  \
      const float *qi = q + (size_t)i * ldq;                                                                        \
      float *si = s + (size_t)i * (size_t)G * lds;                                                                  \
      for (int j0 = 0; j0 < n; j0 += 16) {                                                                          \
        const __mmask16 m = lanes(n - j0);                                                                          \
        for (int g0 = 0; g0 < G; g0 += 8) {                                                                         \
          DISPATCH_HEADS(TILE, MIN(8, G - g0), qi + (size_t)g0 * D, 0, D, kt, bs, j0, m, scale,                     \
                         si + (size_t)g0 * lds, lds)                                                                \
        }                                                                                                           \
      }                                                                                                             \
    }                                                                                                               \
  }
SCORES(attn_scores_f32, float, scores_tile_f32)
SCORES(attn_scores_bf16, uint16_t, scores_tile_bf16)

/* GN rows × NC · 16 head dimensions (NC ≤ 4 chunks, so a 32-wide head loads and multiplies no empty chunks): each
 * value row chunk is loaded once for all rows. With ODD (a head alone in its group) the sum over positions runs in
 * two interleaved partial sums (even and odd j, the odd one added last) so the chunks' FMA chains are half as long;
 * otherwise the rows interleave and j is summed in order. ODD tiles hold GN · NC ≤ 8 chunks, the others ≤ 16. */
#define VALUES_TILE(NAME, VTYPE, LOAD)                                                                              \
  TGT void NAME(const int GN, const int NC, const int ODD, const float *p, size_t lds, const VTYPE *v, int n, int D, \
                int d0, float *out) {                                                                               \
    __mmask16 m[4];                                                                                                 \
    __m512 acc[4][4], odd[4][4];                                                                                    \
    _Pragma("GCC unroll 4") for (int c = 0; c < NC; c++) m[c] = lanes(D - d0 - 16 * c);                            \
    _Pragma("GCC unroll 4") for (int g = 0; g < GN; g++) {                                                          \
      _Pragma("GCC unroll 4") for (int c = 0; c < NC; c++) acc[g][c] =                                              \
          _mm512_maskz_loadu_ps(m[c], out + (size_t)g * D + d0 + 16 * c);                                           \
    }                                                                                                               \
    int j = 0;                                                                                                      \
    if (ODD) {                                                                                                      \
      _Pragma("GCC unroll 4") for (int g = 0; g < GN; g++) {                                                        \
        _Pragma("GCC unroll 4") for (int c = 0; c < NC; c++) odd[g][c] = _mm512_setzero_ps();                      \
      }                                                                                                             \
      for (; j + 2 <= n; j += 2) {                                                                                  \
        __m512 v0[4], v1[4];                                                                                        \
        _Pragma("GCC unroll 4") for (int c = 0; c < NC; c++) {                                                      \
          v0[c] = LOAD(m[c], v + (size_t)j * D + d0 + 16 * c);                                                      \
          v1[c] = LOAD(m[c], v + (size_t)(j + 1) * D + d0 + 16 * c);                                                \
        }                                                                                                           \
        _Pragma("GCC unroll 4") for (int g = 0; g < GN; g++) {                                                      \
          const __m512 w0 = _mm512_set1_ps(p[(size_t)g * lds + (size_t)j]);                                        \
          const __m512 w1 = _mm512_set1_ps(p[(size_t)g * lds + (size_t)j + 1]);                                    \
          _Pragma("GCC unroll 4") for (int c = 0; c < NC; c++) {                                                    \
            acc[g][c] = _mm512_fmadd_ps(w0, v0[c], acc[g][c]);                                                      \
            odd[g][c] = _mm512_fmadd_ps(w1, v1[c], odd[g][c]);                                                      \
          }                                                                                                         \
        }                                                                                                           \
      }                                                                                                             \
    }                                                                                                               \
    for (; j < n; j++) {                                                                                            \
      __m512 vv[4];                                                                                                 \
      _Pragma("GCC unroll 4") for (int c = 0; c < NC; c++) vv[c] = LOAD(m[c], v + (size_t)j * D + d0 + 16 * c);     \
      _Pragma("GCC unroll 4") for (int g = 0; g < GN; g++) {                                                        \
        __m512 w = _mm512_set1_ps(p[(size_t)g * lds + (size_t)j]);                                                  \
        _Pragma("GCC unroll 4") for (int c = 0; c < NC; c++) acc[g][c] = _mm512_fmadd_ps(w, vv[c], acc[g][c]);      \
      }                                                                                                             \
    }                                                                                                               \
    if (ODD) {                                                                                                      \
      _Pragma("GCC unroll 4") for (int g = 0; g < GN; g++) {                                                        \
        _Pragma("GCC unroll 4") for (int c = 0; c < NC; c++) acc[g][c] = _mm512_add_ps(acc[g][c], odd[g][c]);      \
      }                                                                                                             \
    }                                                                                                               \
    _Pragma("GCC unroll 4") for (int g = 0; g < GN; g++) {                                                          \
      _Pragma("GCC unroll 4") for (int c = 0; c < NC; c++)                                                          \
          _mm512_mask_storeu_ps(out + (size_t)g * D + d0 + 16 * c, m[c], acc[g][c]);                                \
    }                                                                                                               \
  }
VALUES_TILE(values_tile_f32, float, load_f32_mask)
VALUES_TILE(values_tile_bf16, uint16_t, load_bf16_mask)

/* Rows 1..4 × chunks 1..4 with ODD given; ODD tiles of more than 8 chunks are never asked for. */
#define DISPATCH_VALUES(TILE, gn, nc, odd, ...)                                  \
  switch ((odd) * 64 + (gn) * 8 + (nc)) {                                        \
  case 9: TILE(1, 1, 0, __VA_ARGS__); break;                                     \
  case 10: TILE(1, 2, 0, __VA_ARGS__); break;                                    \
  case 11: TILE(1, 3, 0, __VA_ARGS__); break;                                    \
  case 12: TILE(1, 4, 0, __VA_ARGS__); break;                                    \
  case 17: TILE(2, 1, 0, __VA_ARGS__); break;                                    \
  case 18: TILE(2, 2, 0, __VA_ARGS__); break;                                    \
  case 19: TILE(2, 3, 0, __VA_ARGS__); break;                                    \
  case 20: TILE(2, 4, 0, __VA_ARGS__); break;                                    \
  case 25: TILE(3, 1, 0, __VA_ARGS__); break;                                    \
  case 26: TILE(3, 2, 0, __VA_ARGS__); break;                                    \
  case 27: TILE(3, 3, 0, __VA_ARGS__); break;                                    \
  case 28: TILE(3, 4, 0, __VA_ARGS__); break;                                    \
  case 33: TILE(4, 1, 0, __VA_ARGS__); break;                                    \
  case 34: TILE(4, 2, 0, __VA_ARGS__); break;                                    \
  case 35: TILE(4, 3, 0, __VA_ARGS__); break;                                    \
  case 36: TILE(4, 4, 0, __VA_ARGS__); break;                                    \
  case 64 + 9: TILE(1, 1, 1, __VA_ARGS__); break;                                \
  case 64 + 10: TILE(1, 2, 1, __VA_ARGS__); break;                               \
  case 64 + 11: TILE(1, 3, 1, __VA_ARGS__); break;                               \
  case 64 + 12: TILE(1, 4, 1, __VA_ARGS__); break;                               \
  case 64 + 17: TILE(2, 1, 1, __VA_ARGS__); break;                               \
  case 64 + 18: TILE(2, 2, 1, __VA_ARGS__); break;                               \
  case 64 + 19: TILE(2, 3, 1, __VA_ARGS__); break;                               \
  case 64 + 20: TILE(2, 4, 1, __VA_ARGS__); break;                               \
  case 64 + 25: TILE(3, 1, 1, __VA_ARGS__); break;                               \
  case 64 + 26: TILE(3, 2, 1, __VA_ARGS__); break;                               \
  case 64 + 33: TILE(4, 1, 1, __VA_ARGS__); break;                               \
  case 64 + 34: TILE(4, 2, 1, __VA_ARGS__); break;                               \
  default: break;                                                                \
  }

/* With G ≤ 2 heads per KV head all NQ · G rows are one set (G = 1: ODD, each row alone in its head group; G = 2: in
 * order), taken 4 rows at a time (2 when a G = 1 row spans more than 2 chunks); with more heads each token's heads go
 * in groups of 4, a group of one ODD, as one token alone would. */
#define VALUES(NAME, VTYPE, TILE)                                                                                   \
  TGT_FN void NAME(const float *p, size_t lds, int NQ, int G, const VTYPE *v, int n, int D, float *out) {          \
    for (int d0 = 0; d0 < D; d0 += 64) {                                                                            \
      const int nc = MIN(4, (D - d0 + 15) / 16);                                                                    \
      if (G <= 2) {                                                                                                 \
        const int rows = NQ * G, per = G == 1 && nc > 2 ? 2 : 4;                                                    \
        for (int r = 0; r < rows; r += per) {                                                                       \
          DISPATCH_VALUES(TILE, MIN(per, rows - r), nc, G == 1, p + (size_t)r * lds, lds, v, n, D, d0,              \
                          out + (size_t)r * D)                                                                      \
        }                                                                                                           \
        continue;                                                                                                   \
      }                                                                                                             \
      for (int i = 0; i < NQ; i++) {                                                                                \
        for (int g0 = 0; g0 < G; g0 += 4) {                                                                         \
          const size_t r = (size_t)i * (size_t)G + (size_t)g0;                                                      \
          const int gn = MIN(4, G - g0);                                                                            \
          DISPATCH_VALUES(TILE, gn, nc, gn == 1, p + r * lds, lds, v, n, D, d0, out + r * D)                        \
        }                                                                                                           \
      }                                                                                                             \
    }                                                                                                               \
  }
VALUES(attn_values_f32, float, values_tile_f32)
VALUES(attn_values_bf16, uint16_t, values_tile_bf16)

/* ---- SiLU · up ---- */

/* e^x on 16 lanes: x = n·ln2 + r with n = round(x / ln2) and |r| ≤ ln2 / 2 (ln2 split in two so n·ln2 is exact),
 * e^r from its Taylor series to r^7 (truncation under 2^-26 of e^r), then × 2^n by scalef, which saturates to inf or 0
 * past the float range. x is clamped first so r stays finite. */
TGT __m512 exp_z(__m512 x) {
  x = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(-104.0f)), _mm512_set1_ps(89.0f));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693145751953125f), x); /* ln2's leading 16 bits: n·hi exact */
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(1.42860682030941723e-6f), r);
  __m512 p = _mm512_set1_ps(1.0f / 5040.0f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 720.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  return _mm512_scalef_ps(p, n);
}

TGT_FN void silu_mul_z(const float *g, const float *u, int n, float *out) {
  int i = 0;
  for (; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (n - i)) - 1u);
    const __m512 gv = _mm512_maskz_loadu_ps(m, g + i), uv = _mm512_maskz_loadu_ps(m, u + i);
    const __m512 e = exp_z(_mm512_sub_ps(_mm512_setzero_ps(), gv));
    const __m512 s = _mm512_div_ps(gv, _mm512_add_ps(_mm512_set1_ps(1.0f), e));
    _mm512_mask_storeu_ps(out + i, m, _mm512_mul_ps(s, uv));
  }
}

/* rill_softmax on 16 lanes: the max is exact (any order gives the same value), e^x is exp_z, and the sum runs in 16
 * double lanes added by the fixed tree of _mm512_reduce_add_pd, so it differs from the portable sum's order only. */
TGT_FN void softmax_z(float *s, int n, float sink) {
  __m512 mv = _mm512_set1_ps(sink);
  for (int i = 0; i < n; i += 16) mv = _mm512_max_ps(mv, _mm512_mask_loadu_ps(mv, lanes(n - i), s + i));
  const float mx = _mm512_reduce_max_ps(mv);
  const __m512 mxv = _mm512_set1_ps(mx);
  __m512d lo = _mm512_setzero_pd(), hi = _mm512_setzero_pd();
  for (int i = 0; i < n; i += 16) {
    const __mmask16 m = lanes(n - i);
    const __m512 e = _mm512_maskz_mov_ps(m, exp_z(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, s + i), mxv)));
    _mm512_mask_storeu_ps(s + i, m, e);
    lo = _mm512_add_pd(lo, _mm512_cvtps_pd(_mm512_castps512_ps256(e)));
    hi = _mm512_add_pd(hi, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(e), 1))));
  }
  /* No sink (−inf) adds nothing; exp_z clamps its input, so it is not asked. */
  const double sum = _mm512_reduce_add_pd(_mm512_add_pd(lo, hi)) + (sink > -INFINITY ? (double)expf(sink - mx) : 0.0);
  const __m512 inv = _mm512_set1_ps((float)(1.0 / sum));
  for (int i = 0; i < n; i += 16) {
    const __mmask16 m = lanes(n - i);
    _mm512_mask_storeu_ps(s + i, m, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, s + i), inv));
  }
}

#define AVX512_ATTENTION                                                                                            \
  .attn_scores_f32 = attn_scores_f32, .attn_scores_bf16 = attn_scores_bf16, .attn_values_f32 = attn_values_f32,     \
  .attn_values_bf16 = attn_values_bf16, .softmax = softmax_z

const rill_kernels rill_kernels_avx512 = {
    .isa = "avx512", .gemm_f32 = gemm_f32, .gemm_bf16 = gemm_bf16, .gemm_q8 = gemm_q8_madd,
    .quantize_q8 = quantize_q8_z, .silu_mul = silu_mul_z, AVX512_ATTENTION, .gemm_mxfp4 = rill_gemm_mxfp4_avx512,
    .gemm_mxfp4_q8 = rill_gemm_mxfp4_q8_avx2};
const rill_kernels rill_kernels_avx512_vnni = {
    .isa = "avx512vnni", .gemm_f32 = gemm_f32, .gemm_bf16 = gemm_bf16, .gemm_q8 = gemm_q8_vnni,
    .quantize_q8 = quantize_q8_z, .silu_mul = silu_mul_z, AVX512_ATTENTION, .gemm_mxfp4 = rill_gemm_mxfp4_avx512,
    .gemm_mxfp4_q8 = rill_gemm_mxfp4_q8_avx512_vnni, .gemm_mxfp4_q8_g16 = rill_gemm_mxfp4_q8_g16_avx512_vnni,
    .gemm_q8_g16 = rill_gemm_q8_g16_avx512_vnni};
const rill_kernels rill_kernels_avx512_bf16 = {
    .isa = "avx512bf16", .gemm_f32 = gemm_f32, .gemm_bf16 = rill_gemm_bf16_avx512bf16, .gemm_q8 = gemm_q8_vnni,
    .quantize_q8 = quantize_q8_z, .silu_mul = silu_mul_z, AVX512_ATTENTION, .gemm_mxfp4 = rill_gemm_mxfp4_avx512,
    .gemm_mxfp4_q8 = rill_gemm_mxfp4_q8_avx512_vnni, .gemm_mxfp4_q8_g16 = rill_gemm_mxfp4_q8_g16_avx512_vnni,
    .gemm_q8_g16 = rill_gemm_q8_g16_avx512_vnni, .bf16_rounds_x = 1};
#endif
