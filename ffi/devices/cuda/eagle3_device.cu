/* The EAGLE-3 head on the CUDA device (eagle3_device.cuh). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eagle3_device.cuh"
#include "eagle3_head.h"
#include "fail.h"
#include "kernels.cuh"
#include "kernels_eagle3.cuh"

#define E3(call)                                                                                                       \
  do {                                                                                                                 \
    cudaError_t e3_status_ = (call);                                                                                   \
    if (e3_status_ != cudaSuccess) return e3_fail(err, err_cap, #call, e3_status_);                                   \
  } while (0)

#define E3E(call)                                                                                                      \
  do {                                                                                                                 \
    cudaError_t e3_status_ = (call);                                                                                   \
    if (e3_status_ != cudaSuccess) return e3_status_;                                                                  \
  } while (0)

static rill_status e3_fail(char *err, size_t err_cap, const char *call, cudaError_t e) {
  const char *paren = strchr(call, '(');
  const int len = paren != nullptr ? (int)(paren - call) : (int)strlen(call);
  return rill_fail(err, err_cap, e == cudaErrorMemoryAllocation ? RILL_ERR_OUT_OF_MEMORY : RILL_ERR_DEVICE,
                   "device cuda: eagle3 head: %.*s failed: %s", len, call, cudaGetErrorString(e));
}

struct rill_cuda_e3 {
  int32_t H, I, Ht, VD, heads, qd, kd, qkv_dim, taps[3];
  float eps;
  int32_t max_tokens, max_seqs, max_drafts, block_size, table_stride, rows_cap;
  rill_gemm_lt *lt;
  /* weights (bf16 as on the device; embed_own only when the head has embed_tokens) */
  __nv_bfloat16 *embed_own, *fc, *qkv, *o, *gate_up, *down, *lm_head;
  const __nv_bfloat16 *embed;
  float *in_norm, *hid_norm, *post_norm, *final_norm, *inv_freq;
  int32_t *d2t;
  int64_t weight_bytes;
  /* state: the head's KV pool (geometry geom, one layer) and the feature store [blocks × block_size × H] */
  rill_kv_geom geom;
  __nv_bfloat16 *kc, *vc;
  float *feat;
  int64_t state_bytes;
  /* step buffers: per fed token (follow) or per proposing sequence (rounds), rows_cap = max(both) rows */
  float *tap;  /* [max_tokens × 3 Ht] */
  float *g;    /* [max_tokens × H] */
  float *hs;   /* [rows_cap × H]: the fed hidden state, then the layer's residual stream */
  float *in;   /* [rows_cap × 2H] */
  float *qkvb; /* [rows_cap × qkv_dim] */
  float *attn; /* [rows_cap × qd] */
  float *gu;   /* [rows_cap × 2I] */
  float *logits; /* [max_seqs × VD] */
  float *hprev;  /* [max_seqs × H] */
  __nv_bfloat16 *xb; /* [rows_cap × widest GEMM input]: bf16 inputs above the GEMV threshold */
  int32_t *row_tok, *row_pos; /* [rows_cap] */
  /* proposals: cur_tok [S], cur_pos [S], round j's rows at rows + j × S [max_drafts × S], tables [S × stride] */
  int32_t *meta, *meta_host;
  size_t meta_len;
  int32_t *proposed, *proposed_host; /* [S × max_drafts] */
  int32_t last_rows;
};

void rill_cuda_e3_destroy(rill_cuda_e3 *x) {
  if (x == nullptr) return;
  void *ptrs[] = {x->embed_own, x->fc,    x->qkv,  x->o,    x->gate_up, x->down,   x->lm_head, x->in_norm,
                  x->hid_norm,  x->post_norm, x->final_norm, x->inv_freq, x->d2t, x->kc, x->vc, x->feat,
                  x->tap,       x->g,     x->hs,   x->in,   x->qkvb,    x->attn,   x->gu,      x->logits,
                  x->hprev,     x->xb,    x->row_tok, x->row_pos, x->meta, x->proposed};
  for (void *p : ptrs) cudaFree(p);
  cudaFreeHost(x->meta_host);
  cudaFreeHost(x->proposed_host);
  free(x);
}

