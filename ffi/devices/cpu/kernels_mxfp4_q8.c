/*
 * MXFP4 weights times int8 activations (rill_quantize_q8 blocks of 32, taken in MXFP4 order so a weight block and an
 * activation block cover the same 32 columns). Twice an E2M1 value is an integer in {0, ±1, ±2, ±3, ±4, ±6, ±8, ±12},
 * so a nibble maps to an exact int8 weight by a 16-entry table; a block's dot product is exact in int32 (at most
 * 32 · 127 · 12), and it is scaled by (activation scale · 2^(s − 127) / 2) and added into fp32 accumulators.
 *
 * Per (token, row) each kernel runs one fixed sequence — the portable and AVX2 ones: blocks in order, each block's
 * int32 products over 8 lanes converted and fused-multiply-added into one 8-lane accumulator with that block's scale,
 * the lanes summed by a fixed tree; the AVX-512 one: described with it below. The number of tokens and rows computed
 * alongside only changes which registers hold them, so results are batch invariant.
 */
#include <string.h>

#include "kernels.h"

static const int8_t e2m1_x2[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

/* 2^(s − 127) / 2 for each scale byte (255 stays infinite); exact in fp32 down to s = 0 (2^-128, subnormal). */
static float half_scale[256];

__attribute__((constructor)) static void half_scale_init(void) {
  for (int s = 0; s < 256; s++) half_scale[s] = rill_e8m0_to_f32((uint8_t)s) * 0.5f;
}

/* The block's int32 dot product: low nibbles against xq[0..16), high ones against xq[16..32). */
static inline int32_t block_dot(const uint8_t *q, const int8_t *xq) {
  int32_t d = 0;
  for (int j = 0; j < 16; j++) d += (int32_t)xq[j] * e2m1_x2[q[j] & 15] + (int32_t)xq[16 + j] * e2m1_x2[q[j] >> 4];
  return d;
}

/* One accumulator per (token, row), blocks in order. */
void rill_gemm_mxfp4_q8_portable(const int8_t *xq, const float *xs, int T, const uint8_t *blocks,
                                 const uint8_t *scales, int nb, int r0, int r1, float *y, size_t ldy) {
  for (int r = r0; r < r1; r++) {
    const uint8_t *br = blocks + (size_t)r * (size_t)nb * 16, *sr = scales + (size_t)r * (size_t)nb;
    for (int t = 0; t < T; t++) {
      const int8_t *xt = xq + (size_t)t * (size_t)nb * 32;
      const float *st = xs + (size_t)t * (size_t)nb;
      float acc = 0.0f;
      for (int b = 0; b < nb; b++) acc += (float)block_dot(br + (size_t)b * 16, xt + (size_t)b * 32) * (st[b] * half_scale[sr[b]]);
      y[(size_t)t * ldy + (size_t)r] = acc;
    }
  }
}

/* In place, each row's blocks regrouped: per group of 16 blocks (the last may hold fewer, n), dword j (bytes
 * [4j, 4j + 4)) of each block k in the group at group offset 4 · n · j + 4k, so one 64-byte load holds the same dword
 * of all 16 blocks; the same bytes, only their order within a group changes. Each scale byte s stays in place, stored
 * as s − 128 in two's complement (s ^ 0x80), the exponent the kernel hands vscalefps. */
void rill_mxfp4_group16(uint8_t *blocks, uint8_t *scales, size_t rows, int nb) {
  uint8_t tmp[16 * 16];
  for (size_t i = 0; i < rows * (size_t)nb; i++) scales[i] ^= 0x80u;
  for (size_t r = 0; r < rows; r++) {
    for (int g = 0; g < nb; g += 16) {
      const int n = nb - g < 16 ? nb - g : 16;
      uint8_t *p = blocks + (r * (size_t)nb + (size_t)g) * 16;
      memcpy(tmp, p, (size_t)n * 16);
      for (int j = 0; j < 4; j++) {
        for (int k = 0; k < n; k++) memcpy(p + 4 * n * j + 4 * k, tmp + 16 * k + 4 * j, 4);
      }
    }
  }
}

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#include "g16_prep.h"
#include "hsum16.h"
#include "quad_q8.h"

/* Tokens per tile and rows side by side: every (token, row) has its own accumulator, so one token's FMA chain is not
 * the only one in flight. */
#define Q8_TILE_T 4
#define Q8_ROWS 4
#define Q8_PF_ROWS 4
/* How far ahead in memory the regrouped kernel prefetches each line of its tile's rows. From DRAM, one thread, one
 * token, 2880-wide rows (1,440 bytes), against the probe's bandwidth in the same run: 8.6–11.5 KB ahead 77–84%, one
 * tile of four rows (5.8 KB) 69–72%, 3 rows 49–51%, every other line 40–42%, none 33%. */
#define G16_PF_BYTES 9216

/* The 32 nibbles of a block as byte indices, low nibbles in the lower 128 bits (meeting xq[0..16)). */
#define NIBBLES(q)                                                                                                     \
  _mm256_and_si256(_mm256_inserti128_si256(_mm256_castsi128_si256(q), _mm_srli_epi16(q, 4), 1), _mm256_set1_epi8(15))

#define Q8_KERNEL(NAME, ROWS_FN, TGT, TGT_FN, DOT)                                                                    \
  TGT float hsum8_##NAME(__m256 v) {                                                                                   \
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));                                     \
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));                                                                            \
    s = _mm_add_ss(s, _mm_movehdup_ps(s));                                                                             \
    return _mm_cvtss_f32(s);                                                                                           \
  }                                                                                                                    \
  TGT void ROWS_FN(const int NT, const int NR, const int8_t *xq, const float *xs, int nb, const uint8_t *blocks,       \
                   const uint8_t *scales, int r, int r1, float *y, size_t ldy) {                                       \
    const size_t rb = (size_t)nb * 16;                                                                                 \
    const __m256i lut_abs = _mm256_setr_epi8(0, 1, 2, 3, 4, 6, 8, 12, 0, 1, 2, 3, 4, 6, 8, 12, 0, 1, 2, 3, 4, 6, 8,  \
                                             12, 0, 1, 2, 3, 4, 6, 8, 12);                                             \
    const __m256i lut_sgn = _mm256_setr_epi8(1, 1, 1, 1, 1, 1, 1, 1, -1, -1, -1, -1, -1, -1, -1, -1, 1, 1, 1, 1, 1,   \
                                             1, 1, 1, -1, -1, -1, -1, -1, -1, -1, -1);                                 \
    __m256 acc[Q8_ROWS][Q8_TILE_T];                                                                                    \
    _Pragma("GCC unroll 4") for (int i = 0; i < NR; i++) {                                                             \
      _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) acc[i][t] = _mm256_setzero_ps();                            \
    }                                                                                                                  \
    const uint8_t *pf = r + NR + Q8_PF_ROWS <= r1 ? blocks + (size_t)(r + Q8_PF_ROWS) * rb : blocks + (size_t)r * rb; \
    for (int b = 0; b < nb; b++) {                                                                                     \
      if ((b & 3) == 0) {                                                                                              \
        _Pragma("GCC unroll 4") for (int i = 0; i < NR; i++)                                                           \
            _mm_prefetch((const char *)(pf + (size_t)i * rb + (size_t)b * 16), _MM_HINT_T1);                           \
      }                                                                                                                \
      _Pragma("GCC unroll 4") for (int i = 0; i < NR; i++) {                                                           \
        const __m256i idx = NIBBLES(_mm_loadu_si128((const __m128i *)(blocks + (size_t)(r + i) * rb + (size_t)b * 16))); \
        const __m256i wabs = _mm256_shuffle_epi8(lut_abs, idx), wsgn = _mm256_shuffle_epi8(lut_sgn, idx);              \
        const float ws = half_scale[scales[(size_t)(r + i) * (size_t)nb + (size_t)b]];                                 \
        _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) {                                                         \
          const __m256i x = _mm256_loadu_si256((const __m256i *)(xq + ((size_t)t * (size_t)nb + (size_t)b) * 32));     \
          const __m256i d = DOT(wabs, _mm256_sign_epi8(x, wsgn));                                                      \
          acc[i][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(d), _mm256_set1_ps(xs[(size_t)t * (size_t)nb + (size_t)b] * ws), \
                                      acc[i][t]);                                                                      \
        }                                                                                                              \
      }                                                                                                                \
    }                                                                                                                  \
    _Pragma("GCC unroll 4") for (int i = 0; i < NR; i++) {                                                             \
      _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) y[(size_t)t * ldy + (size_t)(r + i)] = hsum8_##NAME(acc[i][t]); \
    }                                                                                                                  \
  }                                                                                                                    \
  TGT_FN void NAME(const int8_t *xq, const float *xs, int T, const uint8_t *blocks, const uint8_t *scales, int nb,     \
                   int r0, int r1, float *y, size_t ldy) {                                                             \
    for (int t = 0; t < T; t += Q8_TILE_T) {                                                                           \
      const int nt = T - t < Q8_TILE_T ? T - t : Q8_TILE_T;                                                            \
      const int8_t *xt = xq + (size_t)t * (size_t)nb * 32;                                                             \
      const float *st = xs + (size_t)t * (size_t)nb;                                                                   \
      float *yt = y + (size_t)t * ldy;                                                                                 \
      for (int r = r0; r < r1; r += Q8_ROWS) {                                                                         \
        const int nr = r1 - r < Q8_ROWS ? r1 - r : Q8_ROWS;                                                            \
        /* Constant shapes, so every tile's loops unroll into registers. */                                            \
        switch (nt * 8 + nr) {                                                                                         \
        case 9: ROWS_FN(1, 1, xt, st, nb, blocks, scales, r, r1, yt, ldy); break;                                      \
        case 10: ROWS_FN(1, 2, xt, st, nb, blocks, scales, r, r1, yt, ldy); break;                                     \
        case 11: ROWS_FN(1, 3, xt, st, nb, blocks, scales, r, r1, yt, ldy); break;                                     \
        case 12: ROWS_FN(1, 4, xt, st, nb, blocks, scales, r, r1, yt, ldy); break;                                     \
        case 17: ROWS_FN(2, 1, xt, st, nb, blocks, scales, r, r1, yt, ldy); break;                                     \
        case 18: ROWS_FN(2, 2, xt, st, nb, blocks, scales, r, r1, yt, ldy); break;                                     \
        case 19: ROWS_FN(2, 3, xt, st, nb, blocks, scales, r, r1, yt, ldy); break;                                     \
        case 20: ROWS_FN(2, 4, xt, st, nb, blocks, scales, r, r1, yt, ldy); break;                                     \
        case 25: ROWS_FN(3, 1, xt, st, nb, blocks, scales, r, r1, yt, ldy); break;                                     \
        case 26: ROWS_FN(3, 2, xt, st, nb, blocks, scales, r, r1, yt, ldy); break;                                     \
        case 27: ROWS_FN(3, 3, xt, st, nb, blocks, scales, r, r1, yt, ldy); break;                                     \
        case 28: ROWS_FN(3, 4, xt, st, nb, blocks, scales, r, r1, yt, ldy); break;                                     \
        case 33: ROWS_FN(4, 1, xt, st, nb, blocks, scales, r, r1, yt, ldy); break;                                     \
        case 34: ROWS_FN(4, 2, xt, st, nb, blocks, scales, r, r1, yt, ldy); break;                                     \
        case 35: ROWS_FN(4, 3, xt, st, nb, blocks, scales, r, r1, yt, ldy); break;                                     \
        default: ROWS_FN(4, 4, xt, st, nb, blocks, scales, r, r1, yt, ldy); break;                                     \
        }                                                                                                              \
      }                                                                                                                \
    }                                                                                                                  \
  }

