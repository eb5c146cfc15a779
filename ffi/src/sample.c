#include "sample.h"

#include <math.h>
#include <stdio.h>

#include "fail.h"
#include "philox.h"
#include "sample_rules.h"

/* One row's scratch (sample_rules.h: work, order, counts, seen). */
size_t rill_sample_scratch_bytes(int32_t vocab_size) {
  if (vocab_size < 1) return 0;
  return rill_sample_row_bytes((size_t)vocab_size);
}

/* Samples row r of sequence i from raw (V logits) by the rule of docs/backend-step.md (sample_rules.h); *out gets
 * the token. */
static rill_status sample_row(const rill_step_batch *b, int32_t i, int32_t r, const float *raw, int32_t V,
                              rill_sample_scratch *s, int32_t *out, char *err, size_t err_cap) {
  double *w = s->work;
  if (rill_sample_plain(b, i)) {
    /* Greedy on untouched logits: the argmax of the row itself, ties to the lowest id. */
    int32_t best = 0;
    float max = -INFINITY;
    for (int32_t t = 0; t < V; t++) {
      if (raw[t] > max) {
        max = raw[t];
        best = t;
      }
    }
    *out = best;
    return RILL_OK;
  }
  const rill_sample_row p = rill_sample_row_at(b, i);
  for (int32_t t = 0; t < V; t++) w[t] = rill_sample_logit(raw[t]);
  const int32_t hs = b->history_start[i];
  rill_sample_penalties(b->history, hs, hs + b->history_prompt_lens[i], b->history_start[i + 1],
                        rill_sample_drafts(b, i), r, &p, w, s->counts, s->seen);
  rill_sample_bias(b->bias_ids, b->bias_values, b->bias_start[i], b->bias_start[i + 1], w);

  int32_t first_allowed = 0;
  if (b->mask_row_start[i] >= 0) {
    const uint32_t *m = b->allowed_mask + ((size_t)b->mask_row_start[i] + (size_t)r) * rill_sample_mask_words(V);
    first_allowed = -1;
    for (int32_t t = 0; t < V; t++) {
      if (rill_sample_mask_allows(m, t)) {
        if (first_allowed < 0) first_allowed = t;
      } else {
        w[t] = -INFINITY;
      }
    }
    if (first_allowed < 0) return rill_sample_fail_no_token(b, i, r, err, err_cap);
  }

  int32_t best = -1;
  double max = -INFINITY;
  for (int32_t t = 0; t < V; t++) {
    if (w[t] > max) {
      max = w[t];
      best = t;
    }
  }
  /* Every allowed logit is -inf: the rule's tie-break (lowest id) decides. */
  if (best < 0) best = first_allowed;
  const double temperature = p.temperature;
  if (rill_sample_is_greedy(temperature, max)) {
    *out = best;
    return RILL_OK;
  }
  for (int32_t t = 0; t < V; t++) w[t] = rill_sample_weight(w[t], max, temperature);
  const double u = rill_uniform(p.seeds, (uint32_t)rill_sample_position(b, i, r), 0);
  *out = rill_sample_draw(w, V, s->order, p.top_k, p.top_p, p.min_p, u);
  return RILL_OK;
}

/* log Z of the raw logits at temperature 1 (NaN entries ignored). */
static double log_partition(const float *raw, int32_t V) {
  double max = -INFINITY;
  for (int32_t t = 0; t < V; t++)
    if (raw[t] > max) max = raw[t];
  if (!isfinite(max)) return max;
  double sum = 0;
  for (int32_t t = 0; t < V; t++)
    if (!isnan(raw[t])) sum += exp((double)raw[t] - max);
  return max + log(sum);
}

/* The n largest raw logits, descending, ties to the lower id; slots past the non-NaN entries get id -1, -inf. */
static void top_alternatives(const float *raw, int32_t V, int32_t n, double log_z, int32_t *ids, float *lps) {
  int32_t count = 0;
  for (int32_t t = 0; t < V && n > 0; t++) {
    const float v = raw[t];
    if (isnan(v)) continue;
    if (count == n && !(v > raw[ids[n - 1]])) continue;
    int32_t j = count < n ? count++ : n - 1;
    while (j > 0 && raw[ids[j - 1]] < v) {
      ids[j] = ids[j - 1];
      j--;
    }
    ids[j] = t;
  }
  rill_sample_fill_alternatives(raw, n, count, log_z, ids, lps);
}

/* Samples and verifies sequence i, whose draft_counts[i] + 1 logits rows start at row, into its result rows. The
 * caller has checked draft_counts[i] and logprobs[i] against the limits. Reads and writes nothing of any other
 * sequence, so sequences may run on different threads, each with its own scratch. */
