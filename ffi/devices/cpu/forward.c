/*
 * The CPU device's operations (device_ops.h, rill_cpu_ops) and its step (rill_forward): the rows that need logits and
 * each fed token's KV slot, the layers through rill_forward_layers, then the final norm and output projection of those
 * rows. Per layer: RMSNorm and one stacked q/k/v projection; bias, q/k norm and RoPE with the new K/V written into
 * their paged slots; attention over each sequence's block table; output projection; RMSNorm and a stacked gate/up
 * projection with SiLU, down projection (or, for gpt-oss, the router and the mixture of experts of moe.c). Every stage
 * is split across the thread pool by output rows or tokens, never inside one dot product, so results do not depend on
 * the thread count or the batch.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "device_ops.h"
#include "eagle3.h"
#include "engine.h"
#include "matrix.h"
#include "moe.h"
#include "rms_norm.h"
#include "rope.h"

/* Tokens per task for the per-token stages (norms, RoPE, activation). */
#define TOKENS_PER_TASK 8

/* ---- y = x · Wᵀ over a row range per task ---- */

/* Row ranges of a projection's tasks: guided, each task takes 1/(2 · threads) of the rows left (a multiple of
 * LINEAR_ALIGN, at least LINEAR_MIN_ROWS), so early tasks are long sequential streams and the last ones short enough
 * that no thread waits long for another at the end. Past LINEAR_MAX_TASKS / 2 tasks the rest is split evenly over
 * the slots left, so many threads never overflow the table. Batches of more than one token tile (prefill) re-read a
 * task's rows once per tile, so there a task holds at most LINEAR_REUSE_BYTES of weights, which stay in L2. */
#define LINEAR_MAX_TASKS 512
#define LINEAR_REUSE_BYTES ((size_t)1 << 20)
#define LINEAR_TILE_T 8 /* the most tokens a decode step's kernels serve in one pass over the rows */
#define LINEAR_ALIGN 16
#define LINEAR_MIN_ROWS 16

typedef struct linear_job {
  rill_engine *e;
  const rill_matrix *m;
  const float *x;
  size_t ldx;
  int T;
  float *y;
  size_t ldy;
  int starts[LINEAR_MAX_TASKS + 1]; /* task k: rows [starts[k], starts[k + 1]) */
} linear_job;

static int tasks_for(int n, int per) { return (n + per - 1) / per; }

/* Fills starts[0..n] and returns the task count n (≥ 1 when rows ≥ 1, ≤ LINEAR_MAX_TASKS). */
static int guided_split(int rows, int threads, int max_take, int starts[LINEAR_MAX_TASKS + 1]) {
  int n = 0, r = 0;
  starts[0] = 0;
  while (r < rows) {
    const int left = rows - r;
    int take = tasks_for(left / (2 * threads), LINEAR_ALIGN) * LINEAR_ALIGN;
    if (take > max_take) take = max_take;
    if (take < LINEAR_MIN_ROWS) take = LINEAR_MIN_ROWS;
    if (n >= LINEAR_MAX_TASKS / 2) {
      const int even = tasks_for(left, LINEAR_MAX_TASKS - n);
      if (take < even) take = even;
    }
    if (take > left) take = left;
    r += take;
    starts[++n] = r;
  }
  return n;
}

static void linear_task(void *ctx, int64_t task, int thread) {
  (void)thread;
  const linear_job *j = ctx;
  const rill_matrix *m = j->m;
  const int r0 = j->starts[task], r1 = j->starts[task + 1];
  switch (m->type) {
  case RILL_W_F32: j->e->k->gemm_f32(j->x, j->ldx, j->T, m->data, m->ld, m->cols, r0, r1, j->y, j->ldy); break;
  case RILL_W_BF16: j->e->k->gemm_bf16(j->x, j->ldx, j->T, m->data, m->ld, m->cols, r0, r1, j->y, j->ldy); break;
  case RILL_W_INT8:
    (m->group16 ? j->e->k->gemm_q8_g16 : j->e->k->gemm_q8)(j->e->xq, j->e->xs, j->T, m->data, m->ld, m->nblocks, r0,
                                                           r1, j->y, j->ldy);
    break;
  }
}

