#include "moe.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "aligned_buffer.h"

/* Pairs or tokens per task in the elementwise stages. */
#define PAIRS_PER_TASK 16
/* Rows per expert task: at least this many, a multiple of it. */
#define MOE_ROW_ALIGN 16


/* Rows per regrouping task. */
#define GROUP_ROWS 4096

static void group_task(void *ctx, int64_t task, int thread) {
  (void)thread;
  rill_mxfp4_experts *m = ctx;
  const size_t rows = (size_t)m->experts * (size_t)m->rows, r0 = (size_t)task * GROUP_ROWS;
  rill_mxfp4_group16(m->blocks + r0 * (size_t)m->nblocks * 16, m->scales + r0 * (size_t)m->nblocks,
                     rows - r0 < GROUP_ROWS ? rows - r0 : GROUP_ROWS, m->nblocks);
}

void rill_moe_regroup_experts(rill_model_weights *w, const rill_kernels *k, rill_pool *pool) {
  if (k->gemm_mxfp4_q8_g16 == NULL) return;
  for (int l = 0; l < w->num_layers; l++) {
    rill_mxfp4_experts *parts[2] = {&w->layers[l].experts_gate_up, &w->layers[l].experts_down};
    for (int i = 0; i < 2; i++) {
      rill_mxfp4_experts *m = parts[i];
      if (m->blocks == NULL || m->nblocks > RILL_MXFP4_G16_MAX_BLOCKS) continue;
      const size_t rows = (size_t)m->experts * (size_t)m->rows;
      rill_pool_run(pool, group_task, m, (int64_t)((rows + GROUP_ROWS - 1) / GROUP_ROWS));
      m->group16 = 1;
    }
  }
}

rill_status rill_moe_scratch_alloc(rill_moe_scratch *s, const rill_model_config *c, int32_t max_tokens) {
  memset(s, 0, sizeof *s);
  const size_t E = (size_t)c->num_experts, K = (size_t)c->experts_per_tok, H = (size_t)c->hidden_size;
  const size_t I = (size_t)c->intermediate_size;
  s->chunk = max_tokens < RILL_MOE_CHUNK ? max_tokens : RILL_MOE_CHUNK;
  const size_t P = (size_t)s->chunk * K;
  const size_t widest = 2 * I > H ? 2 * I : H;
  s->max_tasks = (int32_t)(E * ((widest + MOE_ROW_ALIGN - 1) / MOE_ROW_ALIGN));
  s->logits = rill_alloc_aligned((size_t)max_tokens * E * sizeof(float));
  s->sel = rill_alloc_aligned(P * sizeof(int32_t));
  s->weight = rill_alloc_aligned(P * sizeof(float));
  s->offset = rill_alloc_aligned((E + 1) * sizeof(int32_t));
  s->pair_token = rill_alloc_aligned(P * sizeof(int32_t));
  s->pair_of = rill_alloc_aligned(P * sizeof(int32_t));
  s->x = rill_alloc_aligned(P * H * sizeof(float));
  s->gu = rill_alloc_aligned(P * 2 * I * sizeof(float));
  s->act = rill_alloc_aligned(P * I * sizeof(float));
  s->y = rill_alloc_aligned(P * H * sizeof(float));
  s->tasks = rill_alloc_aligned((size_t)s->max_tasks * sizeof(rill_moe_task));
  s->int8_activations = 0;
  s->xq = rill_alloc_aligned(P * H);
  s->aq = rill_alloc_aligned(P * I);
  s->xs = rill_alloc_aligned(P * (H / RILL_Q8_BLOCK) * sizeof(float));
  s->as = rill_alloc_aligned(P * (I / RILL_Q8_BLOCK) * sizeof(float));
  if (s->logits == NULL || s->sel == NULL || s->weight == NULL || s->offset == NULL || s->pair_token == NULL ||
      s->pair_of == NULL || s->x == NULL || s->gu == NULL || s->act == NULL || s->y == NULL || s->tasks == NULL ||
      s->xq == NULL || s->aq == NULL || s->xs == NULL || s->as == NULL) {
    rill_moe_scratch_free(s);
    return RILL_ERR_OUT_OF_MEMORY;
  }
  return RILL_OK;
}

void rill_moe_scratch_free(rill_moe_scratch *s) {
  free(s->logits);
  free(s->sel);
  free(s->weight);
  free(s->offset);
  free(s->pair_token);
  free(s->pair_of);
  free(s->x);
  free(s->gu);
  free(s->act);
  free(s->y);
  free(s->tasks);
  free(s->xq);
  free(s->aq);
  free(s->xs);
  free(s->as);
  memset(s, 0, sizeof *s);
}

