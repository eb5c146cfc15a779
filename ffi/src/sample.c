#include "sample.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>

#include "philox.h"

/*
 * Scratch layout, each part 64-byte aligned: work[V] doubles (the row's logits after penalties and mask, then its
 * unnormalised probabilities), order[V] and counts[V] int32, seen[V] bytes. Nothing is kept between calls: every
 * entry is written before it is read.
 */
typedef struct scratch_view {
  double *work;
  int32_t *order;
  int32_t *counts;
  uint8_t *seen;
} scratch_view;

static size_t align64(size_t n) { return (n + 63) & ~(size_t)63; }

size_t rill_sample_scratch_bytes(int32_t vocab_size) {
  if (vocab_size < 1) return 0;
  const size_t v = (size_t)vocab_size;
  return align64(v * sizeof(double)) + 2 * align64(v * sizeof(int32_t)) + align64(v);
}

static scratch_view view_scratch(void *scratch, int32_t vocab_size) {
  const size_t v = (size_t)vocab_size;
  uint8_t *p = scratch;
  scratch_view s;
  s.work = (double *)(void *)p;
  p += align64(v * sizeof(double));
  s.order = (int32_t *)(void *)p;
  p += align64(v * sizeof(int32_t));
  s.counts = (int32_t *)(void *)p;
  p += align64(v * sizeof(int32_t));
  s.seen = p;
  return s;
}

static rill_status fail(char *err, size_t err_cap, const char *fmt, ...) {
  if (err != NULL && err_cap > 0) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, err_cap, fmt, ap);
    va_end(ap);
  }
  return RILL_ERR_INVALID_ARGUMENT;
}

/* The sampling order: more probable first, ties to the lower id. Ids are distinct, so this is a strict total order. */
static int better(const double *w, int32_t a, int32_t b) { return w[a] > w[b] || (w[a] == w[b] && a < b); }

static void sift_worst_down(int32_t *h, int32_t size, int32_t i, const double *w) {
  for (;;) {
    int32_t c = 2 * i + 1;
    if (c >= size) return;
    if (c + 1 < size && better(w, h[c], h[c + 1])) c++;
    if (!better(w, h[i], h[c])) return;
    const int32_t t = h[i];
    h[i] = h[c];
    h[c] = t;
    i = c;
  }
}

/*
 * Rearranges order[0..n) so that order[0..m) holds its m best entries sorted best first (the rest keep the others in
 * some order). O(n log m): a heap of the m best with the worst at its root, then heap-sorted.
 */
static void top_sorted(int32_t *order, int32_t n, int32_t m, const double *w) {
  if (m > n) m = n;
  if (m <= 0) return;
  for (int32_t i = m / 2 - 1; i >= 0; i--) sift_worst_down(order, m, i, w);
  for (int32_t j = m; j < n; j++) {
    if (better(w, order[j], order[0])) {
      const int32_t t = order[j];
      order[j] = order[0];
      order[0] = t;
      sift_worst_down(order, m, 0, w);
    }
  }
  for (int32_t end = m - 1; end > 0; end--) {
    const int32_t t = order[0];
    order[0] = order[end];
    order[end] = t;
    sift_worst_down(order, end, 0, w);
  }
}

static void sift_int_down(int32_t *h, int32_t size, int32_t i) {
  for (;;) {
    int32_t c = 2 * i + 1;
    if (c >= size) return;
    if (c + 1 < size && h[c + 1] > h[c]) c++;
    if (h[i] >= h[c]) return;
    const int32_t t = h[i];
    h[i] = h[c];
    h[c] = t;
    i = c;
  }
}

static void sort_ids(int32_t *a, int32_t n) {
  for (int32_t i = n / 2 - 1; i >= 0; i--) sift_int_down(a, n, i);
  for (int32_t end = n - 1; end > 0; end--) {
    const int32_t t = a[0];
    a[0] = a[end];
    a[end] = t;
    sift_int_down(a, end, 0);
  }
}

/* Penalties (step 2 of the rule) on work. The history the penalties see for row r is the batch's history followed by
 * the row's r preceding drafts as generated tokens: what plain decoding would have seen at that position. */
