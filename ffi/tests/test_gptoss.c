/*
 * gpt-oss on the CPU device, beyond the float64 reference of test_model_checkpoints:
 *  - MXFP4 decoding, exhaustively: every byte of a block at every position, with scales at the extremes (0, the
 *    subnormal 2^-127; 254, where 4 · 2^127 overflows fp32), through each instruction set's kernel, bit-exact against
 *    E2M1 · 2^(s − 127) computed in double and rounded as fp32 arithmetic rounds;
 *  - the MXFP4 kernels against a float64 dot product on awkward shapes, each ISA's table batch invariant (a token's
 *    output alone equals its output among others, whatever the row range) and within 1e-5 of the portable one;
 *  - bad checkpoints (missing scales, wrong block shape, scales of the wrong length, a NaN scale byte, bad config
 *    fields) are one-line RILL_ERR_MODEL errors naming the tensor or field;
 *  - the released gpt-oss-20b config.json: YaRN's 32 inverse frequencies as the reference computes them (truncate
 *    false: ramp bounds 8.09 and 17.40 unrounded), the concentration 0.1 · ln 32 + 1, even layers sliding over 128;
 *    without truncate the bounds round out to 8 and 18;
 *  - the int8-activation MXFP4 kernels: every byte under the extreme scales exact, against float64 over the int8
 *    activations (fp32 accumulation only) and over the unquantised ones (the quantisation error, < 1% of Σ|x·w|),
 *    batch invariant bitwise;
 *  - the engine on tests/fixtures/checkpoints/gptoss-bf16 (sliding window 20, KV blocks of 16), as held and as int8
 *    (int8 activations into the experts too): a sequence's logits
 *    are bitwise the same alone, batched with others (other tokens routed to the same experts), fed in chunks across
 *    block boundaries, token by token, and after a prefix hit on another sequence's blocks;
 *  - the sliding layers' own pool (bounded by the window): with a ring of 3 blocks per sequence (block j in slot
 *    j mod 3, blocks out of the window given as -1) the logits are bitwise those of the whole-context pool, one-shot,
 *    token by token, in chunks, after prefix hits (with and without the blocks before the window), recomputed into
 *    other blocks (preemption), batched; bad second tables are one-line errors.
 */
#define _POSIX_C_SOURCE 200809L

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "expect_model_error.h"
#include "cpu/kernels.h"
#include "json.h"
#include "model_config.h"
#include "rill.h"
#include "rope.h"
#include "safetensors.h"
#include "safetensors_writer.h"
#include "test_model_batch.h"
#include "test_rng.h"
#include "text_replace.h"

#define DIR "tests/fixtures/checkpoints/gptoss-bf16"

static uint32_t rng = 2024;
static uint32_t next_u32(void) { return xorshift32(&rng); }
static float frand(void) { return (float)(next_u32() >> 8) / 8388608.0f - 1.0f; }

static int same_float(float a, float b) { return (isnan(a) && isnan(b)) || a == b; }

/* ---- decoding ---- */

static void check_decode(const rill_kernels *k) {
  /* Scale bytes from both ends and the middle. */
  static const int scales[] = {0, 1, 2, 100, 126, 127, 128, 200, 250, 251, 252, 253, 254};
  enum { NB = 3 };
  uint8_t blocks[NB * 16], sc[NB];
  float x[NB * 32];
  int bad = 0, checked = 0;
  for (size_t si = 0; si < sizeof scales / sizeof scales[0]; si++) {
    for (int byte = 0; byte < 256; byte++) {
      const int b = byte % NB, j = byte % 16;
      memset(blocks, 0, sizeof blocks);
      memset(x, 0, sizeof x);
      for (int i = 0; i < NB; i++) sc[i] = 127;
      sc[b] = (uint8_t)scales[si];
      blocks[b * 16 + j] = (uint8_t)byte;
      /* Element 2j (low nibble) weighs 1, element 2j + 1 (high nibble) 2, so a swapped order shows. */
      x[rill_mxfp4_xpos((size_t)(b * 32 + 2 * j))] = 1.0f;
      x[rill_mxfp4_xpos((size_t)(b * 32 + 2 * j + 1))] = 2.0f;
      const float lo = (float)ldexp((double)rill_e2m1_values[byte & 15], scales[si] - 127);
      const float hi = (float)ldexp((double)rill_e2m1_values[byte >> 4], scales[si] - 127);
      const float want = lo + hi * 2.0f; /* fp32 arithmetic: overflow to ±inf, inf − inf NaN */
      float got = -1.0f;
      k->gemm_mxfp4(x, NB * 32, 1, blocks, sc, NB, 0, 1, &got, 1);
      checked++;
      if (!same_float(got, want)) {
        if (bad++ < 5) fprintf(stderr, "%s: byte 0x%02x scale %d: got %g want %g\n", k->isa, byte, scales[si], got, want);
      }
    }
  }
  CHECK_MSG(bad == 0, "%s: %d of %d decodes wrong", k->isa, bad, checked);
  printf("%s: %d MXFP4 decodes exact\n", k->isa, checked);
}

static void check_e8m0(void) {
  int bad = 0;
  for (int s = 0; s < 255; s++) bad += rill_e8m0_to_f32((uint8_t)s) != (float)ldexp(1.0, s - 127);
  CHECK_MSG(bad == 0, "%d E8M0 scales wrong", bad);
  CHECK(isinf(rill_e8m0_to_f32(255)));
}

/* ---- kernels against float64 ---- */