size_t rill_cuda_e3_block_bytes(const rill_cuda_e3 *x) {
  return (size_t)x->block_size * (2 * (size_t)x->kd * sizeof(__nv_bfloat16) + (size_t)x->H * sizeof(float));
}

int64_t rill_cuda_e3_weight_bytes(const rill_cuda_e3 *x) { return x->weight_bytes; }
int64_t rill_cuda_e3_state_bytes(const rill_cuda_e3 *x) { return x->state_bytes; }

template <typename V>
static rill_status upload(rill_cuda_e3 *x, V **dst, const void *src, size_t count, char *err, size_t err_cap) {
  E3(cudaMalloc(reinterpret_cast<void **>(dst), count * sizeof(V)));
  E3(cudaMemcpy(*dst, src, count * sizeof(V), cudaMemcpyHostToDevice));
  x->weight_bytes += (int64_t)(count * sizeof(V));
  return RILL_OK;
}

/* A host matrix (fp32 or bf16, rows ld apart) as a dense bf16 matrix on the device. */
static rill_status upload_matrix(rill_cuda_e3 *x, __nv_bfloat16 **dst, const rill_matrix *m, char *err,
                                 size_t err_cap) {
  if (m->type != RILL_W_F32 && m->type != RILL_W_BF16) {
    return rill_fail(err, err_cap, RILL_ERR_INTERNAL,
                     "device cuda: eagle3 head: weights must be held in fp32 or bf16");
  }
  const size_t rows = (size_t)m->rows, cols = (size_t)m->cols;
  __nv_bfloat16 *tmp = static_cast<__nv_bfloat16 *>(malloc(rows * cols * sizeof(__nv_bfloat16)));
  if (tmp == nullptr) {
    return rill_fail(err, err_cap, RILL_ERR_OUT_OF_MEMORY, "out of memory");
  }
  for (size_t r = 0; r < rows; r++) {
    if (m->type == RILL_W_BF16) {
      memcpy(static_cast<void *>(tmp + r * cols), static_cast<const uint16_t *>(m->data) + r * m->ld,
             cols * sizeof(uint16_t));
    } else {
      const float *src = static_cast<const float *>(m->data) + r * m->ld;
      for (size_t c = 0; c < cols; c++) tmp[r * cols + c] = __float2bfloat16_rn(src[c]);
    }
  }
  const rill_status s = upload(x, dst, tmp, rows * cols, err, err_cap);
  free(tmp);
  return s;
}

