#define _DEFAULT_SOURCE

#include "eagle3.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "aligned_buffer.h"
#include "argmax.h"
#include "rms_norm.h"
#include "rope.h"

/* Rows per task for the per-row stages. */
#define ROWS_PER_TASK 8
/* A projection's task covers at least LINEAR_MIN_ROWS weight rows and about LINEAR_TASK_MACS multiply-adds, so a
 * proposal round's small products (one row per sequence) run on the calling thread instead of paying a dispatch. */
#define LINEAR_MIN_ROWS 64
#define LINEAR_TASK_MACS 65536

struct rill_eagle3 {
  rill_eagle3_head h;
  const rill_matrix *embed; /* the head's own embeddings or the target's */
  int32_t qkv_dim, qd, kd;  /* (heads + 2 × kv_heads) × head_dim; heads × head_dim; kv_heads × head_dim */
  int32_t max_rows;         /* max(max_batch_tokens, max_seqs) */
  int32_t max_seqs, max_positions;
  rill_kv_pool kv; /* one layer, the target pool's num_blocks and block_size */
  float *feat;     /* [num_blocks × block_size × hidden], mapped lazily */
  size_t feat_bytes;
  bool tapped; /* the last forward pass captured taps */
  int32_t tap_rows; /* its fed tokens */

  float *tap;           /* [max_batch_tokens × 3 × target hidden] */
  float *g;             /* [max_batch_tokens × hidden] */
  float *hs;            /* [max_rows × hidden]: the fed hidden state, then the layer's residual stream */
  float *in;            /* [max_rows × 2 × hidden] */
  float *qkv;           /* [max_rows × qkv_dim] */
  float *attn;          /* [max_seqs × qd] */
  float *proj;          /* [max_seqs × hidden] */
  float *xn;            /* [max_seqs × hidden] */
  float *gu;            /* [max_seqs × 2 × intermediate] */
  float *act;           /* [max_seqs × intermediate] */
  float *logits;        /* [max_seqs × draft_vocab] */
  int32_t logit_rows;   /* rows of the last round */
  float *inv_freq;      /* [head_dim / 2] */
  float *rope_cos, *rope_sin; /* [max_rows × head_dim / 2] */
  float *att_scratch;   /* per thread: G × max_positions scores, then G × head_dim sums */
  size_t att_stride;
  int32_t *row_tok, *row_pos, *row_seq; /* [max_rows] */
  float *hprev;                         /* [max_seqs × hidden]: each sequence's last pre-norm hidden state */
  int32_t *left, *cur_tok, *cur_pos;    /* [max_seqs] */
};

void rill_eagle3_destroy(rill_eagle3 *x) {
  if (x == NULL) return;
  rill_eagle3_head_free(&x->h);
  rill_kv_pool_destroy(&x->kv);
  if (x->feat != NULL) munmap(x->feat, x->feat_bytes);
  float *fl[] = {x->tap, x->g,  x->hs,     x->in,       x->qkv,      x->attn,     x->proj,  x->xn,
                 x->gu,  x->act, x->logits, x->inv_freq, x->rope_cos, x->rope_sin, x->att_scratch, x->hprev};
  for (size_t i = 0; i < sizeof fl / sizeof fl[0]; i++) free(fl[i]);
  int32_t *in[] = {x->row_tok, x->row_pos, x->row_seq, x->left, x->cur_tok, x->cur_pos};
  for (size_t i = 0; i < sizeof in / sizeof in[0]; i++) free(in[i]);
  free(x);
}

size_t rill_eagle3_weight_bytes(const rill_eagle3 *x) { return x->h.bytes; }

size_t rill_eagle3_state_bytes(const rill_eagle3 *x) { return x->kv.bytes + x->feat_bytes; }

const rill_eagle3_head *rill_eagle3_head_of(const rill_eagle3 *x) { return &x->h; }

const float *rill_eagle3_last_logits(const rill_eagle3 *x, int32_t *rows) {
  *rows = x->logit_rows;
  return x->logits;
}

const float *rill_eagle3_last_hidden(const rill_eagle3 *x, int32_t *rows) {
  *rows = x->logit_rows;
  return x->hs;
}

const float *rill_eagle3_last_taps(const rill_eagle3 *x, int32_t *rows) {
  *rows = x->tap_rows;
  return x->tap;
}

