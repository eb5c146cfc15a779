/* Sampling and draft verification (docs/backend-step.md, "Sampling, specified once"). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "batch_fixture.h"
#include "check.h"
#include "philox.h"
#include "sample.h"
#include "validate.h"

#define MAXD 8
#define K1 (MAXD + 1)
#define MAXL 20
#define MAXV 1024

static float g_logits[FX_MAX_TOKENS * MAXV];
static int32_t r_counts[FX_MAX_SEQS], r_tokens[FX_MAX_SEQS * K1], r_top_ids[FX_MAX_SEQS * K1 * MAXL];
static float r_logprobs[FX_MAX_SEQS * K1], r_top_lps[FX_MAX_SEQS * K1 * MAXL];
static int32_t p_counts[FX_MAX_SEQS], p_tokens[FX_MAX_SEQS * K1], p_top_ids[FX_MAX_SEQS * K1 * MAXL];
static float p_logprobs[FX_MAX_SEQS * K1], p_top_lps[FX_MAX_SEQS * K1 * MAXL];
static char g_err[256], p_err[256];
static void *g_scratch, *g_pool_scratch;
static rill_pool *g_pool;
#define POOL_THREADS 3

/* The pooled sampler on the same batch must give the serial one's status, message and outputs, bit for bit. */
static void check_pooled_matches(const rill_step_batch *b, int32_t V, rill_status serial) {
  rill_step_result res = {p_counts, p_tokens, p_logprobs, p_top_ids, p_top_lps, NULL, NULL};
  memset(p_counts, 0xff, sizeof p_counts);
  const rill_status st = rill_sample_batch_pooled(b, g_logits, V, MAXD, MAXL, FX_MAX_SEQS, g_pool, g_pool_scratch,
                                                  &res, p_err, sizeof p_err);
  CHECK_EQ_INT(st, serial);
  if (st != serial) return;
  if (st != RILL_OK) {
    CHECK_MSG(strcmp(p_err, g_err) == 0, "pooled error \"%s\" vs serial \"%s\"", p_err, g_err);
    return;
  }
  int same = 1;
  for (int32_t i = 0; i < b->num_seqs; i++) {
    same &= p_counts[i] == r_counts[i];
    for (int32_t r = 0; r < r_counts[i]; r++) {
      const size_t slot = (size_t)i * K1 + (size_t)r;
      same &= p_tokens[slot] == r_tokens[slot];
      same &= memcmp(&p_logprobs[slot], &r_logprobs[slot], sizeof(float)) == 0;
      const int32_t lp = b->logprobs[i];
      if (lp > 0) {
        same &= memcmp(p_top_ids + slot * MAXL, r_top_ids + slot * MAXL, (size_t)lp * sizeof(int32_t)) == 0;
        same &= memcmp(p_top_lps + slot * MAXL, r_top_lps + slot * MAXL, (size_t)lp * sizeof(float)) == 0;
      }
    }
  }
  CHECK_MSG(same, "pooled sampling differs from serial (%d sequences)", b->num_seqs);
}

/* Validates, then samples; returns the sample status (a validation failure fails a check). */
static rill_status run(fixture *f, int32_t V) {
  rill_step_batch b = fixture_batch(f);
  rill_limits lim = fixture_limits(V);
  rill_status v = rill_validate_batch(&b, &lim, g_err, sizeof g_err);
  if (v != RILL_OK) {
    CHECK_MSG(0, "fixture batch invalid: %s", g_err);
    return v;
  }
  rill_step_result res = {r_counts, r_tokens, r_logprobs, r_top_ids, r_top_lps, NULL, NULL};
  memset(r_counts, 0xff, sizeof r_counts);
  const rill_status st = rill_sample_batch(&b, g_logits, V, MAXD, MAXL, g_scratch, &res, g_err, sizeof g_err);
  check_pooled_matches(&b, V, st);
  return st;
}

static void one_seq(fixture *f, int32_t fed, int32_t ctx) {
  const int32_t fd[1] = {fed}, cx[1] = {ctx};
  fixture_init(f, 1, fd, cx);
}