static void check_kernel(const rill_kernels *k, const rill_kernels *ref_k, int rows, int nb, int T) {
  const int cols = nb * 32;
  uint8_t *blocks = malloc((size_t)rows * nb * 16), *sc = malloc((size_t)rows * nb);
  float *x = malloc(sizeof(float) * (size_t)T * cols), *y = malloc(sizeof(float) * (size_t)T * rows);
  float *y1 = malloc(sizeof(float) * (size_t)rows), *yp = malloc(sizeof(float) * (size_t)T * rows);
  for (int i = 0; i < rows * nb * 16; i++) blocks[i] = (uint8_t)next_u32();
  for (int i = 0; i < rows * nb; i++) sc[i] = (uint8_t)(122 + next_u32() % 6);
  for (int i = 0; i < T * cols; i++) x[i] = frand();
  k->gemm_mxfp4(x, (size_t)cols, T, blocks, sc, nb, 0, rows, y, (size_t)rows);
  ref_k->gemm_mxfp4(x, (size_t)cols, T, blocks, sc, nb, 0, rows, yp, (size_t)rows);
  double worst = 0.0, worst_isa = 0.0, mag = 0.0;
  for (int t = 0; t < T; t++) {
    for (int r = 0; r < rows; r++) {
      double ref = 0.0;
      for (int c = 0; c < cols; c++) {
        const uint8_t q = blocks[((size_t)r * nb + c / 32) * 16 + (c % 32) / 2];
        const int code = c % 2 == 0 ? q & 15 : q >> 4;
        ref += (double)x[(size_t)t * cols + rill_mxfp4_xpos((size_t)c)] * ldexp((double)rill_e2m1_values[code], sc[r * nb + c / 32] - 127);
      }
      worst = fmax(worst, fabs(ref - y[(size_t)t * rows + r]));
      worst_isa = fmax(worst_isa, fabs((double)yp[(size_t)t * rows + r] - y[(size_t)t * rows + r]));
      mag = fmax(mag, fabs(ref));
    }
  }
  CHECK_MSG(worst <= 1e-6 * cols * fmax(mag, 1.0), "%s %dx%d T=%d: max err %g (|y| %g)", k->isa, rows, cols, T, worst,
            mag);
  CHECK_MSG(worst_isa <= 1e-5 * fmax(mag, 1.0), "%s vs %s %dx%d T=%d: %g apart", k->isa, ref_k->isa, rows, cols, T,
            worst_isa);
  /* Each token alone, over a row range starting mid-matrix: the same bits. */
  const int r0 = rows / 3;
  int differ = 0;
  for (int t = 0; t < T; t++) {
    k->gemm_mxfp4(x + (size_t)t * cols, (size_t)cols, 1, blocks, sc, nb, r0, rows, y1, 1);
    for (int r = r0; r < rows; r++) differ += memcmp(&y1[r], &y[(size_t)t * rows + r], sizeof(float)) != 0;
  }
  CHECK_MSG(differ == 0, "%s %dx%d T=%d: %d outputs differ alone", k->isa, rows, cols, T, differ);
  free(blocks);
  free(sc);
  free(x);
  free(y);
  free(y1);
  free(yp);
}

/* ---- int8-activation MXFP4 kernels ---- */

/* Every byte at every position of a block under the extreme scales: activations 1 (low nibble) and 2 (high nibble),
 * exactly representable in int8 (quantize_q8 maps the block's max 2 to 127 and 1 to 63.5 → 64: so the quants are
 * set directly with scale 1), against E2M1 · 2^(s − 127) in double. */
/* The kernel under test: the table's gemm_mxfp4_q8 over blocks as released, or (g16) its gemm_mxfp4_q8_g16 over a
 * copy of the blocks and scales regrouped by rill_mxfp4_group16. */
static void run_q8(const rill_kernels *k, int g16, const int8_t *xq, const float *xs, int T, const uint8_t *blocks,
                   const uint8_t *sc, int nb, int r0, int r1, float *y, size_t ldy) {
  if (!g16) {
    k->gemm_mxfp4_q8(xq, xs, T, blocks, sc, nb, r0, r1, y, ldy);
    return;
  }
  const size_t bytes = (size_t)r1 * (size_t)nb * 16;
  uint8_t *grouped = malloc(bytes), *grouped_sc = malloc((size_t)r1 * (size_t)nb);
  memcpy(grouped, blocks, bytes);
  memcpy(grouped_sc, sc, (size_t)r1 * (size_t)nb);
  rill_mxfp4_group16(grouped, grouped_sc, (size_t)r1, nb);
  k->gemm_mxfp4_q8_g16(xq, xs, T, grouped, grouped_sc, nb, r0, r1, y, ldy);
  free(grouped);
  free(grouped_sc);
}

static void check_decode_q8(const rill_kernels *k, int g16) {
  static const int scales[] = {0, 1, 2, 100, 126, 127, 128, 200, 250, 251, 252, 253, 254};
  enum { NB = 3 };
  uint8_t blocks[NB * 16], sc[NB];
  int8_t xq[NB * 32];
  float xs[NB];
  int bad = 0, checked = 0;
  for (size_t si = 0; si < sizeof scales / sizeof scales[0]; si++) {
    for (int byte = 0; byte < 256; byte++) {
      const int b = byte % NB, j = byte % 16;
      memset(blocks, 0, sizeof blocks);
      memset(xq, 0, sizeof xq);
      for (int i = 0; i < NB; i++) sc[i] = 127, xs[i] = 1.0f;
      sc[b] = (uint8_t)scales[si];
      blocks[b * 16 + j] = (uint8_t)byte;
      xq[rill_mxfp4_xpos((size_t)(b * 32 + 2 * j))] = 1;
      xq[rill_mxfp4_xpos((size_t)(b * 32 + 2 * j + 1))] = 2;
      const double want = ldexp((double)rill_e2m1_values[byte & 15] + 2.0 * rill_e2m1_values[byte >> 4], scales[si] - 127);
      float got = -1.0f;
      run_q8(k, g16, xq, xs, 1, blocks, sc, NB, 0, 1, &got, 1);
      checked++;
      /* The int32 sum is exact and its scale a power of two, so the result is exact while every element's product
       * fits fp32; past that, the vector kernels hold the two products in separate lanes, so one may overflow alone
       * (then any infinity or NaN is right, as it is for the fp32 kernel). */
      const double part = fmax(fabs((double)rill_e2m1_values[byte & 15]), 2.0 * fabs((double)rill_e2m1_values[byte >> 4]));
      const int overflows = ldexp(part, scales[si] - 127) > FLT_MAX || fabs(want) > FLT_MAX;
      const int ok = got == (float)want || (overflows && !isfinite(got));
      if (!ok && bad++ < 5) fprintf(stderr, "%s q8: byte 0x%02x scale %d: got %g want %g\n", k->isa, byte, scales[si], got, want);
    }
  }
  CHECK_MSG(bad == 0, "%s q8%s: %d of %d decodes wrong", k->isa, g16 ? " g16" : "", bad, checked);
  printf("%s: %d int8-activation MXFP4 decodes exact%s\n", k->isa, checked, g16 ? " (blocks in groups of 16)" : "");
}

/* Against float64 over the dequantised int8 activations (the kernel's only rounding is fp32 accumulation), against
 * float64 over the unquantised activations (the quantisation error, bounded as 8-bit blocks bound it), batch
 * invariance (a token alone over a mid-matrix row range: the same bits), and quantize_q8 in MXFP4 order. */
