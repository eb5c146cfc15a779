/*
 * The device sampler (sample.cuh): one block per row slot, rows r = slot, slot + kSampleSlots, ... Every
 * vocabulary-wide pass runs on all threads of the block: the elementwise ones, the argmaxes and sums, and the
 * selections (top-k, the top-p cut, top logprobs), which are radix selects over (key, id) with block-wide histograms.
 *
 * The host sampler (ffi/src/sample.c) decides top-p and the draw by serial double sums in a fixed order; a parallel
 * sum rounds differently. Both are sums of the same positive terms, so each lies within γ_n · Σ of the exact sum
 * (n terms, γ_n ≈ n · 2^-53); the parallel path takes a decision only when its margin to the threshold exceeds a
 * bound several times that (margin()), which makes the host's serial decision the same one. A row whose decision
 * falls inside the bound (an exact tie of a cumulative sum with the threshold, or u · total within ~1e-10 relative
 * of a boundary) is decided again by the serial rule itself (rill_sample_draw of sample_rules.h, the CPU sampler's
 * code). Tokens therefore equal the host's whenever the weights do.
 *
 * One block per row, not several: each selection pass depends on the previous pass's chosen bin, so a row split over
 * blocks needs a grid-wide barrier per pass (a cooperative launch, or a kernel per pass with the bins in global
 * memory) — several times the launches of a step that runs once per token. With the serial loops gone a row costs a
 * handful of passes over its weights (from L2) per selection, expected to be small beside a decode step (not yet
 * measured on a GPU); a multi-block row is the next step if a profile shows the sampler on the critical path at
 * batch 1.
 */
#include <math.h>
#include <string.h>

#include "block_reduce.cuh"
#include "kernels.cuh"
#include "sample.cuh"
#include "sample_rules.h"

