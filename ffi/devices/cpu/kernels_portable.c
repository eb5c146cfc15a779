#include <math.h>
#include <string.h>

#include "bf16.h"
#include "kernels.h"

/* Eight partial sums, so a vectorising compiler may keep them in one register; then a fixed pairwise reduction. */
static float reduce8(const float a[8]) { return ((a[0] + a[4]) + (a[2] + a[6])) + ((a[1] + a[5]) + (a[3] + a[7])); }

static void gemm_f32(const float *x, size_t ldx, int T, const float *w, size_t ldw, int cols, int r0, int r1, float *y,
                     size_t ldy) {
  int main = cols & ~7;
  for (int r = r0; r < r1; r++) {
    const float *wr = w + (size_t)r * ldw;
    for (int t = 0; t < T; t++) {
      const float *xt = x + (size_t)t * ldx;
      float acc[8] = {0};
      for (int c = 0; c < main; c += 8) {
        for (int l = 0; l < 8; l++) acc[l] += xt[c + l] * wr[c + l];
      }
      float s = reduce8(acc);
      for (int c = main; c < cols; c++) s += xt[c] * wr[c];
      y[(size_t)t * ldy + (size_t)r] = s;
    }
  }
}

static void gemm_bf16(const float *x, size_t ldx, int T, const uint16_t *w, size_t ldw, int cols, int r0, int r1,
                      float *y, size_t ldy) {
  int main = cols & ~7;
  for (int r = r0; r < r1; r++) {
    const uint16_t *wr = w + (size_t)r * ldw;
    for (int t = 0; t < T; t++) {
      const float *xt = x + (size_t)t * ldx;
      float acc[8] = {0};
      for (int c = 0; c < main; c += 8) {
        for (int l = 0; l < 8; l++) acc[l] += xt[c + l] * rill_bf16_to_f32(wr[c + l]);
      }
      float s = reduce8(acc);
      for (int c = main; c < cols; c++) s += xt[c] * rill_bf16_to_f32(wr[c]);
      y[(size_t)t * ldy + (size_t)r] = s;
    }
  }
}

static void gemm_q8(const int8_t *xq, const float *xs, int T, const int8_t *w, size_t ldw, int nblocks, int r0,
                    int r1, float *y, size_t ldy) {
  size_t ld = (size_t)nblocks * RILL_Q8_BLOCK;
  for (int r = r0; r < r1; r++) {
    const int8_t *wr = w + (size_t)r * ldw;
    for (int t = 0; t < T; t++) {
      const int8_t *xt = xq + (size_t)t * ld;
      const float *xst = xs + (size_t)t * (size_t)nblocks;
      float s = 0.0f;
      for (int b = 0; b < nblocks; b++) {
        int32_t d = 0;
        for (int l = 0; l < RILL_Q8_BLOCK; l++) d += (int32_t)xt[b * RILL_Q8_BLOCK + l] * wr[b * RILL_Q8_BLOCK + l];
        s += (float)d * (xst[b] * rill_q8_row_scale(wr, nblocks, b));
      }
      y[(size_t)t * ldy + (size_t)r] = s;
    }
  }
}

/* Attention: the innermost loops run along positions (scores) or head dimensions (values), so they are elementwise
 * and a compiler may vectorise them without reordering any sum. */
static void scores_one_f32(const float *q, int G, int D, const float *kt, int bs, int n, float scale, float *s,
                           size_t lds) {
  for (int g = 0; g < G; g++) {
    float acc[256];
    for (int j0 = 0; j0 < n; j0 += 256) {
      int m = n - j0 < 256 ? n - j0 : 256;
      for (int j = 0; j < m; j++) acc[j] = 0.0f;
      for (int d = 0; d < D; d++) {
        float qd = q[(size_t)g * D + d];
        const float *k = kt + (size_t)d * bs + j0;
        for (int j = 0; j < m; j++) acc[j] += qd * k[j];
      }
      for (int j = 0; j < m; j++) s[(size_t)g * lds + (size_t)(j0 + j)] = acc[j] * scale;
    }
  }
}