static void check_kernel_q8(const rill_kernels *k, int g16, int rows, int nb, int T) {
  const int cols = nb * 32;
  uint8_t *blocks = malloc((size_t)rows * nb * 16), *sc = malloc((size_t)rows * nb);
  float *x = malloc(sizeof(float) * (size_t)T * cols), *y = malloc(sizeof(float) * (size_t)T * rows);
  float *y1 = malloc(sizeof(float) * (size_t)rows), *xs = malloc(sizeof(float) * (size_t)T * nb);
  int8_t *xq = malloc((size_t)T * cols);
  for (int i = 0; i < rows * nb * 16; i++) blocks[i] = (uint8_t)next_u32();
  for (int i = 0; i < rows * nb; i++) sc[i] = (uint8_t)(122 + next_u32() % 6);
  for (int i = 0; i < T * cols; i++) x[i] = frand();
  for (int t = 0; t < T; t++) k->quantize_q8(x + (size_t)t * cols, cols, nb, xq + (size_t)t * cols, xs + (size_t)t * nb);
  run_q8(k, g16, xq, xs, T, blocks, sc, nb, 0, rows, y, (size_t)rows);
  double worst = 0.0, worst_q = 0.0, mag = 0.0, absdot = 0.0;
  for (int t = 0; t < T; t++) {
    for (int r = 0; r < rows; r++) {
      double ref = 0.0, refq = 0.0, a = 0.0;
      for (int c = 0; c < cols; c++) {
        const uint8_t q = blocks[((size_t)r * nb + c / 32) * 16 + (c % 32) / 2];
        const int code = c % 2 == 0 ? q & 15 : q >> 4;
        const double w = ldexp((double)rill_e2m1_values[code], sc[r * nb + c / 32] - 127);
        const size_t at = (size_t)t * cols + rill_mxfp4_xpos((size_t)c);
        ref += (double)x[at] * w;
        refq += (double)xq[at] * (double)xs[(size_t)t * nb + c / 32] * w;
        a += fabs((double)x[at] * w);
      }
      worst = fmax(worst, fabs(refq - y[(size_t)t * rows + r]));
      worst_q = fmax(worst_q, fabs(ref - y[(size_t)t * rows + r]) / fmax(a, 1e-30));
      mag = fmax(mag, fabs(refq));
      absdot = fmax(absdot, a);
    }
  }
  const char *layout = g16 ? " g16" : "";
  CHECK_MSG(worst <= 1e-6 * nb * fmax(absdot, 1.0), "%s q8%s %dx%d T=%d: max err %g (Σ|xw| %g)", k->isa, layout, rows,
            cols, T, worst, absdot);
  /* Each quant is within half a step (max|x| / 254) of its value, so the error is under Σ|w| · max|x| / 254, and
   * relative to Σ|x · w| with uniform x well under 1%. */
  CHECK_MSG(worst_q <= 0.01, "%s q8%s %dx%d T=%d: quantisation error %g of Σ|x·w|", k->isa, layout, rows, cols, T,
            worst_q);
  const int r0 = rows / 3;
  int differ = 0;
  for (int t = 0; t < T; t++) {
    run_q8(k, g16, xq + (size_t)t * cols, xs + (size_t)t * nb, 1, blocks, sc, nb, r0, rows, y1, 1);
    for (int r = r0; r < rows; r++) differ += memcmp(&y1[r], &y[(size_t)t * rows + r], sizeof(float)) != 0;
  }
  CHECK_MSG(differ == 0, "%s q8%s %dx%d T=%d: %d outputs differ alone", k->isa, layout, rows, cols, T, differ);
  free(blocks);
  free(sc);
  free(x);
  free(y);
  free(y1);
  free(xs);
  free(xq);
}

/* Shapes of the int8-activation kernels (rows, blocks, tokens): partial scale groups and quads, and for the grouped
 * layout one group, a partial one, several and a partial last. */
static const int q8_shapes[][3] = {{1, 1, 1},  {7, 3, 1},  {13, 2, 9}, {5, 90, 2}, {33, 5, 8}, {16, 4, 17},
                                   {3, 7, 4},  {6, 19, 3}, {5, 33, 5}, {4, 16, 3}, {3, 48, 6}, {9, 17, 1}};
#define Q8_SHAPES (sizeof q8_shapes / sizeof q8_shapes[0])

#if defined(__x86_64__) || defined(__i386__)
/* The AVX-512 VNNI table's instances of both layouts (vpshufb, and vpermb where the processor has VBMI): each through
 * the whole kernel check, and each pair bit for bit alike on every shape. */
static void check_q8_instances(void) {
  rill_kernels pshufb = *rill_kernels_select(NULL), vbmi = pshufb;
  pshufb.isa = "avx512vnni/vpshufb";
  pshufb.gemm_mxfp4_q8 = rill_gemm_mxfp4_q8_avx512_vnni_pshufb;
  pshufb.gemm_mxfp4_q8_g16 = rill_gemm_mxfp4_q8_g16_avx512_vnni_pshufb;
  vbmi.isa = "avx512vnni/vpermb";
  vbmi.gemm_mxfp4_q8 = rill_gemm_mxfp4_q8_avx512_vbmi;
  vbmi.gemm_mxfp4_q8_g16 = rill_gemm_mxfp4_q8_g16_avx512_vbmi;
  const int has_vbmi = __builtin_cpu_supports("avx512vbmi");
  for (int g16 = 0; g16 < 2; g16++) {
    for (size_t i = 0; i < Q8_SHAPES; i++) {
      check_kernel_q8(&pshufb, g16, q8_shapes[i][0], q8_shapes[i][1], q8_shapes[i][2]);
      if (has_vbmi) check_kernel_q8(&vbmi, g16, q8_shapes[i][0], q8_shapes[i][1], q8_shapes[i][2]);
    }
    check_decode_q8(&pshufb, g16);
    if (has_vbmi) check_decode_q8(&vbmi, g16);
  }
  if (!has_vbmi) return;
  int differ = 0, total = 0;
  for (int g16 = 0; g16 < 2; g16++) {
    for (size_t i = 0; i < Q8_SHAPES; i++) {
      const int rows = q8_shapes[i][0], nb = q8_shapes[i][1], T = q8_shapes[i][2], cols = nb * 32;
      uint8_t *blocks = malloc((size_t)rows * nb * 16), *sc = malloc((size_t)rows * nb);
      int8_t *xq = malloc((size_t)T * cols);
      float *xs = malloc(sizeof(float) * (size_t)T * nb), *a = malloc(sizeof(float) * (size_t)T * rows);
      float *b = malloc(sizeof(float) * (size_t)T * rows);
      for (int j = 0; j < rows * nb * 16; j++) blocks[j] = (uint8_t)next_u32();
      for (int j = 0; j < rows * nb; j++) sc[j] = (uint8_t)(1 + next_u32() % 254);
      for (int j = 0; j < T * cols; j++) xq[j] = (int8_t)(next_u32() % 255 - 127);
      for (int j = 0; j < T * nb; j++) xs[j] = frand();
      run_q8(&pshufb, g16, xq, xs, T, blocks, sc, nb, 0, rows, a, (size_t)rows);
      run_q8(&vbmi, g16, xq, xs, T, blocks, sc, nb, 0, rows, b, (size_t)rows);
      for (int j = 0; j < T * rows; j++, total++) differ += memcmp(&a[j], &b[j], sizeof(float)) != 0;
      free(blocks);
      free(sc);
      free(xq);
      free(xs);
      free(a);
      free(b);
    }
  }
  CHECK_MSG(differ == 0, "vpshufb and vpermb instances differ in %d of %d outputs", differ, total);
  printf("avx512vnni: vpshufb and vpermb MXFP4 x int8 instances equal bit for bit on %d outputs (both layouts)\n",
         total);
}
#endif