typedef struct quant_job {
  rill_engine *e;
  const float *x;
  size_t ldx;
  int T, cols, nblocks;
} quant_job;

static void quant_task(void *ctx, int64_t task, int thread) {
  (void)thread;
  const quant_job *j = ctx;
  int t0 = (int)task * TOKENS_PER_TASK, t1 = t0 + TOKENS_PER_TASK < j->T ? t0 + TOKENS_PER_TASK : j->T;
  for (int t = t0; t < t1; t++) {
    j->e->k->quantize_q8(j->x + (size_t)t * j->ldx, j->cols, j->nblocks,
                     j->e->xq + (size_t)t * (size_t)j->nblocks * RILL_Q8_BLOCK, j->e->xs + (size_t)t * (size_t)j->nblocks);
  }
}

static void linear(rill_engine *e, const rill_matrix *m, const float *x, size_t ldx, int T, float *y, size_t ldy) {
  if (m->type == RILL_W_INT8) {
    quant_job q = {.e = e, .x = x, .ldx = ldx, .T = T, .cols = m->cols, .nblocks = m->nblocks};
    rill_pool_run(e->pool, quant_task, &q, tasks_for(T, TOKENS_PER_TASK));
  }
  linear_job j = {.e = e, .m = m, .x = x, .ldx = ldx, .T = T, .y = y, .ldy = ldy};
  int max_take = m->rows;
  if (T > LINEAR_TILE_T && m->rows > 0) {
    const size_t fit = LINEAR_REUSE_BYTES / (rill_matrix_bytes(m) / (size_t)m->rows) / LINEAR_ALIGN * LINEAR_ALIGN;
    max_take = fit < LINEAR_ALIGN ? LINEAR_ALIGN : fit > (size_t)m->rows ? m->rows : (int)fit;
  }
  const int n = guided_split(m->rows, rill_pool_threads(e->pool), max_take, j.starts);
  rill_pool_run(e->pool, linear_task, &j, n);
}

/* ---- RMSNorm ---- */

typedef struct norm_job {
  const float *x;
  size_t ldx;
  const float *w;
  int n, T;
  float eps;
  float *out;
  size_t ldo;
  const int32_t *rows; /* optional: row t reads x row rows[t] */
} norm_job;

static void norm_task(void *ctx, int64_t task, int thread) {
  (void)thread;
  const norm_job *j = ctx;
  int t0 = (int)task * TOKENS_PER_TASK, t1 = t0 + TOKENS_PER_TASK < j->T ? t0 + TOKENS_PER_TASK : j->T;
  for (int t = t0; t < t1; t++) {
    size_t src = j->rows != NULL ? (size_t)j->rows[t] : (size_t)t;
    rill_rms_norm(j->x + src * j->ldx, j->w, j->n, j->eps, j->out + (size_t)t * j->ldo);
  }
}

static void norm_all(rill_engine *e, const float *x, size_t ldx, const float *w, int T, const int32_t *rows,
                     float *out, size_t ldo) {
  norm_job j = {.x = x, .ldx = ldx, .w = w, .n = e->cfg.hidden_size, .T = T, .eps = e->cfg.rms_norm_eps, .out = out,
                .ldo = ldo, .rows = rows};
  rill_pool_run(e->pool, norm_task, &j, tasks_for(T, TOKENS_PER_TASK));
}

/* ---- q/k bias, q/k norm, RoPE, KV write ---- */

typedef struct qkv_job {
  rill_engine *e;
  const rill_layer_weights *L;
  int layer, T;
} qkv_job;