static void scores_one_bf16(const float *q, int G, int D, const uint16_t *kt, int bs, int n, float scale, float *s,
                            size_t lds) {
  for (int g = 0; g < G; g++) {
    float acc[256];
    for (int j0 = 0; j0 < n; j0 += 256) {
      int m = n - j0 < 256 ? n - j0 : 256;
      for (int j = 0; j < m; j++) acc[j] = 0.0f;
      for (int d = 0; d < D; d++) {
        float qd = q[(size_t)g * D + d];
        const uint16_t *k = kt + (size_t)d * bs + j0;
        for (int j = 0; j < m; j++) acc[j] += qd * rill_bf16_to_f32(k[j]);
      }
      for (int j = 0; j < m; j++) s[(size_t)g * lds + (size_t)(j0 + j)] = acc[j] * scale;
    }
  }
}

static void attn_scores_f32(const float *q, size_t ldq, int NQ, int G, int D, const float *kt, int bs, int n,
                            float scale, float *s, size_t lds) {
  for (int i = 0; i < NQ; i++) scores_one_f32(q + (size_t)i * ldq, G, D, kt, bs, n, scale, s + (size_t)i * G * lds, lds);
}

static void attn_scores_bf16(const float *q, size_t ldq, int NQ, int G, int D, const uint16_t *kt, int bs, int n,
                             float scale, float *s, size_t lds) {
  for (int i = 0; i < NQ; i++) scores_one_bf16(q + (size_t)i * ldq, G, D, kt, bs, n, scale, s + (size_t)i * G * lds, lds);
}

/* Rows in order; each row's sum over j is in order whatever the number of rows. */
static void attn_values_f32(const float *p, size_t lds, int NQ, int G0, const float *v, int n, int D, float *out) {
  const int G = NQ * G0;
  for (int g = 0; g < G; g++) {
    float *o = out + (size_t)g * D;
    for (int j = 0; j < n; j++) {
      float w = p[(size_t)g * lds + (size_t)j];
      const float *vj = v + (size_t)j * D;
      for (int d = 0; d < D; d++) o[d] += w * vj[d];
    }
  }
}

static void attn_values_bf16(const float *p, size_t lds, int NQ, int G0, const uint16_t *v, int n, int D,
                             float *out) {
  const int G = NQ * G0;
  for (int g = 0; g < G; g++) {
    float *o = out + (size_t)g * D;
    for (int j = 0; j < n; j++) {
      float w = p[(size_t)g * lds + (size_t)j];
      const uint16_t *vj = v + (size_t)j * D;
      for (int d = 0; d < D; d++) o[d] += w * rill_bf16_to_f32(vj[d]);
    }
  }
}

const rill_kernels rill_kernels_portable = {.isa = "portable",
                                            .gemm_f32 = gemm_f32,
                                            .gemm_bf16 = gemm_bf16,
                                            .gemm_q8 = gemm_q8,
                                            .quantize_q8 = rill_quantize_q8,
                                            .silu_mul = rill_silu_mul,
                                            .attn_scores_f32 = attn_scores_f32,
                                            .attn_scores_bf16 = attn_scores_bf16,
                                            .attn_values_f32 = attn_values_f32,
                                            .attn_values_bf16 = attn_values_bf16,
                                            .softmax = rill_softmax,
                                            .gemm_mxfp4 = rill_gemm_mxfp4_portable,
                                            .gemm_mxfp4_q8 = rill_gemm_mxfp4_q8_portable};