static void set_row(int32_t row, int32_t V, const float *vals) { memcpy(g_logits + (size_t)row * V, vals, sizeof(float) * V); }

static double logsumexp(const float *x, int32_t n) {
  double m = -INFINITY, s = 0;
  for (int32_t i = 0; i < n; i++) m = x[i] > m ? x[i] : m;
  for (int32_t i = 0; i < n; i++) s += exp(x[i] - m);
  return m + log(s);
}

static void test_greedy_and_ties(void) {
  fixture f;
  one_seq(&f, 3, 10);
  const float a[5] = {0.5f, 3.0f, 2.0f, -1.0f, 3.0f};
  set_row(0, 5, a);
  CHECK(run(&f, 5) == RILL_OK);
  CHECK_EQ_INT(r_counts[0], 1);
  CHECK_EQ_INT(r_tokens[0], 1); /* 1 and 4 tie: the lower id */
  const float c[4] = {-2.0f, -2.0f, -2.0f, -2.0f};
  set_row(0, 4, c);
  CHECK(run(&f, 4) == RILL_OK);
  CHECK_EQ_INT(r_tokens[0], 0);
  /* a sequence that is not sampled gets count 0 and consumes no row */
  const int32_t fd[2] = {2, 1}, cx[2] = {2, 5};
  fixture_init(&f, 2, fd, cx);
  f.sample_flags[0] = 0;
  const float r0[4] = {0, 0, 0, 9};
  set_row(0, 4, r0);
  CHECK(run(&f, 4) == RILL_OK);
  CHECK_EQ_INT(r_counts[0], 0);
  CHECK_EQ_INT(r_counts[1], 1);
  CHECK_EQ_INT(r_tokens[1 * K1], 3);
}

static void test_logprobs(void) {
  fixture f;
  one_seq(&f, 1, 1);
  const int32_t V = 7;
  const float a[7] = {1.5f, -0.25f, 2.0f, 2.0f, 0.0f, -3.0f, 1.5f};
  set_row(0, V, a);
  f.logprobs[0] = 5;
  f.temperature[0] = 0.8f;
  CHECK(run(&f, V) == RILL_OK);
  const double lz = logsumexp(a, V);
  const int32_t x = r_tokens[0];
  CHECK_NEAR(r_logprobs[0], a[x] - lz, 1e-6);
  const int32_t want_ids[5] = {2, 3, 0, 6, 4};
  for (int j = 0; j < 5; j++) {
    CHECK_EQ_INT(r_top_ids[j], want_ids[j]);
    CHECK_NEAR(r_top_lps[j], a[want_ids[j]] - lz, 1e-6);
  }
  /* logprobs come from the raw logits: penalties, masks and temperature do not change them */
  f.temperature[0] = 0;
  f.repetition_penalty[0] = 3.0f;
  f.history_len = 1;
  f.history[0] = 2;
  f.history_start[1] = 1;
  f.num_mask_rows = 1;
  f.mask_row_start[0] = 0;
  f.allowed_mask[0] = (1u << 0) | (1u << 2);
  CHECK(run(&f, V) == RILL_OK);
  CHECK_EQ_INT(r_tokens[0], 0); /* token 2's 2.0 becomes 2 / 3, below token 0's 1.5 */
  CHECK_NEAR(r_logprobs[0], a[r_tokens[0]] - lz, 1e-6);
  CHECK_EQ_INT(r_top_ids[0], 2);
  CHECK_NEAR(r_top_lps[0], a[2] - lz, 1e-6);
  /* logprobs 0: the token's logprob only, top slots untouched */
  f.logprobs[0] = 0;
  r_top_ids[0] = 77;
  CHECK(run(&f, V) == RILL_OK);
  CHECK_EQ_INT(r_top_ids[0], 77);
  CHECK_NEAR(r_logprobs[0], a[r_tokens[0]] - lz, 1e-6);
}