static void qkv_task(void *ctx, int64_t task, int thread) {
  (void)thread;
  const qkv_job *j = ctx;
  rill_engine *e = j->e;
  const rill_model_config *c = &e->cfg;
  const int D = c->head_dim, half = D / 2, NH = c->num_heads, KH = c->num_kv_heads;
  int t0 = (int)task * TOKENS_PER_TASK, t1 = t0 + TOKENS_PER_TASK < j->T ? t0 + TOKENS_PER_TASK : j->T;
  const int win = e->kv_split && c->layer_sliding[j->layer];
  const rill_kv_pool *kv = win ? &e->kv_win : &e->kv;
  const int32_t layer = e->kv_layer[j->layer];
  for (int t = t0; t < t1; t++) {
    const int32_t block = (int32_t)(win ? e->slot_win_block[t] : e->slot_block[t]);
    float *q = e->qkv + (size_t)t * (size_t)e->qkv_dim;
    float *k = q + (size_t)NH * D, *v = k + (size_t)KH * D;
    if (j->L->qkv_bias != NULL) {
      for (int i = 0; i < e->qkv_dim; i++) q[i] += j->L->qkv_bias[i];
    }
    const float *cs = e->rope_cos + (size_t)t * half, *sn = e->rope_sin + (size_t)t * half;
    for (int h = 0; h < NH; h++) {
      float *qh = q + (size_t)h * D;
      if (j->L->q_norm != NULL) rill_rms_norm(qh, j->L->q_norm, D, c->rms_norm_eps, qh);
      rill_rope_apply(qh, half, cs, sn);
    }
    for (int h = 0; h < KH; h++) {
      float *kh = k + (size_t)h * D;
      if (j->L->k_norm != NULL) rill_rms_norm(kh, j->L->k_norm, D, c->rms_norm_eps, kh);
      rill_rope_apply(kh, half, cs, sn);
      rill_kv_store(kv, rill_kv_tile(kv, layer, block, h), e->slot_in_block[t], kh, v + (size_t)h * D);
    }
  }
}

/* ---- attention over the block table ---- */

typedef struct attn_job {
  rill_engine *e;
  const rill_step_batch *b;
  int layer;
  int window;         /* > 0: attend to the last `window` positions only */
  const float *sinks; /* [heads] or NULL: each head's sink logit joins its softmax and takes no value */
} attn_job;

/* One task: one group of fed tokens (rill_attn_group_tokens consecutive positions of one sequence, e->attn_groups) ×
 * one KV head, covering the query heads that share it. A token at position p attends to positions 0..p of its
 * sequence (p − window + 1..p on a sliding layer), read block by block through the block table (its own K/V already
 * written). The group's tokens share each block's key and value loads: scores run over the positions of its last
 * token, and each token's row gets probability 0 past its own position and before its own window, so its sums take
 * the same terms in the same order as alone (a zero term leaves a sum's bits as they are). Scores are indexed by
 * position; the first block is scored whole and the positions before a window get probability 0. */