/* Top k of E biased logits (ties to the lower index) and the softmax over them, largest first. */
static void route(const float *logits, const float *bias, int E, int K, int32_t *sel, float *w) {
  for (int j = 0; j < K; j++) {
    int best = -1;
    float bv = 0.0f;
    for (int e = 0; e < E; e++) {
      int taken = 0;
      for (int i = 0; i < j; i++) taken |= sel[i] == e;
      const float v = logits[e] + bias[e];
      if (!taken && (best < 0 || v > bv)) {
        best = e;
        bv = v;
      }
    }
    sel[j] = best;
    w[j] = bv;
  }
  const float top = w[0];
  float sum = 0.0f;
  for (int j = 0; j < K; j++) {
    w[j] = expf(w[j] - top);
    sum += w[j];
  }
  for (int j = 0; j < K; j++) w[j] /= sum;
}

typedef struct moe_job {
  const rill_model_config *c;
  const rill_layer_weights *L;
  const rill_kernels *k;
  rill_moe_scratch *s;
  const float *xn; /* the chunk's first token */
  float *x;
  int T, pairs, ntasks;
} moe_job;

static void gather_task(void *ctx, int64_t task, int thread) {
  (void)thread;
  const moe_job *j = ctx;
  const size_t H = (size_t)j->c->hidden_size;
  const int p0 = (int)task * PAIRS_PER_TASK, p1 = p0 + PAIRS_PER_TASK < j->pairs ? p0 + PAIRS_PER_TASK : j->pairs;
  for (int p = p0; p < p1; p++) {
    const float *src = j->xn + (size_t)j->s->pair_token[p] * H;
    float *dst = j->s->x + (size_t)p * H;
    for (size_t c = 0; c < H; c++) dst[rill_mxfp4_xpos(c)] = src[c];
    if (j->s->int8_activations) {
      const int nb = (int)(H / RILL_Q8_BLOCK);
      j->k->quantize_q8(dst, (int)H, nb, j->s->xq + (size_t)p * H, j->s->xs + (size_t)p * (size_t)nb);
    }
  }
}

/* One expert's rows [r0, r1) for all its pairs: in → out through m, plus the bias. */
static void expert_rows(const moe_job *j, const rill_mxfp4_experts *m, const float *in, const int8_t *inq,
                        const float *ins, size_t ldin, float *out, size_t ldout, const rill_moe_task *t) {
  const int e = t->expert, p0 = j->s->offset[e], n = j->s->offset[e + 1] - p0;
  float *y = out + (size_t)p0 * ldout;
  if (j->s->int8_activations) {
    __typeof__(j->k->gemm_mxfp4_q8) gemm = m->group16 ? j->k->gemm_mxfp4_q8_g16 : j->k->gemm_mxfp4_q8;
    gemm(inq + (size_t)p0 * ldin, ins + (size_t)p0 * (size_t)m->nblocks, n, rill_mxfp4_blocks_of(m, e),
         rill_mxfp4_scales_of(m, e), m->nblocks, t->r0, t->r1, y, ldout);
  } else {
    j->k->gemm_mxfp4(in + (size_t)p0 * ldin, ldin, n, rill_mxfp4_blocks_of(m, e), rill_mxfp4_scales_of(m, e),
                     m->nblocks, t->r0, t->r1, y, ldout);
  }
  const float *bias = m->bias + (size_t)e * (size_t)m->rows;
  for (int p = 0; p < n; p++) {
    for (int r = t->r0; r < t->r1; r++) y[(size_t)p * ldout + (size_t)r] += bias[r];
  }
}

static void gate_up_task(void *ctx, int64_t task, int thread) {
  (void)thread;
  const moe_job *j = ctx;
  const size_t H = (size_t)j->c->hidden_size, I2 = 2 * (size_t)j->c->intermediate_size;
  expert_rows(j, &j->L->experts_gate_up, j->s->x, j->s->xq, j->s->xs, H, j->s->gu, I2, &j->s->tasks[task]);
}

static void down_task(void *ctx, int64_t task, int thread) {
  (void)thread;
  const moe_job *j = ctx;
  const size_t H = (size_t)j->c->hidden_size, I = (size_t)j->c->intermediate_size;
  expert_rows(j, &j->L->experts_down, j->s->act, j->s->aq, j->s->as, I, j->s->y, H, &j->s->tasks[task]);
}

static void act_task(void *ctx, int64_t task, int thread) {
  (void)thread;
  const moe_job *j = ctx;
  const int I = j->c->intermediate_size;
  const float limit = j->c->swiglu_limit;
  const int p0 = (int)task * PAIRS_PER_TASK, p1 = p0 + PAIRS_PER_TASK < j->pairs ? p0 + PAIRS_PER_TASK : j->pairs;
  for (int p = p0; p < p1; p++) {
    const float *h = j->s->gu + (size_t)p * 2 * (size_t)I;
    float *a = j->s->act + (size_t)p * (size_t)I;
    for (int i = 0; i < I; i++) {
      float g = h[2 * i], u = h[2 * i + 1];
      g = g < limit ? g : limit;
      u = u < -limit ? -limit : u > limit ? limit : u;
      a[rill_mxfp4_xpos((size_t)i)] = (u + 1.0f) * (g / (1.0f + expf(-1.702f * g)));
    }
    if (j->s->int8_activations) {
      const int nb = I / RILL_Q8_BLOCK;
      j->k->quantize_q8(a, I, nb, j->s->aq + (size_t)p * (size_t)I, j->s->as + (size_t)p * (size_t)nb);
    }
  }
}