/* |w| · (±x) without saturation: maddubs pairs stay within 2 · 12 · 127. */
#define DOT_AVX2(a, b) _mm256_madd_epi16(_mm256_maddubs_epi16(a, b), _mm256_set1_epi16(1))

#define TGT_A2 __attribute__((target("avx2,fma"), always_inline)) static inline
#define TGT_A2_FN __attribute__((target("avx2,fma")))
#define TGT_V                                                                                                          \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx2,fma"), always_inline)) static inline
#define TGT_V_FN __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx2,fma")))
#define TGT_VB                                                                                                         \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx512vbmi,avx2,fma"), always_inline)) static \
  inline
#define TGT_VB_FN __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx512vbmi,avx2,fma")))

Q8_KERNEL(rill_gemm_mxfp4_q8_avx2, rows_q8_avx2, TGT_A2, TGT_A2_FN, DOT_AVX2)

/* ---- AVX-512 VNNI: four blocks per instruction pair ----
 * A row's 64 bytes of four blocks [b, b + 4) give, by a table shuffle of their low and of their high nibbles, the
 * weights meeting the activations' first and second 16 bytes of each block; the activations of the four blocks are
 * regrouped to match (their first halves, then their second halves). vpdpbusd multiplies unsigned by signed bytes, so
 * the table holds w + 12 (0 to 24, unsigned) and each lane's sum starts from −12 · Σx over the same activation bytes,
 * computed once per token and four blocks: lane j of the int32 sums is then exactly Σ w · x over its 8 products, with
 * no per-row sign work. Lanes 4k to 4k + 3 hold block b + k. Scales come 16 blocks at a time: the weight scale
 * 2^(s − 128) built in the exponent field (a table for the subnormal and infinite bytes) and the activation scales;
 * a block's lanes take theirs by a permute. Per (token, row) the sequence is fixed: blocks in groups of four in
 * order, each lane's int32 sum converted and fused-multiply-added into its lane of one 16-lane accumulator (a partial
 * last group leaves its missing blocks' lanes adding zero), the halves added, then the 8 lanes by a fixed tree; the
 * tokens and rows computed alongside only change which registers hold them. */