/* Over seeds 0..n-1, counts how often each token is sampled from row 0 (hist has V entries). */
static void sample_many(fixture *f, int32_t V, int32_t n, int32_t *hist) {
  memset(hist, 0, sizeof(int32_t) * V);
  for (int32_t s = 0; s < n; s++) {
    f->seeds[0] = (uint64_t)s * 0x9E3779B97F4A7C15ull;
    if (run(f, V) != RILL_OK) return;
    if (r_tokens[0] >= 0 && r_tokens[0] < V) hist[r_tokens[0]]++;
  }
}

static void test_filters(void) {
  fixture f;
  int32_t hist[8];
  one_seq(&f, 1, 4);
  /* probabilities 0.5, 0.3, 0.2 at temperature 1 */
  const float a[3] = {logf(0.5f), logf(0.3f), logf(0.2f)};
  set_row(0, 3, a);
  f.temperature[0] = 1.0f;
  sample_many(&f, 3, 3000, hist);
  CHECK(hist[0] > 1300 && hist[1] > 750 && hist[2] > 450); /* all three appear, roughly in proportion */
  f.top_k[0] = 1;
  sample_many(&f, 3, 500, hist);
  CHECK_EQ_INT(hist[0], 500);
  f.top_k[0] = 2;
  sample_many(&f, 3, 2000, hist);
  CHECK(hist[2] == 0 && hist[0] > 1000 && hist[1] > 500);
  f.top_k[0] = 0;
  f.top_p[0] = 0.45f;
  sample_many(&f, 3, 500, hist);
  CHECK_EQ_INT(hist[0], 500);
  f.top_p[0] = 0.75f;
  sample_many(&f, 3, 2000, hist);
  CHECK(hist[2] == 0 && hist[0] > 1000 && hist[1] > 500);
  f.top_p[0] = 1.0f;
  f.min_p[0] = 0.5f; /* drops p < 0.25 */
  sample_many(&f, 3, 2000, hist);
  CHECK(hist[2] == 0 && hist[0] > 1000 && hist[1] > 500);
  f.min_p[0] = 0.7f; /* drops p < 0.35 */
  sample_many(&f, 3, 500, hist);
  CHECK_EQ_INT(hist[0], 500);
  /* top-k ties go to the lower id */
  f.min_p[0] = 0;
  const float t4[4] = {0.0f, 1.0f, 1.0f, 1.0f};
  set_row(0, 4, t4);
  f.top_k[0] = 2;
  sample_many(&f, 4, 2000, hist);
  CHECK(hist[0] == 0 && hist[3] == 0 && hist[1] > 850 && hist[2] > 850);
  /* top-p ties: three equal tokens, top_p 0.5 keeps the first two by id */
  f.top_k[0] = 0;
  f.top_p[0] = 0.5f;
  const float t3[4] = {1.0f, 1.0f, 1.0f, -30.0f};
  set_row(0, 4, t3);
  sample_many(&f, 4, 2000, hist);
  CHECK(hist[2] == 0 && hist[3] == 0 && hist[0] > 850 && hist[1] > 850);
  /* temperature sharpens: at 0.05 the 0.5-vs-0.3 gap is e^(0.51/0.05), so the top token wins every draw */
  f.top_p[0] = 1.0f;
  set_row(0, 3, a);
  f.temperature[0] = 0.05f;
  sample_many(&f, 3, 500, hist);
  CHECK_EQ_INT(hist[0], 500);
}

