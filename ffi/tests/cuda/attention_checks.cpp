/*
 * The attention kernels (ffi/devices/cuda/kernels_attention.cu) on the host emulation, called directly, against a double-
 * precision softmax over the same bf16 cache: decode, draft verification (1..16 tokens per sequence beside plain
 * decodes), prefill chunks after cached prefix blocks, long contexts over many blocks and granule boundaries, query
 * groups of 1, 2, 7 and 8 heads, head_dim 64, 128 and 66; random inputs, never zero. Errors are relative to the
 * largest output. Batch invariance: each sequence run alone gives bitwise the outputs it gets in the batch, also
 * when the batch is large enough to take the prefill kernel and the sequence alone takes split-KV. On two of the
 * shapes every case runs again with gpt-oss's extras: a sliding window of 100 positions (across blocks and granules)
 * and a sink logit per query head.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <vector>

#include "../check.h"
#include "cuda/kernels.cuh"
#include "attention_checks.h"
#include "xorshift.h"

namespace {

struct rng : xorshift64s {
  /* ±[0.05, 1): never zero. */
  float value() {
    const float u = 0.05f + 0.95f * (float)next() / 4294967296.0f;
    return (next() & 1u) != 0 ? -u : u;
  }
};

struct shape {
  int kv_heads, group, head_dim, granule; /* granule 0: rill_attention_granule of the table's span */
};

/* One step: fed[s] tokens of sequence s ending at position ctx[s] − 1. */
struct step_case {
  const char *what;
  std::vector<int> fed, ctx;
};

constexpr int kBlock = 16, kStride = 48, kLayers = 2, kLayer = 1;
double worst = 0.0;
int cases = 0;

struct pool {
  shape sh;
  rill_kv_geom g;
  int H, qkv_dim, granules;
  std::vector<__nv_bfloat16> kc, vc;
  std::vector<int32_t> tables; /* per sequence, a shuffled set of blocks */
};

void make_pool(pool *p, shape sh, int max_seqs, rng *r) {
  p->sh = sh;
  p->H = sh.kv_heads * sh.group;
  p->qkv_dim = (p->H + 2 * sh.kv_heads) * sh.head_dim;
  const int num_blocks = max_seqs * kStride + 3;
  p->g = rill_kv_geom{num_blocks, kBlock, sh.kv_heads, sh.head_dim, kStride,
                      sh.granule > 0 ? sh.granule : rill_attention_granule(kStride * kBlock)};
  p->granules = rill_attention_granules(p->g);
  const size_t n = (size_t)kLayers * num_blocks * sh.kv_heads * kBlock * sh.head_dim;
  p->kc.resize(n);
  p->vc.resize(n);
  for (size_t i = 0; i < n; i++) {
    p->kc[i] = __float2bfloat16_rn(r->value());
    p->vc[i] = __float2bfloat16_rn(r->value());
  }
  std::vector<int32_t> perm((size_t)num_blocks);
  for (int i = 0; i < num_blocks; i++) perm[(size_t)i] = i;
  for (int i = num_blocks - 1; i > 0; i--) {
    const int j = r->below(i + 1);
    const int32_t t = perm[(size_t)i];
    perm[(size_t)i] = perm[(size_t)j];
    perm[(size_t)j] = t;
  }
  p->tables.assign(perm.begin(), perm.begin() + (size_t)max_seqs * kStride);
}

struct step_io {
  int T = 0, S = 0;
  std::vector<int32_t> positions, query_start, tables;
  std::vector<float> qkv, out;
};

/* Runs rill_k_attention on sequences `seqs` of the case (their pool tables), q rows from q_all at each token's
 * index in the whole case. */
bool run_step(const pool &p, const step_case &c, const std::vector<int> &seqs, const std::vector<float> &q_all,
              const std::vector<int> &tok0, int window, const float *sinks, step_io *io) {
  io->S = (int)seqs.size();
  io->query_start.assign(1, 0);
  io->positions.clear();
  io->tables.clear();
  io->qkv.clear();
  for (int s : seqs) {
    const int fed = c.fed[(size_t)s], ctx = c.ctx[(size_t)s];
    for (int i = 0; i < fed; i++) {
      io->positions.push_back(ctx - fed + i);
      const float *q = &q_all[(size_t)(tok0[(size_t)s] + i) * p.qkv_dim];
      io->qkv.insert(io->qkv.end(), q, q + p.qkv_dim);
    }
    io->query_start.push_back(io->query_start.back() + fed);
    io->tables.insert(io->tables.end(), p.tables.begin() + (size_t)s * kStride,
                      p.tables.begin() + (size_t)(s + 1) * kStride);
  }
  io->T = io->query_start.back();
  io->out.assign((size_t)io->T * p.H * p.sh.head_dim, NAN);
  const size_t parts = (size_t)kSplitMaxTokens * p.H * p.granules;
  std::vector<float> part_ml(parts * 2, NAN), part_acc(parts * p.sh.head_dim, NAN);
  const cudaError_t e =
      rill_k_attention(nullptr, io->qkv.data(), io->T, io->S, p.H, io->positions.data(), io->query_start.data(),
                       io->tables.data(), p.g, kLayer, window, sinks, p.kc.data(), p.vc.data(), io->out.data(),
                       part_ml.data(), part_acc.data());
  CHECK_MSG(e == cudaSuccess, "%s: launch: %s", c.what, cudaGetErrorString(e));
  return e == cudaSuccess;
}