static rill_status sample_seq(const rill_step_batch *b, int32_t i, const float *row, int32_t vocab_size, size_t K1,
                              size_t L, rill_sample_scratch *s, rill_step_result *out, char *err, size_t err_cap) {
  const size_t V = (size_t)vocab_size;
  const int32_t d = b->draft_counts[i], lp = b->logprobs[i];
  int32_t count = d + 1;
  for (int32_t r = 0; r <= d; r++) {
    const float *raw = row + (size_t)r * V;
    int32_t x = 0;
    const rill_status st = sample_row(b, i, r, raw, vocab_size, s, &x, err, err_cap);
    if (st != RILL_OK) return st;
    const size_t slot = (size_t)i * K1 + (size_t)r;
    out->tokens[slot] = x;
    if (lp >= 0) {
      const double log_z = log_partition(raw, vocab_size);
      out->logprobs[slot] = rill_sample_logprob(raw[x], log_z);
      if (lp > 0) top_alternatives(raw, vocab_size, lp, log_z, out->top_ids + slot * L, out->top_logprobs + slot * L);
    } else {
      out->logprobs[slot] = 0.0f;
    }
    if (rill_sample_rejects(b, i, r, x)) {
      count = r + 1;
      break;
    }
  }
  out->counts[i] = count;
  return RILL_OK;
}

static rill_status check_args(const rill_step_batch *b, const float *logits, int32_t vocab_size, int32_t max_drafts,
                              int32_t max_top_logprobs, const void *scratch, const rill_step_result *out, char *err,
                              size_t err_cap) {
  if (err != NULL && err_cap > 0) err[0] = '\0';
  if (b == NULL || logits == NULL || scratch == NULL || out == NULL || out->counts == NULL || out->tokens == NULL ||
      out->logprobs == NULL || (max_top_logprobs > 0 && (out->top_ids == NULL || out->top_logprobs == NULL)))
    return rill_fail(err, err_cap, RILL_ERR_INVALID_ARGUMENT, "rill_sample_batch: a required pointer is NULL");
  if (vocab_size < 1 || max_drafts < 0 || max_top_logprobs < 0)
    return rill_fail(err, err_cap, RILL_ERR_INVALID_ARGUMENT,
                     "rill_sample_batch: vocab_size %d, max_drafts %d, max_top_logprobs %d are invalid", vocab_size,
                     max_drafts, max_top_logprobs);
  return RILL_OK;
}

rill_status rill_sample_batch(const rill_step_batch *b, const float *logits, int32_t vocab_size, int32_t max_drafts,
                              int32_t max_top_logprobs, void *scratch, rill_step_result *out, char *err,
                              size_t err_cap) {
  rill_status st = check_args(b, logits, vocab_size, max_drafts, max_top_logprobs, scratch, out, err, err_cap);
  if (st != RILL_OK) return st;
  const size_t V = (size_t)vocab_size, K1 = (size_t)max_drafts + 1, L = (size_t)max_top_logprobs;
  rill_sample_scratch s = rill_sample_scratch_at(scratch, (size_t)vocab_size);
  const float *row = logits;
  for (int32_t i = 0; i < b->num_seqs; i++) {
    out->counts[i] = 0;
    if (!b->sample_flags[i]) continue;
    const int32_t d = b->draft_counts[i], lp = b->logprobs[i];
    if (d < 0 || d > max_drafts || lp > max_top_logprobs)
      return rill_fail(err, err_cap, RILL_ERR_INVALID_ARGUMENT,
                       "sequence %d: draft count %d or logprobs %d over the limits", i, d, lp);
    st = sample_seq(b, i, row, vocab_size, K1, L, &s, out, err, err_cap);
    if (st != RILL_OK) return st;
    row += (size_t)(d + 1) * V;
  }
  return RILL_OK;
}

/* ---- the same over a thread pool ---- */

#define POOL_ERR_CAP 256

/* What one thread saw fail: the lowest sequence index it failed on (INT32_MAX: none) and that failure's message. */
typedef struct thread_failure {
  int32_t seq;
  rill_status status;
  char msg[POOL_ERR_CAP];
} thread_failure;

static size_t thread_scratch_stride(int32_t vocab_size) { return rill_align64(rill_sample_scratch_bytes(vocab_size)); }

size_t rill_sample_pool_scratch_bytes(int32_t vocab_size, int threads, int32_t max_seqs) {
  if (vocab_size < 1 || threads < 1 || max_seqs < 1) return 0;
  return (size_t)threads * (thread_scratch_stride(vocab_size) + rill_align64(sizeof(thread_failure))) +
         rill_align64((size_t)max_seqs * sizeof(int64_t));
}

