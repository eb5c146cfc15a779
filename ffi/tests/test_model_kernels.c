/*
 * The CPU kernels of every instruction set this processor runs, against a float64 reference on awkward shapes
 * (columns off the vector width, odd block counts, row and token counts off the tile sizes), and batch invariance
 * inside one kernel: a token's outputs do not depend on how many tokens or which row range are computed with it.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "cpu/kernels.h"
#include "matrix.h"
#include "cpu/rms_norm.h"
#include "test_rng.h"

static uint32_t rng = 12345;
static float frand(void) { return (float)((lcg32(&rng) >> 8) & 0xFFFF) / 32768.0f - 1.0f; }

static void check_kernels(const rill_kernels *k, int rows, int cols, int T) {
  const int nb = (cols + RILL_Q8_BLOCK - 1) / RILL_Q8_BLOCK, ldq = nb * RILL_Q8_BLOCK;
  const size_t ldw = rill_q8_row_bytes(nb);
  float *x = malloc(sizeof(float) * (size_t)T * (size_t)cols), *w = malloc(sizeof(float) * (size_t)rows * (size_t)cols);
  uint16_t *wb = malloc(2 * (size_t)rows * (size_t)cols);
  int8_t *wq = malloc((size_t)rows * ldw), *xq = malloc((size_t)T * (size_t)ldq);
  float *xs = malloc(sizeof(float) * (size_t)T * (size_t)nb);
  float *y = malloc(sizeof(float) * (size_t)T * (size_t)rows), *y1 = malloc(sizeof(float) * (size_t)rows);
  for (int i = 0; i < T * cols; i++) x[i] = frand();
  for (int i = 0; i < rows * cols; i++) {
    w[i] = frand();
    wb[i] = rill_f32_to_bf16(w[i]);
  }
  for (int r = 0; r < rows; r++) rill_quantize_q8_row(w + (size_t)r * cols, cols, nb, wq + (size_t)r * ldw);
  /* The same rows regrouped for gemm_q8_g16 (kind 3, where the table has it): every quant reads back, scales stay. */
  int8_t *wg = malloc((size_t)rows * ldw);
  memcpy(wg, wq, (size_t)rows * ldw);
  for (int r = 0; r < rows; r++) rill_q8_group16(wg + (size_t)r * ldw, nb);
  int unread = 0;
  for (int r = 0; r < rows; r++) {
    for (int c = 0; c < ldq; c++) unread += rill_q8_g16_quant(wg + (size_t)r * ldw, nb, c) != wq[(size_t)r * ldw + c];
    unread += memcmp(wg + (size_t)r * ldw + ldq, wq + (size_t)r * ldw + ldq, ldw - (size_t)ldq) != 0;
  }
  CHECK_MSG(unread == 0, "%dx%d: %d quants or scale rows of the regrouped rows differ", rows, cols, unread);
  for (int t = 0; t < T; t++) rill_quantize_q8(x + (size_t)t * cols, cols, nb, xq + (size_t)t * ldq, xs + (size_t)t * nb);
  for (int kind = 0; kind < 4; kind++) {
    if (kind == 3 && (k->gemm_q8_g16 == NULL || nb > RILL_Q8_G16_MAX_BLOCKS)) continue;
    memset(y, 0, sizeof(float) * (size_t)T * (size_t)rows);
    if (kind == 0) k->gemm_f32(x, (size_t)cols, T, w, (size_t)cols, cols, 0, rows, y, (size_t)rows);
    if (kind == 1) k->gemm_bf16(x, (size_t)cols, T, wb, (size_t)cols, cols, 0, rows, y, (size_t)rows);
    if (kind == 2) k->gemm_q8(xq, xs, T, wq, ldw, nb, 0, rows, y, (size_t)rows);
    if (kind == 3) k->gemm_q8_g16(xq, xs, T, wg, ldw, nb, 0, rows, y, (size_t)rows);
    double worst = 0.0, worst_fp32_x = 0.0, bound_fp32_x = 0.0;
    const int round_x = kind == 1 && k->bf16_rounds_x;
    for (int t = 0; t < T; t++) {
      for (int r = 0; r < rows; r++) {
        double ref = 0.0, ref_fp32_x = 0.0, abs_sum = 0.0;
        for (int c = 0; c < cols; c++) {
          double wv = kind == 1 ? (double)rill_bf16_to_f32(wb[(size_t)r * cols + c]) : (double)w[(size_t)r * cols + c];
          if (round_x) {
            /* The kernel's own products (exact in fp32), and the sum it approximates with fp32 activations. */
            const float xv = x[(size_t)t * cols + c];
            ref += (double)rill_bf16_to_f32(rill_f32_to_bf16(xv)) * wv;
            ref_fp32_x += (double)xv * wv;
            abs_sum += fabs((double)xv * wv);
          } else if (kind >= 2) {
            const int8_t *wr = wq + (size_t)r * ldw;
            ref += (double)xq[(size_t)t * ldq + c] * xs[(size_t)t * nb + c / 32] * (double)wr[c] *
                   rill_q8_row_scale(wr, nb, c / 32);
          } else {
            ref += (double)x[(size_t)t * cols + c] * wv;
          }
        }
        worst = fmax(worst, fabs(ref - (double)y[(size_t)t * rows + r]));
        if (round_x) {
          const double err = fabs(ref_fp32_x - (double)y[(size_t)t * rows + r]);
          worst_fp32_x = fmax(worst_fp32_x, err);
          /* Rounding each activation to bf16 moves its term by at most 2^-9 of it, plus the fp32 sum's error. */
          CHECK_MSG(err <= abs_sum * 0x1p-9 + 1e-6 * cols, "%s %dx%d T=%d: token %d row %d err %g vs fp32 x",
                    k->isa, rows, cols, T, t, r, err);
          bound_fp32_x = fmax(bound_fp32_x, abs_sum * 0x1p-9);
        }
      }
    }
    if (round_x && rows == 19) {
      printf("%s bf16 %dx%d T=%d: max err vs fp32 activations %.3g (rounding bound %.3g)\n", k->isa, rows, cols, T,
             worst_fp32_x, bound_fp32_x);
    }
    /* fp32 accumulation over cols terms of size ≤ 1. */
    double tol = 1e-6 * cols;
    CHECK_MSG(worst <= tol, "%s kind %d %dx%d T=%d: max err %g", k->isa, kind, rows, cols, T, worst);
    /* Each token alone over a shifted row range gives the same bits. */
    for (int t = 0; t < T; t++) {
      int r0 = rows > 3 ? 3 : 0;
      if (kind == 0) k->gemm_f32(x + (size_t)t * cols, (size_t)cols, 1, w, (size_t)cols, cols, r0, rows, y1, 0);
      if (kind == 1) k->gemm_bf16(x + (size_t)t * cols, (size_t)cols, 1, wb, (size_t)cols, cols, r0, rows, y1, 0);
      if (kind == 2) k->gemm_q8(xq + (size_t)t * ldq, xs + (size_t)t * nb, 1, wq, ldw, nb, r0, rows, y1, 0);
      if (kind == 3) k->gemm_q8_g16(xq + (size_t)t * ldq, xs + (size_t)t * nb, 1, wg, ldw, nb, r0, rows, y1, 0);
      CHECK_MSG(memcmp(y1 + r0, y + (size_t)t * rows + r0, sizeof(float) * (size_t)(rows - r0)) == 0,
                "%s kind %d %dx%d: token %d alone differs", k->isa, kind, rows, cols, t);
    }
  }
  free(x);
  free(w);
  free(wb);
  free(wq);
  free(wg);
  free(xq);
  free(xs);
  free(y);
  free(y1);
}

