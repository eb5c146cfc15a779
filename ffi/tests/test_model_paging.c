/*
 * The forward pass over the paged KV pool against one-shot prefills: scattered block ids across block boundaries,
 * chunked prefill, decode, rollback of rejected drafts, prefix blocks shared between sequences, batch invariance,
 * bf16 KV; and rill_step's greedy tokens and draft acceptance against the logits. "Identical" means bitwise: every
 * row's arithmetic is independent of how the batch is cut.
 */
#define _POSIX_C_SOURCE 200809L

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "rill.h"
#include "test_model_batch.h"

#define MODEL "models/rill-tiny-harmony"
#define V 1024
#define BS 4

static rill_engine *open_engine_threads(const char *kv_dtype, const char *dtype, int threads) {
  rill_options o = {0};
  o.threads = threads;
  o.block_size = BS;
  o.num_blocks = 256;
  o.max_batch_tokens = 512;
  o.max_seqs = 16;
  o.max_drafts = 4;
  o.kv_dtype = kv_dtype;
  o.dtype = dtype;
  rill_engine *e = NULL;
  rill_status s = rill_engine_create(MODEL, &o, &e);
  CHECK_MSG(s == RILL_OK, "create: %s", rill_global_error());
  return e;
}

static rill_engine *open_engine(const char *kv_dtype, const char *dtype) { return open_engine_threads(kv_dtype, dtype, 2); }

static void make_tokens(int32_t *t, int n, uint32_t seed) {
  for (int i = 0; i < n; i++) {
    seed = seed * 1664525u + 1013904223u;
    t[i] = (int32_t)((seed >> 8) % 1000u);
  }
}

static double max_diff(const float *a, const float *b, size_t n) {
  double m = 0.0;
  for (size_t i = 0; i < n; i++) m = fmax(m, fabs((double)a[i] - (double)b[i]));
  return m;
}

/* Logits of every position of tokens[0..n) as one prefill in blocks 200.. (contiguous). */
static float *reference(rill_engine *e, const int32_t *tokens, int n) {
  int32_t table[MB_STRIDE];
  for (int j = 0; j < MB_STRIDE; j++) table[j] = 200 + j % 56;
  model_batch mb;
  mb_init(&mb);
  mb_add(&mb, 999, tokens, n, 0, table, (n + BS - 1) / BS, 1, 0);
  rill_step_batch b = mb_batch(&mb);
  float *out = malloc((size_t)n * V * sizeof(float));
  rill_status s = rill_forward_logits(e, &b, out);
  CHECK_MSG(s == RILL_OK, "reference: %s", rill_last_error(e));
  return out;
}

static const int32_t SCATTERED[] = {37, 5, 22, 11, 60, 2, 49, 17, 30, 8, 71, 90, 13, 44, 66, 3};

/* Chunked prefill through scattered blocks, then decode steps, against the one-shot reference. */
static void test_chunks(rill_engine *e, const char *label, double tol) {
  enum { N = 45 };
  int32_t toks[N];
  make_tokens(toks, N, 7);
  float *ref = reference(e, toks, N);
  const int chunks[] = {7, 1, 13, 4, 15, 1, 1, 1, 1, 1};
  int pos = 0;
  float *out = malloc((size_t)N * V * sizeof(float));
  for (size_t c = 0; c < sizeof chunks / sizeof chunks[0]; c++) {
    model_batch mb;
    mb_init(&mb);
    mb_add(&mb, 1, toks + pos, chunks[c], pos, SCATTERED, (pos + chunks[c] + BS - 1) / BS, 1, 0);
    rill_step_batch b = mb_batch(&mb);
    rill_status s = rill_forward_logits(e, &b, out);
    CHECK_MSG(s == RILL_OK, "chunk %zu: %s", c, rill_last_error(e));
    double d = max_diff(out, ref + (size_t)pos * V, (size_t)chunks[c] * V);
    CHECK_MSG(d <= tol, "%s: chunk %zu at %d: max diff %g", label, c, pos, d);
    pos += chunks[c];
  }
  CHECK_EQ_INT(pos, N);
  free(out);
  free(ref);
}