static void attn_task(void *ctx, int64_t task, int thread) {
  const attn_job *j = ctx;
  rill_engine *e = j->e;
  const rill_model_config *c = &e->cfg;
  const int win = e->kv_split && c->layer_sliding[j->layer];
  const rill_kv_pool *kv = win ? &e->kv_win : &e->kv;
  const int32_t layer = e->kv_layer[j->layer];
  const int D = c->head_dim, NH = c->num_heads, KH = c->num_kv_heads, G = NH / KH;
  const int bs = kv->block_size;
  const int grp = (int)(task / KH), kh = (int)(task % KH);
  const int t0 = e->attn_groups[grp], nq = e->attn_groups[grp + 1] - t0;
  const int s = e->tok_seq[t0];
  const int n = j->b->positions[t0 + nq - 1] + 1;
  /* A sliding layer's blocks before the window may be gone from its table (validated: those from the first block
   * holding a position of the group's first window on are in the pool). */
  const int32_t *table = (win ? j->b->sliding_block_tables : j->b->block_tables) +
                         (size_t)s * (size_t)j->b->block_table_stride;
  const float *q = e->qkv + (size_t)t0 * (size_t)e->qkv_dim + (size_t)kh * G * D;
  float *scores = e->att_scratch + (size_t)thread * e->att_scratch_stride; /* nq · G rows of n */
  float *acc = scores + (size_t)e->attn_rows * (size_t)e->lim.max_positions; /* nq · G rows of D */
  const float scale = 1.0f / sqrtf((float)D);
  const size_t lds = (size_t)n;
  const int n0 = j->b->positions[t0] + 1, first0 = j->window > 0 && n0 > j->window ? n0 - j->window : 0;
  const int b0 = first0 / bs;
  for (int b = b0; b * bs < n; b++) {
    int cnt = n - b * bs < bs ? n - b * bs : bs;
    size_t tile = rill_kv_tile(kv, layer, table[b], kh);
    if (kv->bf16) {
      e->k->attn_scores_bf16(q, (size_t)e->qkv_dim, nq, G, D, (const uint16_t *)kv->k + tile, bs, cnt, scale,
                             scores + (size_t)b * bs, lds);
    } else {
      e->k->attn_scores_f32(q, (size_t)e->qkv_dim, nq, G, D, (const float *)kv->k + tile, bs, cnt, scale,
                            scores + (size_t)b * bs, lds);
    }
  }
  for (int i = 0; i < nq; i++) {
    const int ni = n0 + i, first = j->window > 0 && ni > j->window ? ni - j->window : 0;
    for (int g = 0; g < G; g++) {
      float *sc = scores + (size_t)(i * G + g) * lds;
      for (int p = b0 * bs; p < first; p++) sc[p] = 0.0f;
      e->k->softmax(sc + first, ni - first, j->sinks != NULL ? j->sinks[kh * G + g] : -INFINITY);
      for (int p = ni; p < n; p++) sc[p] = 0.0f;
    }
  }
  memset(acc, 0, (size_t)nq * G * D * sizeof(float));
  for (int b = b0; b * bs < n; b++) {
    int cnt = n - b * bs < bs ? n - b * bs : bs;
    size_t tile = rill_kv_tile(kv, layer, table[b], kh);
    if (kv->bf16) {
      e->k->attn_values_bf16(scores + (size_t)b * bs, lds, nq, G, (const uint16_t *)kv->v + tile, cnt, D, acc);
    } else {
      e->k->attn_values_f32(scores + (size_t)b * bs, lds, nq, G, (const float *)kv->v + tile, cnt, D, acc);
    }
  }
  for (int i = 0; i < nq; i++) {
    memcpy(e->attn + (size_t)(t0 + i) * (size_t)NH * D + (size_t)kh * G * D, acc + (size_t)i * G * D,
           (size_t)G * D * sizeof(float));
  }
}

/* ---- residual add and SiLU gate ---- */

typedef struct elem_job {
  rill_engine *e;
  int T;
  const float *bias; /* residual: optional bias of the projection */
} elem_job;

static void residual_task(void *ctx, int64_t task, int thread) {
  (void)thread;
  const elem_job *j = ctx;
  const int H = j->e->cfg.hidden_size;
  int t0 = (int)task * TOKENS_PER_TASK, t1 = t0 + TOKENS_PER_TASK < j->T ? t0 + TOKENS_PER_TASK : j->T;
  for (int t = t0; t < t1; t++) {
    float *x = j->e->x + (size_t)t * H;
    const float *p = j->e->proj + (size_t)t * H;
    if (j->bias != NULL) {
      for (int i = 0; i < H; i++) x[i] += p[i] + j->bias[i];
    } else {
      for (int i = 0; i < H; i++) x[i] += p[i];
    }
  }
}