/* Attention over one block for NQ tokens of G heads: scores against keys stored transposed, and the weighted sum of
 * values, for fp32 and bf16 tiles, on shapes off the vector widths; each token's rows are also computed alone and must
 * be the same bits (the tokens of a sequence share a call; a token's attention must not depend on that). */
static void check_attention(const rill_kernels *k, int NQ, int G, int D, int bs, int n) {
  const int R = NQ * G;
  const size_t ldq = (size_t)G * D + 3, lds = (size_t)n + 3;
  float *q = malloc(sizeof(float) * (size_t)NQ * ldq), *kt = malloc(sizeof(float) * (size_t)D * bs);
  float *v = malloc(sizeof(float) * (size_t)bs * D), *p = malloc(sizeof(float) * (size_t)R * lds);
  uint16_t *ktb = malloc(2 * (size_t)D * bs), *vb = malloc(2 * (size_t)bs * D);
  float *s = malloc(sizeof(float) * (size_t)R * lds), *out = malloc(sizeof(float) * (size_t)R * D);
  float *s1 = malloc(sizeof(float) * (size_t)G * lds), *out1 = malloc(sizeof(float) * (size_t)G * D);
  for (size_t i = 0; i < (size_t)NQ * ldq; i++) q[i] = frand();
  for (int i = 0; i < D * bs; i++) {
    kt[i] = frand();
    v[i] = frand();
    ktb[i] = rill_f32_to_bf16(kt[i]);
    vb[i] = rill_f32_to_bf16(v[i]);
  }
  for (size_t i = 0; i < (size_t)R * lds; i++) p[i] = frand();
  for (int bf = 0; bf < 2; bf++) {
    for (size_t i = 0; i < (size_t)R * lds; i++) s[i] = -7.0f;
    if (bf) {
      k->attn_scores_bf16(q, ldq, NQ, G, D, ktb, bs, n, 0.5f, s, lds);
    } else {
      k->attn_scores_f32(q, ldq, NQ, G, D, kt, bs, n, 0.5f, s, lds);
    }
    double worst = 0.0;
    int untouched = 1, alone = 1;
    for (int r = 0; r < R; r++) {
      const float *qr = q + (size_t)(r / G) * ldq + (size_t)(r % G) * D;
      for (int j = 0; j < n; j++) {
        double ref = 0.0;
        for (int d = 0; d < D; d++) {
          double kv = bf ? rill_bf16_to_f32(ktb[d * bs + j]) : kt[d * bs + j];
          ref += (double)qr[d] * kv;
        }
        worst = fmax(worst, fabs(0.5 * ref - s[(size_t)r * lds + (size_t)j]));
      }
      for (size_t j = (size_t)n; j < lds; j++) untouched = untouched && s[(size_t)r * lds + j] == -7.0f;
    }
    for (int i = 0; i < NQ; i++) {
      if (bf) {
        k->attn_scores_bf16(q + (size_t)i * ldq, 0, 1, G, D, ktb, bs, n, 0.5f, s1, lds);
      } else {
        k->attn_scores_f32(q + (size_t)i * ldq, 0, 1, G, D, kt, bs, n, 0.5f, s1, lds);
      }
      for (int g = 0; g < G; g++) {
        alone = alone && memcmp(s1 + (size_t)g * lds, s + (size_t)(i * G + g) * lds, sizeof(float) * (size_t)n) == 0;
      }
    }
    CHECK_MSG(worst <= 1e-5 * D, "%s scores bf16=%d NQ=%d G=%d D=%d bs=%d n=%d: err %g", k->isa, bf, NQ, G, D, bs, n,
              worst);
    CHECK_MSG(untouched, "%s scores wrote past n", k->isa);
    CHECK_MSG(alone, "%s scores bf16=%d NQ=%d G=%d D=%d n=%d: a token alone differs", k->isa, bf, NQ, G, D, n);
    for (int i = 0; i < R * D; i++) out[i] = 1.0f + 0.01f * (float)(i % 7);
    if (bf) {
      k->attn_values_bf16(p, lds, NQ, G, vb, n, D, out);
    } else {
      k->attn_values_f32(p, lds, NQ, G, v, n, D, out);
    }
    worst = 0.0;
    for (int r = 0; r < R; r++) {
      for (int d = 0; d < D; d++) {
        double ref = 1.0f + 0.01f * (float)((r * D + d) % 7);
        for (int j = 0; j < n; j++) {
          double vv = bf ? rill_bf16_to_f32(vb[j * D + d]) : v[j * D + d];
          ref += (double)p[(size_t)r * lds + (size_t)j] * vv;
        }
        worst = fmax(worst, fabs(ref - out[r * D + d]));
      }
    }
    alone = 1;
    for (int i = 0; i < NQ; i++) {
      for (int c = 0; c < G * D; c++) out1[c] = 1.0f + 0.01f * (float)((i * G * D + c) % 7);
      if (bf) {
        k->attn_values_bf16(p + (size_t)i * G * lds, lds, 1, G, vb, n, D, out1);
      } else {
        k->attn_values_f32(p + (size_t)i * G * lds, lds, 1, G, v, n, D, out1);
      }
      alone = alone && memcmp(out1, out + (size_t)i * G * D, sizeof(float) * (size_t)G * D) == 0;
    }
    CHECK_MSG(worst <= 1e-5 * n, "%s values bf16=%d NQ=%d G=%d D=%d n=%d: err %g", k->isa, bf, NQ, G, D, n, worst);
    CHECK_MSG(alone, "%s values bf16=%d NQ=%d G=%d D=%d n=%d: a token alone differs", k->isa, bf, NQ, G, D, n);
  }
  free(q);
  free(kt);
  free(v);
  free(p);
  free(ktb);
  free(vb);
  free(s);
  free(out);
  free(s1);
  free(out1);
}

