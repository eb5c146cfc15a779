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

static uint32_t rng = 12345;
static float frand(void) {
  rng = rng * 1664525u + 1013904223u;
  return (float)((rng >> 8) & 0xFFFF) / 32768.0f - 1.0f;
}

static void check_kernels(const rill_kernels *k, int rows, int cols, int T) {
  const int nb = (cols + RILL_Q8_BLOCK - 1) / RILL_Q8_BLOCK, ldq = nb * RILL_Q8_BLOCK;
  float *x = malloc(sizeof(float) * (size_t)T * (size_t)cols), *w = malloc(sizeof(float) * (size_t)rows * (size_t)cols);
  uint16_t *wb = malloc(2 * (size_t)rows * (size_t)cols);
  int8_t *wq = malloc((size_t)rows * (size_t)ldq), *xq = malloc((size_t)T * (size_t)ldq);
  float *ws = malloc(sizeof(float) * (size_t)rows * (size_t)nb), *xs = malloc(sizeof(float) * (size_t)T * (size_t)nb);
  float *y = malloc(sizeof(float) * (size_t)T * (size_t)rows), *y1 = malloc(sizeof(float) * (size_t)rows);
  for (int i = 0; i < T * cols; i++) x[i] = frand();
  for (int i = 0; i < rows * cols; i++) {
    w[i] = frand();
    wb[i] = rill_f32_to_bf16(w[i]);
  }
  for (int r = 0; r < rows; r++) rill_quantize_q8(w + (size_t)r * cols, cols, nb, wq + (size_t)r * ldq, ws + (size_t)r * nb);
  for (int t = 0; t < T; t++) rill_quantize_q8(x + (size_t)t * cols, cols, nb, xq + (size_t)t * ldq, xs + (size_t)t * nb);
  for (int kind = 0; kind < 3; kind++) {
    memset(y, 0, sizeof(float) * (size_t)T * (size_t)rows);
    if (kind == 0) k->gemm_f32(x, (size_t)cols, T, w, (size_t)cols, cols, 0, rows, y, (size_t)rows);
    if (kind == 1) k->gemm_bf16(x, (size_t)cols, T, wb, (size_t)cols, cols, 0, rows, y, (size_t)rows);
    if (kind == 2) k->gemm_q8(xq, xs, T, wq, ws, nb, 0, rows, y, (size_t)rows);
    double worst = 0.0;
    for (int t = 0; t < T; t++) {
      for (int r = 0; r < rows; r++) {
        double ref = 0.0;
        for (int c = 0; c < cols; c++) {
          double wv = kind == 1 ? (double)rill_bf16_to_f32(wb[(size_t)r * cols + c]) : (double)w[(size_t)r * cols + c];
          if (kind == 2) {
            ref += (double)xq[(size_t)t * ldq + c] * xs[(size_t)t * nb + c / 32] * (double)wq[(size_t)r * ldq + c] *
                   ws[(size_t)r * nb + c / 32];
          } else {
            ref += (double)x[(size_t)t * cols + c] * wv;
          }
        }
        worst = fmax(worst, fabs(ref - (double)y[(size_t)t * rows + r]));
      }
    }
    /* fp32 accumulation over cols terms of size ≤ 1. */
    double tol = 1e-6 * cols;
    CHECK_MSG(worst <= tol, "%s kind %d %dx%d T=%d: max err %g", k->isa, kind, rows, cols, T, worst);
    /* Each token alone over a shifted row range gives the same bits. */
    for (int t = 0; t < T; t++) {
      int r0 = rows > 3 ? 3 : 0;
      if (kind == 0) k->gemm_f32(x + (size_t)t * cols, (size_t)cols, 1, w, (size_t)cols, cols, r0, rows, y1, 0);
      if (kind == 1) k->gemm_bf16(x + (size_t)t * cols, (size_t)cols, 1, wb, (size_t)cols, cols, r0, rows, y1, 0);
      if (kind == 2) k->gemm_q8(xq + (size_t)t * ldq, xs + (size_t)t * nb, 1, wq, ws, nb, r0, rows, y1, 0);
      CHECK_MSG(memcmp(y1 + r0, y + (size_t)t * rows + r0, sizeof(float) * (size_t)(rows - r0)) == 0,
                "%s kind %d %dx%d: token %d alone differs", k->isa, kind, rows, cols, t);
    }
  }
  free(x);
  free(w);
  free(wb);
  free(wq);
  free(xq);
  free(ws);
  free(xs);
  free(y);
  free(y1);
}

/* Attention over one block: scores against keys stored transposed, and the weighted sum of values, for fp32 and bf16
 * tiles, on shapes off the vector widths. */