/* ---- bad checkpoints ---- */

/* Every tensor of the fixture (the index names them), to be edited and written back as one file. */
static out_tensor *fixture_tensors(rill_checkpoint *ck, int *n) {
  size_t len = 0;
  char *text = mb_read_file(DIR "/model.safetensors.index.json", &len);
  if (text == NULL) return NULL;
  char err[128];
  rill_json_doc *doc = rill_json_parse(text, len, err, sizeof err);
  free(text);
  if (doc == NULL) return NULL;
  const rill_json *map = rill_json_get(rill_json_root(doc), "weight_map");
  out_tensor *ts = calloc(map->length, sizeof *ts);
  int k = 0;
  for (const rill_json *m = map->first; m != NULL; m = m->next, k++) {
    const rill_tensor *t = rill_checkpoint_find(ck, m->key);
    snprintf(ts[k].name, sizeof ts[k].name, "%s", m->key);
    snprintf(ts[k].dtype, sizeof ts[k].dtype, "%s", t->dtype_name);
    ts[k].ndim = t->ndim;
    for (int d = 0; d < t->ndim; d++) ts[k].shape[d] = t->shape[d];
    ts[k].data = t->data;
    ts[k].nbytes = t->nbytes;
  }
  *n = k;
  rill_json_free(doc);
  return ts;
}

static out_tensor *find_out(out_tensor *ts, int n, const char *name) {
  for (int i = 0; i < n; i++) {
    if (strcmp(ts[i].name, name) == 0) return &ts[i];
  }
  return NULL;
}

static char tmp_root[256];

static void write_dir(const char *dir, const char *config, const out_tensor *ts, int n) {
  mkdir(dir, 0755);
  char path[600];
  snprintf(path, sizeof path, "%s/config.json", dir);
  FILE *f = fopen(path, "wb");
  if (f != NULL) {
    fputs(config, f);
    fclose(f);
  }
  snprintf(path, sizeof path, "%s/model.safetensors", dir);
  write_safetensors(path, ts, n);
}