rill_status rill_eagle3_create(rill_engine *e, const char *dir, rill_eagle3 **out, char *err, size_t err_cap) {
  *out = NULL;
  rill_eagle3 *x = calloc(1, sizeof *x);
  if (x == NULL) {
    snprintf(err, err_cap, "out of memory");
    return RILL_ERR_OUT_OF_MEMORY;
  }
  rill_status s = rill_eagle3_head_load(dir, &e->cfg, e->pool, &x->h, err, err_cap);
  if (s != RILL_OK) {
    free(x);
    return s;
  }
  const rill_model_config *c = &x->h.cfg;
  const size_t H = (size_t)c->hidden_size, I = (size_t)c->intermediate_size, D = (size_t)c->head_dim;
  const size_t G = (size_t)(c->num_heads / c->num_kv_heads);
  x->embed = x->h.own_embed ? &x->h.embed : &e->w.embed;
  x->qd = c->num_heads * c->head_dim;
  x->kd = c->num_kv_heads * c->head_dim;
  x->qkv_dim = x->qd + 2 * x->kd;
  x->max_seqs = e->lim.max_seqs;
  x->max_positions = e->lim.max_positions;
  x->max_rows = e->lim.max_batch_tokens > e->lim.max_seqs ? e->lim.max_batch_tokens : e->lim.max_seqs;
  const size_t T = (size_t)e->lim.max_batch_tokens, R = (size_t)x->max_rows, S = (size_t)x->max_seqs;
  s = rill_kv_pool_create(&x->kv, 1, e->lim.num_blocks, e->lim.block_size, c->num_kv_heads, c->head_dim,
                          e->kv.bf16);
  if (s != RILL_OK) {
    rill_eagle3_destroy(x);
    snprintf(err, err_cap, "out of memory for the head's KV pool of %d blocks", e->lim.num_blocks);
    return s;
  }
  x->feat_bytes = (size_t)e->lim.num_blocks * (size_t)e->lim.block_size * H * sizeof(float);
  void *f = mmap(NULL, x->feat_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (f == MAP_FAILED) {
    x->feat_bytes = 0;
    rill_eagle3_destroy(x);
    snprintf(err, err_cap, "out of memory for the head's feature store of %d blocks", e->lim.num_blocks);
    return RILL_ERR_OUT_OF_MEMORY;
  }
  x->feat = f;
  const size_t threads = (size_t)rill_pool_threads(e->pool);
  x->tap = rill_alloc_floats(T * 3 * (size_t)x->h.target_hidden);
  x->g = rill_alloc_floats(T * H);
  x->hs = rill_alloc_floats(R * H);
  x->in = rill_alloc_floats(R * 2 * H);
  x->qkv = rill_alloc_floats(R * (size_t)x->qkv_dim);
  x->attn = rill_alloc_floats(S * (size_t)x->qd);
  x->proj = rill_alloc_floats(S * H);
  x->xn = rill_alloc_floats(S * H);
  x->gu = rill_alloc_floats(S * 2 * I);
  x->act = rill_alloc_floats(S * I);
  x->logits = rill_alloc_floats(S * (size_t)x->h.draft_vocab);
  x->inv_freq = rill_alloc_floats(D / 2);
  x->rope_cos = rill_alloc_floats(R * D / 2);
  x->rope_sin = rill_alloc_floats(R * D / 2);
  x->att_stride = (G * (size_t)x->max_positions + G * D + 15) & ~(size_t)15;
  x->att_scratch = rill_alloc_floats(threads * x->att_stride);
  x->hprev = rill_alloc_floats(S * H);
  x->row_tok = malloc(R * sizeof(int32_t));
  x->row_pos = malloc(R * sizeof(int32_t));
  x->row_seq = malloc(R * sizeof(int32_t));
  x->left = malloc(S * sizeof(int32_t));
  x->cur_tok = malloc(S * sizeof(int32_t));
  x->cur_pos = malloc(S * sizeof(int32_t));
  if (x->tap == NULL || x->g == NULL || x->hs == NULL || x->in == NULL || x->qkv == NULL || x->attn == NULL ||
      x->proj == NULL || x->xn == NULL || x->gu == NULL || x->act == NULL || x->logits == NULL ||
      x->inv_freq == NULL || x->rope_cos == NULL || x->rope_sin == NULL || x->att_scratch == NULL ||
      x->hprev == NULL || x->row_tok == NULL || x->row_pos == NULL || x->row_seq == NULL || x->left == NULL ||
      x->cur_tok == NULL || x->cur_pos == NULL) {
    rill_eagle3_destroy(x);
    snprintf(err, err_cap, "out of memory for the head's step buffers");
    return RILL_ERR_OUT_OF_MEMORY;
  }
  rill_rope_inv_freq(c, x->inv_freq);
  *out = x;
  return RILL_OK;
}

void rill_eagle3_capture(rill_eagle3 *x, int32_t layer_input, const float *resid, int32_t T) {
  const size_t Ht = (size_t)x->h.target_hidden;
  for (int i = 0; i < 3; i++) {
    if (x->h.taps[i] != layer_input) continue;
    for (int32_t t = 0; t < T; t++) {
      memcpy(x->tap + ((size_t)t * 3 + (size_t)i) * Ht, resid + (size_t)t * Ht, Ht * sizeof(float));
    }
  }
  x->tapped = true;
  x->tap_rows = T;
}

/* ---- stages, each split over the engine's thread pool ---- */

typedef struct linear_job {
  const rill_kernels *k;
  const rill_matrix *m;
  const float *x;
  size_t ldx;
  int T, r0, r1, per_task;
  float *y;
  size_t ldy;
} linear_job;

static void linear_task(void *ctx, int64_t task, int thread) {
  (void)thread;
  const linear_job *j = ctx;
  const int a = j->r0 + (int)task * j->per_task, b = a + j->per_task < j->r1 ? a + j->per_task : j->r1;
  if (j->m->type == RILL_W_BF16) {
    j->k->gemm_bf16(j->x, j->ldx, j->T, j->m->data, j->m->ld, j->m->cols, a, b, j->y, j->ldy);
  } else {
    j->k->gemm_f32(j->x, j->ldx, j->T, j->m->data, j->m->ld, j->m->cols, a, b, j->y, j->ldy);
  }
}

/* y[t][r] = x[t] · m[r] for rows r0 ≤ r < r1 (the head's matrices are fp32 or bf16). */
static void linear_rows(rill_engine *e, const rill_matrix *m, const float *x, size_t ldx, int T, int r0, int r1,
                        float *y, size_t ldy) {
  if (T <= 0 || r1 <= r0) return;
  const int64_t per_row = (int64_t)m->cols * T;
  int64_t per = (LINEAR_TASK_MACS + per_row - 1) / per_row;
  per = per < LINEAR_MIN_ROWS ? LINEAR_MIN_ROWS : (per + 15) / 16 * 16;
  if (per > r1 - r0) per = r1 - r0;
  linear_job j = {.k = e->k, .m = m, .x = x, .ldx = ldx, .T = T, .r0 = r0, .r1 = r1, .per_task = (int)per, .y = y,
                  .ldy = ldy};
  rill_pool_run(e->pool, linear_task, &j, (r1 - r0 + j.per_task - 1) / j.per_task);
}

static void linear(rill_engine *e, const rill_matrix *m, const float *x, size_t ldx, int T, float *y, size_t ldy) {
  linear_rows(e, m, x, ldx, T, 0, m->rows, y, ldy);
}

/* The head's KV slot of a position through a sequence's block table (validated by the caller's batch checks). */
static size_t slot_of(const rill_eagle3 *x, const int32_t *table, int32_t pos) {
  const int bs = x->kv.block_size;
  return (size_t)table[pos / bs] * (size_t)bs + (size_t)(pos % bs);
}

typedef struct row_job {
  rill_engine *e;
  rill_eagle3 *x;
  const rill_step_batch *b;
  int n;
  bool from_store; /* input_task: the fed hidden state is g_{pos-1} from the feature store (else hs holds it) */
  bool kv_only;    /* rope_store_task: only k and v were projected (q is not rotated) */
  bool final_norm; /* add_norm_task: the head's final norm (else post_attention_layernorm) */
} row_job;

static const int32_t *table_of(const rill_step_batch *b, int32_t seq) {
  return b->block_tables + (size_t)seq * (size_t)b->block_table_stride;
}

/* in = [input_norm(embedding of the token) ‖ hidden_norm(fed hidden state)]; RoPE angles at pos − 1. */
static void input_task(void *ctx, int64_t task, int thread) {
  (void)thread;
  const row_job *j = ctx;
  rill_eagle3 *x = j->x;
  const rill_model_config *c = &x->h.cfg;
  const int H = c->hidden_size, half = c->head_dim / 2;
  int r0 = (int)task * ROWS_PER_TASK, r1 = r0 + ROWS_PER_TASK < j->n ? r0 + ROWS_PER_TASK : j->n;
  for (int r = r0; r < r1; r++) {
    float *hs = x->hs + (size_t)r * H, *in = x->in + (size_t)r * 2 * H;
    const int32_t pos = x->row_pos[r];
    if (j->from_store) {
      memcpy(hs, x->feat + slot_of(x, table_of(j->b, x->row_seq[r]), pos - 1) * (size_t)H, (size_t)H * sizeof(float));
    }
    rill_matrix_row(x->embed, x->row_tok[r], in + H); /* scratch: the normalised hidden state overwrites it */
    rill_rms_norm(in + H, x->h.input_norm, H, c->rms_norm_eps, in);
    rill_rms_norm(hs, x->h.hidden_norm, H, c->rms_norm_eps, in + H);
    rill_rope_angles(x->inv_freq, half, pos - 1, 1.0f, x->rope_cos + (size_t)r * half, x->rope_sin + (size_t)r * half);
  }
}

/* RoPE on q (when with_q) and k, then k and v into the row's slot. */
static void rope_store_task(void *ctx, int64_t task, int thread) {
  (void)thread;
  const row_job *j = ctx;
  rill_eagle3 *x = j->x;
  const rill_model_config *c = &x->h.cfg;
  const int D = c->head_dim, half = D / 2, bs = x->kv.block_size;
  int r0 = (int)task * ROWS_PER_TASK, r1 = r0 + ROWS_PER_TASK < j->n ? r0 + ROWS_PER_TASK : j->n;
  for (int r = r0; r < r1; r++) {
    float *q = x->qkv + (size_t)r * (size_t)x->qkv_dim, *k = q + x->qd, *v = k + x->kd;
    const float *cs = x->rope_cos + (size_t)r * half, *sn = x->rope_sin + (size_t)r * half;
    if (!j->kv_only) {
      for (int h = 0; h < c->num_heads; h++) rill_rope_apply(q + (size_t)h * D, half, cs, sn);
    }
    const int32_t pos = x->row_pos[r];
    const int32_t block = table_of(j->b, x->row_seq[r])[pos / bs];
    for (int h = 0; h < c->num_kv_heads; h++) {
      rill_rope_apply(k + (size_t)h * D, half, cs, sn);
      rill_kv_store(&x->kv, rill_kv_tile(&x->kv, 0, block, h), pos % bs, k + (size_t)h * D, v + (size_t)h * D);
    }
  }
}

/* One row × one KV head: attention over slots 1..pos of the row's sequence (slot 0 holds no pair). */
static void attn_task(void *ctx, int64_t task, int thread) {
  const row_job *j = ctx;
  rill_eagle3 *x = j->x;
  const rill_kernels *kk = j->e->k;
  const rill_kv_pool *kv = &x->kv;
  const rill_model_config *c = &x->h.cfg;
  const int D = c->head_dim, KH = c->num_kv_heads, G = c->num_heads / KH, bs = kv->block_size;
  const int r = (int)(task / KH), kh = (int)(task % KH);
  const int32_t pos = x->row_pos[r], n = pos; /* positions 1..pos */
  const int32_t *table = table_of(j->b, x->row_seq[r]);
  const float *q = x->qkv + (size_t)r * (size_t)x->qkv_dim + (size_t)kh * G * D;
  float *scores = x->att_scratch + (size_t)thread * x->att_stride;
  float *acc = scores + (size_t)G * (size_t)x->max_positions;
  const float scale = 1.0f / sqrtf((float)D);
  const size_t lds = (size_t)n;
  for (int b = 0; b * bs <= pos; b++) {
    const int s0 = b == 0 ? 1 : 0, end = pos - b * bs + 1 < bs ? pos - b * bs + 1 : bs, cnt = end - s0;
    if (cnt <= 0) continue;
    const size_t tile = rill_kv_tile(kv, 0, table[b], kh);
    float *dst = scores + (size_t)(b * bs + s0 - 1);
    if (kv->bf16) {
      kk->attn_scores_bf16(q, 0, 1, G, D, (const uint16_t *)kv->k + tile + s0, bs, cnt, scale, dst, lds);
    } else {
      kk->attn_scores_f32(q, 0, 1, G, D, (const float *)kv->k + tile + s0, bs, cnt, scale, dst, lds);
    }
  }
  for (int g = 0; g < G; g++) kk->softmax(scores + (size_t)g * lds, n, -INFINITY);
  memset(acc, 0, (size_t)G * D * sizeof(float));
  for (int b = 0; b * bs <= pos; b++) {
    const int s0 = b == 0 ? 1 : 0, end = pos - b * bs + 1 < bs ? pos - b * bs + 1 : bs, cnt = end - s0;
    if (cnt <= 0) continue;
    const size_t tile = rill_kv_tile(kv, 0, table[b], kh) + (size_t)s0 * D;
    const float *p = scores + (size_t)(b * bs + s0 - 1);
    if (kv->bf16) {
      kk->attn_values_bf16(p, lds, 1, G, (const uint16_t *)kv->v + tile, cnt, D, acc);
    } else {
      kk->attn_values_f32(p, lds, 1, G, (const float *)kv->v + tile, cnt, D, acc);
    }
  }
  memcpy(x->attn + (size_t)r * (size_t)x->qd + (size_t)kh * G * D, acc, (size_t)G * D * sizeof(float));
}

/* hs += proj; then xn = norm(hs) with `w`. */
static void add_norm_task(void *ctx, int64_t task, int thread) {
  (void)thread;
  const row_job *j = ctx;
  rill_eagle3 *x = j->x;
  const int H = x->h.cfg.hidden_size;
  const float *w = j->final_norm ? x->h.final_norm : x->h.post_norm;
  int r0 = (int)task * ROWS_PER_TASK, r1 = r0 + ROWS_PER_TASK < j->n ? r0 + ROWS_PER_TASK : j->n;
  for (int r = r0; r < r1; r++) {
    float *hs = x->hs + (size_t)r * H;
    const float *p = x->proj + (size_t)r * H;
    for (int i = 0; i < H; i++) hs[i] += p[i];
    rill_rms_norm(hs, w, H, x->h.cfg.rms_norm_eps, x->xn + (size_t)r * H);
  }
}

static void silu_task(void *ctx, int64_t task, int thread) {
  (void)thread;
  const row_job *j = ctx;
  rill_eagle3 *x = j->x;
  const int I = x->h.cfg.intermediate_size;
  int r0 = (int)task * ROWS_PER_TASK, r1 = r0 + ROWS_PER_TASK < j->n ? r0 + ROWS_PER_TASK : j->n;
  for (int r = r0; r < r1; r++) {
    const float *g = x->gu + (size_t)r * 2 * I;
    j->e->k->silu_mul(g, g + I, I, x->act + (size_t)r * I);
  }
}

static int64_t row_tasks(int n) { return (n + ROWS_PER_TASK - 1) / ROWS_PER_TASK; }

/* The head's input, q/k/v (k/v only when kv_only) with RoPE, and the K/V written, for rows 0..n (row_tok, row_pos,
 * row_seq set; hs set unless from_store). */
static void head_kv(rill_engine *e, rill_eagle3 *x, const rill_step_batch *b, int n, bool from_store, bool kv_only) {
  row_job j = {.e = e, .x = x, .b = b, .n = n, .from_store = from_store, .kv_only = kv_only};
  rill_pool_run(e->pool, input_task, &j, row_tasks(n));
  const size_t H2 = 2 * (size_t)x->h.cfg.hidden_size;
  linear_rows(e, &x->h.qkv, x->in, H2, n, kv_only ? x->qd : 0, x->qkv_dim, x->qkv, (size_t)x->qkv_dim);
  rill_pool_run(e->pool, rope_store_task, &j, row_tasks(n));
}

rill_status rill_eagle3_follow(rill_engine *e, const rill_step_batch *b) {
  rill_eagle3 *x = e->eagle3;
  if (!x->tapped) {
    snprintf(e->err, sizeof e->err, "eagle3 head: the target's forward pass captured no hidden states");
    return RILL_ERR_INTERNAL;
  }
  x->tapped = false;
  const int T = b->num_tokens, H = x->h.cfg.hidden_size, Ht3 = 3 * x->h.target_hidden;
  linear(e, &x->h.fc, x->tap, (size_t)Ht3, T, x->g, (size_t)H);
  int n = 0;
  for (int s = 0; s < b->num_seqs; s++) {
    const int32_t *table = table_of(b, s);
    for (int t = b->query_start[s]; t < b->query_start[s + 1]; t++) {
      const int32_t pos = b->positions[t];
      memcpy(x->feat + slot_of(x, table, pos) * (size_t)H, x->g + (size_t)t * H, (size_t)H * sizeof(float));
      if (pos == 0) continue;
      x->row_tok[n] = b->tokens[t];
      x->row_pos[n] = pos;
      x->row_seq[n] = s;
      n++;
    }
  }
  /* Every feature is stored before any row reads g_{pos-1}, which may be this step's. */
  head_kv(e, x, b, n, true, true);
  return RILL_OK;
}

/* One proposal round over n rows (row_* and hs set): the layer, norm and lm_head into logits. */
static void head_round(rill_engine *e, rill_eagle3 *x, const rill_step_batch *b, int n) {
  const rill_model_config *c = &x->h.cfg;
  const size_t H = (size_t)c->hidden_size, I = (size_t)c->intermediate_size;
  head_kv(e, x, b, n, false, false);
  row_job j = {.e = e, .x = x, .b = b, .n = n};
  rill_pool_run(e->pool, attn_task, &j, (int64_t)n * c->num_kv_heads);
  linear(e, &x->h.o, x->attn, (size_t)x->qd, n, x->proj, H);
  rill_pool_run(e->pool, add_norm_task, &j, row_tasks(n)); /* residual + post_attention_layernorm */
  linear(e, &x->h.gate_up, x->xn, H, n, x->gu, 2 * I);
  rill_pool_run(e->pool, silu_task, &j, row_tasks(n));
  linear(e, &x->h.down, x->act, I, n, x->proj, H);
  j.final_norm = true;
  rill_pool_run(e->pool, add_norm_task, &j, row_tasks(n));
  linear(e, &x->h.lm_head, x->xn, H, n, x->logits, (size_t)x->h.draft_vocab);
  x->logit_rows = n;
}

rill_status rill_eagle3_propose(rill_engine *e, const rill_step_batch *b, rill_step_result *r) {
  rill_status s = rill_eagle3_follow(e, b);
  if (s != RILL_OK || b->propose_counts == NULL) return s;
  rill_eagle3 *x = e->eagle3;
  const int32_t B = b->num_seqs, K1 = e->lim.max_drafts + 1, KD = e->lim.max_drafts, VD = x->h.draft_vocab;
  const size_t H = (size_t)x->h.cfg.hidden_size;
  /* P = the last accepted token's position (not in the target's KV yet); validation guaranteed the table covers
   * context_lens + k, and P ≤ context_lens, so slots P .. P + k − 1 lie inside it. P ≥ 1: the context is not empty,
   * so g_{P-1} was stored when P − 1 was fed. */
  int32_t rounds = 0;
  for (int32_t i = 0; i < B; i++) {
    r->proposed_counts[i] = 0;
    const int32_t k = b->propose_counts[i], n = r->counts[i];
    x->left[i] = 0;
    if (k <= 0 || n < 1) continue;
    x->left[i] = k;
    x->cur_tok[i] = r->tokens[(size_t)i * K1 + (size_t)(n - 1)];
    x->cur_pos[i] = b->context_lens[i] - b->draft_counts[i] + n - 1;
    if (k > rounds) rounds = k;
  }
  x->logit_rows = 0;
  for (int32_t j = 0; j < rounds; j++) {
    int n = 0;
    for (int32_t i = 0; i < B; i++) {
      if (x->left[i] <= j) continue;
      x->row_tok[n] = x->cur_tok[i];
      x->row_pos[n] = x->cur_pos[i] + j;
      x->row_seq[n] = i;
      float *hs = x->hs + (size_t)n * H;
      if (j == 0) {
        memcpy(hs, x->feat + slot_of(x, table_of(b, i), x->cur_pos[i] - 1) * H, H * sizeof(float));
      } else {
        memcpy(hs, x->hprev + (size_t)i * H, H * sizeof(float));
      }
      n++;
    }
    head_round(e, x, b, n);
    for (int q = 0; q < n; q++) {
      const int32_t i = x->row_seq[q];
      memcpy(x->hprev + (size_t)i * H, x->hs + (size_t)q * H, H * sizeof(float));
      const int32_t tok = x->h.d2t[rill_argmax(x->logits + (size_t)q * (size_t)VD, VD)];
      r->proposed[(size_t)i * KD + (size_t)j] = tok;
      r->proposed_counts[i] = j + 1;
      x->cur_tok[i] = tok;
    }
  }
  return RILL_OK;
}
