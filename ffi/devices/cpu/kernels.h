/*
 * The CPU device's inner loops, one table per instruction set. Each ISA's file compiles its functions with a
 * per-function target attribute, so one build holds them all and rill_kernels_select picks at run time.
 *
 * Batch invariance: every kernel computes output (token t, row r) with the same sequence of operations whatever the
 * number of tokens or rows processed alongside it, so a sequence's logits do not depend on what it is batched with.
 */
#ifndef RILL_CPU_KERNELS_H
#define RILL_CPU_KERNELS_H

#include <stddef.h>
#include <stdint.h>

/* Elements per quantisation block of int8 weights and activations. */
#define RILL_Q8_BLOCK 32

typedef struct rill_kernels {
  const char *isa;
  /* y[t * ldy + r] = Σ_c x[t * ldx + c] · w[r * ldw + c] over c < cols, for t < T and r0 ≤ r < r1. */
  void (*gemm_f32)(const float *x, size_t ldx, int T, const float *w, size_t ldw, int cols, int r0, int r1, float *y,
                   size_t ldy);
  /* Same with bf16 weights (the upper half of an fp32) and fp32 accumulation; activations in fp32, or rounded to bf16
   * (nearest even) first where bf16_rounds_x is set. */
  void (*gemm_bf16)(const float *x, size_t ldx, int T, const uint16_t *w, size_t ldw, int cols, int r0, int r1,
                    float *y, size_t ldy);
  /* int8 weights and activations in blocks of RILL_Q8_BLOCK: row r of w is the q8 row at w + r · ldw (see
   * rill_q8_row_bytes: quants, then fp16 block scales); token t is xq[t * nblocks * 32 ..] with fp32 scales
   * xs[t * nblocks ..]. Each block's int32 dot product is scaled by (its activation scale × weight scale). */
  void (*gemm_q8)(const int8_t *xq, const float *xs, int T, const int8_t *w, size_t ldw, int nblocks, int r0, int r1,
                  float *y, size_t ldy);
  /* rill_quantize_q8 (activations before an int8 product), with the same bytes and scales on every table. */
  void (*quantize_q8)(const float *x, int cols, int nblocks, int8_t *q, float *s);
  /* out[i] = g[i] · sigmoid(g[i]) · u[i] for i < n: SiLU of the gate times the up projection. The vector versions use
   * their own exp (within 2 ulp of expf), so tables may differ from each other in the last bits, never from run to
   * run or with the batch. */
  void (*silu_mul)(const float *g, const float *u, int n, float *out);
  /* Attention over one KV block of one head for NQ tokens of G query heads each, head_dim D: token i's head g reads
   * its query at q + i · ldq + g · D and owns row r = i · G + g of the scores and sums. Keys are stored transposed (D
   * rows of bs slots), so a vector spans positions: s[r · lds + j] = scale · Σ_d q_r[d] · kt[d · bs + j] for j < n ≤ bs.
   * A row's sum over d is taken in an order that depends only on G and D, never on NQ, so a token's scores are the
   * same bits whichever tokens share the call (the tokens of one sequence share each key load). */
  void (*attn_scores_f32)(const float *q, size_t ldq, int NQ, int G, int D, const float *kt, int bs, int n,
                          float scale, float *s, size_t lds);
  void (*attn_scores_bf16)(const float *q, size_t ldq, int NQ, int G, int D, const uint16_t *kt, int bs, int n,
                           float scale, float *s, size_t lds);
  /* Values stored by slot (n rows of D), for the same NQ · G rows: out[r·D + d] += Σ_j p[r · lds + j] · v[j·D + d],
   * in an order that depends only on G, D and n, never on NQ. */
  void (*attn_values_f32)(const float *p, size_t lds, int NQ, int G, const float *v, int n, int D, float *out);
  void (*attn_values_bf16)(const float *p, size_t lds, int NQ, int G, const uint16_t *v, int n, int D, float *out);
  /* Softmax of one head's scores s[0..n), n ≥ 1, in place, with a sink logit (−inf for none) that joins the
   * normaliser and takes no probability: m = max(sink, max_i s[i]), s[i] = e^(s[i] − m) / (e^(sink − m) + Σ_j
   * e^(s[j] − m)), the sum taken in double. The vector versions use their own exp (as silu_mul) and sum in lanes. */
  void (*softmax)(float *s, int n, float sink);
  /* MXFP4 weights times fp32 activations with fp32 accumulation: row r is nb blocks of 32 E2M1 codes, 16 bytes each
   * at blocks + (r · nb + b) · 16 (element 2j of a block in the low nibble of byte j, 2j + 1 in the high one), with
   * E8M0 scales at scales + r · nb; y[t · ldy + r] = Σ_c x_t[c] · w[r][c] for r0 ≤ r < r1, t < T. Activations come in
   * MXFP4 order (rill_mxfp4_xpos): x_t[c] is at x + t · ldx + rill_mxfp4_xpos(c), so the low nibbles of a block's
   * bytes meet 16 consecutive activations and the high nibbles the next 16, with no shuffling of the weights. */
  void (*gemm_mxfp4)(const float *x, size_t ldx, int T, const uint8_t *blocks, const uint8_t *scales, int nb, int r0,
                     int r1, float *y, size_t ldy);
  /* 1 where gemm_bf16 rounds activations to bf16 before multiplying (AVX512-BF16's dot products), else 0. */
  int bf16_rounds_x;
  /* The same product with int8 activations (cpu/kernels_mxfp4_q8.c): token t is the quantize_q8 blocks of its
   * activations in MXFP4 order, xq + t · nb · 32 with scales xs + t · nb. */
  void (*gemm_mxfp4_q8)(const int8_t *xq, const float *xs, int T, const uint8_t *blocks, const uint8_t *scales, int nb,
                        int r0, int r1, float *y, size_t ldy);
  /* gemm_mxfp4_q8 over blocks and scales regrouped by rill_mxfp4_group16 (nb ≤ RILL_MXFP4_G16_MAX_BLOCKS); NULL where
   * the table has none (then experts stay as released). */
  void (*gemm_mxfp4_q8_g16)(const int8_t *xq, const float *xs, int T, const uint8_t *blocks, const uint8_t *scales,
                            int nb, int r0, int r1, float *y, size_t ldy);
  /* gemm_q8 over rows regrouped by rill_q8_group16 (nblocks ≤ RILL_Q8_G16_MAX_BLOCKS); NULL where the table has none
   * (then int8 rows stay in block order). */
  void (*gemm_q8_g16)(const int8_t *xq, const float *xs, int T, const int8_t *w, size_t ldw, int nblocks, int r0,
                      int r1, float *y, size_t ldy);
} rill_kernels;

