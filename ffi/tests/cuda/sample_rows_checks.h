/*
 * The device sampler kernel (ffi/devices/cuda/sample.cu) against the host sampler (ffi/src/sample.c) on the same random
 * logits, with no model between them: many batches of rows over vocabularies from 1 to 151936 tokens, logits spread
 * wide or narrow, quantised (ties), all equal, topped by ±0, with -inf and NaN entries, and every sampling parameter: temperature,
 * top-k (1, small, vocab - 1, ≥ vocab), top-p (1, 0.9, 0.5, tiny), min-p, penalties over a history with the drafts,
 * logit bias, allowed masks and logprobs with top alternatives. Every row the host samples must get the same token
 * from the device, logprobs within float rounding of a double sum in another order, and the same top ids.
 * Included once, by test_cuda_emu.cpp (its checks count in that program's summary).
 */
#ifndef RILL_TESTS_CUDA_SAMPLE_ROWS_CHECKS_H
#define RILL_TESTS_CUDA_SAMPLE_ROWS_CHECKS_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <vector>

#include "../check.h"
#include "cuda/sample.cuh"
#include "xorshift.h"
#include "rill.h"
extern "C" {
#include "sample.h" /* a C header without C++ guards */
}

namespace sample_rows {

constexpr int kMaxSeqs = 6, kMaxDrafts = 3, kTop = 20;

struct gen : xorshift64s {
  double unit() { return (double)next() / 4294967296.0; }
};

/* One batch: the host's step-batch arrays and the logits of its sampled rows. */
struct batch {
  int32_t V = 0, S = 0, R = 0;
  int32_t seq_ids[kMaxSeqs], query_start[kMaxSeqs + 1], context_lens[kMaxSeqs], draft_counts[kMaxSeqs];
  uint8_t sample_flags[kMaxSeqs];
#define SAMPLING_ARRAY(name, type, limit, neutral) type name[kMaxSeqs];
  RILL_SAMPLING_FIELDS(SAMPLING_ARRAY)
#undef SAMPLING_ARRAY
  int32_t mask_row_start[kMaxSeqs];
  int32_t history_start[kMaxSeqs + 1], history_prompt_lens[kMaxSeqs], bias_start[kMaxSeqs + 1];
  std::vector<int32_t> tokens, history, bias_ids;
  std::vector<float> bias_values, logits;
  std::vector<uint32_t> mask;