static void check_bad_checkpoints(void) {
  char err[256];
  rill_checkpoint *ck = NULL;
  CHECK(rill_checkpoint_open(DIR, &ck, err, sizeof err) == RILL_OK);
  size_t len = 0;
  char *cfg = mb_read_file(DIR "/config.json", &len);
  CHECK(cfg != NULL);
  if (ck == NULL || cfg == NULL) {
    free(cfg);
    rill_checkpoint_close(ck);
    return;
  }
  int n = 0;
  out_tensor *ts = fixture_tensors(ck, &n);
  CHECK(ts != NULL && n > 20);
  if (ts == NULL) {
    free(cfg);
    rill_checkpoint_close(ck);
    return;
  }
  char dir[512];

  /* As fixture, rewritten as one file: loads. */
  snprintf(dir, sizeof dir, "%s/whole", tmp_root);
  write_dir(dir, cfg, ts, n);
  rill_options o = {0};
  o.num_blocks = 16;
  o.max_batch_tokens = 64;
  o.threads = 1;
  rill_engine *e = NULL;
  CHECK_MSG(rill_engine_create(dir, &o, &e) == RILL_OK, "rewritten fixture: %s", rill_global_error());
  rill_engine_destroy(e);

  /* Missing scales: dropped from the file. */
  out_tensor *scales = find_out(ts, n, "model.layers.1.mlp.experts.down_proj_scales");
  CHECK(scales != NULL);
  if (scales == NULL) goto done;
  out_tensor saved = *scales;
  *scales = ts[n - 1];
  snprintf(dir, sizeof dir, "%s/no-scales", tmp_root);
  write_dir(dir, cfg, ts, n - 1);
  expect_model_error(dir, "missing scales", "missing tensor", "model.layers.1.mlp.experts.down_proj_scales");
  *scales = saved;

  /* Scales one block short per row (the data too, so the file itself is consistent). */
  scales->shape[2] -= 1;
  scales->nbytes = (size_t)(scales->shape[0] * scales->shape[1] * scales->shape[2]);
  snprintf(dir, sizeof dir, "%s/short-scales", tmp_root);
  write_dir(dir, cfg, ts, n);
  expect_model_error(dir, "scales of the wrong length", "down_proj_scales has shape [6, 96, 2]", "expected [6, 96, 3]");
  *scales = saved;

  /* Blocks of 32 bytes (64 values) instead of 16. */
  out_tensor *blocks = find_out(ts, n, "model.layers.0.mlp.experts.gate_up_proj_blocks");
  CHECK(blocks != NULL);
  if (blocks == NULL) goto done;
  out_tensor bsaved = *blocks;
  blocks->shape[2] /= 3;
  blocks->shape[3] = 48;
  snprintf(dir, sizeof dir, "%s/block-shape", tmp_root);
  write_dir(dir, cfg, ts, n);
  expect_model_error(dir, "wrong block shape", "gate_up_proj_blocks has shape [6, 192, 1, 48]",
                     "expected [6, 192, 3, 16]");
  /* Blocks stored as BF16. */
  *blocks = bsaved;
  snprintf(blocks->dtype, sizeof blocks->dtype, "BF16");
  blocks->shape[3] = 8;
  snprintf(dir, sizeof dir, "%s/block-dtype", tmp_root);
  write_dir(dir, cfg, ts, n);
  expect_model_error(dir, "blocks not U8", "gate_up_proj_blocks has dtype BF16", "expected U8");
  *blocks = bsaved;

  /* A NaN scale (255). */
  uint8_t *nan_scales = malloc(saved.nbytes);
  memcpy(nan_scales, saved.data, saved.nbytes);
  nan_scales[100] = 255;
  scales->data = nan_scales;
  snprintf(dir, sizeof dir, "%s/nan-scale", tmp_root);
  write_dir(dir, cfg, ts, n);
  expect_model_error(dir, "NaN scale", "down_proj_scales: scale byte 255", "row 33, block 1");
  *scales = saved;
  free(nan_scales);

  /* Experts dequantised to BF16 (a conversion's layout): named, not MXFP4. */
  snprintf(blocks->name, sizeof blocks->name, "model.layers.0.mlp.experts.gate_up_proj");
  snprintf(blocks->dtype, sizeof blocks->dtype, "BF16");
  blocks->shape[3] = 8;
  snprintf(dir, sizeof dir, "%s/dense-experts", tmp_root);
  write_dir(dir, cfg, ts, n);
  expect_model_error(dir, "unquantized experts", "gate_up_proj holds the experts unquantized (BF16)", "MXFP4");
  *blocks = bsaved;

  /* Missing sinks. */
  out_tensor *sinks = find_out(ts, n, "model.layers.0.self_attn.sinks");
  CHECK(sinks != NULL);
  if (sinks == NULL) goto done;
  out_tensor ssaved = *sinks;
  *sinks = ts[n - 1];
  snprintf(dir, sizeof dir, "%s/no-sinks", tmp_root);
  write_dir(dir, cfg, ts, n - 1);
  expect_model_error(dir, "missing sinks", "missing tensor", "model.layers.0.self_attn.sinks");
  *sinks = ssaved;

  /* Config fields. */
  static const struct {
    const char *what, *from, *to, *needle;
  } edits[] = {
      {"quant method", "\"quant_method\": \"mxfp4\"", "\"quant_method\": \"fp8\"", "quant_method must be mxfp4"},
      {"layer_types length", "\"full_attention\"\n", "\"full_attention\", \"full_attention\"\n", "layer_types"},
      {"layer type name", "\"full_attention\"\n", "\"global\"\n", "layer_types entries"},
      {"more experts per token than experts", "\"num_local_experts\": 6", "\"num_local_experts\": 2",
       "num_experts_per_tok exceeds num_local_experts"},
      {"per-token counts disagree", "\"experts_per_token\": 3", "\"experts_per_token\": 2", "disagree"},
      {"hidden not whole blocks", "\"hidden_size\": 96", "\"hidden_size\": 100", "multiples of 32"},
      {"window missing", "\"sliding_window\": 20", "\"sliding_window\": null", "no sliding_window"},
      {"yarn betas", "\"beta_fast\": 32.0", "\"beta_fast\": 0.5", "beta_fast must exceed beta_slow"},
  };
  for (size_t i = 0; i < sizeof edits / sizeof edits[0]; i++) {
    char *c = replace(cfg, edits[i].from, edits[i].to);
    CHECK_MSG(c != NULL, "%s: '%s' not in the fixture's config", edits[i].what, edits[i].from);
    if (c == NULL) continue;
    snprintf(dir, sizeof dir, "%s/cfg-%zu", tmp_root, i);
    write_dir(dir, c, ts, n);
    free(c);
    expect_model_error(dir, edits[i].what, "config.json", edits[i].needle);
  }
done:
  free(ts);
  free(cfg);
  rill_checkpoint_close(ck);
}

/* ---- YaRN on the release's settings ---- */

/* The released gpt-oss-20b config.json, as far as the library reads it. */
static const char *release_config(const char *truncate) {
  static char text[2048];
  snprintf(text, sizeof text,
           "{\"architectures\": [\"GptOssForCausalLM\"], \"model_type\": \"gpt_oss\", \"vocab_size\": 201088, "
           "\"hidden_size\": 2880, \"intermediate_size\": 2880, \"num_hidden_layers\": 24, "
           "\"num_attention_heads\": 64, \"num_key_value_heads\": 8, \"head_dim\": 64, \"num_local_experts\": 32, "
           "\"num_experts_per_tok\": 4, \"experts_per_token\": 4, \"sliding_window\": 128, "
           "\"max_position_embeddings\": 131072, \"rms_norm_eps\": 1e-05, \"rope_theta\": 150000, "
           "\"rope_scaling\": {\"beta_fast\": 32.0, \"beta_slow\": 1.0, \"factor\": 32.0, "
           "\"original_max_position_embeddings\": 4096, \"rope_type\": \"yarn\"%s}, \"swiglu_limit\": 7.0, "
           "\"attention_bias\": true, \"hidden_act\": \"silu\", \"tie_word_embeddings\": false, "
           "\"quantization_config\": {\"quant_method\": \"mxfp4\"}}",
           truncate);
  return text;
}

static int read_release(const char *truncate, rill_model_config *c) {
  char dir[400], path[450], err[256];
  snprintf(dir, sizeof dir, "%s/release-%s", tmp_root, truncate[0] == '\0' ? "default" : "truncate");
  mkdir(dir, 0755);
  snprintf(path, sizeof path, "%s/config.json", dir);
  FILE *f = fopen(path, "wb");
  if (f == NULL) return 0;
  fputs(release_config(truncate), f);
  fclose(f);
  rill_status s = rill_model_config_read(dir, c, err, sizeof err);
  CHECK_MSG(s == RILL_OK, "release config: %s", err);
  return s == RILL_OK;
}

