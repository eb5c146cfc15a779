/* The device sampler (sample.cuh): one block per row slot, rows r = slot, slot + kSampleSlots, ...; the vocabulary-
 * wide elementwise passes and argmaxes run on every thread, the order-sensitive sums and selections on thread 0. */
#include <math.h>

#include "block_reduce.cuh"
#include "kernels.cuh"
#include "sample.cuh"

namespace {

constexpr int kThreads = 256;

__device__ inline size_t align64(size_t n) { return (n + 63) & ~(size_t)63; }

/* Philox4x32-10 and the 53-bit uniform of ffi/src/philox.c (docs/random.md). */
__device__ double uniform(uint64_t seed, uint32_t position, uint32_t draw) {
  uint32_t c0 = position, c1 = draw, c2 = 0, c3 = 0, k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);
  for (int round = 0; round < 10; round++) {
    const uint64_t p0 = (uint64_t)0xD2511F53u * c0, p1 = (uint64_t)0xCD9E8D57u * c2;
    const uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0, n1 = (uint32_t)p1;
    const uint32_t n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1, n3 = (uint32_t)p0;
    c0 = n0;
    c1 = n1;
    c2 = n2;
    c3 = n3;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return ((double)(c0 >> 5) * 67108864.0 + (double)(c1 >> 6)) / 9007199254740992.0;
}

__device__ inline bool better(const double *w, int32_t a, int32_t b) { return w[a] > w[b] || (w[a] == w[b] && a < b); }

__device__ void sift_worst_down(int32_t *h, int32_t size, int32_t i, const double *w) {
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

/* order[0..m) := the m best of order[0..n), best first (sample.c's top_sorted: the same heap, so the same result). */
__device__ void top_sorted(int32_t *order, int32_t n, int32_t m, const double *w) {
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

__device__ void sort_ids(int32_t *a, int32_t n) {
  for (int32_t root = n / 2 - 1; root >= 0; root--) {
    for (int32_t i = root;;) {
      int32_t c = 2 * i + 1;
      if (c >= n) break;
      if (c + 1 < n && a[c + 1] > a[c]) c++;
      if (a[i] >= a[c]) break;
      const int32_t t = a[i];
      a[i] = a[c];
      a[c] = t;
      i = c;
    }
  }
  for (int32_t end = n - 1; end > 0; end--) {
    int32_t t = a[0];
    a[0] = a[end];
    a[end] = t;
    for (int32_t i = 0;;) {
      int32_t c = 2 * i + 1;
      if (c >= end) break;
      if (c + 1 < end && a[c + 1] > a[c]) c++;
      if (a[i] >= a[c]) break;
      t = a[i];
      a[i] = a[c];
      a[c] = t;
      i = c;
    }
  }
}

/* Block argmax, ties to the lower id: (value, id) with id -1 for "none above -inf". Every thread gets the result. */
struct best_t {
  double v;
  int32_t id;
};
__device__ inline best_t pick(best_t a, best_t b) {
  if (b.id < 0) return a;
  if (a.id < 0) return b;
  return (b.v > a.v || (b.v == a.v && b.id < a.id)) ? b : a;
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

__device__ void penalties(const rill_sample_job &j, const int32_t *history, const int32_t *drafts, double *w,
                          int32_t *c, uint8_t *seen) {
  const int32_t hs = j.hist_off, he = j.hist_off + j.hist_len, gen = hs + j.hist_prompt, r = j.r;
  const int32_t *dr = drafts + j.drafts_off;
  const double fp = j.frequency, pp = j.presence, rp = j.repetition;
  if (fp != 0 || pp != 0) {
    for (int32_t h = gen; h < he; h++) c[history[h]] = 0;
    for (int32_t k = 0; k < r; k++) c[dr[k]] = 0;
    for (int32_t h = gen; h < he; h++) c[history[h]]++;
    for (int32_t k = 0; k < r; k++) c[dr[k]]++;
    for (int32_t h = gen; h < he + r; h++) {
      const int32_t t = h < he ? history[h] : dr[h - he];
      if (c[t] > 0) {
        w[t] -= fp * c[t] + pp;
        c[t] = 0;
      }
    }
  }
  if (rp != 1) {
    for (int32_t h = hs; h < he; h++) seen[history[h]] = 0;
    for (int32_t k = 0; k < r; k++) seen[dr[k]] = 0;
    for (int32_t h = hs; h < he + r; h++) {
      const int32_t t = h < he ? history[h] : dr[h - he];
      if (!seen[t]) {
        seen[t] = 1;
        w[t] = w[t] > 0 ? w[t] / rp : w[t] * rp;
      }
    }
  }
}

/* The token of a general row (sample.c's sample_row past its plain-greedy shortcut); -1 when the mask allows none. */
__device__ int32_t sample_general(const rill_sample_job &j, const float *raw, int V, const int32_t *history,
                                  const int32_t *bias_ids, const float *bias_values, const int32_t *drafts,
                                  const uint32_t *mask, uint8_t *slot, best_t *red) {
  double *w = reinterpret_cast<double *>(slot);
  int32_t *order = reinterpret_cast<int32_t *>(slot + align64((size_t)V * sizeof(double)));
  int32_t *counts = order + align64((size_t)V * sizeof(int32_t)) / sizeof(int32_t);
  uint8_t *seen = reinterpret_cast<uint8_t *>(counts + align64((size_t)V * sizeof(int32_t)) / sizeof(int32_t));
  __shared__ int32_t result;
  for (int t = threadIdx.x; t < V; t += blockDim.x) w[t] = isnan(raw[t]) ? -INFINITY : (double)raw[t];
  __syncthreads();
  if (threadIdx.x == 0) {
    penalties(j, history, drafts, w, counts, seen);
    for (int32_t k = j.bias_off; k < j.bias_off + j.bias_len; k++) w[bias_ids[k]] += (double)bias_values[k];
  }
  __syncthreads();
  const size_t words = ((size_t)V + 31) / 32;
  const uint32_t *m = j.mask_row >= 0 ? mask + (size_t)j.mask_row * words : nullptr;
  best_t allowed{0.0, -1}, mine{0.0, -1};
  for (int t = threadIdx.x; t < V; t += blockDim.x) {
    if (m != nullptr && !((m[t >> 5] >> (t & 31)) & 1u)) {
      w[t] = -INFINITY;
    } else if (allowed.id < 0) {
      allowed = best_t{0.0, t}; /* strided ascending: the thread's first allowed id */
    }
    if (w[t] > -INFINITY) mine = pick(mine, best_t{w[t], t});
  }
  const best_t first = block_argmax(best_t{0.0, allowed.id}, red); /* equal values: the lowest id wins */
  const best_t top = block_argmax(mine, red);
  if (first.id < 0) return -1;
  const int32_t best = top.id < 0 ? first.id : top.id;
  const double max = top.id < 0 ? -INFINITY : top.v;
  const double temperature = j.temperature;
  if (temperature == 0 || max == -INFINITY || max == INFINITY) return best;

  for (int t = threadIdx.x; t < V; t += blockDim.x) w[t] = exp((w[t] - max) / temperature);
  __syncthreads();
  if (threadIdx.x == 0) {
    int32_t n = 0;
    for (int32_t t = 0; t < V; t++)
      if (w[t] > 0) order[n++] = t;
    int32_t kept = n;
    bool sorted = false;
    if (j.top_k > 0 && j.top_k < n) {
      top_sorted(order, n, j.top_k, w);
      kept = j.top_k;
      sorted = true;
    }
    const double top_p = j.top_p;
    if (top_p > 0 && top_p < 1 && kept > 1) {
      double total = 0;
      for (int32_t k = 0; k < kept; k++) total += w[order[k]];
      const double target = top_p * total;
      const int32_t pool = kept;
      int32_t mm = sorted ? pool : (pool < 64 ? pool : 64);
      for (;;) {
        if (!sorted) top_sorted(order, pool, mm, w);
        double acc = 0;
        int32_t reached = -1;
        for (int32_t k = 0; k < mm; k++) {
          acc += w[order[k]];
          if (acc >= target) {
            reached = k + 1;
            break;
          }
        }
        if (reached > 0) {
          kept = reached;
          break;
        }
        if (mm == pool) {
          kept = pool;
          break;
        }
        mm = mm > pool / 4 ? pool : mm * 4;
      }
      sorted = true;
    }
    const double min_p = j.min_p;
    if (min_p > 0 && kept > 1) {
      if (sorted) {
        while (kept > 1 && w[order[kept - 1]] < min_p) kept--;
      } else {
        int32_t k2 = 0;
        for (int32_t k = 0; k < kept; k++)
          if (w[order[k]] >= min_p) order[k2++] = order[k];
        kept = k2;
      }
    }
    if (sorted) sort_ids(order, kept);
    double total = 0;
    for (int32_t k = 0; k < kept; k++) total += w[order[k]];
    const double target = uniform(j.seed, (uint32_t)j.position, 0) * total;
    double run = 0;
    result = order[kept - 1];
    for (int32_t k = 0; k < kept; k++) {
      run += w[order[k]];
      if (run > target) {
        result = order[k];
        break;
      }
    }
  }
  __syncthreads();
  return result;
}

__global__ void sample_kernel(const float *logits, int R, int V, const rill_sample_job *jobs, const int32_t *history,
                              const int32_t *bias_ids, const float *bias_values, const int32_t *drafts,
                              const uint32_t *mask, uint8_t *scratch, size_t slot_bytes, int L, int32_t *out_tok,
                              float *out_lp, int32_t *out_top_ids, float *out_top_lp) {
  __shared__ best_t red[kThreads];
  __shared__ double sums[32];
  uint8_t *slot = scratch + (size_t)blockIdx.x * slot_bytes;
  for (int row = blockIdx.x; row < R; row += gridDim.x) {
    const rill_sample_job j = jobs[row];
    const float *raw = logits + (size_t)row * V;
    int32_t tok;
    if (j.plain) {
      best_t mine{0.0, -1};
      for (int t = threadIdx.x; t < V; t += blockDim.x)
        if (raw[t] > -INFINITY) mine = pick(mine, best_t{(double)raw[t], t});
      const best_t b = block_argmax(mine, red);
      tok = b.id < 0 ? 0 : b.id;
    } else {
      tok = sample_general(j, raw, V, history, bias_ids, bias_values, drafts, mask, slot, red);
    }
    if (threadIdx.x == 0) out_tok[row] = tok;
    if (j.logprobs < 0 || tok < 0) {
      if (threadIdx.x == 0) out_lp[row] = 0.0f;
      continue;
    }
    /* log Z at temperature 1 over the raw row, NaNs ignored (sample.c's log_partition). */
    best_t mine{0.0, -1};
    for (int t = threadIdx.x; t < V; t += blockDim.x)
      if (raw[t] > -INFINITY) mine = pick(mine, best_t{(double)raw[t], t});
    const best_t top = block_argmax(mine, red);
    const double max = top.id >= 0 ? top.v : -INFINITY;
    double log_z = max;
    if (isfinite(max)) {
      double sum = 0;
      for (int t = threadIdx.x; t < V; t += blockDim.x)
        if (!isnan(raw[t])) sum += exp((double)raw[t] - max);
      sum = rill_block_sum(sum, sums);
      log_z = max + log(sum);
    }
    if (threadIdx.x == 0) {
      out_lp[row] = (float)((double)raw[tok] - log_z);
      const int n = j.logprobs;
      int32_t *ids = out_top_ids + (size_t)row * L;
      float *lps = out_top_lp + (size_t)row * L;
      int32_t count = 0;
      for (int32_t t = 0; t < V && n > 0; t++) {
        const float v = raw[t];
        if (isnan(v)) continue;
        if (count == n && !(v > raw[ids[n - 1]])) continue;
        int32_t k = count < n ? count++ : n - 1;
        while (k > 0 && raw[ids[k - 1]] < v) {
          ids[k] = ids[k - 1];
          k--;
        }
        ids[k] = t;
      }
      for (int32_t k = 0; k < n; k++) {
        if (k < count) {
          lps[k] = (float)((double)raw[ids[k]] - log_z);
        } else {
          ids[k] = -1;
          lps[k] = -INFINITY;
        }
      }
    }
    __syncthreads();
  }
}

} // namespace

size_t rill_sample_slot_bytes(int V) {
  const size_t v = (size_t)V;
  return ((v * sizeof(double) + 63) & ~(size_t)63) + 2 * ((v * sizeof(int32_t) + 63) & ~(size_t)63) +
         ((v + 63) & ~(size_t)63);
}

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