rill_status rill_cuda_e3_create(const rill_eagle3_head *h, const float *inv_freq, const __nv_bfloat16 *embed,
                                const rill_limits *lim, rill_gemm_lt *lt, rill_cuda_e3 **out, char *err,
                                size_t err_cap) {
  *out = nullptr;
  const rill_model_config *c = &h->cfg;
  /* The head's products and attention take what the target's kernels take (cuda_device.cu check_shapes). */
  if (c->hidden_size % 8 != 0 || c->intermediate_size % 8 != 0 || (c->num_heads * c->head_dim) % 8 != 0 ||
      c->head_dim % 2 != 0 || c->head_dim > 256 || c->num_kv_heads < 1 || c->num_heads % c->num_kv_heads != 0) {
    return rill_fail(err, err_cap, RILL_ERR_UNSUPPORTED,
                     "device cuda: eagle3 head: hidden_size, intermediate_size and heads × head_dim must be multiples "
                     "of 8, head_dim even and at most 256, num_heads a multiple of num_kv_heads");
  }
  rill_cuda_e3 *x = static_cast<rill_cuda_e3 *>(calloc(1, sizeof(rill_cuda_e3)));
  if (x == nullptr) {
    return rill_fail(err, err_cap, RILL_ERR_OUT_OF_MEMORY, "out of memory");
  }
  x->H = c->hidden_size;
  x->I = c->intermediate_size;
  x->Ht = h->target_hidden;
  x->VD = h->draft_vocab;
  x->heads = c->num_heads;
  x->qd = c->num_heads * c->head_dim;
  x->kd = c->num_kv_heads * c->head_dim;
  x->qkv_dim = x->qd + 2 * x->kd;
  for (int i = 0; i < 3; i++) x->taps[i] = h->taps[i];
  x->eps = c->rms_norm_eps;
  x->max_tokens = lim->max_batch_tokens;
  x->max_seqs = lim->max_seqs;
  x->max_drafts = lim->max_drafts;
  x->block_size = lim->block_size;
  x->table_stride = (lim->max_positions + lim->block_size - 1) / lim->block_size;
  x->rows_cap = x->max_tokens > x->max_seqs ? x->max_tokens : x->max_seqs;
  x->lt = lt;
  x->geom = rill_kv_geom{0, lim->block_size, c->num_kv_heads, c->head_dim, x->table_stride, 0};
  const rill_status s = [&]() -> rill_status {
    const size_t H = (size_t)x->H, I = (size_t)x->I, R = (size_t)x->rows_cap, T = (size_t)x->max_tokens;
    const size_t S = (size_t)x->max_seqs, KD = (size_t)x->max_drafts;
    rill_status st;
    if ((st = upload_matrix(x, &x->fc, &h->fc, err, err_cap)) != RILL_OK) return st;
    if ((st = upload_matrix(x, &x->qkv, &h->qkv, err, err_cap)) != RILL_OK) return st;
    if ((st = upload_matrix(x, &x->o, &h->o, err, err_cap)) != RILL_OK) return st;
    if ((st = upload_matrix(x, &x->gate_up, &h->gate_up, err, err_cap)) != RILL_OK) return st;
    if ((st = upload_matrix(x, &x->down, &h->down, err, err_cap)) != RILL_OK) return st;
    if ((st = upload_matrix(x, &x->lm_head, &h->lm_head, err, err_cap)) != RILL_OK) return st;
    if (h->own_embed && (st = upload_matrix(x, &x->embed_own, &h->embed, err, err_cap)) != RILL_OK) return st;
    x->embed = h->own_embed ? x->embed_own : embed;
    if ((st = upload(x, &x->in_norm, h->input_norm, H, err, err_cap)) != RILL_OK) return st;
    if ((st = upload(x, &x->hid_norm, h->hidden_norm, H, err, err_cap)) != RILL_OK) return st;
    if ((st = upload(x, &x->post_norm, h->post_norm, H, err, err_cap)) != RILL_OK) return st;
    if ((st = upload(x, &x->final_norm, h->final_norm, H, err, err_cap)) != RILL_OK) return st;
    if ((st = upload(x, &x->inv_freq, inv_freq, (size_t)c->head_dim / 2, err, err_cap)) != RILL_OK) return st;
    if ((st = upload(x, &x->d2t, h->d2t, (size_t)x->VD, err, err_cap)) != RILL_OK) return st;
    size_t widest = 3 * (size_t)x->Ht;
    const size_t widths[] = {2 * H, (size_t)x->qd, I, H};
    for (size_t w : widths) widest = w > widest ? w : widest;
    E3(cudaMalloc(&x->tap, T * 3 * (size_t)x->Ht * sizeof(float)));
    E3(cudaMalloc(&x->g, T * H * sizeof(float)));
    E3(cudaMalloc(&x->hs, R * H * sizeof(float)));
    E3(cudaMalloc(&x->in, R * 2 * H * sizeof(float)));
    E3(cudaMalloc(&x->qkvb, R * (size_t)x->qkv_dim * sizeof(float)));
    E3(cudaMalloc(&x->attn, R * (size_t)x->qd * sizeof(float)));
    E3(cudaMalloc(&x->gu, R * 2 * I * sizeof(float)));
    E3(cudaMalloc(&x->logits, S * (size_t)x->VD * sizeof(float)));
    E3(cudaMalloc(&x->hprev, S * H * sizeof(float)));
    E3(cudaMalloc(&x->xb, R * widest * sizeof(__nv_bfloat16)));
    E3(cudaMalloc(&x->row_tok, R * sizeof(int32_t)));
    E3(cudaMalloc(&x->row_pos, R * sizeof(int32_t)));
    x->meta_len = S * (2 + KD + (size_t)x->table_stride);
    E3(cudaMalloc(&x->meta, x->meta_len * sizeof(int32_t)));
    E3(cudaMallocHost(&x->meta_host, x->meta_len * sizeof(int32_t)));
    const size_t np = S * (KD > 0 ? KD : 1);
    E3(cudaMalloc(&x->proposed, np * sizeof(int32_t)));
    E3(cudaMallocHost(&x->proposed_host, np * sizeof(int32_t)));
    return RILL_OK;
  }();
  if (s != RILL_OK) {
    rill_cuda_e3_destroy(x);
    return s;
  }
  *out = x;
  return RILL_OK;
}