static void check_release_yarn(void) {
  rill_model_config c;
  if (!read_release(", \"truncate\": false", &c)) return;
  CHECK(c.rope_scaling == RILL_ROPE_YARN && !c.rope_truncate);
  CHECK_NEAR(c.rope_attn_factor, 0.1 * log(32.0) + 1.0, 1e-6); /* 1.3465736 */
  CHECK(c.sliding_window == 128 && c.layer_sliding[0] == 1 && c.layer_sliding[1] == 0 && c.layer_sliding[22] == 1);
  CHECK(c.num_experts == 32 && c.experts_per_tok == 4 && c.max_positions == 131072);
  /* The reference's inverse frequencies with the ramp from 8.092779 to 17.398025, unrounded. */
  static const double want[32] = {1,           0.689044,    0.474782,    0.327146,    0.225418,    0.155323,
                                  0.107024,    0.0737446,   0.0508133,   0.0317057,   0.019335,    0.011592,
                                  0.00679496,  0.00386036,  0.00209379,  0.0010526,   0.000456484, 0.000129319,
                                  3.83088e-05, 2.63965e-05, 1.81883e-05, 1.25326e-05, 8.6355e-06,  5.95024e-06,
                                  4.09998e-06, 2.82507e-06, 1.9466e-06,  1.34129e-06, 9.24209e-07, 6.36821e-07,
                                  4.38798e-07, 3.02351e-07};
  float inv[32];
  rill_rope_inv_freq(&c, inv);
  int bad = 0;
  for (int j = 0; j < 32; j++) {
    if (fabs(inv[j] - want[j]) > 1e-5 * want[j]) { /* the reference values carry 6 significant digits */
      bad++;
      fprintf(stderr, "inv_freq[%d] = %.7g, want %.6g\n", j, (double)inv[j], want[j]);
    }
  }
  CHECK_MSG(bad == 0, "%d of 32 YaRN frequencies off the release's", bad);
  /* Without "truncate" (transformers' default true) the bounds round out to 8 and 18: pair 9 then blends 1/10 of the
   * interpolated frequency instead of 0.098. */
  rill_model_config t;
  if (!read_release("", &t)) return;
  CHECK(t.rope_truncate);
  float inv_t[32];
  rill_rope_inv_freq(&t, inv_t);
  const double f9 = pow(150000.0, -18.0 / 64.0), ramp = (9.0 - 8.0) / (18.0 - 8.0);
  CHECK_NEAR(inv_t[9], f9 / 32.0 * ramp + f9 * (1.0 - ramp), 1e-6 * f9);
  CHECK(fabs(inv_t[9] - inv[9]) > 1e-4 * f9);
}

/* ---- the engine: batch invariance, chunks, prefix hits ---- */

/* The weights' dtype check_engine runs (NULL: as held); int8 also takes int8 activations into the experts. */
static const char *engine_dtype = NULL;

static rill_engine *open_engine(int threads) {
  rill_options o = {0};
  o.threads = threads;
  o.dtype = engine_dtype;
  o.block_size = 16;
  o.num_blocks = 64;
  o.max_batch_tokens = 256;
  rill_engine *e = NULL;
  rill_status s = rill_engine_create(DIR, &o, &e);
  CHECK_MSG(s == RILL_OK, "create: %s", rill_global_error());
  return e;
}

enum { V = 96, LEN = 53 };

/* Logits of tokens[0..n) of one sequence fed from position `first` with block table `table`. */
static int forward(rill_engine *e, const int32_t *toks, int n, int first, const int32_t *table, float *out) {
  model_batch mb;
  mb_init(&mb);
  mb_add(&mb, 1, toks, n, first, table, (first + n + 15) / 16, 1, 0);
  rill_step_batch b = mb_batch(&mb);
  rill_status s = rill_forward_logits(e, &b, out);
  CHECK_MSG(s == RILL_OK, "forward: %s", rill_last_error(e));
  return s == RILL_OK;
}

static void check_engine(void) {
  rill_engine *e = open_engine(2);
  if (e == NULL) return;
  int32_t prompt[LEN], other[LEN], third[LEN];
  for (int i = 0; i < LEN; i++) {
    prompt[i] = (int32_t)(next_u32() % V);
    other[i] = (int32_t)(next_u32() % V);
    third[i] = (int32_t)(next_u32() % V);
  }
  static const int32_t table_a[4] = {0, 1, 2, 3}, table_b[4] = {9, 4, 12, 7}, table_c[4] = {20, 21, 22, 23};
  static float one[LEN * V], got[LEN * V], batch[3 * LEN * V];
  if (!forward(e, prompt, LEN, 0, table_a, one)) goto out;

  /* Batched with two others whose tokens share its experts; the whole batch in one step. */
  model_batch mb;
  mb_init(&mb);
  mb_add(&mb, 2, other, 31, 0, table_c, 2, 1, 0);
  mb_add(&mb, 1, prompt, LEN, 0, table_b, 4, 1, 0);
  mb_add(&mb, 3, third, 17, 0, table_c + 2, 2, 1, 0);
  rill_step_batch b = mb_batch(&mb);
  CHECK(rill_forward_logits(e, &b, batch) == RILL_OK);
  CHECK_MSG(memcmp(batch + (size_t)31 * V, one, sizeof(float) * LEN * V) == 0, "batched logits differ from alone");

  /* Chunks of 5, 13 and the rest, through scattered blocks: the window (20) and the blocks (16) never align. */
  int p = 0;
  static const int chunks[] = {5, 13, 3, 16, 16};
  for (size_t k = 0; k < sizeof chunks / sizeof chunks[0] && p < LEN; k++) {
    int m = LEN - p < chunks[k] ? LEN - p : chunks[k];
    if (!forward(e, prompt + p, m, p, table_b, got + (size_t)p * V)) goto out;
    p += m;
  }
  CHECK_MSG(p == LEN && memcmp(got, one, sizeof got) == 0, "chunked prefill differs from one-shot");

  /* Token by token (decode steps). */
  for (int t = 0; t < LEN; t++) {
    if (!forward(e, prompt + t, 1, t, table_c, got + (size_t)t * V)) goto out;
  }
  CHECK_MSG(memcmp(got, one, sizeof got) == 0, "token-by-token decode differs from one-shot");

  /* A prefix hit: a second sequence whose first 32 tokens are the prompt's reuses blocks 0 and 1 of table_a (written
   * by the first forward) and feeds only the rest into its own blocks. */
  int32_t table_d[4] = {0, 1, 30, 31};
  if (!forward(e, prompt, LEN, 0, table_a, got)) goto out;
  if (!forward(e, prompt + 32, LEN - 32, 32, table_d, got)) goto out;
  CHECK_MSG(memcmp(got, one + (size_t)32 * V, sizeof(float) * (LEN - 32) * V) == 0, "prefix hit differs");

  /* One thread: the same bits. */
  rill_engine *e1 = open_engine(1);
  if (e1 != NULL && forward(e1, prompt, LEN, 0, table_a, got)) {
    CHECK_MSG(memcmp(got, one, sizeof got) == 0, "1 thread differs from 2");
  }
  rill_engine_destroy(e1);

out:
  rill_engine_destroy(e);
}