static void test_mask(void) {
  fixture f;
  int32_t hist[40];
  one_seq(&f, 1, 4);
  const int32_t V = 40;
  float row[40];
  for (int32_t t = 0; t < V; t++) row[t] = (float)(t % 7) * 0.1f;
  row[5] = 4.0f;
  set_row(0, V, row);
  f.num_mask_rows = 3;
  f.mask_row_start[0] = 1;
  memset(f.allowed_mask, 0, sizeof f.allowed_mask);
  /* row 1 (words 2..3): tokens 3, 33, 35 */
  f.allowed_mask[2] = 1u << 3;
  f.allowed_mask[3] = (1u << 1) | (1u << 3);
  CHECK(run(&f, V) == RILL_OK);
  CHECK_EQ_INT(r_tokens[0], 33); /* 3: 0.3, 33: 0.5, 35: 0.0 */
  f.temperature[0] = 1.0f;
  sample_many(&f, V, 1500, hist);
  int32_t outside = 0;
  for (int32_t t = 0; t < V; t++)
    if (t != 3 && t != 33 && t != 35) outside += hist[t];
  CHECK(outside == 0 && hist[3] > 300 && hist[33] > 300 && hist[35] > 300);
  /* a row that allows nothing is an error naming the mask */
  f.allowed_mask[2] = 0;
  f.allowed_mask[3] = 0;
  g_err[0] = 0;
  CHECK(run(&f, V) == RILL_ERR_INVALID_ARGUMENT);
  CHECK(strstr(g_err, "allowed_mask") != NULL);
  /* tokens whose logits are all -inf but allowed: the lowest allowed id */
  f.allowed_mask[3] = (1u << 2) | (1u << 7);
  for (int32_t t = 0; t < V; t++) row[t] = -INFINITY;
  set_row(0, V, row);
  CHECK(run(&f, V) == RILL_OK);
  CHECK_EQ_INT(r_tokens[0], 34);
}

static void set_history(fixture *f, const int32_t *h, int32_t n, int32_t prompt) {
  memcpy(f->history, h, sizeof(int32_t) * n);
  f->history_len = n;
  f->history_start[0] = 0;
  f->history_start[1] = n;
  f->history_prompt_lens[0] = prompt;
}

static void test_penalties(void) {
  fixture f;
  one_seq(&f, 1, 4);
  const int32_t V = 4;
  const float a[4] = {2.0f, 1.9f, -1.0f, -1.05f};
  set_row(0, V, a);
  const int32_t h00[2] = {0, 0};
  set_history(&f, h00, 2, 0);
  f.frequency_penalty[0] = 0.1f; /* 2 - 0.2 < 1.9 */
  CHECK(run(&f, V) == RILL_OK);
  CHECK_EQ_INT(r_tokens[0], 1);
  f.frequency_penalty[0] = 0.01f; /* 2 - 0.02 > 1.9 */
  CHECK(run(&f, V) == RILL_OK);
  CHECK_EQ_INT(r_tokens[0], 0);
  f.frequency_penalty[0] = 0;
  f.presence_penalty[0] = 0.05f; /* once per distinct token: 1.95 > 1.9 */
  CHECK(run(&f, V) == RILL_OK);
  CHECK_EQ_INT(r_tokens[0], 0);
  f.presence_penalty[0] = 0.2f;
  CHECK(run(&f, V) == RILL_OK);
  CHECK_EQ_INT(r_tokens[0], 1);
  /* presence and frequency see only the generated part; a prompt-only token is untouched */
  set_history(&f, h00, 2, 2);
  f.frequency_penalty[0] = 1.0f;
  CHECK(run(&f, V) == RILL_OK);
  CHECK_EQ_INT(r_tokens[0], 0);
  f.frequency_penalty[0] = 0;
  f.presence_penalty[0] = 0;
  /* repetition sees the prompt too: 2 / 1.1 < 1.9 */
  f.repetition_penalty[0] = 1.1f;
  CHECK(run(&f, V) == RILL_OK);
  CHECK_EQ_INT(r_tokens[0], 1);
  /* negative logits are multiplied: -1 * 1.1 < -1.05 */
  const float b[4] = {-5.0f, -6.0f, -1.0f, -1.05f};
  set_row(0, V, b);
  const int32_t h2[1] = {2};
  set_history(&f, h2, 1, 1);
  CHECK(run(&f, V) == RILL_OK);
  CHECK_EQ_INT(r_tokens[0], 3);
  f.repetition_penalty[0] = 1.0f;
  CHECK(run(&f, V) == RILL_OK);
  CHECK_EQ_INT(r_tokens[0], 2);
}