static void silu_task(void *ctx, int64_t task, int thread) {
  (void)thread;
  const elem_job *j = ctx;
  const int I = j->e->cfg.intermediate_size;
  int t0 = (int)task * TOKENS_PER_TASK, t1 = t0 + TOKENS_PER_TASK < j->T ? t0 + TOKENS_PER_TASK : j->T;
  for (int t = t0; t < t1; t++) {
    const float *g = j->e->gu + (size_t)t * 2 * (size_t)I, *u = g + I;
    float *a = j->e->act + (size_t)t * I;
    j->e->k->silu_mul(g, u, I, a);
  }
}

static void residual(rill_engine *e, int T, const float *bias) {
  elem_job j = {.e = e, .T = T, .bias = bias};
  rill_pool_run(e->pool, residual_task, &j, tasks_for(T, TOKENS_PER_TASK));
}

/* ---- the device operations (device_ops.h) over the engine's host buffers ---- */

/* The embedding rows, and each token's RoPE angles for rope_kv. */
static rill_status cpu_embed(void *dev, int32_t layer, int32_t T, char *err, size_t err_cap) {
  (void)layer, (void)err, (void)err_cap;
  rill_engine *e = dev;
  const rill_step_batch *b = e->batch;
  const int H = e->cfg.hidden_size, half = e->cfg.head_dim / 2;
  for (int t = 0; t < T; t++) {
    rill_matrix_row(&e->w.embed, b->tokens[t], e->x + (size_t)t * H);
    rill_rope_angles(e->inv_freq, half, b->positions[t], e->cfg.rope_attn_factor, e->rope_cos + (size_t)t * half,
                     e->rope_sin + (size_t)t * half);
  }
  return RILL_OK;
}

static rill_status cpu_tap(void *dev, int32_t layer, int32_t T, char *err, size_t err_cap) {
  (void)err, (void)err_cap;
  rill_engine *e = dev;
  rill_eagle3_capture(e->eagle3, layer, e->x, T);
  return RILL_OK;
}

/* out = RMSNorm(x; norm) · mᵀ for the step's T tokens, through xn. */
static void norm_linear(rill_engine *e, const float *norm, const rill_matrix *m, int T, float *out, size_t ldo) {
  const size_t H = (size_t)e->cfg.hidden_size;
  norm_all(e, e->x, H, norm, T, NULL, e->xn, H);
  linear(e, m, e->xn, H, T, out, ldo);
}

static rill_status cpu_qkv(void *dev, int32_t layer, int32_t T, char *err, size_t err_cap) {
  (void)err, (void)err_cap;
  rill_engine *e = dev;
  const rill_layer_weights *L = &e->w.layers[layer];
  norm_linear(e, L->attn_norm, &L->qkv, T, e->qkv, (size_t)e->qkv_dim);
  return RILL_OK;
}

static rill_status cpu_rope_kv(void *dev, int32_t layer, int32_t T, char *err, size_t err_cap) {
  (void)err, (void)err_cap;
  rill_engine *e = dev;
  qkv_job j = {.e = e, .L = &e->w.layers[layer], .layer = layer, .T = T};
  rill_pool_run(e->pool, qkv_task, &j, tasks_for(T, TOKENS_PER_TASK));
  return RILL_OK;
}

static rill_status cpu_attend(void *dev, int32_t layer, int32_t T, char *err, size_t err_cap) {
  (void)err, (void)err_cap;
  rill_engine *e = dev;
  const rill_model_config *c = &e->cfg;
  attn_job j = {.e = e, .b = e->batch, .layer = layer, .window = c->layer_sliding[layer] ? c->sliding_window : 0,
                .sinks = e->w.layers[layer].sinks};
  /* Groups of consecutive positions of one sequence, at most rill_attn_group_tokens tokens each. */
  const int per = rill_attn_group_tokens(c->num_heads / c->num_kv_heads);
  int groups = 0;
  for (int t = 0; t < T; t++) {
    const int g0 = groups > 0 ? e->attn_groups[groups - 1] : 0;
    if (groups == 0 || t - g0 >= per || e->tok_seq[t] != e->tok_seq[t - 1] ||
        e->batch->positions[t] != e->batch->positions[t - 1] + 1) {
      e->attn_groups[groups++] = t;
    }
  }
  e->attn_groups[groups] = T;
  rill_pool_run(e->pool, attn_task, &j, (int64_t)groups * c->num_kv_heads);
  return RILL_OK;
}