static void check_attention(const rill_kernels *k, int G, int D, int bs, int n) {
  float *q = malloc(sizeof(float) * (size_t)G * D), *kt = malloc(sizeof(float) * (size_t)D * bs);
  float *v = malloc(sizeof(float) * (size_t)bs * D), *p = malloc(sizeof(float) * (size_t)G * (size_t)(n + 3));
  uint16_t *ktb = malloc(2 * (size_t)D * bs), *vb = malloc(2 * (size_t)bs * D);
  float *s = malloc(sizeof(float) * (size_t)G * (size_t)(n + 3)), *out = malloc(sizeof(float) * (size_t)G * D);
  for (int i = 0; i < G * D; i++) q[i] = frand();
  for (int i = 0; i < D * bs; i++) {
    kt[i] = frand();
    v[i] = frand();
    ktb[i] = rill_f32_to_bf16(kt[i]);
    vb[i] = rill_f32_to_bf16(v[i]);
  }
  const size_t lds = (size_t)n + 3;
  for (int i = 0; i < G * (n + 3); i++) p[i] = frand();
  for (int bf = 0; bf < 2; bf++) {
    for (size_t i = 0; i < (size_t)G * lds; i++) s[i] = -7.0f;
    if (bf) {
      k->attn_scores_bf16(q, G, D, ktb, bs, n, 0.5f, s, lds);
    } else {
      k->attn_scores_f32(q, G, D, kt, bs, n, 0.5f, s, lds);
    }
    double worst = 0.0;
    int untouched = 1;
    for (int g = 0; g < G; g++) {
      for (int j = 0; j < n; j++) {
        double ref = 0.0;
        for (int d = 0; d < D; d++) {
          double kv = bf ? rill_bf16_to_f32(ktb[d * bs + j]) : kt[d * bs + j];
          ref += (double)q[g * D + d] * kv;
        }
        worst = fmax(worst, fabs(0.5 * ref - s[(size_t)g * lds + (size_t)j]));
      }
      for (size_t j = (size_t)n; j < lds; j++) untouched = untouched && s[(size_t)g * lds + j] == -7.0f;
    }
    CHECK_MSG(worst <= 1e-5 * D, "%s scores bf16=%d G=%d D=%d bs=%d n=%d: err %g", k->isa, bf, G, D, bs, n, worst);
    CHECK_MSG(untouched, "%s scores wrote past n", k->isa);
    for (int i = 0; i < G * D; i++) out[i] = 1.0f;
    if (bf) {
      k->attn_values_bf16(p, lds, G, vb, n, D, out);
    } else {
      k->attn_values_f32(p, lds, G, v, n, D, out);
    }
    worst = 0.0;
    for (int g = 0; g < G; g++) {
      for (int d = 0; d < D; d++) {
        double ref = 1.0;
        for (int j = 0; j < n; j++) {
          double vv = bf ? rill_bf16_to_f32(vb[j * D + d]) : v[j * D + d];
          ref += (double)p[(size_t)g * lds + (size_t)j] * vv;
        }
        worst = fmax(worst, fabs(ref - out[g * D + d]));
      }
    }
    CHECK_MSG(worst <= 1e-5 * n, "%s values bf16=%d G=%d D=%d n=%d: err %g", k->isa, bf, G, D, n, worst);
  }
  free(q);
  free(kt);
  free(v);
  free(p);
  free(ktb);
  free(vb);
  free(s);
  free(out);
}

int main(void) {
  const rill_kernels *sets[3] = {rill_kernels_select("portable"), rill_kernels_select("avx2"),
                                 rill_kernels_select(NULL)};
  static const int shapes[][3] = {{1, 32, 1}, {7, 100, 3}, {13, 96, 9}, {5, 17, 2}, {9, 64, 5}, {4, 1000, 4}, {33, 160, 8},
                                  {11, 200, 12}, {6, 48, 7}, {5, 48, 70},
                                  {19, 2100, 8}, {3, 4109, 13}};
  for (int s = 0; s < 3; s++) {
    printf("kernels: %s\n", sets[s]->isa);
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
      check_kernels(sets[s], shapes[i][0], shapes[i][1], shapes[i][2]);
    }
    static const int att[][4] = {{1, 8, 4, 4}, {7, 64, 16, 16}, {7, 64, 16, 5}, {9, 24, 20, 17}, {4, 130, 32, 31},
                                 {2, 16, 1, 1}, {12, 80, 16, 16}};
    for (size_t i = 0; i < sizeof att / sizeof att[0]; i++) check_attention(sets[s], att[i][0], att[i][1], att[i][2], att[i][3]);
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
  return check_summary();
}