/* ---- the sliding layers' pool ---- */

static rill_engine *open_bounded(int in_main, int32_t sliding_blocks) {
  rill_options o = {0};
  o.threads = 2;
  o.block_size = 16;
  o.num_blocks = 64;
  o.max_batch_tokens = 256;
  o.num_sliding_blocks = sliding_blocks;
  o.sliding_kv_in_main = in_main;
  rill_engine *e = NULL;
  rill_status s = rill_engine_create(DIR, &o, &e);
  CHECK_MSG(s == RILL_OK, "create: %s", rill_global_error());
  return e;
}

/* Sliding table of a ring of 3 slots from `base` for a sequence whose fed tokens start at p0 and end before ctx:
 * blocks out of every fed token's window are -1. */
static void ring_table(int32_t *row, int base, int p0, int ctx) {
  const int from = p0 - 20 + 1 > 0 ? (p0 - 20 + 1) / 16 : 0;
  for (int j = 0; j < MB_STRIDE; j++) row[j] = j >= from && j * 16 < ctx ? base + j % 3 : -1;
}

/* Logits of one sequence's tokens[0..n) fed from `first` with main table `table` and sliding row `srow`. */
static rill_status forward2(rill_engine *e, const int32_t *toks, int n, int first, const int32_t *table,
                            const int32_t *srow, float *out) {
  model_batch mb;
  mb_init(&mb);
  mb_add(&mb, 1, toks, n, first, table, (first + n + 15) / 16, 1, 0);
  rill_step_batch b = mb_batch(&mb);
  b.sliding_block_tables = srow;
  return rill_forward_logits(e, &b, out);
}

static void expect_table_error(rill_engine *e, const int32_t *toks, int n, int first, const int32_t *table,
                               const int32_t *srow, const char *what, const char *want) {
  static float sink[LEN * V];
  rill_status s = forward2(e, toks, n, first, table, srow, sink);
  const char *msg = rill_last_error(e);
  CHECK_MSG(s == RILL_ERR_INVALID_ARGUMENT && strstr(msg, want) != NULL && strchr(msg, '\n') == NULL,
            "%s: status %d, message \"%s\" (want \"%s\")", what, s, msg, want);
  printf("%s -> %s\n", what, msg);
}