static void test_greedy_verification(void) {
  fixture f;
  const int32_t V = 10;
  one_seq(&f, 3, 20); /* last token + 2 drafts */
  f.draft_counts[0] = 2;
  float rows[3][10];
  memset(rows, 0, sizeof rows);
  rows[0][5] = 1.0f;
  rows[1][6] = 1.0f;
  rows[2][7] = 1.0f;
  for (int r = 0; r < 3; r++) set_row(r, V, rows[r]);
  f.tokens[1] = 5;
  f.tokens[2] = 6;
  CHECK(run(&f, V) == RILL_OK);
  CHECK_EQ_INT(r_counts[0], 3);
  CHECK(r_tokens[0] == 5 && r_tokens[1] == 6 && r_tokens[2] == 7);
  f.tokens[2] = 9;
  CHECK(run(&f, V) == RILL_OK);
  CHECK_EQ_INT(r_counts[0], 2);
  CHECK(r_tokens[0] == 5 && r_tokens[1] == 6);
  f.tokens[1] = 4;
  CHECK(run(&f, V) == RILL_OK);
  CHECK_EQ_INT(r_counts[0], 1);
  CHECK_EQ_INT(r_tokens[0], 5);
  /* each row's logprob is that of its own accepted token */
  f.tokens[1] = 5;
  f.tokens[2] = 6;
  f.logprobs[0] = 1;
  CHECK(run(&f, V) == RILL_OK);
  for (int r = 0; r < 3; r++) {
    CHECK_NEAR(r_logprobs[r], rows[r][r_tokens[r]] - logsumexp(rows[r], V), 1e-6);
    CHECK_EQ_INT(r_top_ids[r * MAXL], 5 + r);
  }
}

/* A small deterministic generator for test data. */
static uint64_t g_lcg = 88172645463325252ull;
static double lcg_unit(void) {
  g_lcg ^= g_lcg << 13;
  g_lcg ^= g_lcg >> 7;
  g_lcg ^= g_lcg << 17;
  return (double)(g_lcg >> 11) / 9007199254740992.0;
}

/*
 * Speculation is invisible in the output: decoding one token per step and verifying drafts in one step (in a batch,
 * behind another sequence) give the same tokens for the same seed, with penalties, filters and masks active.
 */
