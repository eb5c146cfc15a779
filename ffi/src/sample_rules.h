/*
 * The sampling rule of docs/backend-step.md ("Sampling, specified once"), written once for the CPU sampler
 * (sample.c) and the CUDA sampler (ffi/devices/cuda/sample.cu and its host side in ffi/devices/cuda/cuda_device.cu). The row
 * functions are static inline and RILL_HD: the C compiler builds them for the CPU device, nvcc for the GPU, so both
 * devices take every serial decision by this text. The CUDA sampler's parallel passes (its argmaxes, radix selects
 * and prefix sums) decide only where they provably agree with these rules, and hand every other row to
 * rill_sample_draw (sample.cu explains the bound); its parallel orders compare by rill_sample_before and
 * rill_sample_key_before.
 *
 * A row, in order: raw logits (a NaN ranks as -inf: rill_sample_logit), penalties over the row's history
 * (rill_sample_penalties), logit bias (rill_sample_bias), mask (rill_sample_mask_allows); then greedy, or the
 * weights e_t = exp((l_t − max) / T) (rill_sample_weight) narrowed by top-k, top-p and min-p and drawn from by the
 * Philox uniform of the token's position (rill_sample_draw). Logprobs come from the raw row (rill_sample_logprob,
 * rill_sample_fill_alternatives); drafts are accepted while the row's token equals the draft (rill_sample_rejects).
 */
#ifndef RILL_SAMPLE_RULES_H
#define RILL_SAMPLE_RULES_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "fail.h"
#include "host_device.h"
#include "philox.h"
#include "rill.h"

/* ---- one row's scratch ---- */

/*
 * Each part 64-byte aligned: work[V] doubles (the row's logits after penalties and mask, then its unnormalised
 * probabilities), order[V] and counts[V] int32, seen[V] bytes. Nothing is kept between rows: every entry is written
 * before it is read.
 */
typedef struct rill_sample_scratch {
  double *work;
  int32_t *order;
  int32_t *counts;
  uint8_t *seen;
} rill_sample_scratch;

static inline RILL_HD size_t rill_align64(size_t n) { return (n + 63) & ~(size_t)63; }

static inline RILL_HD size_t rill_sample_row_bytes(size_t vocab) {
  return rill_align64(vocab * sizeof(double)) + 2 * rill_align64(vocab * sizeof(int32_t)) + rill_align64(vocab);
}

/* The parts of one row's scratch of rill_sample_row_bytes(vocab) bytes at p (64-byte aligned). */
static inline RILL_HD rill_sample_scratch rill_sample_scratch_at(void *p, size_t vocab) {
  uint8_t *at = (uint8_t *)p;
  rill_sample_scratch s;
  s.work = (double *)(void *)at;
  at += rill_align64(vocab * sizeof(double));
  s.order = (int32_t *)(void *)at;
  at += rill_align64(vocab * sizeof(int32_t));
  s.counts = (int32_t *)(void *)at;
  at += rill_align64(vocab * sizeof(int32_t));
  s.seen = at;
  return s;
}

/* ---- the sampling order ---- */

/* a ranks before b: more probable first, ties to the lower id. Ids are distinct, so this is a strict total order. */
static inline RILL_HD int rill_sample_before(double va, int32_t a, double vb, int32_t b) {
  return va > vb || (va == vb && a < b);
}

/* The same order over keys whose unsigned order is the values' order (the CUDA selections' radix keys). */
static inline RILL_HD int rill_sample_key_before(uint64_t ka, int32_t a, uint64_t kb, int32_t b) {
  return ka > kb || (ka == kb && a < b);
}

/* ---- a row's logits ---- */

/* A raw logit as the rule reads it: a NaN (a broken model) can never be chosen, so it ranks as an impossible token. */
static inline RILL_HD double rill_sample_logit(float raw) { return isnan(raw) ? -INFINITY : (double)raw; }

/* One sequence's sampling parameters (rill.h's RILL_SAMPLING_FIELDS), read once per row by the CPU sampler and packed
 * as they are into each CUDA sample job. */
typedef struct rill_sample_row {
#define RILL_SAMPLE_ROW_FIELD(name, type, limit, neutral) type name;
  RILL_SAMPLING_FIELDS(RILL_SAMPLE_ROW_FIELD)
#undef RILL_SAMPLE_ROW_FIELD
} rill_sample_row;

static inline rill_sample_row rill_sample_row_at(const rill_step_batch *b, int32_t i) {
  rill_sample_row p;
#define RILL_SAMPLE_ROW_READ(name, type, limit, neutral) p.name = b->name[i];
  RILL_SAMPLING_FIELDS(RILL_SAMPLE_ROW_READ)
#undef RILL_SAMPLE_ROW_READ
  return p;
}

/*
 * Penalties (step 2 of the rule) on w. history[hs, he) is the sequence's history, its generated part from gen; the
 * row's history is that followed by its r preceding drafts as generated tokens: what plain decoding would have seen at
 * that position. counts and seen are vocabulary-sized scratch, written before read.
 */