#define Z_TILE_T 4
#define Z_ROWS 4

/* Half-scales of up to 16 blocks (lanes past gm zero). */
TGT_V __m512 half_scales_z(const uint8_t *sp, __mmask16 gm) {
  const __m512i s = _mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(gm, sp));
  const __m512 v = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_sub_epi32(s, _mm512_set1_epi32(1)), 23));
  const __mmask16 rare =
      (_mm512_cmplt_epu32_mask(s, _mm512_set1_epi32(2)) | _mm512_cmpeq_epi32_mask(s, _mm512_set1_epi32(255))) & gm;
  return _mm512_maskz_mov_ps(gm, rare ? _mm512_mask_i32gather_ps(v, rare, s, half_scale, 4) : v);
}

/* A row's n ≤ 4 MXFP4 blocks of 16 bytes from p; the rest zero. */
TGT_V __m512i quad_blocks(const uint8_t *p, int n) {
  const int bytes = n * 16;
  return bytes >= 64 ? _mm512_loadu_si512(p) : _mm512_maskz_loadu_epi8(((__mmask64)1 << bytes) - 1u, p);
}

/* The weights of a row's 64 bytes, looked up from the table of w + 12: *wa those of the low nibbles, *wb of the high
 * ones. vpshufb reads an index's low 4 bits (and zeroes where bit 7 is set), so both nibbles are masked; vpermb (VBMI)
 * reads the low 6 bits, so with the table repeated four times neither needs masking (the high one is shifted down,
 * the bits above it ignored). The same table entries either way, so the same bits. */