static float f32_of_bits(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

/* fp32 → fp16 against every half: each converts back to itself, and the midpoint between neighbours (exact in fp32)
 * rounds to the even one; plus overflow, underflow and NaN. */
static void check_f16(void) {
  int bad = 0;
  for (uint32_t h = 0; h < 0x7C00u; h++) {
    for (uint32_t sign = 0; sign <= 0x8000u; sign += 0x8000u) {
      float f = rill_f16_to_f32((uint16_t)(h | sign));
      if (rill_f32_to_f16(f) != (uint16_t)(h | sign)) bad++;
      if (h + 1 < 0x7C00u) {
        float mid = 0.5f * (f + rill_f16_to_f32((uint16_t)((h + 1) | sign)));
        uint16_t even = (uint16_t)(((h & 1u) ? h + 1 : h) | sign);
        if (rill_f32_to_f16(mid) != even) bad++;
      }
    }
  }
  CHECK_MSG(bad == 0, "fp16 conversion: %d halves wrong", bad);
  CHECK(rill_f32_to_f16(1.0f) == 0x3C00u && rill_f32_to_f16(-2.0f) == 0xC000u);
  CHECK(rill_f32_to_f16(65504.0f) == 0x7BFFu && rill_f32_to_f16(65519.0f) == 0x7BFFu);
  CHECK(rill_f32_to_f16(65520.0f) == 0x7C00u && rill_f32_to_f16(-1e30f) == 0xFC00u);
  CHECK(rill_f32_to_f16(f32_of_bits(0x33000000u)) == 0 && rill_f32_to_f16(f32_of_bits(0x33000001u)) == 1);
  CHECK(rill_f32_to_f16(1e-30f) == 0 && rill_f32_to_f16(f32_of_bits(0x7F800000u)) == 0x7C00u);
  uint16_t nan = rill_f32_to_f16(f32_of_bits(0x7FC00000u));
  CHECK((nan & 0x7C00u) == 0x7C00u && (nan & 0x3FFu) != 0);
}

/* A q8 weight row: quants against the fp16-rounded scale, the scales after the quants, zero padding; a block whose
 * scale underflows fp16 reads as zeros. */
static void check_q8_row(void) {
  float x[70];
  for (int i = 0; i < 70; i++) x[i] = frand();
  x[3] = -3.0f; /* block 0's largest */
  for (int i = 32; i < 64; i++) x[i] = 1e-12f * (float)(i - 40); /* block 1: scale under fp16's range */
  const int nb = 3;
  const size_t bytes = rill_q8_row_bytes(nb);
  CHECK(bytes == 128);
  int8_t row[128];
  memset(row, 0x55, sizeof row);
  rill_quantize_q8_row(x, 70, nb, row);
  CHECK(row[3] == -127);
  CHECK_NEAR(rill_q8_row_scale(row, nb, 0), 3.0 / 127.0, 3.0 / 127.0 / 2048.0);
  CHECK(rill_q8_row_scale(row, nb, 1) == 0.0f);
  int zeros = 0, pad = 0;
  for (int i = 32; i < 64; i++) zeros += row[i] == 0;
  for (int i = 70; i < 96; i++) pad += row[i] == 0;
  for (size_t i = (size_t)nb * 34; i < bytes; i++) pad += row[i] == 0;
  CHECK(zeros == 32 && pad == 26 + (int)(bytes - (size_t)nb * 34));
  /* Dequantised within half a step of the input in the blocks that have a scale. */
  double worst = 0.0;
  for (int i = 0; i < 70; i++) {
    if (i >= 32 && i < 64) continue;
    double s = rill_q8_row_scale(row, nb, i / 32);
    worst = fmax(worst, fabs((double)row[i] * s - x[i]) / s);
  }
  CHECK_MSG(worst <= 0.5 + 1e-6, "q8 row: worst error %g steps", worst);
  float back[70];
  rill_matrix m = {.type = RILL_W_INT8, .rows = 1, .cols = 70, .nblocks = nb, .ld = bytes, .data = row};
  rill_matrix_row(&m, 0, back);
  CHECK_NEAR(back[3], -127.0 * rill_q8_row_scale(row, nb, 0), 1e-9);
  CHECK(back[40] == 0.0f && back[69] == (float)row[69] * rill_q8_row_scale(row, nb, 2));
}

/* Each table's activation quantiser writes the portable one's bytes and scales, with tails, NaN, infinities, zero and
 * tiny blocks. */
static void check_quantize(const rill_kernels *k) {
  static const int widths[] = {1, 16, 17, 31, 32, 33, 100, 896};
  for (size_t i = 0; i < sizeof widths / sizeof widths[0]; i++) {
    const int cols = widths[i], nb = (cols + 31) / 32;
    float x[896];
    for (int c = 0; c < cols; c++) x[c] = frand() * (c % 7 == 0 ? 1e-40f : 3.0f);
    if (cols > 40) {
      x[3] = f32_of_bits(0x7FC00000u);  /* NaN */
      x[34] = f32_of_bits(0x7F800000u); /* +inf: its block's scale is inf */
      for (int c = 64; c < 96 && c < cols; c++) x[c] = 0.0f;
    }
    int8_t qa[896], qb[896];
    float sa[28], sb[28];
    memset(qa, 0x33, sizeof qa);
    memset(qb, 0x33, sizeof qb);
    rill_quantize_q8(x, cols, nb, qa, sa);
    k->quantize_q8(x, cols, nb, qb, sb);
    CHECK_MSG(memcmp(qa, qb, (size_t)nb * 32) == 0 && memcmp(sa, sb, sizeof(float) * (size_t)nb) == 0,
              "%s quantize_q8 cols %d differs from portable", k->isa, cols);
  }
}

/* Each table's silu_mul against a double-precision reference: within a few float roundings of it, over tails of a
 * vector, the saturating ends of the exponential, zeros and a NaN. */
static void check_silu_mul(const rill_kernels *k) {
  static const int widths[] = {1, 15, 16, 17, 100, 4864};
  static float g[4864], u[4864], out[4865];
  for (size_t i = 0; i < sizeof widths / sizeof widths[0]; i++) {
    const int n = widths[i];
    for (int c = 0; c < n; c++) {
      g[c] = 24.0f * frand();
      u[c] = 2.0f * frand();
    }
    if (n > 16) {
      g[0] = -200.0f; /* e^200: inf, SiLU -0 */
      g[1] = 200.0f;
      g[2] = 0.0f;
      g[3] = -87.5f;
      g[4] = 1e-30f;
      g[5] = f32_of_bits(0x7FC00000u);
    }
    out[n] = 12345.0f;
    k->silu_mul(g, u, n, out);
    int bad = 0;
    for (int c = 0; c < n; c++) {
      const double want = (double)g[c] / (1.0 + exp(-(double)g[c])) * (double)u[c];
      if (isnan(want)) {
        bad += !isnan(out[c]);
      } else if (fabs((double)out[c] - want) > 1e-6 * fabs(want) + 1e-37) {
        bad++;
      }
    }
    CHECK_MSG(bad == 0, "%s silu_mul n %d: %d values off", k->isa, n, bad);
    CHECK_MSG(out[n] == 12345.0f, "%s silu_mul n %d wrote past the end", k->isa, n);
  }
}

/* Softmax with and without a sink logit against float64, on lengths around the vector widths, with a wide score range
 * (probabilities down to e^-60) and one position far below the rest (its probability underflows to 0); nothing is
 * written past n. */
static void check_softmax(const rill_kernels *k) {
  static const int widths[] = {1, 2, 7, 8, 15, 16, 17, 33, 100, 1031};
  static float s[1032], in[1031];
  for (size_t i = 0; i < sizeof widths / sizeof widths[0]; i++) {
    const int n = widths[i];
    for (int sk = 0; sk < 3; sk++) {
      /* No sink, a sink inside the scores' range, a sink above them all. */
      const float sink = sk == 0 ? -INFINITY : sk == 1 ? 0.5f : 40.0f;
      for (int c = 0; c < n; c++) in[c] = s[c] = 30.0f * frand();
      if (n > 2) in[1] = s[1] = -200.0f;
      s[n] = 12345.0f;
      k->softmax(s, n, sink);
      double mx = sink;
      for (int c = 0; c < n; c++) mx = fmax(mx, (double)in[c]);
      double sum = exp((double)sink - mx);
      for (int c = 0; c < n; c++) sum += exp((double)in[c] - mx);
      double worst = 0.0;
      for (int c = 0; c < n; c++) worst = fmax(worst, fabs((double)s[c] - exp((double)in[c] - mx) / sum));
      CHECK_MSG(worst <= 1e-6, "%s softmax n %d sink %g: err %g", k->isa, n, (double)sink, worst);
      CHECK_MSG(s[n] == 12345.0f, "%s softmax n %d wrote past the end", k->isa, n);
    }
  }
}

/* RMSNorm against float64 on lengths around its 4-term step, written in place as the forward pass does. */
static void check_rms_norm(void) {
  static const int widths[] = {1, 3, 4, 5, 8, 192, 897};
  static float x[897], w[897], ref_in[897];
  for (size_t i = 0; i < sizeof widths / sizeof widths[0]; i++) {
    const int n = widths[i];
    double ss = 0.0;
    for (int c = 0; c < n; c++) {
      ref_in[c] = x[c] = 3.0f * frand();
      w[c] = frand();
      ss += (double)x[c] * x[c];
    }
    rill_rms_norm(x, w, n, 1e-5f, x);
    const double inv = 1.0 / sqrt(ss / n + 1e-5);
    double worst = 0.0;
    for (int c = 0; c < n; c++) worst = fmax(worst, fabs((double)x[c] - (double)w[c] * ref_in[c] * inv));
    CHECK_MSG(worst <= 1e-6, "rms_norm n %d: err %g", n, worst);
  }
}

int main(void) {
  /* The selected tables, plus the non-VNNI variants of the wider ones where this processor runs them. */
  const rill_kernels *sets[6] = {rill_kernels_select("portable"), rill_kernels_select("avx2"),
                                 rill_kernels_select(NULL)};
  int nsets = 3;
#if defined(__x86_64__) || defined(__i386__)
  if (strncmp(sets[1]->isa, "avx2", 4) == 0 && sets[1] != &rill_kernels_avx2) sets[nsets++] = &rill_kernels_avx2;
  if (strncmp(sets[2]->isa, "avx512", 6) == 0 && sets[2] != &rill_kernels_avx512) sets[nsets++] = &rill_kernels_avx512;
  /* AVX512-BF16's table (bf16 activations) runs only when asked for. */
  if (rill_kernels_select("avx512bf16") == &rill_kernels_avx512_bf16) sets[nsets++] = &rill_kernels_avx512_bf16;
  int has_bf16_dot = 0;
  for (int s = 0; s < nsets; s++) has_bf16_dot = has_bf16_dot || sets[s]->bf16_rounds_x;
  printf("kernels: AVX512-BF16 dot products %s on this processor\n", has_bf16_dot ? "checked" : "not available");
#endif
  static const int shapes[][3] = {{1, 32, 1},   {7, 100, 3}, {13, 96, 9}, {5, 17, 2},    {9, 64, 5},
                                  {4, 1000, 4}, {33, 160, 8}, {3, 1090, 2}, {6, 700, 5}, {11, 200, 12},
                                  {6, 48, 7},   {5, 48, 70},  {19, 2100, 8}, {3, 4109, 13}, {17, 192, 1},
                                  {17, 192, 4},  {10, 33, 3}, {9, 800, 2},
                                  /* one whole group of 16 blocks, and one plus a single block, for gemm_q8_g16 */
                                  {5, 512, 6}, {4, 520, 9},
                                  /* rows too wide for the int8 kernels' prepared activations (over 1364 blocks) */
                                  {3, 44000, 3}};
  for (int s = 0; s < nsets; s++) {
    printf("kernels: %s\n", sets[s]->isa);
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
      check_kernels(sets[s], shapes[i][0], shapes[i][1], shapes[i][2]);
    }
    /* G, D, block size, n: grouped and ungrouped heads (one or two heads take partial sums in the vector tables),
     * head widths off the 4-term and 16-lane steps, and D of 32 and 66 (one or two column chunks past a 64). */
    static const int att[][4] = {{1, 8, 4, 4}, {7, 64, 16, 16}, {7, 64, 16, 5}, {9, 24, 20, 17}, {4, 130, 32, 31},
                                 {2, 16, 1, 1}, {12, 80, 16, 16}, {1, 32, 16, 16}, {1, 32, 16, 7}, {1, 30, 16, 11},
                                 {2, 66, 16, 15}, {1, 48, 16, 9}, {1, 3, 8, 5}};
    check_quantize(sets[s]);
    check_silu_mul(sets[s]);
    check_softmax(sets[s]);
    for (size_t i = 0; i < sizeof att / sizeof att[0]; i++) {
      check_attention(sets[s], 1, att[i][0], att[i][1], att[i][2], att[i][3]);
    }
    /* NQ tokens at once: 1..7 tokens of G = 1..5 heads (past the 4- and 8-row tiles, tails of every size), head
     * widths of one, two, three and five column chunks. */
    static const int multi[][3] = {{1, 32, 16}, {1, 30, 11}, {1, 48, 9},  {1, 66, 16}, {2, 32, 16},
                                   {2, 66, 13}, {3, 24, 17}, {4, 64, 16}, {5, 32, 7},  {1, 3, 5}};
    for (size_t i = 0; i < sizeof multi / sizeof multi[0]; i++) {
      for (int nq = 1; nq <= 7; nq++) check_attention(sets[s], nq, multi[i][0], multi[i][1], 20, multi[i][2]);
    }
  }
  /* Quantisation: zeros stay zero with scale 0; the largest magnitude maps to ±127. */
  float z[40] = {0};
  z[5] = -2.0f;
  z[33] = 0.5f;
  int8_t q[64];
  float sc[2];
  rill_quantize_q8(z, 40, 2, q, sc);
  CHECK(q[5] == -127 && q[0] == 0 && q[33] == 127 && q[39] == 0 && q[63] == 0);
  CHECK_NEAR(sc[0], 2.0 / 127.0, 1e-9);
  CHECK_NEAR(sc[1], 0.5 / 127.0, 1e-9);
  check_f16();
  check_q8_row();
  check_rms_norm();
  return check_summary();
}