/* Rejected drafts: feed 4 tokens of which only the first 2 are kept, then continue from there. */
static void test_rollback(rill_engine *e) {
  enum { N = 20 };
  int32_t toks[N], wrong[4];
  make_tokens(toks, N, 11);
  make_tokens(wrong, 4, 12);
  float *ref = reference(e, toks, N);
  float *out = malloc((size_t)N * V * sizeof(float));
  model_batch mb;
  mb_init(&mb);
  mb_add(&mb, 1, toks, 10, 0, SCATTERED, 3, 1, 0);
  rill_step_batch b = mb_batch(&mb);
  CHECK(rill_forward_logits(e, &b, out) == RILL_OK);
  /* Positions 10..13: two right tokens then two wrong ones. */
  int32_t feed[4] = {toks[10], toks[11], wrong[2], wrong[3]};
  mb_init(&mb);
  mb_add(&mb, 1, feed, 4, 10, SCATTERED, 4, 1, 3);
  b = mb_batch(&mb);
  CHECK(rill_forward_logits(e, &b, out) == RILL_OK);
  CHECK(max_diff(out, ref + (size_t)10 * V, 2 * V) == 0.0);
  /* The engine keeps 12 tokens; positions 12.. are fed again and overwrite the rejected slots. */
  mb_init(&mb);
  mb_add(&mb, 1, toks + 12, 8, 12, SCATTERED, 5, 1, 0);
  b = mb_batch(&mb);
  CHECK(rill_forward_logits(e, &b, out) == RILL_OK);
  double d = max_diff(out, ref + (size_t)12 * V, 8 * V);
  CHECK_MSG(d == 0.0, "after rollback: max diff %g", d);
  free(out);
  free(ref);
}

/* Two sequences share their first 4 blocks (16 tokens); B lists A's blocks and writes only its own. */
static void test_prefix(rill_engine *e) {
  enum { NA = 26, NB = 30, SHARED = 16 };
  int32_t a[NA], bt[NB];
  make_tokens(a, NA, 21);
  memcpy(bt, a, SHARED * sizeof(int32_t));
  make_tokens(bt + SHARED, NB - SHARED, 22);
  float *ref_a = reference(e, a, NA), *ref_b = reference(e, bt, NB);
  const int32_t table_a[] = {100, 101, 102, 103, 104, 105, 106};
  const int32_t table_b[] = {100, 101, 102, 103, 110, 111, 112, 113};
  float *out = malloc((size_t)(NA + NB) * V * sizeof(float));
  model_batch mb;
  mb_init(&mb);
  mb_add(&mb, 1, a, 20, 0, table_a, 5, 1, 0);
  rill_step_batch b = mb_batch(&mb);
  CHECK(rill_forward_logits(e, &b, out) == RILL_OK);
  /* B joins with only its unshared tokens while A decodes, in one batch. */
  mb_init(&mb);
  mb_add(&mb, 1, a + 20, 1, 20, table_a, 6, 1, 0);
  mb_add(&mb, 2, bt + SHARED, NB - SHARED, SHARED, table_b, 8, 1, 0);
  b = mb_batch(&mb);
  CHECK(rill_forward_logits(e, &b, out) == RILL_OK);
  CHECK_MSG(max_diff(out, ref_a + (size_t)20 * V, V) == 0.0, "A beside B");
  double d = max_diff(out + V, ref_b + (size_t)SHARED * V, (size_t)(NB - SHARED) * V);
  CHECK_MSG(d == 0.0, "B on shared prefix: max diff %g", d);
  /* A carries on after B wrote: the shared blocks are unchanged. */
  mb_init(&mb);
  mb_add(&mb, 1, a + 21, NA - 21, 21, table_a, 7, 1, 0);
  b = mb_batch(&mb);
  CHECK(rill_forward_logits(e, &b, out) == RILL_OK);
  d = max_diff(out, ref_a + (size_t)21 * V, (size_t)(NA - 21) * V);
  CHECK_MSG(d == 0.0, "A after B: max diff %g", d);
  free(out);
  free(ref_a);
  free(ref_b);
}