static void apply_penalties(const rill_step_batch *b, int32_t i, int32_t r, scratch_view *s) {
  const int32_t hs = b->history_start[i], he = b->history_start[i + 1];
  const int32_t gen = hs + b->history_prompt_lens[i];
  const int32_t d = b->draft_counts[i];
  const int32_t *drafts = b->tokens + b->query_start[i + 1] - d;
  const double fp = b->frequency_penalty[i], pp = b->presence_penalty[i], rp = b->repetition_penalty[i];
  double *w = s->work;
  if (fp != 0 || pp != 0) {
    int32_t *c = s->counts;
    for (int32_t h = gen; h < he; h++) c[b->history[h]] = 0;
    for (int32_t j = 0; j < r; j++) c[drafts[j]] = 0;
    for (int32_t h = gen; h < he; h++) c[b->history[h]]++;
    for (int32_t j = 0; j < r; j++) c[drafts[j]]++;
    for (int32_t h = gen; h < he + r; h++) {
      const int32_t t = h < he ? b->history[h] : drafts[h - he];
      if (c[t] > 0) {
        w[t] -= fp * c[t] + pp;
        c[t] = 0;
      }
    }
  }
  if (rp != 1) {
    uint8_t *seen = s->seen;
    for (int32_t h = hs; h < he; h++) seen[b->history[h]] = 0;
    for (int32_t j = 0; j < r; j++) seen[drafts[j]] = 0;
    for (int32_t h = hs; h < he + r; h++) {
      const int32_t t = h < he ? b->history[h] : drafts[h - he];
      if (!seen[t]) {
        seen[t] = 1;
        w[t] = w[t] > 0 ? w[t] / rp : w[t] * rp;
      }
    }
  }
}

/* Logit bias (step 2 of the rule, after the penalties): each entry of the sequence adds its value to its token. */
static void apply_logit_bias(const rill_step_batch *b, int32_t i, double *w) {
  for (int32_t k = b->bias_start[i]; k < b->bias_start[i + 1]; k++) w[b->bias_ids[k]] += (double)b->bias_values[k];
}

/* Greedy with no penalty or mask: every row of sequence i is the argmax of its raw logits. */
static int plain_greedy(const rill_step_batch *b, int32_t i) {
  return b->frequency_penalty[i] == 0 && b->presence_penalty[i] == 0 && b->repetition_penalty[i] == 1 &&
         b->mask_row_start[i] < 0 && b->bias_start[i] == b->bias_start[i + 1] && b->temperature[i] == 0;
}