  rill_step_batch view() const {
    rill_step_batch b;
    memset(&b, 0, sizeof b);
    b.num_seqs = S;
    b.num_tokens = (int32_t)tokens.size();
    b.seq_ids = seq_ids;
    b.tokens = tokens.data();
    b.query_start = query_start;
    b.context_lens = context_lens;
    b.draft_counts = draft_counts;
    b.sample_flags = sample_flags;
#define SAMPLING_POINTER(name, type, limit, neutral) b.name = name;
    RILL_SAMPLING_FIELDS(SAMPLING_POINTER)
#undef SAMPLING_POINTER
    b.mask_row_start = mask_row_start;
    b.allowed_mask = mask.data();
    b.num_mask_rows = (int32_t)(mask.size() / (((size_t)V + 31) / 32));
    b.history_start = history_start;
    b.history = history.data();
    b.history_len = (int32_t)history.size();
    b.history_prompt_lens = history_prompt_lens;
    b.bias_start = bias_start;
    b.bias_ids = bias_ids.data();
    b.bias_values = bias_values.data();
    b.bias_len = (int32_t)bias_ids.size();
    return b;
  }
};

/* A logits row of one of several shapes; every row has some finite entry. */
void fill_row(gen *g, float *row, int32_t V, int shape) {
  const double scale = shape == 0 ? 0.5 : shape == 1 ? 3.0 : shape == 2 ? 12.0 : 40.0;
  for (int32_t t = 0; t < V; t++) {
    double x = (g->unit() * 2.0 - 1.0) * scale;
    if (shape == 4) x = floor(x * 2.0) / 2.0; /* quantised: ties everywhere, and ±0 */
    if (shape == 5) x = 1.25;                 /* all equal */
    if (shape == 6) x = g->below(50) == 0 ? 8.0 + g->unit() : g->unit(); /* a few strong, a flat tail */
    if (shape == 7) x = g->below(3) == 0 ? -1.0 : 0.0; /* the largest are ±0: equal, so ranked by id */
    row[t] = (float)x;
    if ((shape == 4 || shape == 7) && x == 0.0 && g->below(2) == 0) row[t] = -0.0f;
  }
  if (shape >= 3 && shape != 7 && V > 2) {
    /* -inf and NaN entries. */
    for (int k = 0; k < 1 + V / 50; k++) row[g->below(V)] = g->below(2) ? -INFINITY : NAN;
    row[g->below(V)] = 1.0f;
  }
}

void make_batch(gen *g, batch *b) {
  const int32_t vocabs[10] = {1, 2, 5, 33, 100, 257, 1000, 4099, 32000, 151936};
  const int32_t pick = g->below(40);
  b->V = vocabs[pick < 36 ? pick % 8 : 8 + pick % 2];
  const int32_t V = b->V;
  b->S = 1 + g->below(kMaxSeqs);
  b->R = 0;
  b->tokens.clear();
  b->history.clear();
  b->bias_ids.clear();
  b->bias_values.clear();
  b->mask.clear();
  const size_t words = ((size_t)V + 31) / 32;
  const float temps[6] = {0.0f, 0.3f, 0.7f, 1.0f, 1.6f, 5.0f}, top_ps[6] = {1.0f, 0.95f, 0.9f, 0.5f, 1e-6f, 0.0f};
  const float min_ps[4] = {0.0f, 0.05f, 0.3f, 1.0f};
  const int32_t lps[5] = {-1, 0, 1, 5, kTop};
  for (int32_t i = 0; i < b->S; i++) {
    const int32_t d = g->below(kMaxDrafts + 1), fed = d + 1 + g->below(3);
#define SAMPLING_NEUTRAL(name, type, limit, neutral) b->name[i] = (type)(neutral);
    RILL_SAMPLING_FIELDS(SAMPLING_NEUTRAL)
#undef SAMPLING_NEUTRAL
    b->seq_ids[i] = 10 + i;
    b->query_start[i] = (int32_t)b->tokens.size();
    for (int32_t k = 0; k < fed; k++) b->tokens.push_back(g->below(V));
    b->context_lens[i] = fed + g->below(100);
    b->draft_counts[i] = d;
    b->sample_flags[i] = i == 0 || g->below(8) != 0;
    b->temperature[i] = temps[g->below(6)];
    b->top_p[i] = top_ps[g->below(6)];
    b->min_p[i] = min_ps[g->below(4)];
    const int32_t ks[8] = {0, 1, 2, 5, 40, V - 1, V, V + 5};
    b->top_k[i] = ks[g->below(8)];
    b->logprobs[i] = lps[g->below(5)];
    b->seeds[i] = ((uint64_t)g->next() << 32) | g->next();
    b->presence_penalty[i] = b->frequency_penalty[i] = 0.0f;
    b->repetition_penalty[i] = 1.0f;
    b->history_start[i] = (int32_t)b->history.size();
    b->history_prompt_lens[i] = 0;
    if (g->below(3) == 0) {
      b->presence_penalty[i] = (float)g->unit() * 1.5f;
      b->frequency_penalty[i] = (float)g->unit();
      b->repetition_penalty[i] = g->below(2) == 0 ? 1.0f + (float)g->unit() : 0.5f + 0.5f * (float)g->unit();
      const int32_t n = 1 + g->below(30);
      for (int32_t k = 0; k < n; k++) b->history.push_back(g->below(k < 8 ? V : (V < 16 ? V : 16)));
      b->history_prompt_lens[i] = g->below(n + 1);
    }
    b->bias_start[i] = (int32_t)b->bias_ids.size();
    if (g->below(4) == 0) {
      const int32_t n = 1 + g->below(4);
      for (int32_t k = 0; k < n; k++) {
        b->bias_ids.push_back(g->below(V));
        b->bias_values.push_back(g->below(5) == 0 ? 100.0f : (float)(g->unit() - 0.5) * 10.0f);
      }
    }
    b->mask_row_start[i] = -1;
    if (g->below(4) == 0) {
      b->mask_row_start[i] = (int32_t)(b->mask.size() / words);
      for (int32_t r = 0; r <= d; r++) {
        const size_t at = b->mask.size();
        for (size_t w = 0; w < words; w++) b->mask.push_back(g->below(4) == 0 ? ~0u : g->next() & g->next());
        if (V % 32 != 0) b->mask[at + words - 1] &= (1u << (V % 32)) - 1;
        b->mask[at + (size_t)g->below(V) / 32] |= 1u; /* some token allowed */
        b->mask[at] |= 1u;
      }
    }
    if (b->sample_flags[i]) b->R += d + 1;
  }
  b->query_start[b->S] = (int32_t)b->tokens.size();
  b->history_start[b->S] = (int32_t)b->history.size();
  b->bias_start[b->S] = (int32_t)b->bias_ids.size();
  if (b->mask.empty()) b->mask.push_back(0);
  b->logits.assign((size_t)b->R * (size_t)V, 0.0f);
  for (int32_t r = 0; r < b->R; r++) fill_row(g, b->logits.data() + (size_t)r * V, V, g->below(8));
}

struct outputs {
  std::vector<int32_t> counts, tokens, top_ids;
  std::vector<float> lps, top_lps;
};

rill_status host_sample(batch *b, std::vector<uint8_t> *scratch, outputs *o, char *err, size_t cap) {
  const size_t K1 = kMaxDrafts + 1;
  o->counts.assign((size_t)b->S, 0);
  o->tokens.assign((size_t)b->S * K1, -7);
  o->lps.assign((size_t)b->S * K1, 0.0f);
  o->top_ids.assign((size_t)b->S * K1 * kTop, -7);
  o->top_lps.assign((size_t)b->S * K1 * kTop, 0.0f);
  scratch->resize(rill_sample_scratch_bytes(b->V) + 64);
  rill_step_result res = {o->counts.data(), o->tokens.data(), o->lps.data(), o->top_ids.data(), o->top_lps.data(),
                          nullptr, nullptr};
  const rill_step_batch v = b->view();
  return rill_sample_batch(&v, b->logits.data(), b->V, kMaxDrafts, kTop, scratch->data(), &res, err, cap);
}

/* The device kernel on b's rows, jobs packed as cuda_device.cu packs them. Per row: token, logprob, top arrays. */
cudaError_t device_sample(const batch *b, outputs *o) {
  std::vector<rill_sample_job> jobs((size_t)b->R);
  std::vector<int32_t> drafts((size_t)b->R + 1, 0);
  const size_t words = ((size_t)b->V + 31) / 32;
  const rill_step_batch v = b->view();
  int32_t R = 0;
  for (int32_t i = 0; i < b->S; i++) {
    if (!b->sample_flags[i]) continue;
    const int32_t dc = b->draft_counts[i], bl = b->bias_start[i + 1] - b->bias_start[i];
    const int plain = rill_sample_plain(&v, i);
    for (int32_t r = 0; r <= dc; r++) {
      rill_sample_job &j = jobs[(size_t)(R + r)];
      memset(&j, 0, sizeof j);
      j.r = r;
      j.plain = plain;
      j.p = rill_sample_row_at(&v, i);
      j.position = b->context_lens[i] - dc + r;
      j.mask_row = b->mask_row_start[i] < 0 ? -1 : b->mask_row_start[i] + r;
      j.hist_off = b->history_start[i];
      j.hist_len = b->history_start[i + 1] - b->history_start[i];
      j.hist_prompt = b->history_prompt_lens[i];
      j.bias_off = b->bias_start[i];
      j.bias_len = bl;
      j.drafts_off = R;
      drafts[(size_t)(R + r)] = r < dc ? b->tokens[(size_t)(b->query_start[i + 1] - dc + r)] : 0;
    }
    R += dc + 1;
  }
  (void)words;
  const int slots = R < kSampleSlots ? R : kSampleSlots;
  std::vector<uint8_t> scratch((size_t)(slots > 0 ? slots : 1) * rill_sample_slot_bytes(b->V) + 64);
  o->tokens.assign((size_t)R, -7);
  o->lps.assign((size_t)R, 0.0f);
  o->top_ids.assign((size_t)R * kTop, -7);
  o->top_lps.assign((size_t)R * kTop, 0.0f);
  const std::vector<int32_t> none(1, 0);
  const std::vector<float> nonef(1, 0.0f);
  return rill_k_sample(nullptr, b->logits.data(), R, b->V, jobs.data(),
                       b->history.empty() ? none.data() : b->history.data(),
                       b->bias_ids.empty() ? none.data() : b->bias_ids.data(),
                       b->bias_values.empty() ? nonef.data() : b->bias_values.data(), drafts.data(), b->mask.data(),
                       scratch.data(), kTop, o->tokens.data(), o->lps.data(), o->top_ids.data(), o->top_lps.data());
}

bool lp_close(float a, float b) {
  if (a == b) return true;
  return fabs((double)a - (double)b) <= 1e-6 * fmax(1.0, fabs((double)a));
}

void run(int cases) {
  gen g{0x243f6a8885a308d3ull};
  std::vector<uint8_t> scratch;
  long rows = 0, mismatches = 0, accepted = 0;
  const long parallel0 = rill_sample_parallel_rows, serial0 = rill_sample_serial_rows;
  for (int c = 0; c < cases; c++) {
    batch b;
    make_batch(&g, &b);
    outputs h, d;
    char err[256] = "";
    /* Drafts made to agree with the host's tokens up to a random row, so later rows are sampled and compared too. */
    for (int32_t i = 0; i < b.S; i++) {
      const int32_t dc = b.draft_counts[i], keep = g.below(dc + 1);
      for (int32_t r = 0; r < keep; r++) {
        if (host_sample(&b, &scratch, &h, err, sizeof err) != RILL_OK || h.counts[(size_t)i] <= r) break;
        b.tokens[(size_t)(b.query_start[i + 1] - dc + r)] = h.tokens[(size_t)i * (kMaxDrafts + 1) + (size_t)r];
      }
    }
    const rill_status hs = host_sample(&b, &scratch, &h, err, sizeof err);
    CHECK_MSG(hs == RILL_OK, "case %d: host sampler: %s", c, err);
    const cudaError_t ds = device_sample(&b, &d);
    CHECK_MSG(ds == cudaSuccess, "case %d: device sampler: %s", c, cudaGetErrorString(ds));
    if (hs != RILL_OK || ds != cudaSuccess) continue;
    int32_t row = 0;
    for (int32_t i = 0; i < b.S; i++) {
      if (!b.sample_flags[i]) continue;
      const int32_t n = h.counts[(size_t)i];
      accepted += n - 1;
      for (int32_t r = 0; r < n; r++, rows++) {
        const size_t hs_at = (size_t)i * (kMaxDrafts + 1) + (size_t)r, ds_at = (size_t)(row + r);
        const int32_t ht = h.tokens[hs_at], dt = d.tokens[ds_at];
        if (ht != dt) mismatches++;
        CHECK_MSG(ht == dt, "case %d (V %d) seq %d row %d (T %g k %d p %g minp %g): host %d, device %d", c, b.V, i, r,
                  (double)b.temperature[i], b.top_k[i], (double)b.top_p[i], (double)b.min_p[i], ht, dt);
        if (b.logprobs[i] < 0) continue;
        CHECK_MSG(lp_close(h.lps[hs_at], d.lps[ds_at]), "case %d seq %d row %d: logprob %.9g vs %.9g", c, i, r,
                  (double)h.lps[hs_at], (double)d.lps[ds_at]);
        for (int32_t k = 0; k < b.logprobs[i]; k++) {
          const size_t ha = hs_at * kTop + (size_t)k, da = ds_at * kTop + (size_t)k;
          CHECK_MSG(h.top_ids[ha] == d.top_ids[da] && lp_close(h.top_lps[ha], d.top_lps[da]),
                    "case %d seq %d row %d top %d: host %d %.9g, device %d %.9g", c, i, r, k, h.top_ids[ha],
                    (double)h.top_lps[ha], d.top_ids[da], (double)d.top_lps[da]);
        }
      }
      row += b.draft_counts[i] + 1;
    }
  }
  const long parallel = rill_sample_parallel_rows - parallel0, serial = rill_sample_serial_rows - serial0;
  /* Most rows are decided in parallel; the quantised and all-equal rows put cumulative sums exactly on top-p
   * thresholds, which the serial path must decide. */
  CHECK_MSG(parallel > 4 * serial && serial > 0, "rows decided in parallel %ld, serially %ld", parallel, serial);
  CHECK(accepted > 0);
  printf("sampler rows: %ld rows compared (%ld drafts accepted), %ld token mismatches; general rows decided in "
         "parallel %ld, serially %ld\n",
         rows, accepted, mismatches, parallel, serial);
}

} // namespace sample_rows

#endif /* RILL_TESTS_CUDA_SAMPLE_ROWS_CHECKS_H */