#define NIBBLE_LUT _mm_setr_epi8(12, 13, 14, 15, 16, 18, 20, 24, 12, 11, 10, 9, 8, 6, 4, 0)

TGT_V void nibbles_pshufb(__m512i qv, __m512i *wa, __m512i *wb) {
  const __m512i lut = _mm512_broadcast_i32x4(NIBBLE_LUT), low4 = _mm512_set1_epi8(15);
  *wa = _mm512_shuffle_epi8(lut, _mm512_and_si512(qv, low4));
  *wb = _mm512_shuffle_epi8(lut, _mm512_and_si512(_mm512_srli_epi16(qv, 4), low4));
}

TGT_VB void nibbles_vbmi(__m512i qv, __m512i *wa, __m512i *wb) {
  const __m512i lut = _mm512_broadcast_i32x4(NIBBLE_LUT);
  *wa = _mm512_permutexvar_epi8(qv, lut);
  *wb = _mm512_permutexvar_epi8(_mm512_srli_epi16(qv, 4), lut);
}

/* ---- AVX-512 VNNI over experts in groups of 16 blocks (rill_mxfp4_group16) ---- */
_Static_assert((RILL_MXFP4_G16_MAX_BLOCKS + 15) / 16 * sizeof(g16_prepped) <= G16_PREP_BYTES,
               "one token's prepared groups fit the scratch");