void check_case(const pool &p, const step_case &c, rng *r, int window, bool with_sinks) {
  const int S = (int)c.fed.size(), D = p.sh.head_dim, G = p.sh.group;
  std::vector<int> tok0((size_t)S);
  int T = 0;
  for (int s = 0; s < S; s++) {
    tok0[(size_t)s] = T;
    T += c.fed[(size_t)s];
  }
  std::vector<float> q_all((size_t)T * p.qkv_dim);
  for (float &v : q_all) v = r->value();
  std::vector<int> all((size_t)S);
  for (int s = 0; s < S; s++) all[(size_t)s] = s;
  std::vector<float> sinks((size_t)p.H);
  for (float &v : sinks) v = 2.0f * r->value();
  const float *sk = with_sinks ? sinks.data() : nullptr;
  step_io batch;
  if (!run_step(p, c, all, q_all, tok0, window, sk, &batch)) return;
  /* Reference. */
  double err = 0.0, scale = 0.0;
  const double inv = 1.0 / sqrt((double)D);
  std::vector<double> sc;
  for (int s = 0; s < S; s++) {
    const int32_t *table = &p.tables[(size_t)s * kStride];
    for (int i = 0; i < c.fed[(size_t)s]; i++) {
      const int t = tok0[(size_t)s] + i, n = batch.positions[(size_t)t] + 1;
      const int first = window > 0 && n > window ? n - window : 0;
      for (int h = 0; h < p.H; h++) {
        const int kh = h / G;
        const float *q = &q_all[(size_t)t * p.qkv_dim + (size_t)h * D];
        sc.assign((size_t)n, 0.0);
        double m = with_sinks ? (double)sinks[(size_t)h] : -INFINITY;
        for (int j = first; j < n; j++) {
          const size_t at = (((size_t)kLayer * p.g.num_blocks + table[j / kBlock]) * p.g.kv_heads + kh) * kBlock * D +
                            (size_t)(j % kBlock) * D;
          double dot = 0.0;
          for (int d = 0; d < D; d++) dot += (double)q[d] * __bfloat162float(p.kc[at + d]);
          sc[(size_t)j] = dot * inv;
          m = fmax(m, sc[(size_t)j]);
        }
        double l = with_sinks ? exp((double)sinks[(size_t)h] - m) : 0.0;
        for (int j = first; j < n; j++) l += (sc[(size_t)j] = exp(sc[(size_t)j] - m));
        for (int d = 0; d < D; d++) {
          double o = 0.0;
          for (int j = first; j < n; j++) {
            const size_t at = (((size_t)kLayer * p.g.num_blocks + table[j / kBlock]) * p.g.kv_heads + kh) * kBlock *
                                  D + (size_t)(j % kBlock) * D + d;
            o += sc[(size_t)j] * __bfloat162float(p.vc[at]);
          }
          o /= l;
          const double got = batch.out[((size_t)t * p.H + h) * D + d];
          err = fmax(err, isfinite(got) ? fabs(got - o) : INFINITY);
          scale = fmax(scale, fabs(o));
        }
      }
    }
  }
  const double rel = err / fmax(scale, 1e-30);
  worst = fmax(worst, rel);
  cases++;
  CHECK_MSG(rel <= 2e-5, "%s (G %d, D %d, granule %d, %s, window %d%s): relative error %.3g", c.what, G, D,
            p.g.granule, T <= kSplitMaxTokens ? "split" : "prefill", window, with_sinks ? ", sinks" : "", rel);
  /* Batch invariance: each sequence alone. */
  for (int s = 0; s < S && S > 1; s++) {
    step_io alone;
    if (!run_step(p, c, std::vector<int>{s}, q_all, tok0, window, sk, &alone)) return;
    const size_t row = (size_t)p.H * D;
    CHECK_MSG(memcmp(alone.out.data(), &batch.out[(size_t)tok0[(size_t)s] * row],
                     (size_t)c.fed[(size_t)s] * row * sizeof(float)) == 0,
              "%s (G %d, D %d): sequence %d alone (%s) differs from the batch (%s)", c.what, G, D, s,
              alone.T <= kSplitMaxTokens ? "split" : "prefill", T <= kSplitMaxTokens ? "split" : "prefill");
  }
}

} // namespace

void attention_kernel_checks(int *passed, int *failed) {
  rng r{0x243f6a8885a308d3ull};
  const shape shapes[] = {
      {2, 1, 64, 64}, {2, 2, 128, 32}, {1, 7, 66, 64}, {2, 8, 128, 0}, {1, 8, 64, 96}, {2, 4, 256, 0},
  };
  const std::vector<step_case> steps = {
      {"decode", {1, 1, 1, 1}, {1, 37, 300, 700}},
      {"verify beside decodes", {1, 5, 3, 7}, {129, 64, 500, 33}},
      {"verify 16", {16}, {620}},
      {"verify 16 in a prefill-sized step", {16, 1, 2}, {620, 700, 45}},
      {"prefill after a prefix hit, with decodes", {40, 1, 100, 3}, {240, 513, 100, 66}},
      {"long prefill chunk", {90}, {768}},
  };
  for (const shape &sh : shapes) {
    pool p;
    make_pool(&p, sh, 4, &r);
    for (const step_case &c : steps) check_case(p, c, &r, 0, false);
    /* gpt-oss's heads (8 per KV head, D 64) and an odd shape: enough for the window and sinks. */
    if ((sh.group == 8 && sh.head_dim == 64) || sh.head_dim == 66) {
      for (const step_case &c : steps) check_case(p, c, &r, 100, true);
    }
  }
  printf("attention kernels: %d cases, largest relative error %.3g\n", cases, worst);
  *passed = check_passed_count;
  *failed = check_failed_count;
}