void rill_silu_mul(const float *g, const float *u, int n, float *out) {
  for (int i = 0; i < n; i++) out[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
}

void rill_softmax(float *s, int n, float sink) {
  float mx = s[0];
  for (int i = 1; i < n; i++) mx = s[i] > mx ? s[i] : mx;
  mx = sink > mx ? sink : mx;
  double sum = (double)expf(sink - mx);
  for (int i = 0; i < n; i++) {
    s[i] = expf(s[i] - mx);
    sum += s[i];
  }
  const float inv = (float)(1.0 / sum);
  for (int i = 0; i < n; i++) s[i] *= inv;
}

void rill_quantize_q8(const float *x, int cols, int nblocks, int8_t *q, float *s) {
  /* Adding and subtracting 1.5 · 2^23 rounds to the nearest integer, ties to even, for |v| < 2^22 (here |v| ≤ 127),
   * without a libm call per element. */
  const float magic = 12582912.0f;
  for (int b = 0; b < nblocks; b++) {
    int c0 = b * RILL_Q8_BLOCK;
    int n = cols - c0 < RILL_Q8_BLOCK ? cols - c0 : RILL_Q8_BLOCK;
    float amax = 0.0f;
    for (int l = 0; l < n; l++) {
      float a = fabsf(x[c0 + l]);
      amax = a > amax ? a : amax;
    }
    float inv = amax > 0.0f ? 127.0f / amax : 0.0f;
    s[b] = amax / 127.0f;
    for (int l = 0; l < n; l++) {
      float v = (x[c0 + l] * inv + magic) - magic;
      v = v >= -127.0f ? (v <= 127.0f ? v : 127.0f) : -127.0f; /* NaN lands on -127, never an undefined cast */
      q[c0 + l] = (int8_t)v;
    }
    for (int l = n; l < RILL_Q8_BLOCK; l++) q[c0 + l] = 0;
  }
}

uint16_t rill_f32_to_f16(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  const uint32_t sign = (u >> 16) & 0x8000u, a = u & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return (uint16_t)(sign | 0x7E00u);     /* NaN */
  if (a >= 0x477FF000u) return (uint16_t)(sign | 0x7C00u);    /* ≥ 65520 rounds past 65504: inf */
  if (a >= 0x38800000u) {                                      /* normal in half: rebias, round the 13 dropped bits */
    uint32_t h = (a - 0x38000000u) >> 13, rem = a & 0x1FFFu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) h++;
    return (uint16_t)(sign | h);
  }
  if (a < 0x33000000u) return (uint16_t)sign; /* under 2^-25: rounds to zero */
  /* Subnormal in half: the value in units of 2^-24, rounded to nearest even (may round up to the smallest normal). */
  const uint32_t e = a >> 23, m = (a & 0x7FFFFFu) | 0x800000u, shift = 126u - e;
  uint32_t h = m >> shift, rem = m & ((1u << shift) - 1u), half = 1u << (shift - 1u);
  if (rem > half || (rem == half && (h & 1u))) h++;
  return (uint16_t)(sign | h);
}

float rill_f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1Fu, man = h & 0x3FFu, u;
  if (exp == 0) {
    if (man == 0) {
      u = sign;
    } else {
      /* Subnormal: normalise. */
      int e = -1;
      do {
        e++;
        man <<= 1;
      } while ((man & 0x400u) == 0);
      u = sign | ((uint32_t)(127 - 15 - e) << 23) | ((man & 0x3FFu) << 13);
    }
  } else if (exp == 31) {
    u = sign | 0x7F800000u | (man << 13);
  } else {
    u = sign | ((exp + 127 - 15) << 23) | (man << 13);
  }
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

float rill_q8_row_scale(const int8_t *row, int nblocks, int b) {
  uint16_t h;
  memcpy(&h, row + (size_t)nblocks * RILL_Q8_BLOCK + (size_t)b * 2, sizeof h);
  return rill_f16_to_f32(h);
}

void rill_quantize_q8_row(const float *x, int cols, int nblocks, int8_t *row) {
  const float magic = 12582912.0f; /* as in rill_quantize_q8 */
  int8_t *q = row;
  unsigned char *scales = (unsigned char *)row + (size_t)nblocks * RILL_Q8_BLOCK;
  for (int b = 0; b < nblocks; b++) {
    int c0 = b * RILL_Q8_BLOCK;
    int n = cols - c0 < RILL_Q8_BLOCK ? cols - c0 : RILL_Q8_BLOCK;
    float amax = 0.0f;
    for (int l = 0; l < n; l++) {
      float a = fabsf(x[c0 + l]);
      amax = a > amax ? a : amax;
    }
    float sf = amax / 127.0f;
    /* amax is never NaN (a NaN never compares greater); an infinite one clamps to fp16's largest. */
    uint16_t h = rill_f32_to_f16(sf <= 65504.0f ? sf : 65504.0f);
    float s = rill_f16_to_f32(h);
    float inv = s > 0.0f ? 1.0f / s : 0.0f; /* an underflowed scale stores 0 and zero quants */
    memcpy(scales + (size_t)b * 2, &h, sizeof h);
    for (int l = 0; l < n; l++) {
      float v = (x[c0 + l] * inv + magic) - magic;
      v = v >= -127.0f ? (v <= 127.0f ? v : 127.0f) : -127.0f;
      q[c0 + l] = (int8_t)v;
    }
    for (int l = n; l < RILL_Q8_BLOCK; l++) q[c0 + l] = 0;
  }
  size_t used = (size_t)nblocks * (RILL_Q8_BLOCK + 2), total = rill_q8_row_bytes(nblocks);
  memset((unsigned char *)row + used, 0, total - used);
}