rill_status rill_cuda_e3_alloc_pool(rill_cuda_e3 *x, int32_t blocks, char *err, size_t err_cap) {
  x->geom.num_blocks = blocks;
  const size_t kv = (size_t)blocks * (size_t)x->block_size * (size_t)x->kd;
  E3(cudaMalloc(&x->kc, kv * sizeof(__nv_bfloat16)));
  E3(cudaMalloc(&x->vc, kv * sizeof(__nv_bfloat16)));
  const size_t feat = (size_t)blocks * (size_t)x->block_size * (size_t)x->H;
  E3(cudaMalloc(&x->feat, feat * sizeof(float)));
  x->state_bytes = (int64_t)(2 * kv * sizeof(__nv_bfloat16) + feat * sizeof(float));
  return RILL_OK;
}

/* y = x · Wᵀ (+ y): the streaming kernel up to the GEMV threshold, else x cast to bf16 for cuBLASLt or the tiled
 * kernel (as the target's layers do above it). */
static cudaError_t linear(rill_cuda_e3 *x, cudaStream_t st, const float *in, int n, int K, const __nv_bfloat16 *W,
                          int N, int accumulate, float *y) {
  if (n <= kGemvMaxTokens) return rill_k_linear(st, in, n, K, W, N, nullptr, accumulate, y);
  E3E(rill_k_e3_to_bf16(st, in, (size_t)n * (size_t)K, x->xb));
  if (x->lt != nullptr) {
    const cudaError_t e = rill_gemm_lt_linear_bf16x(x->lt, st, x->xb, n, K, W, N, nullptr, accumulate, y);
    if (e != cudaErrorNotSupported) return e;
  }
  return rill_k_linear_bf16x(st, x->xb, n, K, W, N, nullptr, accumulate, y);
}

/* y = RMSNorm(in) · Wᵀ, the norm fused up to the GEMV threshold. */
static cudaError_t norm_linear(rill_cuda_e3 *x, cudaStream_t st, const float *in, const float *norm_w, int n,
                               const __nv_bfloat16 *W, int N, float *y) {
  if (n <= kGemvMaxTokens) return rill_k_linear_norm(st, in, nullptr, norm_w, x->eps, n, x->H, W, N, nullptr, 0, y);
  E3E(rill_k_rms_norm(st, in, nullptr, norm_w, x->H, x->eps, n, x->xb));
  if (x->lt != nullptr) {
    const cudaError_t e = rill_gemm_lt_linear_bf16x(x->lt, st, x->xb, n, x->H, W, N, nullptr, 0, y);
    if (e != cudaErrorNotSupported) return e;
  }
  return rill_k_linear_bf16x(st, x->xb, n, x->H, W, N, nullptr, 0, y);
}