/* Samples row r of sequence i from raw (V logits) by the rule of docs/backend-step.md; *out gets the token. */
static rill_status sample_row(const rill_step_batch *b, int32_t i, int32_t r, const float *raw, int32_t V,
                              scratch_view *s, int32_t *out, char *err, size_t err_cap) {
  double *w = s->work;
  if (plain_greedy(b, i)) {
    /* Greedy on untouched logits: the argmax of the row itself (the general path below gives the same token). */
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
  /* A NaN logit (a broken model) can never be chosen: it ranks as an impossible token. */
  for (int32_t t = 0; t < V; t++) w[t] = isnan(raw[t]) ? -INFINITY : (double)raw[t];
  apply_penalties(b, i, r, s);
  apply_logit_bias(b, i, w);

  int32_t first_allowed = 0;
  if (b->mask_row_start[i] >= 0) {
    const size_t words = ((size_t)V + 31) / 32;
    const uint32_t *m = b->allowed_mask + ((size_t)b->mask_row_start[i] + (size_t)r) * words;
    first_allowed = -1;
    for (int32_t t = 0; t < V; t++) {
      if ((m[t >> 5] >> (t & 31)) & 1u) {
        if (first_allowed < 0) first_allowed = t;
      } else {
        w[t] = -INFINITY;
      }
    }
    if (first_allowed < 0)
      return fail(err, err_cap, "allowed_mask row %d (sequence %d, seq_id %d) allows no token",
                  b->mask_row_start[i] + r, i, b->seq_ids[i]);
  }

  int32_t best = -1;
  double max = -INFINITY;
  for (int32_t t = 0; t < V; t++) {
    if (w[t] > max) {
      max = w[t];
      best = t;
    }
  }
  /* Every allowed logit is -inf: no distribution to draw from, so the rule's tie-break (lowest id) decides. */
  if (best < 0) best = first_allowed;
  const double temperature = b->temperature[i];
  if (temperature == 0 || max == -INFINITY || max == INFINITY) {
    *out = best;
    return RILL_OK;
  }

  /* Unnormalised probabilities e_t = exp((l_t - max) / T); the largest is exactly 1. Candidates in ascending id. */
  int32_t *order = s->order;
  int32_t n = 0;
  for (int32_t t = 0; t < V; t++) {
    const double e = exp((w[t] - max) / temperature);
    w[t] = e;
    if (e > 0) order[n++] = t;
  }

  int32_t kept = n;
  int sorted = 0; /* order[0..kept) is sorted best first (else in ascending id order) */
  const int32_t top_k = b->top_k[i];
  if (top_k > 0 && top_k < n) {
    top_sorted(order, n, top_k, w);
    kept = top_k;
    sorted = 1;
  }
  const double top_p = b->top_p[i];
  if (top_p > 0 && top_p < 1 && kept > 1) {
    double total = 0;
    for (int32_t j = 0; j < kept; j++) total += w[order[j]];
    const double target = top_p * total;
    const int32_t pool = kept;
    int32_t m = sorted ? pool : (pool < 64 ? pool : 64);
    for (;;) {
      if (!sorted) top_sorted(order, pool, m, w);
      double acc = 0;
      int32_t reached = -1;
      for (int32_t j = 0; j < m; j++) {
        acc += w[order[j]];
        if (acc >= target) {
          reached = j + 1;
          break;
        }
      }
      if (reached > 0) {
        kept = reached;
        break;
      }
      if (m == pool) {
        kept = pool; /* rounding kept the full sum just under top_p · total */
        break;
      }
      m = m > pool / 4 ? pool : m * 4;
    }
    sorted = 1;
  }
  const double min_p = b->min_p[i];
  if (min_p > 0 && kept > 1) {
    const double threshold = min_p * 1.0; /* the largest kept probability is e_best = 1 */
    if (sorted) {
      while (kept > 1 && w[order[kept - 1]] < threshold) kept--;
    } else {
      int32_t k2 = 0;
      for (int32_t j = 0; j < kept; j++)
        if (w[order[j]] >= threshold) order[k2++] = order[j];
      kept = k2;
    }
  }
  if (sorted) sort_ids(order, kept);

  double total = 0;
  for (int32_t j = 0; j < kept; j++) total += w[order[j]];
  const int32_t position = b->context_lens[i] - b->draft_counts[i] + r; /* where the sampled token will sit */
  const double u = rill_uniform(b->seeds[i], (uint32_t)position, 0);
  const double target = u * total;
  double run = 0;
  for (int32_t j = 0; j < kept; j++) {
    run += w[order[j]];
    if (run > target) {
      *out = order[j];
      return RILL_OK;
    }
  }
  *out = order[kept - 1]; /* u · total rounded up to total */
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
  for (int32_t j = 0; j < n; j++) {
    if (j < count) {
      lps[j] = (float)((double)raw[ids[j]] - log_z);
    } else {
      ids[j] = -1;
      lps[j] = -INFINITY;
    }
  }
}

/* Samples and verifies sequence i, whose draft_counts[i] + 1 logits rows start at row, into its result rows. The
 * caller has checked draft_counts[i] and logprobs[i] against the limits. Reads and writes nothing of any other
 * sequence, so sequences may run on different threads, each with its own scratch. */
static rill_status sample_seq(const rill_step_batch *b, int32_t i, const float *row, int32_t vocab_size, size_t K1,
                              size_t L, scratch_view *s, rill_step_result *out, char *err, size_t err_cap) {
  const size_t V = (size_t)vocab_size;
  const int32_t d = b->draft_counts[i], lp = b->logprobs[i];
  const int32_t *drafts = b->tokens + b->query_start[i + 1] - d;
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
      out->logprobs[slot] = (float)((double)raw[x] - log_z);
      if (lp > 0) top_alternatives(raw, vocab_size, lp, log_z, out->top_ids + slot * L, out->top_logprobs + slot * L);
    } else {
      out->logprobs[slot] = 0.0f;
    }
    if (r < d && x != drafts[r]) {
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
    return fail(err, err_cap, "rill_sample_batch: a required pointer is NULL");
  if (vocab_size < 1 || max_drafts < 0 || max_top_logprobs < 0)
    return fail(err, err_cap, "rill_sample_batch: vocab_size %d, max_drafts %d, max_top_logprobs %d are invalid",
                vocab_size, max_drafts, max_top_logprobs);
  return RILL_OK;
}

rill_status rill_sample_batch(const rill_step_batch *b, const float *logits, int32_t vocab_size, int32_t max_drafts,
                              int32_t max_top_logprobs, void *scratch, rill_step_result *out, char *err,
                              size_t err_cap) {
  rill_status st = check_args(b, logits, vocab_size, max_drafts, max_top_logprobs, scratch, out, err, err_cap);
  if (st != RILL_OK) return st;
  const size_t V = (size_t)vocab_size, K1 = (size_t)max_drafts + 1, L = (size_t)max_top_logprobs;
  scratch_view s = view_scratch(scratch, vocab_size);
  const float *row = logits;
  for (int32_t i = 0; i < b->num_seqs; i++) {
    out->counts[i] = 0;
    if (!b->sample_flags[i]) continue;
    const int32_t d = b->draft_counts[i], lp = b->logprobs[i];
    if (d < 0 || d > max_drafts || lp > max_top_logprobs)
      return fail(err, err_cap, "sequence %d: draft count %d or logprobs %d over the limits", i, d, lp);
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

static size_t thread_scratch_stride(int32_t vocab_size) { return align64(rill_sample_scratch_bytes(vocab_size)); }

size_t rill_sample_pool_scratch_bytes(int32_t vocab_size, int threads, int32_t max_seqs) {
  if (vocab_size < 1 || threads < 1 || max_seqs < 1) return 0;
  return (size_t)threads * (thread_scratch_stride(vocab_size) + align64(sizeof(thread_failure))) +
         align64((size_t)max_seqs * sizeof(int64_t));
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
  scratch_view s = view_scratch(j->thread_scratch + (size_t)thread * j->stride, j->vocab_size);
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
  if (pool == NULL) return fail(err, err_cap, "rill_sample_batch_pooled: pool is NULL");
  if (b->num_seqs > max_seqs)
    return fail(err, err_cap, "rill_sample_batch_pooled: %d sequences over the scratch's %d", b->num_seqs, max_seqs);
  const int threads = rill_pool_threads(pool);
  const size_t stride = thread_scratch_stride(vocab_size);
  uint8_t *p = scratch;
  pool_job j = {.b = b, .logits = logits, .vocab_size = vocab_size, .K1 = (size_t)max_drafts + 1,
                .L = (size_t)max_top_logprobs, .thread_scratch = p, .stride = stride, .out = out};
  p += (size_t)threads * stride;
  j.failures = (thread_failure *)(void *)p;
  p += (size_t)threads * align64(sizeof(thread_failure));
  int64_t *row_start = (int64_t *)(void *)p;
  j.row_start = row_start;
  /* The limits checks and row offsets in batch order, as the serial loop meets them. */
  int64_t row = 0, full_rows = 0;
  for (int32_t i = 0; i < b->num_seqs; i++) {
    out->counts[i] = 0;
    if (!b->sample_flags[i]) continue;
    const int32_t d = b->draft_counts[i], lp = b->logprobs[i];
    if (d < 0 || d > max_drafts || lp > max_top_logprobs)
      return fail(err, err_cap, "sequence %d: draft count %d or logprobs %d over the limits", i, d, lp);
    row_start[i] = row;
    row += d + 1;
    if (!plain_greedy(b, i) || lp >= 0) full_rows += d + 1;
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