/* A sequence's logits alone and in mixed batches (other sequences before and after, prefill and decode) agree. */
static void test_batch_invariance(rill_engine *e) {
  enum { N = 13 };
  int32_t x[N], o1[40], o2[9];
  make_tokens(x, N, 31);
  make_tokens(o1, 40, 32);
  make_tokens(o2, 9, 33);
  const int32_t tx[] = {1, 2, 3, 4}, t1[] = {10, 11, 12, 13, 14, 15, 16, 17, 18, 19}, t2[] = {30, 31, 32};
  float *alone = malloc((size_t)N * V * sizeof(float)), *mixed = malloc((size_t)(N + 49) * V * sizeof(float));
  model_batch mb;
  mb_init(&mb);
  mb_add(&mb, 1, x, N, 0, tx, 4, 1, 0);
  rill_step_batch b = mb_batch(&mb);
  CHECK(rill_forward_logits(e, &b, alone) == RILL_OK);
  mb_init(&mb);
  mb_add(&mb, 2, o1, 40, 0, t1, 10, 1, 0);
  mb_add(&mb, 1, x, N, 0, tx, 4, 1, 0);
  mb_add(&mb, 3, o2, 9, 0, t2, 3, 1, 0);
  b = mb_batch(&mb);
  CHECK(rill_forward_logits(e, &b, mixed) == RILL_OK);
  double d = max_diff(alone, mixed + (size_t)40 * V, (size_t)N * V);
  CHECK_MSG(d == 0.0, "batch invariance (prefill): max diff %g", d);
  /* One decode token of x beside a long prefill. */
  int32_t next = 5;
  mb_init(&mb);
  mb_add(&mb, 1, &next, 1, N, tx, 4, 1, 0);
  b = mb_batch(&mb);
  CHECK(rill_forward_logits(e, &b, alone) == RILL_OK);
  mb_init(&mb);
  mb_add(&mb, 2, o1, 40, 0, t1, 10, 1, 0);
  mb_add(&mb, 1, &next, 1, N, tx, 4, 1, 0);
  b = mb_batch(&mb);
  CHECK(rill_forward_logits(e, &b, mixed) == RILL_OK);
  d = max_diff(alone, mixed + (size_t)40 * V, V);
  CHECK_MSG(d == 0.0, "batch invariance (decode): max diff %g", d);
  free(alone);
  free(mixed);
}

static int argmax(const float *row) {
  int best = 0;
  for (int v = 1; v < V; v++) {
    if (row[v] > row[best]) best = v;
  }
  return best;
}

/* rill_step: greedy tokens are the logits' argmax; drafts equal to the greedy continuation are all accepted. */
static void test_step(rill_engine *e) {
  enum { N = 17, K1 = 5, L = 20 };
  int32_t toks[N + 8];
  make_tokens(toks, N, 41);
  const int32_t table[] = {50, 51, 52, 53, 54, 55, 56};
  int32_t counts[4], out_toks[4 * K1], top_ids[4 * K1 * L];
  float logprobs[4 * K1], top_lp[4 * K1 * L];
  rill_step_result r = {counts, out_toks, logprobs, top_ids, top_lp, NULL, NULL};
  /* Greedy continuation from the logits. */
  float *ref = reference(e, toks, N);
  int32_t greedy[6];
  int len = N;
  greedy[0] = argmax(ref + (size_t)(N - 1) * V);
  free(ref);
  for (int g = 1; g < 6; g++) {
    toks[len++] = greedy[g - 1];
    ref = reference(e, toks, len);
    greedy[g] = argmax(ref + (size_t)(len - 1) * V);
    free(ref);
  }
  /* Prefill in two chunks: the first is not sampled. */
  model_batch mb;
  mb_init(&mb);
  mb_add(&mb, 1, toks, 9, 0, table, 3, 0, 0);
  rill_step_batch b = mb_batch(&mb);
  counts[0] = -1;
  CHECK_MSG(rill_step(e, &b, &r) == RILL_OK, "step: %s", rill_last_error(e));
  CHECK_EQ_INT(counts[0], 0);
  mb_init(&mb);
  mb_add(&mb, 1, toks + 9, N - 9, 9, table, 5, 1, 0);
  b = mb_batch(&mb);
  CHECK_MSG(rill_step(e, &b, &r) == RILL_OK, "step: %s", rill_last_error(e));
  CHECK_EQ_INT(counts[0], 1);
  CHECK_EQ_INT(out_toks[0], greedy[0]);
  /* Feed greedy[0] plus 4 drafts: greedy[1..3] right, then a wrong one: accepts 3 drafts + the target's token. */
  int32_t feed[5] = {greedy[0], greedy[1], greedy[2], greedy[3], (greedy[4] + 1) % V};
  mb_init(&mb);
  mb_add(&mb, 1, feed, 5, N, table, 6, 1, 4);
  b = mb_batch(&mb);
  CHECK_MSG(rill_step(e, &b, &r) == RILL_OK, "step: %s", rill_last_error(e));
  CHECK_EQ_INT(counts[0], 4);
  for (int i = 0; i < 4; i++) CHECK_EQ_INT(out_toks[i], greedy[i + 1]);
  /* Bad batches are refused without touching anything. */
  int32_t bad = V;
  mb_init(&mb);
  mb_add(&mb, 1, &bad, 1, N, table, 6, 1, 0);
  b = mb_batch(&mb);
  CHECK(rill_step(e, &b, &r) == RILL_ERR_INVALID_ARGUMENT);
  CHECK(strlen(rill_last_error(e)) > 0);
  const int32_t bad_table[] = {50, 51, 52, 53, 54, 256};
  mb_init(&mb);
  mb_add(&mb, 1, feed, 1, 20, bad_table, 6, 1, 0);
  b = mb_batch(&mb);
  CHECK(rill_step(e, &b, &r) == RILL_ERR_INVALID_ARGUMENT);
  CHECK(rill_forward_logits(e, &b, (float[V]){0}) == RILL_ERR_INVALID_ARGUMENT);
  CHECK(rill_step(e, NULL, &r) == RILL_ERR_INVALID_ARGUMENT);
  CHECK(rill_step(e, &b, NULL) == RILL_ERR_INVALID_ARGUMENT);
  CHECK(rill_release(e, 1) == RILL_OK);
}