static void test_drafts_match_plain_decoding(void) {
  enum { V = 48, D = 4, BASE = 6, CTX0 = 30 };
  const int32_t base_history[BASE] = {3, 7, 7, 11, 3, 20};
  int32_t mismatches_seen = 0, full_accepts = 0, bad_trials = 0;
  for (int trial = 0; trial < 300; trial++) {
    float rows[D + 1][V];
    for (int r = 0; r <= D; r++)
      for (int t = 0; t < V; t++) rows[r][t] = (float)(lcg_unit() * 4.0 - 2.0);
    /* sharpen so drafts often agree */
    for (int r = 0; r <= D; r++) rows[r][(trial + r) % V] += 3.0f;
    const uint64_t seed = 1000003ull * (uint64_t)trial;
    fixture f;
    /* plain decoding: one step per token */
    int32_t plain[D + 1];
    for (int r = 0; r <= D; r++) {
      one_seq(&f, 1, CTX0 + r);
      f.seeds[0] = seed;
      f.temperature[0] = 0.9f;
      f.top_k[0] = 30;
      f.top_p[0] = 0.97f;
      f.min_p[0] = 0.01f;
      f.frequency_penalty[0] = 0.3f;
      f.presence_penalty[0] = 0.1f;
      f.repetition_penalty[0] = 1.2f;
      int32_t h[BASE + D];
      memcpy(h, base_history, sizeof base_history);
      for (int j = 0; j < r; j++) h[BASE + j] = plain[j];
      set_history(&f, h, BASE + r, 2);
      f.num_mask_rows = 1;
      f.mask_row_start[0] = 0;
      f.allowed_mask[0] = 0xffffffffu;
      f.allowed_mask[1] = 0xffffu & ~(1u << (trial % 16)); /* token 32 + trial % 16 is never allowed */
      set_row(0, V, rows[r]);
      if (run(&f, V) != RILL_OK) return;
      plain[r] = r_tokens[0];
    }
    /* speculative: drafts agree with plain decoding up to a chosen point, then (maybe) diverge */
    const int agree = trial % (D + 1);
    int32_t drafts[D];
    for (int j = 0; j < D; j++) drafts[j] = j < agree ? plain[j] : (plain[j] + 1 + trial % 3) % V;
    const int32_t fd[2] = {5, 1 + D}, cx[2] = {9, CTX0 + D};
    fixture_init(&f, 2, fd, cx);
    f.temperature[0] = 1.0f;
    f.seeds[1] = seed;
    f.temperature[1] = 0.9f;
    f.top_k[1] = 30;
    f.top_p[1] = 0.97f;
    f.min_p[1] = 0.01f;
    f.frequency_penalty[1] = 0.3f;
    f.presence_penalty[1] = 0.1f;
    f.repetition_penalty[1] = 1.2f;
    f.draft_counts[1] = D;
    for (int j = 0; j < D; j++) f.tokens[f.query_start[2] - D + j] = drafts[j];
    memcpy(f.history, base_history, sizeof base_history);
    f.history_len = BASE;
    f.history_start[0] = 0;
    f.history_start[1] = 0;
    f.history_start[2] = BASE;
    f.history_prompt_lens[1] = 2;
    f.num_mask_rows = D + 1;
    f.mask_row_start[1] = 0;
    for (int r = 0; r <= D; r++) {
      f.allowed_mask[2 * r] = 0xffffffffu;
      f.allowed_mask[2 * r + 1] = 0xffffu & ~(1u << (trial % 16));
    }
    float other[V];
    for (int t = 0; t < V; t++) other[t] = (float)(lcg_unit() * 2.0);
    set_row(0, V, other);
    for (int r = 0; r <= D; r++) set_row(1 + r, V, rows[r]);
    if (run(&f, V) != RILL_OK) return;
    int32_t expect = D + 1;
    for (int j = 0; j < D; j++)
      if (drafts[j] != plain[j]) {
        expect = j + 1;
        break;
      }
    int same = r_counts[1] == expect;
    for (int j = 0; j < expect && same; j++) same = r_tokens[K1 + j] == plain[j];
    if (!same) {
      bad_trials++;
      fprintf(stderr, "trial %d: speculative tokens differ from plain decoding\n", trial);
    }
    if (expect == D + 1) full_accepts++;
    else mismatches_seen++;
  }
  CHECK_EQ_INT(bad_trials, 0);
  CHECK(full_accepts > 20 && mismatches_seen > 100);
}

/* The reference distribution of the rule, computed the slow obvious way (selection by repeated scans). */
static void reference_dist(const float *l, int V, double temp, int k, double top_p, double min_p, double *p) {
  double m = -INFINITY, s = 0;
  for (int t = 0; t < V; t++) m = l[t] > m ? l[t] : m;
  for (int t = 0; t < V; t++) s += (p[t] = exp((l[t] - m) / temp));
  for (int t = 0; t < V; t++) p[t] /= s;
  int rank[64], used[64] = {0};
  for (int j = 0; j < V; j++) {
    int best = -1;
    for (int t = 0; t < V; t++)
      if (!used[t] && (best < 0 || p[t] > p[best])) best = t;
    used[best] = 1;
    rank[j] = best;
  }
  int kept = (k > 0 && k < V) ? k : V;
  double mass = 0;
  for (int j = 0; j < kept; j++) mass += p[rank[j]];
  if (top_p > 0 && top_p < 1) {
    double acc = 0;
    for (int j = 0; j < kept; j++) {
      acc += p[rank[j]];
      if (acc >= top_p * mass) {
        kept = j + 1;
        break;
      }
    }
  }
  const double thr = min_p * p[rank[0]];
  while (kept > 1 && p[rank[kept - 1]] < thr) kept--;
  double z = 0;
  for (int j = 0; j < kept; j++) z += p[rank[j]];
  double q[64] = {0};
  for (int j = 0; j < kept; j++) q[rank[j]] = p[rank[j]] / z;
  for (int t = 0; t < V; t++) p[t] = q[t];
}