static rill_status cpu_attn_out(void *dev, int32_t layer, int32_t T, char *err, size_t err_cap) {
  (void)err, (void)err_cap;
  rill_engine *e = dev;
  const rill_model_config *c = &e->cfg;
  const rill_layer_weights *L = &e->w.layers[layer];
  linear(e, &L->o, e->attn, (size_t)c->num_heads * (size_t)c->head_dim, T, e->proj, (size_t)c->hidden_size);
  residual(e, T, L->o_bias);
  return RILL_OK;
}

static rill_status cpu_gate_up(void *dev, int32_t layer, int32_t T, char *err, size_t err_cap) {
  (void)err, (void)err_cap;
  rill_engine *e = dev;
  const rill_layer_weights *L = &e->w.layers[layer];
  norm_linear(e, L->ffn_norm, &L->gate_up, T, e->gu, 2 * (size_t)e->cfg.intermediate_size);
  return RILL_OK;
}

static rill_status cpu_down(void *dev, int32_t layer, int32_t T, char *err, size_t err_cap) {
  (void)err, (void)err_cap;
  rill_engine *e = dev;
  elem_job j = {.e = e, .T = T, .bias = NULL};
  rill_pool_run(e->pool, silu_task, &j, tasks_for(T, TOKENS_PER_TASK));
  linear(e, &e->w.layers[layer].down, e->act, (size_t)e->cfg.intermediate_size, T, e->proj,
         (size_t)e->cfg.hidden_size);
  residual(e, T, NULL);
  return RILL_OK;
}

static rill_status cpu_router(void *dev, int32_t layer, int32_t T, char *err, size_t err_cap) {
  (void)err, (void)err_cap;
  rill_engine *e = dev;
  const rill_layer_weights *L = &e->w.layers[layer];
  norm_linear(e, L->ffn_norm, &L->router, T, e->moe.logits, (size_t)e->cfg.num_experts);
  return RILL_OK;
}

static rill_status cpu_experts(void *dev, int32_t layer, int32_t T, char *err, size_t err_cap) {
  (void)err, (void)err_cap;
  rill_engine *e = dev;
  rill_moe_forward(&e->cfg, &e->w.layers[layer], e->k, e->pool, &e->moe, e->xn, T, e->x);
  return RILL_OK;
}

const rill_device_ops rill_cpu_ops = {
    .embed = cpu_embed,
    .tap = cpu_tap,
    .qkv = cpu_qkv,
    .rope_kv = cpu_rope_kv,
    .attend = cpu_attend,
    .attn_out = cpu_attn_out,
    .gate_up = cpu_gate_up,
    .down = cpu_down,
    .router = cpu_router,
    .experts = cpu_experts,
};