static inline RILL_HD void rill_sample_penalties(const int32_t *history, int32_t hs, int32_t gen, int32_t he,
                                                 const int32_t *drafts, int32_t r, const rill_sample_row *p,
                                                 double *w, int32_t *counts, uint8_t *seen) {
  const double frequency = p->frequency_penalty, presence = p->presence_penalty, repetition = p->repetition_penalty;
  if (frequency != 0 || presence != 0) {
    int32_t *c = counts;
    for (int32_t h = gen; h < he; h++) c[history[h]] = 0;
    for (int32_t j = 0; j < r; j++) c[drafts[j]] = 0;
    for (int32_t h = gen; h < he; h++) c[history[h]]++;
    for (int32_t j = 0; j < r; j++) c[drafts[j]]++;
    for (int32_t h = gen; h < he + r; h++) {
      const int32_t t = h < he ? history[h] : drafts[h - he];
      if (c[t] > 0) {
        w[t] -= frequency * c[t] + presence;
        c[t] = 0;
      }
    }
  }
  if (repetition != 1) {
    for (int32_t h = hs; h < he; h++) seen[history[h]] = 0;
    for (int32_t j = 0; j < r; j++) seen[drafts[j]] = 0;
    for (int32_t h = hs; h < he + r; h++) {
      const int32_t t = h < he ? history[h] : drafts[h - he];
      if (!seen[t]) {
        seen[t] = 1;
        w[t] = w[t] > 0 ? w[t] / repetition : w[t] * repetition;
      }
    }
  }
}

/* Logit bias (step 2, after the penalties): entry k in [start, end) adds values[k] to its token, in double. */
static inline RILL_HD void rill_sample_bias(const int32_t *ids, const float *values, int32_t start, int32_t end,
                                            double *w) {
  for (int32_t k = start; k < end; k++) w[ids[k]] += (double)values[k];
}

static inline RILL_HD size_t rill_sample_mask_words(int32_t vocab) { return ((size_t)vocab + 31) / 32; }

/* Whether token t is allowed by a mask row of rill_sample_mask_words(V) words (bit t % 32 of word t / 32). */
static inline RILL_HD int rill_sample_mask_allows(const uint32_t *row, int32_t t) {
  return (int)((row[t >> 5] >> (t & 31)) & 1u);
}

/* Greedy decides the row (step 4) when the temperature is 0, or when the largest logit is ±inf (no distribution to
 * draw from: the argmax, ties to the lowest id, is the token). */
static inline RILL_HD int rill_sample_is_greedy(double temperature, double max) {
  return temperature == 0 || max == -INFINITY || max == INFINITY;
}

/* The unnormalised probability of logit l (step 5): the largest, l = max, is exactly 1. */
static inline RILL_HD double rill_sample_weight(double l, double max, double temperature) {
  return exp((l - max) / temperature);
}

/* ---- top-k, top-p, min-p and the draw ---- */

static inline RILL_HD void rill_sample_sift_worst_down(int32_t *h, int32_t size, int32_t i, const double *w) {
  for (;;) {
    int32_t c = 2 * i + 1;
    if (c >= size) return;
    if (c + 1 < size && rill_sample_before(w[h[c]], h[c], w[h[c + 1]], h[c + 1])) c++;
    if (!rill_sample_before(w[h[i]], h[i], w[h[c]], h[c])) return;
    const int32_t t = h[i];
    h[i] = h[c];
    h[c] = t;
    i = c;
  }
}

/*
 * Rearranges order[0..n) so that order[0..m) holds its m best entries by w, sorted best first (the rest keep the
 * others in some order). O(n log m): a heap of the m best with the worst at its root, then heap-sorted.
 */
static inline RILL_HD void rill_sample_top_sorted(int32_t *order, int32_t n, int32_t m, const double *w) {
  if (m > n) m = n;
  if (m <= 0) return;
  for (int32_t i = m / 2 - 1; i >= 0; i--) rill_sample_sift_worst_down(order, m, i, w);
  for (int32_t j = m; j < n; j++) {
    if (rill_sample_before(w[order[j]], order[j], w[order[0]], order[0])) {
      const int32_t t = order[j];
      order[j] = order[0];
      order[0] = t;
      rill_sample_sift_worst_down(order, m, 0, w);
    }
  }
  for (int32_t end = m - 1; end > 0; end--) {
    const int32_t t = order[0];
    order[0] = order[end];
    order[end] = t;
    rill_sample_sift_worst_down(order, end, 0, w);
  }
}