/* hs += down(silu(gate) ⊙ up). */
static cudaError_t silu_down(rill_cuda_e3 *x, cudaStream_t st, int n) {
  if (n <= kGemvMaxTokens) return rill_k_linear_silu_mul(st, x->gu, n, x->I, x->down, x->H, x->hs);
  E3E(rill_k_silu_mul(st, x->gu, n, x->I, x->xb));
  if (x->lt != nullptr) {
    const cudaError_t e = rill_gemm_lt_linear_bf16x(x->lt, st, x->xb, n, x->I, x->down, x->H, nullptr, 1, x->hs);
    if (e != cudaErrorNotSupported) return e;
  }
  return rill_k_linear_bf16x(st, x->xb, n, x->I, x->down, x->H, nullptr, 1, x->hs);
}

cudaError_t rill_cuda_e3_tap(rill_cuda_e3 *x, cudaStream_t st, int layer_input, const float *resid, int T) {
  for (int i = 0; i < 3; i++) {
    if (x->taps[i] == layer_input) E3E(rill_k_e3_tap(st, resid, T, x->Ht, i, x->tap));
  }
  return cudaSuccess;
}

cudaError_t rill_cuda_e3_follow(rill_cuda_e3 *x, cudaStream_t st, int T, const int32_t *tokens,
                                const int32_t *positions, const int32_t *tok_seq, const int32_t *tables) {
  const int H = x->H, bs = x->block_size;
  E3E(linear(x, st, x->tap, T, 3 * x->Ht, x->fc, H, 0, x->g));
  /* Every feature is stored before any row reads g_{p-1}, which may be this step's. */
  E3E(rill_k_e3_store_features(st, x->g, T, H, positions, tok_seq, tables, x->table_stride, bs, x->feat));
  E3E(rill_k_e3_input(st, T, tokens, positions, tok_seq, tables, x->table_stride, bs, x->feat, nullptr, x->embed,
                      x->in_norm, x->hid_norm, x->eps, H, x->hs, x->in));
  /* Only k and v: the rows after q's of the stacked projection. */
  const __nv_bfloat16 *wkv = x->qkv + (size_t)x->qd * 2 * (size_t)H;
  E3E(linear(x, st, x->in, T, 2 * H, wkv, 2 * x->kd, 0, x->qkvb));
  return rill_k_e3_rope_kv(st, T, nullptr, 0, x->qkvb, 2 * x->kd, x->heads, x->inv_freq, positions, tok_seq, tables,
                           x->geom, x->kc, x->vc);
}

/* Round j over n rows (sequences rows[0..n)): the layer, norm, lm_head and the greedy pick. */
static cudaError_t propose_round(rill_cuda_e3 *x, cudaStream_t st, int j, int n, const int32_t *rows,
                                 int32_t *cur_tok, const int32_t *cur_pos, const int32_t *tables) {
  const int H = x->H, ld = x->qkv_dim;
  E3E(rill_k_e3_round_rows(st, n, rows, j, cur_tok, cur_pos, x->row_tok, x->row_pos));
  E3E(rill_k_e3_input(st, n, x->row_tok, x->row_pos, rows, tables, x->table_stride, x->block_size, x->feat,
                      j == 0 ? nullptr : x->hprev, x->embed, x->in_norm, x->hid_norm, x->eps, H, x->hs, x->in));
  E3E(linear(x, st, x->in, n, 2 * H, x->qkv, ld, 0, x->qkvb));
  E3E(rill_k_e3_rope_kv(st, n, x->qkvb, ld, x->qkvb + x->qd, ld, x->heads, x->inv_freq, x->row_pos, rows, tables,
                        x->geom, x->kc, x->vc));
  E3E(rill_k_e3_attention(st, n, x->qkvb, ld, x->heads, x->row_pos, rows, tables, x->geom, x->kc, x->vc, x->attn));
  E3E(linear(x, st, x->attn, n, x->qd, x->o, H, 1, x->hs));
  E3E(norm_linear(x, st, x->hs, x->post_norm, n, x->gate_up, 2 * x->I, x->gu));
  E3E(silu_down(x, st, n));
  E3E(norm_linear(x, st, x->hs, x->final_norm, n, x->lm_head, x->VD, x->logits));
  return rill_k_e3_pick(st, n, x->logits, x->VD, x->d2t, rows, j, x->max_drafts, x->hs, H, cur_tok, x->hprev,
                        x->proposed);
}