rill_status rill_forward(rill_engine *e, const rill_step_batch *b, rill_rows mode, float *out, int32_t *num_rows) {
  const rill_model_config *c = &e->cfg;
  const int T = b->num_tokens, H = c->hidden_size;
  const int bs = e->kv.block_size;

  /* Only the rows that are sampled (or every row, for rill_forward_logits) pay for the output projection; checked
   * before any KV slot is written. */
  int32_t R = 0;
  const int all_rows = mode == RILL_ROWS_ALL;
  if (all_rows) {
    for (int t = 0; t < T; t++) e->rows[R++] = t;
  } else if (mode == RILL_ROWS_LAST) {
    for (int s = 0; s < b->num_seqs; s++) {
      if (b->query_start[s + 1] > b->query_start[s]) e->rows[R++] = b->query_start[s + 1] - 1;
    }
  } else if (mode == RILL_ROWS_SAMPLED) {
    for (int s = 0; s < b->num_seqs; s++) {
      if (!b->sample_flags[s]) continue;
      int end = b->query_start[s + 1], n = b->draft_counts[s] + 1;
      if (n > end - b->query_start[s]) {
        snprintf(e->err, sizeof e->err, "draft_counts[%d]: %d drafts but only %d fed tokens", s, n - 1,
                 end - b->query_start[s]);
        return RILL_ERR_INVALID_ARGUMENT;
      }
      for (int t = end - n; t < end; t++) e->rows[R++] = t;
    }
  }
  /* Where each fed token's K/V goes; the batch was validated, so every table entry read here is in range. */
  for (int s = 0; s < b->num_seqs; s++) {
    const int32_t *table = b->block_tables + (size_t)s * (size_t)b->block_table_stride;
    for (int t = b->query_start[s]; t < b->query_start[s + 1]; t++) {
      int32_t p = b->positions[t];
      e->tok_seq[t] = s;
      e->slot_block[t] = table[p / bs];
      e->slot_in_block[t] = p % bs;
      e->slot_win_block[t] = e->kv_split ? b->sliding_block_tables[(size_t)s * (size_t)b->block_table_stride + p / bs] : -1;
    }
  }
  e->batch = b;
  /* EAGLE-3: the head keeps the residual stream at its tapped layer inputs (0 = the embeddings). */
  rill_status st = rill_forward_layers(e->ops, e, c, T, e->eagle3 != NULL, e->err, sizeof e->err);
  e->batch = NULL;
  if (st != RILL_OK) return st;

  *num_rows = R;
  const rill_matrix *head = e->w.tied ? &e->w.embed : &e->w.lm_head;
  float *dst = all_rows ? out : e->logits;
  /* rill_forward_logits may ask for more rows than the step buffers hold: go in slices of max_rows. */
  for (int32_t r0 = 0; r0 < R; r0 += e->max_rows) {
    int32_t n = R - r0 < e->max_rows ? R - r0 : e->max_rows;
    norm_all(e, e->x, (size_t)H, e->w.final_norm, n, e->rows + r0, e->row_hidden, (size_t)H);
    linear(e, head, e->row_hidden, (size_t)H, n, dst + (size_t)r0 * (size_t)c->vocab_size, (size_t)c->vocab_size);
  }
  return RILL_OK;
}

/* ---- the CPU device as the engine drives it (device_ops.h rill_device; state: the engine) ---- */

static rill_status cpu_forward(void *state, const rill_step_batch *b, int all_rows, float *out, const float **logits,
                               int32_t *num_rows, char *err, size_t err_cap) {
  (void)err, (void)err_cap; /* rill_forward reports into the engine's own error buffer, which the engine passes */
  rill_engine *e = state;
  rill_status s = rill_forward(e, b, all_rows ? RILL_ROWS_ALL : RILL_ROWS_SAMPLED, out, num_rows);
  if (logits != NULL) *logits = e->logits;
  return s;
}

static int cpu_has_head(const void *state) { return ((const rill_engine *)state)->eagle3 != NULL; }

static rill_status cpu_propose(void *state, const rill_step_batch *b, rill_step_result *r, char *err, size_t err_cap) {
  (void)err, (void)err_cap;
  return rill_eagle3_propose(state, b, r);
}

static rill_status cpu_follow(void *state, const rill_step_batch *b, char *err, size_t err_cap) {
  (void)err, (void)err_cap;
  rill_engine *e = state;
  return e->eagle3 != NULL ? rill_eagle3_follow(e, b) : RILL_OK;
}

/* Sampling stays on the host (the engine's sampler); the head, if any, is the engine's eagle3. */
rill_device rill_cpu_device(rill_engine *e) {
  rill_device d = {.state = e, .forward = cpu_forward, .samples = NULL, .step = NULL, .has_head = cpu_has_head,
                   .propose = cpu_propose, .follow = cpu_follow, .destroy = NULL};
  return d;
}