static inline RILL_HD void rill_sample_sift_id_down(int32_t *h, int32_t size, int32_t i) {
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

/* Sorts a[0..n) ascending (a heap sort: no recursion, no allocation, on the device too). */
static inline RILL_HD void rill_sample_sort_ids(int32_t *a, int32_t n) {
  for (int32_t i = n / 2 - 1; i >= 0; i--) rill_sample_sift_id_down(a, n, i);
  for (int32_t end = n - 1; end > 0; end--) {
    const int32_t t = a[0];
    a[0] = a[end];
    a[end] = t;
    rill_sample_sift_id_down(a, end, 0);
  }
}

/*
 * Step 5 and 6 on a row's weights w[0..V) (the largest exactly 1): the candidates (weight > 0) narrowed by top-k,
 * top-p and min-p, then the first, in ascending id, at which the running sum of kept weights exceeds u · total.
 * order: V int32 of scratch. top-p sums its candidates most probable first, sorting only as many as it needs (64,
 * then 4× more); the draw sums in ascending id order, so the result is the rule's whatever the sort did.
 */
static inline RILL_HD int32_t rill_sample_draw(const double *w, int32_t V, int32_t *order, int32_t top_k, double top_p,
                                               double min_p, double u) {
  int32_t n = 0;
  for (int32_t t = 0; t < V; t++)
    if (w[t] > 0) order[n++] = t;
  int32_t kept = n;
  int sorted = 0; /* order[0..kept) is sorted best first (else in ascending id order) */
  if (top_k > 0 && top_k < n) {
    rill_sample_top_sorted(order, n, top_k, w);
    kept = top_k;
    sorted = 1;
  }
  if (top_p > 0 && top_p < 1 && kept > 1) {
    double total = 0;
    for (int32_t j = 0; j < kept; j++) total += w[order[j]];
    const double target = top_p * total;
    const int32_t pool = kept;
    int32_t m = sorted ? pool : (pool < 64 ? pool : 64);
    for (;;) {
      if (!sorted) rill_sample_top_sorted(order, pool, m, w);
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
  if (sorted) rill_sample_sort_ids(order, kept);

  double total = 0;
  for (int32_t j = 0; j < kept; j++) total += w[order[j]];
  const double target = u * total;
  double run = 0;
  for (int32_t j = 0; j < kept; j++) {
    run += w[order[j]];
    if (run > target) return order[j];
  }
  return order[kept - 1]; /* u · total rounded up to total */
}

/* ---- logprobs ---- */

/* The logprob of a raw logit under log Z (the log-partition of the raw row at temperature 1, NaNs ignored). */
static inline RILL_HD float rill_sample_logprob(float raw, double log_z) { return (float)((double)raw - log_z); }

/* Top alternatives, ids[0..count) holding the count largest non-NaN raw logits, descending, ties to the lower id:
 * their logprobs; slots [count, n) get id -1 and -inf. */
static inline RILL_HD void rill_sample_fill_alternatives(const float *raw, int32_t n, int32_t count, double log_z,
                                                         int32_t *ids, float *lps) {
  for (int32_t j = 0; j < n; j++) {
    if (j < count) {
      lps[j] = rill_sample_logprob(raw[ids[j]], log_z);
    } else {
      ids[j] = -1;
      lps[j] = -INFINITY;
    }
  }
}

/* ---- a sequence of a step batch (host side of either device) ---- */

/* Greedy with no penalty, bias or mask: every row of sequence i is the argmax of its raw logits, ties to the lowest
 * id (the general path gives the same token). */
static inline int rill_sample_plain(const rill_step_batch *b, int32_t i) {
  return b->frequency_penalty[i] == 0 && b->presence_penalty[i] == 0 && b->repetition_penalty[i] == 1 &&
         b->mask_row_start[i] < 0 && b->bias_start[i] == b->bias_start[i + 1] && b->temperature[i] == 0;
}

/* Sequence i's drafts: its last draft_counts[i] fed tokens. */
static inline const int32_t *rill_sample_drafts(const rill_step_batch *b, int32_t i) {
  return b->tokens + b->query_start[i + 1] - b->draft_counts[i];
}

/* The position row r of sequence i samples for (where its token will sit): the Philox counter of its draw. */
static inline int32_t rill_sample_position(const rill_step_batch *b, int32_t i, int32_t r) {
  return b->context_lens[i] - b->draft_counts[i] + r;
}

/* Verification: row r's token x ends sequence i's rows when it is not the draft it verifies (the last row, r = d,
 * always ends them). */
static inline int rill_sample_rejects(const rill_step_batch *b, int32_t i, int32_t r, int32_t x) {
  return r < b->draft_counts[i] && x != rill_sample_drafts(b, i)[r];
}

/* The step's failure when row r of sequence i allows no token (rule 3). */
static inline rill_status rill_sample_fail_no_token(const rill_step_batch *b, int32_t i, int32_t r, char *err,
                                                    size_t err_cap) {
  return rill_fail(err, err_cap, RILL_ERR_INVALID_ARGUMENT,
                   "allowed_mask row %d (sequence %d, seq_id %d) allows no token", b->mask_row_start[i] + r, i,
                   b->seq_ids[i]);
}

#endif /* RILL_SAMPLE_RULES_H */