rill_status rill_cuda_e3_propose(rill_cuda_e3 *x, cudaStream_t st, const rill_step_batch *b, rill_step_result *r,
                                 char *err, size_t err_cap) {
  if (b->propose_counts == nullptr) return RILL_OK;
  const int32_t B = b->num_seqs, S = x->max_seqs, KD = x->max_drafts, K1 = KD + 1, bs = x->block_size;
  int32_t *cur_tok = x->meta_host, *cur_pos = cur_tok + S, *rows = cur_pos + S, *tables = rows + (size_t)S * KD;
  int32_t rounds = 0, count[64 + 1] = {0};
  /* P = the last accepted token's position, as on the CPU device (eagle3.c): the table covers context_lens + k, and
   * P ≤ context_lens, so slots P .. P + k − 1 lie inside it; P ≥ 1, so g_{P-1} was stored when P − 1 was fed. */
  for (int32_t i = 0; i < B; i++) {
    r->proposed_counts[i] = 0;
    const int32_t k = b->propose_counts[i], n = r->counts[i];
    if (k <= 0 || n < 1) continue;
    cur_tok[i] = r->tokens[(size_t)i * K1 + (size_t)(n - 1)];
    cur_pos[i] = b->context_lens[i] - b->draft_counts[i] + n - 1;
    const int32_t need = (cur_pos[i] + k - 1) / bs + 1;
    memcpy(tables + (size_t)i * x->table_stride, b->block_tables + (size_t)i * b->block_table_stride,
           (size_t)need * sizeof(int32_t));
    for (int32_t j = 0; j < k; j++) rows[(size_t)j * S + count[j]++] = i;
    r->proposed_counts[i] = k;
    rounds = k > rounds ? k : rounds;
  }
  if (rounds == 0) return RILL_OK;
  E3(cudaMemcpyAsync(x->meta, x->meta_host, x->meta_len * sizeof(int32_t), cudaMemcpyHostToDevice, st));
  int32_t *dtok = x->meta;
  const int32_t *dpos = dtok + S, *drows = dpos + S, *dtables = drows + (size_t)S * KD;
  for (int32_t j = 0; j < rounds; j++) {
    E3(propose_round(x, st, j, count[j], drows + (size_t)j * S, dtok, dpos, dtables));
  }
  x->last_rows = count[rounds - 1];
  E3(cudaMemcpyAsync(x->proposed_host, x->proposed, (size_t)B * KD * sizeof(int32_t), cudaMemcpyDeviceToHost, st));
  E3(cudaStreamSynchronize(st));
  for (int32_t i = 0; i < B; i++) {
    if (r->proposed_counts[i] > 0) {
      memcpy(r->proposed + (size_t)i * KD, x->proposed_host + (size_t)i * KD,
             (size_t)r->proposed_counts[i] * sizeof(int32_t));
    }
  }
  return RILL_OK;
}

rill_status rill_cuda_e3_last_rows(rill_cuda_e3 *x, cudaStream_t st, float *logits, float *hidden, int32_t cap,
                                   int32_t *rows, char *err, size_t err_cap) {
  *rows = x->last_rows;
  const size_t n = (size_t)(x->last_rows < cap ? x->last_rows : cap);
  if (logits != nullptr) {
    E3(cudaMemcpyAsync(logits, x->logits, n * (size_t)x->VD * sizeof(float), cudaMemcpyDeviceToHost, st));
  }
  if (hidden != nullptr) {
    E3(cudaMemcpyAsync(hidden, x->hs, n * (size_t)x->H * sizeof(float), cudaMemcpyDeviceToHost, st));
  }
  E3(cudaStreamSynchronize(st));
  return RILL_OK;
}