namespace {

constexpr int kThreads = 256;

/* Block argmax, ties to the lower id: (value, id) with id -1 for "none above -inf". Every thread gets the result. */
struct best_t {
  double v;
  int32_t id;
};
__device__ inline best_t pick(best_t a, best_t b) {
  if (b.id < 0) return a;
  if (a.id < 0) return b;
  return rill_sample_before(b.v, b.id, a.v, a.id) ? b : a;
}
__device__ best_t block_argmax(best_t mine, best_t *scratch) {
  __syncthreads();
  scratch[threadIdx.x] = mine;
  __syncthreads();
  for (int stride = kThreads / 2; stride > 0; stride >>= 1) {
    if ((int)threadIdx.x < stride) scratch[threadIdx.x] = pick(scratch[threadIdx.x], scratch[threadIdx.x + stride]);
    __syncthreads();
  }
  return scratch[0];
}

/* ---- block-wide selection ---- */

/* Atomic adds on shared memory; the emulation runs a block's threads as fibers that switch only at barriers and
 * shuffles, so a plain read-modify-write is atomic there. */
template <typename T> __device__ inline T atomic_add(T *p, T v) {
#ifdef RILL_CUDA_EMU
  const T old = *p;
  *p = old + v;
  return old;
#else
  return atomicAdd(p, v);
#endif
}

__device__ inline uint64_t double_key(double v) {
  uint64_t k;
  memcpy(&k, &v, sizeof k); /* v > 0: the bit pattern orders as the value */
  return k;
}

/* A float's total order as an unsigned key, -0 as +0 (the host compares them equal, so ties go to the lower id). */
__device__ inline uint64_t float_key(float v) {
  if (v == 0.0f) v = 0.0f;
  uint32_t b;
  memcpy(&b, &v, sizeof b);
  return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}

constexpr int kBins = 256;

/* Shared state of a selection. A member's radix digits are its key's kd bytes, high first, then the 4 bytes of ~id
 * (a lower id is a larger digit), so digit order is the sampling order and every member has a distinct digit string. */
struct select_ws {
  int32_t count[kBins];
  double mass[kBins];
  uint64_t kp;      /* the key bytes chosen so far (all kd once the id digits start) */
  uint32_t ip;      /* the ~id bytes chosen so far */
  int32_t status;   /* after a pass: 0 go on, 1 one member left in the chosen bin, 2 digits exhausted, -1 none */
  int32_t count_above; /* members before the selected one */
  double mass_above;   /* their mass, summed in some order */
  uint64_t key;        /* the selected member */
  int32_t id;
};

__device__ inline bool in_play(uint64_t k, uint32_t nid, int p, int kd, uint64_t kp, uint32_t ip) {
  if (p <= kd) return p == 0 || (k >> (8 * (kd - p))) == kp;
  return k == kp && (nid >> (8 * (4 - (p - kd)))) == ip;
}

__device__ inline int digit_of(uint64_t k, uint32_t nid, int p, int kd) {
  return p < kd ? (int)((k >> (8 * (kd - 1 - p))) & 255u) : (int)((nid >> (8 * (3 - (p - kd)))) & 255u);
}

/*
 * Walks the members of set (set.get(t, &key, &mass): whether token t is one) in the sampling order and selects the
 * first at which, by count, more than rank members have been met (by_mass false: the member of that rank), or, by
 * mass, the running mass reaches target. One pass over the vocabulary per radix digit, stopping as soon as the chosen
 * bin holds a single member. Returns false (no member selected) when the members run out first. Every thread must
 * call it; the result is in ws (key, id, count_above, mass_above) for every thread.
 */
template <typename Set>
__device__ bool block_select(const Set &set, int V, int kd, bool by_mass, int32_t rank, double target,
                             select_ws *ws) {
  __syncthreads(); /* ws may still be read after the previous selection */
  if (threadIdx.x == 0) {
    ws->kp = 0;
    ws->ip = 0;
    ws->count_above = 0;
    ws->mass_above = 0.0;
  }
  const int digits = kd + 4;
  for (int p = 0; p < digits; p++) {
    for (int b = threadIdx.x; b < kBins; b += blockDim.x) {
      ws->count[b] = 0;
      ws->mass[b] = 0.0;
    }
    __syncthreads();
    const uint64_t kp = ws->kp;
    const uint32_t ip = ws->ip;
    for (int t = threadIdx.x; t < V; t += blockDim.x) {
      uint64_t k;
      double m;
      if (!set.get(t, &k, &m)) continue;
      const uint32_t nid = ~(uint32_t)t;
      if (!in_play(k, nid, p, kd, kp, ip)) continue;
      const int d = digit_of(k, nid, p, kd);
      atomic_add(&ws->count[d], 1);
      if (by_mass) atomic_add(&ws->mass[d], m);
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      int chosen = -1;
      for (int b = kBins - 1; b >= 0; b--) {
        const int32_t c = ws->count[b];
        if (c == 0) continue;
        if (by_mass ? ws->mass_above + ws->mass[b] >= target : ws->count_above + c > rank) {
          chosen = b;
          break;
        }
        ws->count_above += c;
        ws->mass_above += ws->mass[b];
      }
      if (chosen < 0) {
        ws->status = -1;
      } else {
        if (p < kd) {
          ws->kp = (ws->kp << 8) | (uint64_t)chosen;
        } else {
          ws->ip = (ws->ip << 8) | (uint32_t)chosen;
        }
        ws->status = ws->count[chosen] == 1 ? 1 : (p == digits - 1 ? 2 : 0);
        if (ws->status == 2) {
          ws->key = ws->kp;
          ws->id = (int32_t)~ws->ip;
        }
      }
    }
    __syncthreads();
    const int status = ws->status;
    if (status < 0) return false;
    if (status == 2) return true;
    if (status == 1) {
      /* The one member whose digits so far are the chosen ones. */
      const uint64_t kp1 = ws->kp;
      const uint32_t ip1 = ws->ip;
      for (int t = threadIdx.x; t < V; t += blockDim.x) {
        uint64_t k;
        double m;
        if (set.get(t, &k, &m) && in_play(k, ~(uint32_t)t, p + 1, kd, kp1, ip1)) {
          ws->key = k;
          ws->id = t;
        }
      }
      __syncthreads();
      return true;
    }
  }
  return false; /* not reached: the id digits make every member's digit string distinct */
}

/* The candidates of the draw: weight > 0, no worse than the cut (when there is one), and at least min_w. */
struct kept_set {
  const double *w;
  bool cut;
  uint64_t cut_key;
  int32_t cut_id;
  double min_w;
  __device__ bool get(int32_t t, uint64_t *k, double *m) const {
    const double v = w[t];
    if (!(v > 0)) return false;
    if (v < min_w) return false;
    const uint64_t key = double_key(v);
    if (cut && rill_sample_key_before(cut_key, cut_id, key, t)) return false;
    *k = key;
    *m = v;
    return true;
  }
};

/* The raw logits that top logprobs rank: every non-NaN one. */
struct raw_set {
  const float *raw;
  __device__ bool get(int32_t t, uint64_t *k, double *m) const {
    const float v = raw[t];
    if (isnan(v)) return false;
    *k = float_key(v);
    *m = 0.0;
    return true;
  }
};

/* A bound on how far a sum of up to n positive terms (in any order, plus a product or two) can lie from another sum
 * of the same terms: both are within γ_n ≈ n · 2^-53 of the exact sum, relative to total; this is 4× their sum. */
__device__ inline double margin(double total, int32_t n) { return total * ((double)n + 8.0) * 0x1p-50; }

/* Exclusive prefix sums of one double per thread over the block (Hillis-Steele in buf[kThreads]); *total gets the
 * sum of all. Each result is a sum of the preceding threads' values in some order. */
__device__ double block_exclusive_sum(double v, double *buf, double *total) {
  const int i = threadIdx.x, n = blockDim.x;
  __syncthreads();
  buf[i] = v;
  __syncthreads();
  for (int off = 1; off < n; off <<= 1) {
    const double x = i >= off ? buf[i - off] : 0.0;
    __syncthreads();
    buf[i] += x;
    __syncthreads();
  }
  const double before = i > 0 ? buf[i - 1] : 0.0;
  *total = buf[n - 1];
  __syncthreads();
  return before;
}

/* Shared memory of the sampler's block. */
struct block_ws {
  best_t red[kThreads];
  double dbuf[kThreads];
  double dsums[32];
  int32_t isums[32];
  select_ws sel;
  int32_t result;
};

/* The token of a general row (sample.c's sample_row past its plain-greedy shortcut); -1 when the mask allows none. */
__device__ int32_t sample_general(const rill_sample_job &j, const float *raw, int V, const int32_t *history,
                                  const int32_t *bias_ids, const float *bias_values, const int32_t *drafts,
                                  const uint32_t *mask, uint8_t *slot, block_ws *ws) {
  const rill_sample_scratch s = rill_sample_scratch_at(slot, (size_t)V);
  double *w = s.work;
  for (int t = threadIdx.x; t < V; t += blockDim.x) w[t] = rill_sample_logit(raw[t]);
  __syncthreads();
  if (threadIdx.x == 0) {
    rill_sample_penalties(history, j.hist_off, j.hist_off + j.hist_prompt, j.hist_off + j.hist_len,
                          drafts + j.drafts_off, j.r, &j.p, w, s.counts, s.seen);
    rill_sample_bias(bias_ids, bias_values, j.bias_off, j.bias_off + j.bias_len, w);
  }
  __syncthreads();
  const uint32_t *m = j.mask_row >= 0 ? mask + (size_t)j.mask_row * rill_sample_mask_words(V) : nullptr;
  best_t allowed{0.0, -1}, mine{0.0, -1};
  for (int t = threadIdx.x; t < V; t += blockDim.x) {
    if (m != nullptr && !rill_sample_mask_allows(m, t)) {
      w[t] = -INFINITY;
    } else if (allowed.id < 0) {
      allowed = best_t{0.0, t}; /* strided ascending: the thread's first allowed id */
    }
    if (w[t] > -INFINITY) mine = pick(mine, best_t{w[t], t});
  }
  const best_t first = block_argmax(best_t{0.0, allowed.id}, ws->red); /* equal values: the lowest id wins */
  const best_t top = block_argmax(mine, ws->red);
  if (first.id < 0) return -1;
  const int32_t best = top.id < 0 ? first.id : top.id;
  const double max = top.id < 0 ? -INFINITY : top.v;
  const double temperature = j.p.temperature;
  if (rill_sample_is_greedy(temperature, max)) return best;

  int32_t positive = 0;
  for (int t = threadIdx.x; t < V; t += blockDim.x) {
    w[t] = rill_sample_weight(w[t], max, temperature);
    positive += w[t] > 0;
  }
  const int32_t n = rill_block_sum(positive, ws->isums); /* also the barrier after the weights */

  /* Top-k, top-p and min-p narrow one candidate set, kept as a cut in the sampling order plus a weight floor. */
  kept_set ks{w, false, 0, -1, 0.0};
  int32_t kept = n;
  bool sorted = false, decided = true;
  if (j.p.top_k > 0 && j.p.top_k < n) {
    block_select(ks, V, 8, false, j.p.top_k - 1, 0.0, &ws->sel); /* n > top_k members: always selects */
    ks.cut = true;
    ks.cut_key = ws->sel.key;
    ks.cut_id = ws->sel.id;
    kept = j.p.top_k;
    sorted = true;
  }
  const double top_p = j.p.top_p;
  if (top_p > 0 && top_p < 1 && kept > 1) {
    /* The host's cut: the first member, most probable first, at which the running mass reaches top_p · total. */
    double part = 0;
    for (int t = threadIdx.x; t < V; t += blockDim.x) {
      uint64_t k;
      double mass;
      if (ks.get(t, &k, &mass)) part += mass;
    }
    const double total = rill_block_sum(part, ws->dsums);
    const double target = top_p * total, e = margin(total, n);
    decided = false;
    if (block_select(ks, V, 8, true, 0, target, &ws->sel)) {
      const double before = ws->sel.mass_above, through = before + w[ws->sel.id];
      if (before + e < target - e && through - e >= target + e) {
        decided = true;
        ks.cut = true;
        ks.cut_key = ws->sel.key;
        ks.cut_id = ws->sel.id;
        kept = ws->sel.count_above + 1;
      }
    }
    sorted = true;
  }
  const double min_p = j.p.min_p;
  if (min_p > 0 && kept > 1) {
    ks.min_w = min_p;
    if (sorted && min_p > 1) decided = false; /* the host keeps the most probable member then; validation forbids it */
  }

  if (decided) {
    /* The draw: the first member, in ascending id, at which the running mass exceeds u · total. Each thread sums a
     * contiguous range of ids; the thread whose range holds the crossing finds it. */
    const int span = (V + (int)blockDim.x - 1) / (int)blockDim.x;
    const int lo = (int)threadIdx.x * span < V ? (int)threadIdx.x * span : V, hi = lo + span < V ? lo + span : V;
    double part = 0;
    for (int t = lo; t < hi; t++) {
      uint64_t k;
      double mass;
      if (ks.get(t, &k, &mass)) part += mass;
    }
    double total;
    const double base = block_exclusive_sum(part, ws->dbuf, &total);
    const double target = rill_uniform(j.p.seeds, (uint32_t)j.position, 0) * total, e = margin(total, n);
    if (threadIdx.x == 0) ws->result = -1;
    __syncthreads();
    if (total > 0 && base <= target + e && base + part > target - e) {
      double run = base;
      for (int t = lo; t < hi; t++) {
        uint64_t k;
        double mass;
        if (!ks.get(t, &k, &mass)) continue;
        const double before = run;
        run += mass;
        if (run > target) {
          if (before + e <= target - e && run - e > target + e) ws->result = t; /* only the host's token can pass */
          break;
        }
      }
    }
    __syncthreads();
    const int32_t token = ws->result;
    if (token >= 0) {
#ifdef RILL_CUDA_EMU
      if (threadIdx.x == 0) rill_sample_parallel_rows++;
#endif
      return token;
    }
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    const double u = rill_uniform(j.p.seeds, (uint32_t)j.position, 0);
    ws->result = rill_sample_draw(w, V, s.order, j.p.top_k, j.p.top_p, j.p.min_p, u);
#ifdef RILL_CUDA_EMU
    rill_sample_serial_rows++;
#endif
  }
  __syncthreads();
  return ws->result;
}

/* This thread's share of a row's argmax (ties to the lower id, NaN and −∞ skipped): kArgmaxLoads logits in flight
 * before any is compared, since one block reads the whole row and a load at a time leaves it latency-bound. The
 * (value, id) order is total, so the grouping of the comparisons does not change the result. */
constexpr int kArgmaxLoads = 8;
__device__ inline best_t row_argmax(const float *raw, int V) {
  best_t mine{0.0, -1};
  int t = (int)threadIdx.x;
  for (; t + (kArgmaxLoads - 1) * kThreads < V; t += kArgmaxLoads * kThreads) {
    float v[kArgmaxLoads];
#pragma unroll
    for (int u = 0; u < kArgmaxLoads; u++) v[u] = raw[t + u * kThreads];
#pragma unroll
    for (int u = 0; u < kArgmaxLoads; u++)
      if (v[u] > -INFINITY) mine = pick(mine, best_t{(double)v[u], t + u * kThreads});
  }
  for (; t < V; t += kThreads)
    if (raw[t] > -INFINITY) mine = pick(mine, best_t{(double)raw[t], t});
  return mine;
}

__global__ void sample_kernel(const float *logits, int R, int V, const rill_sample_job *jobs, const int32_t *history,
                  const int32_t *bias_ids, const float *bias_values, const int32_t *drafts, const uint32_t *mask,
                  uint8_t *scratch, size_t slot_bytes, int L, int32_t *out_tok, float *out_lp, int32_t *out_top_ids,
                  float *out_top_lp) {
  __shared__ block_ws ws;
  uint8_t *slot = scratch + (size_t)blockIdx.x * slot_bytes;
  for (int row = blockIdx.x; row < R; row += gridDim.x) {
    const rill_sample_job j = jobs[row];
    const float *raw = logits + (size_t)row * V;
    int32_t tok;
    if (j.plain) {
      const best_t b = block_argmax(row_argmax(raw, V), ws.red);
      tok = b.id < 0 ? 0 : b.id;
    } else {
      tok = sample_general(j, raw, V, history, bias_ids, bias_values, drafts, mask, slot, &ws);
    }
    if (threadIdx.x == 0) out_tok[row] = tok;
    if (j.p.logprobs < 0 || tok < 0) {
      if (threadIdx.x == 0) out_lp[row] = 0.0f;
      continue;
    }
    /* log Z at temperature 1 over the raw row, NaNs ignored (sample.c's log_partition). */
    best_t mine{0.0, -1};
    int32_t valid = 0;
    for (int t = threadIdx.x; t < V; t += blockDim.x) {
      if (raw[t] > -INFINITY) mine = pick(mine, best_t{(double)raw[t], t});
      valid += !isnan(raw[t]);
    }
    const best_t top = block_argmax(mine, ws.red);
    const double max = top.id >= 0 ? top.v : -INFINITY;
    double log_z = max;
    if (isfinite(max)) {
      double sum = 0;
      for (int t = threadIdx.x; t < V; t += blockDim.x)
        if (!isnan(raw[t])) sum += exp((double)raw[t] - max);
      sum = rill_block_sum(sum, ws.dsums);
      log_z = max + log(sum);
    }
    if (threadIdx.x == 0) out_lp[row] = rill_sample_logprob(raw[tok], log_z);
    const int n = j.p.logprobs;
    if (n == 0) continue;
    /* The n largest non-NaN logits, descending, ties to the lower id (sample.c's top_alternatives): the n-th by a
     * selection, then the members up to it gathered and sorted. */
    int32_t *ids = out_top_ids + (size_t)row * L;
    float *lps = out_top_lp + (size_t)row * L;
    valid = rill_block_sum(valid, ws.isums);
    const int32_t count = n < valid ? n : valid;
    if (count > 0) {
      const raw_set rs{raw};
      block_select(rs, V, 4, false, count - 1, 0.0, &ws.sel);
      const uint64_t cut_key = ws.sel.key;
      const int32_t cut_id = ws.sel.id;
      if (threadIdx.x == 0) ws.result = 0;
      __syncthreads();
      for (int t = threadIdx.x; t < V; t += blockDim.x) {
        if (isnan(raw[t]) || rill_sample_key_before(cut_key, cut_id, float_key(raw[t]), t)) continue;
        ids[atomic_add(&ws.result, 1)] = t;
      }
      __syncthreads();
    }
    if (threadIdx.x == 0) {
      for (int32_t k = 1; k < count; k++) {
        const int32_t t = ids[k];
        const uint64_t key = float_key(raw[t]);
        int32_t i = k;
        for (; i > 0 && rill_sample_key_before(key, t, float_key(raw[ids[i - 1]]), ids[i - 1]); i--)
          ids[i] = ids[i - 1];
        ids[i] = t;
      }
      rill_sample_fill_alternatives(raw, n, count, log_z, ids, lps);
    }
    __syncthreads();
  }
}

} // namespace

#ifdef RILL_CUDA_EMU
long rill_sample_parallel_rows = 0, rill_sample_serial_rows = 0;
#endif

size_t rill_sample_slot_bytes(int V) { return rill_sample_row_bytes((size_t)V); }

cudaError_t rill_k_sample(cudaStream_t s, const float *logits, int R, int V, const rill_sample_job *jobs,
                          const int32_t *history, const int32_t *bias_ids, const float *bias_values,
                          const int32_t *drafts, const uint32_t *mask, void *scratch, int L, int32_t *out_tok,
                          float *out_lp, int32_t *out_top_ids, float *out_top_lp) {
  if (R == 0) return cudaSuccess;
  const int grid = R < kSampleSlots ? R : kSampleSlots;
  RILL_LAUNCH(sample_kernel, grid, kThreads, s, logits, R, V, jobs, history, bias_ids, bias_values, drafts, mask,
              static_cast<uint8_t *>(scratch), rill_sample_slot_bytes(V), L, out_tok, out_lp, out_top_ids,
              out_top_lp);
  return cudaGetLastError();
}