/* Where activation c sits in MXFP4 order: each block of 32 holds its even elements, then its odd ones. */
static inline size_t rill_mxfp4_xpos(size_t c) { return (c & ~(size_t)31) + (c & 1) * 16 + (c & 31) / 2; }

/* The E2M1 values of the 16 codes (bit 3 the sign), and an E8M0 scale byte s as 2^(s − 127). */
extern const float rill_e2m1_values[16];
float rill_e8m0_to_f32(uint8_t s);
/* gemm_mxfp4 of each table (cpu/kernels_mxfp4.c). */
void rill_gemm_mxfp4_portable(const float *x, size_t ldx, int T, const uint8_t *blocks, const uint8_t *scales, int nb,
                              int r0, int r1, float *y, size_t ldy);
void rill_gemm_mxfp4_avx2(const float *x, size_t ldx, int T, const uint8_t *blocks, const uint8_t *scales, int nb,
                          int r0, int r1, float *y, size_t ldy);
/* gemm_bf16 with AVX512-BF16 dot products, activations rounded to bf16 (cpu/kernels_avx512bf16.c). */
void rill_gemm_bf16_avx512bf16(const float *x, size_t ldx, int T, const uint16_t *w, size_t ldw, int cols, int r0,
                               int r1, float *y, size_t ldy);
void rill_gemm_mxfp4_avx512(const float *x, size_t ldx, int T, const uint8_t *blocks, const uint8_t *scales, int nb,
                            int r0, int r1, float *y, size_t ldy);
/* gemm_mxfp4_q8 of each table (cpu/kernels_mxfp4_q8.c; the AVX-512 table without VNNI takes the AVX2 one). */
void rill_gemm_mxfp4_q8_portable(const int8_t *xq, const float *xs, int T, const uint8_t *blocks,
                                 const uint8_t *scales, int nb, int r0, int r1, float *y, size_t ldy);
void rill_gemm_mxfp4_q8_avx2(const int8_t *xq, const float *xs, int T, const uint8_t *blocks, const uint8_t *scales,
                             int nb, int r0, int r1, float *y, size_t ldy);
void rill_gemm_mxfp4_q8_avx512_vnni(const int8_t *xq, const float *xs, int T, const uint8_t *blocks,
                                    const uint8_t *scales, int nb, int r0, int r1, float *y, size_t ldy);
/* The table entry gemm_mxfp4_q8_g16 of the AVX-512 VNNI tables, and its two instances like the one below. */
void rill_gemm_mxfp4_q8_g16_avx512_vnni(const int8_t *xq, const float *xs, int T, const uint8_t *blocks,
                                        const uint8_t *scales, int nb, int r0, int r1, float *y, size_t ldy);
void rill_gemm_mxfp4_q8_g16_avx512_vnni_pshufb(const int8_t *xq, const float *xs, int T, const uint8_t *blocks,
                                               const uint8_t *scales, int nb, int r0, int r1, float *y, size_t ldy);
void rill_gemm_mxfp4_q8_g16_avx512_vbmi(const int8_t *xq, const float *xs, int T, const uint8_t *blocks,
                                        const uint8_t *scales, int nb, int r0, int r1, float *y, size_t ldy);