/* Seeded sampling follows the rule's distribution: chi-square over 20000 draws (seeds and positions vary). */
static void chi_square_case(const float *l, int V, float temp, int k, float top_p, float min_p) {
  double p[64];
  reference_dist(l, V, temp, k, top_p, min_p, p);
  fixture f;
  int32_t hist[64] = {0};
  const int N = 20000;
  for (int n = 0; n < N; n++) {
    one_seq(&f, 1, 1 + n % 500);
    f.seeds[0] = (uint64_t)n / 500 * 7919u + 17u;
    f.temperature[0] = temp;
    f.top_k[0] = k;
    f.top_p[0] = top_p;
    f.min_p[0] = min_p;
    set_row(0, V, l);
    if (run(&f, V) != RILL_OK) return;
    hist[r_tokens[0]]++;
  }
  double chi2 = 0;
  int dof = -1, zero_ok = 1;
  for (int t = 0; t < V; t++) {
    if (p[t] == 0) {
      zero_ok = zero_ok && hist[t] == 0;
      continue;
    }
    const double e = p[t] * N;
    chi2 += (hist[t] - e) * (hist[t] - e) / e;
    dof++;
  }
  /* 0.999 quantiles of chi-square with 1..7 degrees of freedom */
  static const double q999[8] = {0, 10.83, 13.82, 16.27, 18.47, 20.52, 22.46, 24.32};
  CHECK(zero_ok);
  CHECK(dof >= 1 && dof <= 7);
  if (dof >= 1 && dof <= 7) CHECK_MSG(chi2 < q999[dof], "chi2 %.2f with %d dof", chi2, dof);
}

static void test_chi_square(void) {
  const float l[8] = {1.0f, 0.2f, -0.5f, 0.8f, -2.0f, 0.0f, 0.3f, -1.0f};
  chi_square_case(l, 8, 1.0f, 0, 1.0f, 0.0f);
  chi_square_case(l, 8, 0.7f, 0, 1.0f, 0.0f);
  chi_square_case(l, 8, 1.3f, 5, 1.0f, 0.0f);
  chi_square_case(l, 8, 1.0f, 0, 0.8f, 0.0f);
  chi_square_case(l, 8, 1.0f, 6, 0.9f, 0.1f);
}

/* Larger vocabularies take the partial-selection paths of top-k and top-p; compare with the reference. */
static void test_filters_large_vocab(void) {
  enum { V = 1000 };
  static float row[V];
  for (int t = 0; t < V; t++) row[t] = (float)(lcg_unit() * 6.0);
  fixture f;
  one_seq(&f, 1, 3);
  set_row(0, V, row);
  f.temperature[0] = 0.5f;
  f.top_p[0] = 0.9f;
  int32_t *hist = calloc(V, sizeof(int32_t));
  sample_many(&f, V, 4000, hist);
  /* tokens outside the top-p set never appear: find the set by sorting a copy */
  static double p[V];
  double m = 0, s = 0;
  for (int t = 0; t < V; t++) m = row[t] > m ? row[t] : m;
  for (int t = 0; t < V; t++) s += (p[t] = exp((row[t] - m) / 0.5));
  static int idx[V];
  for (int t = 0; t < V; t++) idx[t] = t;
  for (int i = 1; i < V; i++) { /* insertion sort, descending p, ties lower id */
    int v = idx[i], j = i;
    while (j > 0 && (p[idx[j - 1]] < p[v] || (p[idx[j - 1]] == p[v] && idx[j - 1] > v))) {
      idx[j] = idx[j - 1];
      j--;
    }
    idx[j] = v;
  }
  double acc = 0;
  int kept = V;
  for (int j = 0; j < V; j++) {
    acc += p[idx[j]];
    if (acc >= 0.9 * s) {
      kept = j + 1;
      break;
    }
  }
  static uint8_t in[V];
  memset(in, 0, sizeof in);
  for (int j = 0; j < kept; j++) in[idx[j]] = 1;
  int outside = 0, inside_seen = 0;
  for (int t = 0; t < V; t++) {
    if (!in[t]) outside += hist[t];
    else inside_seen += hist[t] > 0;
  }
  CHECK_EQ_INT(outside, 0);
  CHECK(kept > 64 && inside_seen > kept / 2); /* the set is larger than the first selection round */
  /* top-k 100 of 1000 */
  f.top_p[0] = 1.0f;
  f.top_k[0] = 100;
  sample_many(&f, V, 3000, hist);
  outside = 0;
  for (int j = 100; j < V; j++) outside += hist[idx[j]];
  CHECK_EQ_INT(outside, 0);
  free(hist);
}