typedef struct pool_job {
  const rill_step_batch *b;
  const float *logits;
  int32_t vocab_size;
  size_t K1, L;
  uint8_t *thread_scratch; /* thread t's scratch at t × stride */
  size_t stride;
  thread_failure *failures; /* [threads] */
  const int64_t *row_start; /* [num_seqs] first logits row of each sampled sequence */
  rill_step_result *out;
} pool_job;

static void sample_task(void *ctx, int64_t task, int thread) {
  const pool_job *j = ctx;
  const int32_t i = (int32_t)task;
  if (!j->b->sample_flags[i]) return;
  thread_failure *f = &j->failures[thread];
  rill_sample_scratch s = rill_sample_scratch_at(j->thread_scratch + (size_t)thread * j->stride, (size_t)j->vocab_size);
  char msg[POOL_ERR_CAP] = "";
  const rill_status st = sample_seq(j->b, i, j->logits + (size_t)j->row_start[i] * (size_t)j->vocab_size,
                                    j->vocab_size, j->K1, j->L, &s, j->out, msg, sizeof msg);
  if (st != RILL_OK && i < f->seq) {
    f->seq = i;
    f->status = st;
    snprintf(f->msg, sizeof f->msg, "%s", msg);
  }
}

rill_status rill_sample_batch_pooled(const rill_step_batch *b, const float *logits, int32_t vocab_size,
                                     int32_t max_drafts, int32_t max_top_logprobs, int32_t max_seqs, rill_pool *pool,
                                     void *scratch, rill_step_result *out, char *err, size_t err_cap) {
  rill_status st = check_args(b, logits, vocab_size, max_drafts, max_top_logprobs, scratch, out, err, err_cap);
  if (st != RILL_OK) return st;
  if (pool == NULL) return rill_fail(err, err_cap, RILL_ERR_INVALID_ARGUMENT, "rill_sample_batch_pooled: pool is NULL");
  if (b->num_seqs > max_seqs)
    return rill_fail(err, err_cap, RILL_ERR_INVALID_ARGUMENT,
                     "rill_sample_batch_pooled: %d sequences over the scratch's %d", b->num_seqs, max_seqs);
  const int threads = rill_pool_threads(pool);
  const size_t stride = thread_scratch_stride(vocab_size);
  uint8_t *p = scratch;
  pool_job j = {.b = b, .logits = logits, .vocab_size = vocab_size, .K1 = (size_t)max_drafts + 1,
                .L = (size_t)max_top_logprobs, .thread_scratch = p, .stride = stride, .out = out};
  p += (size_t)threads * stride;
  j.failures = (thread_failure *)(void *)p;
  p += (size_t)threads * rill_align64(sizeof(thread_failure));
  int64_t *row_start = (int64_t *)(void *)p;
  j.row_start = row_start;
  /* The limits checks and row offsets in batch order, as the serial loop meets them. */
  int64_t row = 0, full_rows = 0;
  for (int32_t i = 0; i < b->num_seqs; i++) {
    out->counts[i] = 0;
    if (!b->sample_flags[i]) continue;
    const int32_t d = b->draft_counts[i], lp = b->logprobs[i];
    if (d < 0 || d > max_drafts || lp > max_top_logprobs)
      return rill_fail(err, err_cap, RILL_ERR_INVALID_ARGUMENT,
                       "sequence %d: draft count %d or logprobs %d over the limits", i, d, lp);
    row_start[i] = row;
    row += d + 1;
    if (!rill_sample_plain(b, i) || lp >= 0) full_rows += d + 1;
  }
  for (int t = 0; t < threads; t++) {
    j.failures[t].seq = INT32_MAX;
    j.failures[t].status = RILL_OK;
  }
  /* A plain greedy row is one pass of argmax, cheaper than waking the workers; rows that exponentiate the vocabulary
   * (sampling, logprobs) or run penalties and masks are worth spreading once there are two of them. */
  if (full_rows >= 2) {
    rill_pool_run(pool, sample_task, &j, b->num_seqs);
  } else {
    for (int32_t i = 0; i < b->num_seqs; i++) sample_task(&j, i, 0);
  }
  /* The lowest failing sequence's message, whichever thread met it: the serial loop's first failure. */
  const thread_failure *first = NULL;
  for (int t = 0; t < threads; t++)
    if (j.failures[t].seq != INT32_MAX && (first == NULL || j.failures[t].seq < first->seq)) first = &j.failures[t];
  if (first != NULL) {
    if (err != NULL && err_cap > 0) snprintf(err, err_cap, "%s", first->msg);
    return first->status;
  }
  return RILL_OK;
}