static void check_bounded_kv(void) {
  rill_engine *whole = open_bounded(1, 0), *ring = open_bounded(0, 9);
  if (whole == NULL || ring == NULL) goto out;
  rill_info wi, ri;
  CHECK(rill_engine_info(whole, &wi) == RILL_OK && rill_engine_info(ring, &ri) == RILL_OK);
  CHECK_MSG(wi.sliding_window == 0 && wi.num_sliding_blocks == 0 && wi.sliding_kv_bytes == 0,
            "sliding layers kept in the main pool report no second pool");
  CHECK_MSG(ri.sliding_window == 20 && ri.num_sliding_blocks == 9 && ri.num_blocks == 64,
            "second pool: window %d, %d blocks", ri.sliding_window, ri.num_sliding_blocks);
  /* One of the fixture's two layers slides: the main pool holds half the bytes per block, the ring 9 blocks of it. */
  CHECK_MSG(ri.kv_bytes - ri.sliding_kv_bytes == wi.kv_bytes / 2 && ri.sliding_kv_bytes * 64 == wi.kv_bytes / 2 * 9,
            "pool bytes: whole %lld, split %lld + %lld", (long long)wi.kv_bytes,
            (long long)(ri.kv_bytes - ri.sliding_kv_bytes), (long long)ri.sliding_kv_bytes);

  int32_t prompt[LEN], other[LEN];
  for (int i = 0; i < LEN; i++) {
    prompt[i] = (int32_t)(next_u32() % V);
    other[i] = (int32_t)(next_u32() % V);
  }
  static const int32_t table_a[4] = {0, 1, 2, 3}, table_b[4] = {9, 4, 12, 7};
  static float want[LEN * V], want_o[LEN * V], got[LEN * V], batch[2 * LEN * V];
  static int32_t srow[MB_MAX_SEQS * MB_STRIDE];
  if (!forward(whole, prompt, LEN, 0, table_a, want) || !forward(whole, other, LEN, 0, table_b, want_o)) goto out;

  /* One-shot: every block is in the first token's window. */
  ring_table(srow, 0, 0, LEN);
  for (int j = 0; j < 4; j++) srow[j] = j;
  CHECK(forward2(ring, prompt, LEN, 0, table_a, srow, got) == RILL_OK);
  CHECK_MSG(memcmp(got, want, sizeof got) == 0, "bounded pool one-shot differs from the whole pool");

  /* Token by token through a ring of 3 slots: block j + 3 overwrites block j once it left every window. */
  for (int t = 0; t < LEN; t++) {
    ring_table(srow, 3, t, t + 1);
    if (forward2(ring, prompt + t, 1, t, table_b, srow, got + (size_t)t * V) != RILL_OK) {
      CHECK_MSG(0, "decode %d: %s", t, rill_last_error(ring));
      goto out;
    }
  }
  CHECK_MSG(memcmp(got, want, sizeof got) == 0, "ring decode differs from the whole pool");

  /* Chunked prefill across window and block boundaries, in the ring at slots 6..8. */
  static const int chunks[] = {5, 13, 3, 16, 16};
  int p = 0;
  for (size_t k = 0; k < sizeof chunks / sizeof chunks[0] && p < LEN; k++) {
    int m = LEN - p < chunks[k] ? LEN - p : chunks[k];
    ring_table(srow, 6, p, p + m);
    if (forward2(ring, prompt + p, m, p, table_a, srow, got + (size_t)p * V) != RILL_OK) {
      CHECK_MSG(0, "chunk at %d: %s", p, rill_last_error(ring));
      goto out;
    }
    p += m;
  }
  CHECK_MSG(memcmp(got, want, sizeof got) == 0, "ring chunked prefill differs from the whole pool");

  /* Prefix hits: the prompt one-shot into slots 0..3, then a second sequence sharing 32 tokens reuses sliding blocks
   * 0 and 1 (its first fed position 32 sees back to 13) and writes its own at 4, 5. */
  for (int j = 0; j < MB_STRIDE; j++) srow[j] = j < 4 ? j : -1;
  CHECK(forward2(ring, prompt, LEN, 0, table_a, srow, got) == RILL_OK);
  const int32_t table_d[4] = {0, 1, 30, 31};
  for (int j = 0; j < MB_STRIDE; j++) srow[j] = -1;
  srow[0] = 0, srow[1] = 1, srow[2] = 4, srow[3] = 5;
  CHECK(forward2(ring, prompt + 32, LEN - 32, 32, table_d, srow, got) == RILL_OK);
  CHECK_MSG(memcmp(got, want + (size_t)32 * V, sizeof(float) * (LEN - 32) * V) == 0, "prefix hit of 32 differs");
  /* A hit of 48: position 48 sees back to 29, so block 0 is not needed and given as -1. */
  const int32_t table_e[4] = {0, 1, 2, 33};
  srow[0] = -1, srow[1] = 1, srow[2] = 2, srow[3] = 8;
  CHECK(forward2(ring, prompt + 48, LEN - 48, 48, table_e, srow, got) == RILL_OK);
  CHECK_MSG(memcmp(got, want + (size_t)48 * V, sizeof(float) * (LEN - 48) * V) == 0, "prefix hit of 48 differs");

  /* Preemption: the sequence is recomputed from scratch into other blocks, in chunks of 21 and 32. */
  static const int32_t table_f[4] = {40, 41, 42, 43};
  ring_table(srow, 5, 0, 21);
  srow[0] = 5, srow[1] = 6;
  CHECK(forward2(ring, prompt, 21, 0, table_f, srow, got) == RILL_OK);
  ring_table(srow, 5, 21, LEN);
  srow[0] = 5, srow[1] = 6, srow[2] = 7, srow[3] = 8;
  CHECK(forward2(ring, prompt + 21, LEN - 21, 21, table_f, srow, got + (size_t)21 * V) == RILL_OK);
  CHECK_MSG(memcmp(got, want, sizeof got) == 0, "recompute after preemption differs");

  /* Batched: two sequences decoding their last token, each with its own ring, as alone. */
  model_batch mb;
  mb_init(&mb);
  mb_add(&mb, 1, prompt, LEN, 0, table_a, 4, 1, 0);
  mb_add(&mb, 2, other, LEN, 0, table_b, 4, 1, 0);
  rill_step_batch b = mb_batch(&mb);
  for (int j = 0; j < 2 * MB_STRIDE; j++) srow[j] = -1;
  for (int j = 0; j < 4; j++) srow[j] = j, srow[MB_STRIDE + j] = 8 - j; /* slots 8, 7, 6, 5 */
  b.sliding_block_tables = srow;
  CHECK(rill_forward_logits(ring, &b, batch) == RILL_OK);
  CHECK_MSG(memcmp(batch, want, sizeof want) == 0 && memcmp(batch + (size_t)LEN * V, want_o, sizeof want_o) == 0,
            "batched in the bounded pool differs from alone in the whole pool");

  /* Bad second tables: one-line errors naming the field. */
  ring_table(srow, 0, 40, 41);
  expect_table_error(ring, prompt + 40, 1, 40, table_a, NULL, "no sliding table", "sliding_block_tables: NULL");
  srow[2] = 9;
  expect_table_error(ring, prompt + 40, 1, 40, table_a, srow, "sliding block out of range",
                     "sliding_block_tables[0][2] = 9 is outside the sliding pool 0..8");
  ring_table(srow, 0, 40, 41);
  srow[1] = -1; /* position 40 sees back to 21, in block 1 */
  expect_table_error(ring, prompt + 40, 1, 40, table_a, srow, "needed block missing",
                     "sliding_block_tables[0][1] = -1 is outside the sliding pool");
  ring_table(srow, 0, 40, 41);
  srow[0] = -7; /* out of the window: never read */
  CHECK_MSG(forward2(ring, prompt + 40, 1, 40, table_a, srow, got) == RILL_OK, "an entry before the window is read");
  /* The sliding layer reads the second table: block 1 of another sequence's content in the window changes logits. */
  ring_table(srow, 0, 40, 41);
  for (int j = 0; j < 4; j++) srow[j] = j;
  CHECK(forward2(ring, prompt, LEN, 0, table_a, srow, got) == RILL_OK);
  srow[1] = 7; /* slot 7 holds the other sequence's block 1 (batched step above) */
  CHECK(forward2(ring, prompt + 40, 1, 40, table_a, srow, got) == RILL_OK);
  CHECK_MSG(memcmp(got, want + (size_t)40 * V, sizeof(float) * V) != 0, "the sliding table is not what is read");
  /* A model without a second pool ignores the table. */
  CHECK(forward2(whole, prompt + 40, 1, 40, table_a, NULL, got) == RILL_OK);
  CHECK_MSG(memcmp(got, want + (size_t)40 * V, sizeof(float) * V) == 0, "whole pool without a sliding table");
out:
  rill_engine_destroy(whole);
  rill_engine_destroy(ring);
}

int main(void) {
  const rill_kernels *sets[3] = {rill_kernels_select("portable"), rill_kernels_select("avx2"),
                                 rill_kernels_select(NULL)};
  check_e8m0();
  for (int s = 0; s < 3; s++) {
    if (s > 0 && sets[s] == sets[s - 1]) continue;
    check_decode(sets[s]);
    static const int shapes[][3] = {{1, 1, 1},  {7, 3, 1},  {13, 2, 9}, {5, 90, 2},
                                    {33, 5, 8}, {16, 4, 17}, {3, 7, 4},  {6, 19, 3}, {5, 33, 5}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
      check_kernel(sets[s], sets[0], shapes[i][0], shapes[i][1], shapes[i][2]);
    }
    for (int g16 = 0; g16 < 2; g16++) {
      if (g16 && sets[s]->gemm_mxfp4_q8_g16 == NULL) continue;
      for (size_t i = 0; i < Q8_SHAPES; i++) {
        check_kernel_q8(sets[s], g16, q8_shapes[i][0], q8_shapes[i][1], q8_shapes[i][2]);
      }
      check_decode_q8(sets[s], g16);
    }
  }
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  if (strcmp(sets[2]->isa, "avx512vnni") == 0) check_q8_instances();
#endif
  snprintf(tmp_root, sizeof tmp_root, "/tmp/rill-gptoss-XXXXXX");
  if (mkdtemp(tmp_root) == NULL) {
    CHECK_MSG(0, "mkdtemp failed");
    return check_summary();
  }
  check_bad_checkpoints();
  check_release_yarn();
  check_engine();
  engine_dtype = "int8";
  check_engine();
  engine_dtype = NULL;
  check_bounded_kv();
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf %s", tmp_root);
  CHECK(system(cmd) == 0);
  return check_summary();
}