/* Both layouts' kernels, once per lookup. */
#define Z_TGT TGT_V
#define Z_NIBBLES nibbles_pshufb
#define Z_FN(name) name##_pshufb
#include "mxfp4_q8_z.h"
#include "mxfp4_q8_g16.h"
#undef Z_TGT
#undef Z_NIBBLES
#undef Z_FN
#define Z_TGT TGT_VB
#define Z_NIBBLES nibbles_vbmi
#define Z_FN(name) name##_vbmi
#include "mxfp4_q8_z.h"
#include "mxfp4_q8_g16.h"

TGT_V_FN void rill_gemm_mxfp4_q8_avx512_vnni_pshufb(const int8_t *xq, const float *xs, int T, const uint8_t *blocks,
                                                    const uint8_t *scales, int nb, int r0, int r1, float *y,
                                                    size_t ldy) {
  gemm_pshufb(xq, xs, T, blocks, scales, nb, r0, r1, y, ldy);
}

TGT_VB_FN void rill_gemm_mxfp4_q8_avx512_vbmi(const int8_t *xq, const float *xs, int T, const uint8_t *blocks,
                                              const uint8_t *scales, int nb, int r0, int r1, float *y, size_t ldy) {
  gemm_vbmi(xq, xs, T, blocks, scales, nb, r0, r1, y, ldy);
}

/* The table's entry takes the vpermb instance where the processor has VBMI (decided once, at load), else the
 * vpshufb one; both give the same bits. */
static int have_vbmi;

__attribute__((constructor)) static void have_vbmi_init(void) {
  __builtin_cpu_init();
  have_vbmi = __builtin_cpu_supports("avx512vbmi");
}

void rill_gemm_mxfp4_q8_avx512_vnni(const int8_t *xq, const float *xs, int T, const uint8_t *blocks,
                                    const uint8_t *scales, int nb, int r0, int r1, float *y, size_t ldy) {
  (have_vbmi ? rill_gemm_mxfp4_q8_avx512_vbmi : rill_gemm_mxfp4_q8_avx512_vnni_pshufb)(xq, xs, T, blocks, scales, nb,
                                                                                       r0, r1, y, ldy);
}

TGT_V_FN void rill_gemm_mxfp4_q8_g16_avx512_vnni_pshufb(const int8_t *xq, const float *xs, int T, const uint8_t *blocks,
                                                        const uint8_t *scales, int nb, int r0, int r1, float *y,
                                                        size_t ldy) {
  gemm_g16_pshufb(xq, xs, T, blocks, scales, nb, r0, r1, y, ldy);
}

TGT_VB_FN void rill_gemm_mxfp4_q8_g16_avx512_vbmi(const int8_t *xq, const float *xs, int T, const uint8_t *blocks,
                                                  const uint8_t *scales, int nb, int r0, int r1, float *y, size_t ldy) {
  gemm_g16_vbmi(xq, xs, T, blocks, scales, nb, r0, r1, y, ldy);
}

void rill_gemm_mxfp4_q8_g16_avx512_vnni(const int8_t *xq, const float *xs, int T, const uint8_t *blocks,
                                        const uint8_t *scales, int nb, int r0, int r1, float *y, size_t ldy) {
  (have_vbmi ? rill_gemm_mxfp4_q8_g16_avx512_vbmi : rill_gemm_mxfp4_q8_g16_avx512_vnni_pshufb)(
      xq, xs, T, blocks, scales, nb, r0, r1, y, ldy);
}
#endif
