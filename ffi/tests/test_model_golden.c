#define _POSIX_C_SOURCE 200809L

/*
 * The bundled models (models/rill-tiny-*) against their golden logits (torch, fp32), each case run as one prefill, on
 * every kernel set this processor has: fp32 weights within 1e-4 absolute on every stored row; bf16 and int8 weights
 * on the first model within 1e-2 and 3e-2 of the largest |golden logit| (the bounds of the lower precisions).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "check.h"
#include "json.h"
#include "rill.h"
#include "test_model_batch.h"

static const char *const MODELS[] = {"models/rill-tiny-harmony", "models/rill-tiny-chatml"};

static double golden_error(const char *dir, const char *isa, const char *dtype, int threads, double *ref_max) {
  char path[256];
  snprintf(path, sizeof path, "%s/golden/logits.json", dir);
  size_t len = 0;
  char *text = mb_read_file(path, &len);
  CHECK_MSG(text != NULL, "read %s", path);
  if (text == NULL) return INFINITY;
  char err[256];
  rill_json_doc *doc = rill_json_parse(text, len, err, sizeof err);
  free(text);
  CHECK_MSG(doc != NULL, "parse %s: %s", path, err);
  if (doc == NULL) return INFINITY;
  const rill_json *cases = rill_json_get(rill_json_root(doc), "cases");
  CHECK(cases != NULL && cases->length > 0);

  setenv("RILL_CPU_ISA", isa, 1);
  rill_options o = {0};
  o.threads = threads;
  o.dtype = dtype;
  o.num_blocks = 128;
  o.max_batch_tokens = 1024;
  rill_engine *e = NULL;
  rill_status s = rill_engine_create(dir, &o, &e);
  CHECK_MSG(s == RILL_OK, "create %s: %s", dir, rill_global_error());
  if (s != RILL_OK) {
    rill_json_free(doc);
    return INFINITY;
  }
  rill_info info;
  rill_engine_info(e, &info);
  CHECK_EQ_INT(info.vocab_size, 1024);
  const int V = info.vocab_size;
  double worst = 0.0;
  int32_t table[MB_STRIDE];
  for (int j = 0; j < MB_STRIDE; j++) table[j] = j;
  for (const rill_json *c = cases != NULL ? cases->first : NULL; c != NULL; c = c->next) {
    const rill_json *ids = rill_json_get(c, "input_ids"), *pos = rill_json_get(c, "positions");
    const rill_json *logits = rill_json_get(c, "logits");
    int32_t n = (int32_t)ids->length;
    int32_t *toks = malloc((size_t)n * sizeof *toks);
    int k = 0;
    for (const rill_json *v = ids->first; v != NULL; v = v->next) toks[k++] = (int32_t)v->integer;
    model_batch *mb = malloc(sizeof *mb);
    mb_init(mb);
    mb_add(mb, 1, toks, n, 0, table, (n + info.block_size - 1) / info.block_size, 1, 0);
    rill_step_batch b = mb_batch(mb);
    float *out = malloc((size_t)n * (size_t)V * sizeof(float));
    s = rill_forward_logits(e, &b, out);
    CHECK_MSG(s == RILL_OK, "forward %s: %s", dir, rill_last_error(e));
    const rill_json *p = pos->first, *row = logits->first;
    for (; s == RILL_OK && p != NULL && row != NULL; p = p->next, row = row->next) {
      CHECK_EQ_INT(row->length, V);
      int v = 0;
      for (const rill_json *x = row->first; x != NULL && v < V; x = x->next, v++) {
        double d = fabs((double)out[(size_t)p->integer * (size_t)V + (size_t)v] - x->number);
        if (fabs(x->number) > *ref_max) *ref_max = fabs(x->number);
        if (d > worst) worst = d;
      }
    }
    free(out);
    free(mb);
    free(toks);
  }
  rill_engine_destroy(e);
  rill_json_free(doc);
  return worst;
}

int main(void) {
  static const char *const isas[] = {"avx512bf16", "avx512", "avx2", "portable"};
  for (size_t m = 0; m < sizeof MODELS / sizeof MODELS[0]; m++) {
    for (size_t i = 0; i < sizeof isas / sizeof isas[0]; i++) {
      double ref_max = 0.0;
      double err = golden_error(MODELS[m], isas[i], "fp32", 2, &ref_max);
      printf("%s (%s, fp32): max |native - golden| = %.3g\n", MODELS[m], isas[i], err);
      CHECK_MSG(err < 1e-4, "%s (%s): max |diff| %g", MODELS[m], isas[i], err);
      static const char *const low[] = {"bf16", "int8"};
      static const double bound[] = {1e-2, 3e-2};
      /* One model is enough to exercise the lower-precision kernels (this test also runs under ASan). */
      for (int k = 0; k < 2 && m == 0; k++) {
        double rel = golden_error(MODELS[m], isas[i], low[k], 2, &ref_max) / ref_max;
        printf("%s (%s, %s): max |native - golden| / max |golden| = %.3g\n", MODELS[m], isas[i], low[k], rel);
        CHECK_MSG(rel <= bound[k], "%s (%s, %s): %g over %g", MODELS[m], isas[i], low[k], rel, bound[k]);
      }
    }
  }
  return check_summary();
}