/* The widest rows (in blocks) gemm_mxfp4_q8_g16 takes: one token's prepared groups fill its 64 KB of scratch. */
#define RILL_MXFP4_G16_MAX_BLOCKS 1808
/* Regroups rows × nb MXFP4 blocks and their scales in place for gemm_mxfp4_q8_g16 (kernels_mxfp4_q8.c describes the
 * layout). */
void rill_mxfp4_group16(uint8_t *blocks, uint8_t *scales, size_t rows, int nb);
/* Its two instances (the table's entry picks one by the processor): nibbles looked up by vpshufb, or by vpermb (VBMI). */
void rill_gemm_mxfp4_q8_avx512_vnni_pshufb(const int8_t *xq, const float *xs, int T, const uint8_t *blocks,
                                           const uint8_t *scales, int nb, int r0, int r1, float *y, size_t ldy);
void rill_gemm_mxfp4_q8_avx512_vbmi(const int8_t *xq, const float *xs, int T, const uint8_t *blocks,
                                    const uint8_t *scales, int nb, int r0, int r1, float *y, size_t ldy);
/* int8 rows regrouped in 16-block groups (cpu/kernels_q8_g16.c describes the layout): the widest row gemm_q8_g16
 * takes (one token's prepared groups fill its 64 KB of scratch), the regrouping of one row's quants in place (its
 * scales stay), the quant of column c read back from a regrouped row, and the AVX-512 VNNI kernel. */
#define RILL_Q8_G16_MAX_BLOCKS 1808
void rill_q8_group16(int8_t *row, int nblocks);
int8_t rill_q8_g16_quant(const int8_t *row, int nblocks, int c);
void rill_gemm_q8_g16_avx512_vnni(const int8_t *xq, const float *xs, int T, const int8_t *w, size_t ldw, int nblocks,
                                  int r0, int r1, float *y, size_t ldy);


/* Portable C; always available. */
extern const rill_kernels rill_kernels_portable;
/* AVX2 + FMA (+ AVX-VNNI int8 dot products where the processor has them). */
extern const rill_kernels rill_kernels_avx2;
extern const rill_kernels rill_kernels_avx2_vnni;
/* AVX-512 F/BW/VL (+ VNNI for int8). */
extern const rill_kernels rill_kernels_avx512;
extern const rill_kernels rill_kernels_avx512_vnni;
/* avx512_vnni with bf16 weights × activations rounded to bf16 by AVX512-BF16 dot products (twice the fp32 FMA's
 * terms per instruction); logits move by the activations' rounding (see ffi/tests/test_model_golden.c's bounds). */
extern const rill_kernels rill_kernels_avx512_bf16;

/* The best table this processor runs. `prefer` ("portable", "avx2", "avx512"; NULL = best) caps the choice;
 * "avx512bf16" (never picked unasked: it changes bf16 logits) allows rill_kernels_avx512_bf16 where the CPU has it. */
const rill_kernels *rill_kernels_select(const char *prefer);

/* Quantises cols floats into nblocks blocks of 32 int8 (symmetric, scale = max|x| / 127; the tail past cols is 0). */
void rill_quantize_q8(const float *x, int cols, int nblocks, int8_t *q, float *s);

/* The portable silu_mul (libm's expf). */
void rill_silu_mul(const float *g, const float *u, int n, float *out);
/* Tokens of one sequence (consecutive positions) that share an attention call, for G query heads per KV head: as
 * many as fill the AVX-512 tables' tiles, 4 query rows with one or two heads, 8 with three or four; 1 above. */
static inline int rill_attn_group_tokens(int G) { return G == 1 ? 4 : G <= 4 ? 2 : 1; }

/* The portable softmax (libm's expf, the sum in order). */
void rill_softmax(float *s, int n, float sink);

/* A q8 weight row, one contiguous stream: nblocks × 32 int8 quants, then nblocks fp16 scales (the quants stay
 * 64-byte aligned, and a block costs 34 bytes as in Q8_0), zero-padded to a whole number of 64-byte lines. */
static inline size_t rill_q8_row_bytes(int nblocks) {
  return ((size_t)nblocks * (RILL_Q8_BLOCK + 2) + 63) & ~(size_t)63;
}
/* Quantises a weight row as rill_quantize_q8 does, except that each scale is rounded to fp16 first and the quants are
 * taken against the rounded scale (so dequantising is exact to the stored bytes); writes rill_q8_row_bytes(nblocks)
 * bytes. A block whose scale is under fp16's range stores scale 0 and zero quants; over it, 65504. */
void rill_quantize_q8_row(const float *x, int cols, int nblocks, int8_t *row);
/* Block b's weight scale in a q8 row. */
float rill_q8_row_scale(const int8_t *row, int nblocks, int b);

/* IEEE half precision, round to nearest even (overflow to ±inf, NaN kept a NaN). */
uint16_t rill_f32_to_f16(float f);
float rill_f16_to_f32(uint16_t h);

#endif /* RILL_CPU_KERNELS_H */