static void combine_task(void *ctx, int64_t task, int thread) {
  (void)thread;
  const moe_job *j = ctx;
  const int H = j->c->hidden_size, K = j->c->experts_per_tok;
  const int t0 = (int)task * PAIRS_PER_TASK, t1 = t0 + PAIRS_PER_TASK < j->T ? t0 + PAIRS_PER_TASK : j->T;
  for (int t = t0; t < t1; t++) {
    float *x = j->x + (size_t)t * (size_t)H;
    const float *w = j->s->weight + (size_t)t * (size_t)K;
    const int32_t *pairs = j->s->pair_of + (size_t)t * (size_t)K;
    for (int i = 0; i < H; i++) {
      float acc = 0.0f;
      for (int r = 0; r < K; r++) acc += w[r] * j->s->y[(size_t)pairs[r] * (size_t)H + (size_t)i];
      x[i] += acc;
    }
  }
}

/* Splits each chosen expert's rows into tasks: about four per thread over all of them, whole multiples of
 * MOE_ROW_ALIGN rows. */
static int split_rows(rill_moe_scratch *s, int E, int rows, int threads) {
  int active = 0;
  for (int e = 0; e < E; e++) active += s->offset[e + 1] > s->offset[e];
  const int64_t total = (int64_t)active * rows;
  int per = (int)((total / (4 * threads) + MOE_ROW_ALIGN - 1) / MOE_ROW_ALIGN * MOE_ROW_ALIGN);
  if (per < MOE_ROW_ALIGN) per = MOE_ROW_ALIGN;
  int n = 0;
  for (int e = 0; e < E; e++) {
    if (s->offset[e + 1] == s->offset[e]) continue;
    for (int r = 0; r < rows; r += per) {
      s->tasks[n++] = (rill_moe_task){.expert = e, .r0 = r, .r1 = r + per < rows ? r + per : rows};
    }
  }
  return n;
}

static int tasks_for(int n, int per) { return (n + per - 1) / per; }

void rill_moe_forward(const rill_model_config *c, const rill_layer_weights *L, const rill_kernels *k, rill_pool *pool,
                      rill_moe_scratch *s, const float *xn, int T, float *x) {
  const int E = c->num_experts, K = c->experts_per_tok, H = c->hidden_size, I = c->intermediate_size;
  const int threads = rill_pool_threads(pool);
  for (int t0 = 0; t0 < T; t0 += s->chunk) {
    const int n = T - t0 < s->chunk ? T - t0 : s->chunk;
    /* Route, then group the (token, rank) pairs by expert with a counting sort (tokens stay ascending). */
    for (int e = 0; e <= E; e++) s->offset[e] = 0;
    for (int t = 0; t < n; t++) {
      route(s->logits + (size_t)(t0 + t) * (size_t)E, L->router_bias, E, K, s->sel + (size_t)t * K,
            s->weight + (size_t)t * K);
      for (int r = 0; r < K; r++) s->offset[s->sel[t * K + r] + 1]++;
    }
    for (int e = 0; e < E; e++) s->offset[e + 1] += s->offset[e];
    for (int t = 0; t < n; t++) {
      for (int r = 0; r < K; r++) {
        const int p = s->offset[s->sel[t * K + r]]++;
        s->pair_token[p] = t;
        s->pair_of[t * K + r] = p;
      }
    }
    for (int e = E; e > 0; e--) s->offset[e] = s->offset[e - 1];
    s->offset[0] = 0;
    moe_job j = {.c = c, .L = L, .k = k, .s = s, .xn = xn + (size_t)t0 * (size_t)H, .x = x + (size_t)t0 * (size_t)H,
                 .T = n, .pairs = n * K};
    rill_pool_run(pool, gather_task, &j, tasks_for(j.pairs, PAIRS_PER_TASK));
    j.ntasks = split_rows(s, E, 2 * I, threads);
    rill_pool_run(pool, gate_up_task, &j, j.ntasks);
    rill_pool_run(pool, act_task, &j, tasks_for(j.pairs, PAIRS_PER_TASK));
    j.ntasks = split_rows(s, E, H, threads);
    rill_pool_run(pool, down_task, &j, j.ntasks);
    rill_pool_run(pool, combine_task, &j, tasks_for(n, PAIRS_PER_TASK));
  }
}