static void set_bias(fixture *f, const int32_t *ids, const float *values, int32_t n) {
  memcpy(f->bias_ids, ids, sizeof(int32_t) * n);
  memcpy(f->bias_values, values, sizeof(float) * n);
  f->bias_len = n;
  f->bias_start[0] = 0;
  f->bias_start[1] = n;
}

static void test_logit_bias(void) {
  fixture f;
  one_seq(&f, 1, 4);
  const int32_t V = 4;
  const float a[4] = {2.0f, 1.9f, -1.0f, 0.5f};
  set_row(0, V, a);
  /* -100 forbids the best token, +100 forces a poor one, greedy and sampled alike */
  const int32_t down[1] = {0};
  const float minus[1] = {-100.0f};
  set_bias(&f, down, minus, 1);
  CHECK(run(&f, V) == RILL_OK);
  CHECK_EQ_INT(r_tokens[0], 1);
  const int32_t up[1] = {2};
  const float plus[1] = {100.0f};
  set_bias(&f, up, plus, 1);
  f.temperature[0] = 1.0f;
  for (uint64_t seed = 1; seed <= 20; seed++) {
    f.seeds[0] = seed;
    CHECK(run(&f, V) == RILL_OK);
    CHECK_EQ_INT(r_tokens[0], 2);
  }
  /* logprobs stay those of the raw logits */
  f.logprobs[0] = 0;
  CHECK(run(&f, V) == RILL_OK);
  CHECK(fabs(r_logprobs[0] - (a[2] - logsumexp(a, V))) < 1e-5);
  f.logprobs[0] = -1;
  f.temperature[0] = 0;
  /* the bias adds to the penalised logit: 2 - 0.2 (frequency) + 0.15 > 1.9, without the bias < 1.9 */
  const int32_t h00[2] = {0, 0};
  set_history(&f, h00, 2, 0);
  f.frequency_penalty[0] = 0.1f;
  const float small[1] = {0.15f};
  set_bias(&f, down, small, 1);
  CHECK(run(&f, V) == RILL_OK);
  CHECK_EQ_INT(r_tokens[0], 0);
  f.bias_len = 0;
  f.bias_start[1] = 0;
  CHECK(run(&f, V) == RILL_OK);
  CHECK_EQ_INT(r_tokens[0], 1);
  /* the mask still wins over a bias */
  f.frequency_penalty[0] = 0;
  set_bias(&f, up, plus, 1);
  f.num_mask_rows = 1;
  f.mask_row_start[0] = 0;
  f.allowed_mask[0] = 0x9u; /* tokens 0 and 3 */
  CHECK(run(&f, V) == RILL_OK);
  CHECK_EQ_INT(r_tokens[0], 0);
}

int main(void) {
  g_scratch = malloc(rill_sample_scratch_bytes(MAXV));
  const size_t pool_bytes = rill_sample_pool_scratch_bytes(MAXV, POOL_THREADS, FX_MAX_SEQS);
  g_pool_scratch = aligned_alloc(64, (pool_bytes + 63) & ~(size_t)63);
  if (g_scratch == NULL || g_pool_scratch == NULL || rill_pool_create(POOL_THREADS, &g_pool) != RILL_OK) {
    CHECK_MSG(0, "setup: out of memory");
    return check_summary();
  }
  test_greedy_and_ties();
  test_logprobs();
  test_filters();
  test_mask();
  test_penalties();
  test_logit_bias();
  test_greedy_verification();
  test_drafts_match_plain_decoding();
  test_chi_square();
  test_filters_large_vocab();
  rill_pool_destroy(g_pool);
  free(g_pool_scratch);
  free(g_scratch);
  return check_summary();
}