/* Weights and KV at lower precision stay near fp32 (bounds stated here, measured on the bundled model). */
static void test_precisions(rill_engine *e32) {
  enum { N = 40 };
  int32_t toks[N];
  make_tokens(toks, N, 51);
  float *ref = reference(e32, toks, N);
  double ref_max = 0.0;
  for (size_t i = 0; i < (size_t)N * V; i++) ref_max = fmax(ref_max, fabs((double)ref[i]));
  static const struct {
    const char *dtype, *kv;
    double bound; /* max |diff| / max |logit| */
  } cases[] = {{"bf16", NULL, 1e-2}, {"int8", NULL, 3e-2}, {NULL, "bf16", 5e-3}, {"int8", "bf16", 3e-2}};
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    rill_engine *e = open_engine(cases[c].kv, cases[c].dtype);
    if (e == NULL) continue;
    float *got = reference(e, toks, N);
    int agree = 0;
    for (int t = 0; t < N; t++) agree += argmax(got + (size_t)t * V) == argmax(ref + (size_t)t * V);
    double rel = max_diff(got, ref, (size_t)N * V) / ref_max;
    printf("weights %s, kv %s: max |diff| / max |logit| = %.3g, argmax agreement %d/%d\n",
           cases[c].dtype ? cases[c].dtype : "fp32", cases[c].kv ? cases[c].kv : "fp32", rel, agree, N);
    CHECK_MSG(rel <= cases[c].bound, "%s/%s: %g over %g", cases[c].dtype, cases[c].kv, rel, cases[c].bound);
    CHECK(rel > 0.0);
    free(got);
    test_chunks(e, "low precision", 0.0);
    rill_engine_destroy(e);
  }
  free(ref);
}

/* Work is split by output rows and by (token, KV head), never inside one dot product: any thread count gives the
 * same bits. */
static void test_threads(rill_engine *e2) {
  enum { N = 33 };
  int32_t toks[N];
  make_tokens(toks, N, 61);
  float *two = reference(e2, toks, N);
  static const int counts[] = {1, 3};
  for (int i = 0; i < 2; i++) {
    rill_engine *e = open_engine_threads(NULL, NULL, counts[i]);
    if (e == NULL) continue;
    float *got = reference(e, toks, N);
    CHECK_MSG(memcmp(got, two, (size_t)N * V * sizeof(float)) == 0, "%d threads differ from 2", counts[i]);
    free(got);
    rill_engine_destroy(e);
  }
  free(two);
}

int main(void) {
  rill_engine *e = open_engine(NULL, NULL);
  if (e == NULL) return check_summary();
  test_chunks(e, "fp32", 0.0);
  test_rollback(e);
  test_prefix(e);
  test_batch_invariance(e);
  test_step(e);
  test_precisions(e);
  test_threads(e);
  rill_engine_destroy(e);
  return check_summary();
}
