/*
 * The CUDA device (cuda_device.h): weights uploaded once as bf16 (q/k/v and gate/up stacked as the host loader
 * stacks them), a bf16 paged KV pool sized from the free memory at create, and every step buffer — device and pinned
 * host — allocated at create, so a step never allocates. A step uploads its token metadata in one copy, runs the
 * layers on one stream — rill_forward_layers over this device's operations (device_ops.h), the forward pass the CPU
 * device runs too — and copies only the sampled rows' logits back, with one synchronisation.
 *
 * CUDA graphs: at create, the forward pass (layers, final norm and output projection) is captured once per bucket of
 * fed tokens (1, 2, 4, …, up to the most logits rows a step computes, at most kMaxGraphTokens). A step of T ≤ Tb
 * tokens is padded up to its bucket Tb and replays Tb's graph; larger steps (prefill) run eagerly. What varies per
 * step reaches the graph only through device memory uploaded before the replay (d->meta, laid out for Tb tokens);
 * every kernel argument is fixed by Tb. Padding tokens are token 0 at position 0 of a dummy sequence whose block
 * table holds only the scratch KV block (one block past the pool the engine sees), so they write and read nothing a
 * real sequence owns; every kernel treats rows independently, so a real token's results do not depend on them. A
 * bucket is replayed only when T (and the logits rows) would take the same kernels eagerly (attention splits, GEMV
 * or GEMM), so a replayed step's logits are bit for bit an eager step's (cuBLASLt may pick another algorithm for
 * another row count: there, to rounding).
 *
 * gpt-oss (cfg num_experts > 0): the MoE layers keep their experts packed in MXFP4 as the host loaded them, route
 * on the device (kernels_moe.cu), and the attention takes the layer's sliding window and sinks.
 *
 * An EAGLE-3 head (eagle3_device.cuh): the layers hand it their residual stream at its tapped layer inputs and it
 * follows every forward pass (features, its KV) inside run_layers, so inside the graphs; its proposals run after
 * sampling (rill_cuda_propose). Its KV and features take a share of every KV block's budget.
 *
 * Every CUDA call's status is checked; a failure is RILL_ERR_DEVICE naming the call and CUDA's message.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cuda_device.h"
#include "device_ops.h"
#include "fail.h"
#include "eagle3_device.cuh"
#include "gemm_lt.cuh"
#include "kernels.cuh"
#include "sample.cuh"
#include "sample_rules.h"

#define CU(call)                                                                                                       \
  do {                                                                                                                 \
    cudaError_t cu_status_ = (call);                                                                                   \
    if (cu_status_ != cudaSuccess) return cuda_fail(err, err_cap, #call, cu_status_);                                 \
  } while (0)

static rill_status cuda_fail(char *err, size_t err_cap, const char *call, cudaError_t e) {
  /* Only the function's name: the arguments add nothing a user can act on. */
  const char *paren = strchr(call, '(');
  int len = paren != nullptr ? (int)(paren - call) : (int)strlen(call);
  return rill_fail(err, err_cap, e == cudaErrorMemoryAllocation ? RILL_ERR_OUT_OF_MEMORY : RILL_ERR_DEVICE,
                   "device cuda: %.*s failed: %s", len, call, cudaGetErrorString(e));
}

namespace {

struct layer_dev {
  float *attn_norm, *ffn_norm, *q_norm, *k_norm, *qkv_bias, *o_bias;
  __nv_bfloat16 *qkv, *o, *gate_up, *down;
  /* gpt-oss */
  float *sinks, *router_bias, *gu_bias, *dn_bias;
  __nv_bfloat16 *router;
  uint8_t *gu_blocks, *gu_scales, *dn_blocks, *dn_scales;
};

/* Largest bucket captured: beyond it a step's kernels outweigh their launches, and capture time grows. */
constexpr int kMaxGraphTokens = 512;
/* gpt-oss: fed tokens whose expert products share the per-pair buffers at once (bounds them, not the step). The
 * emulation's steps are small: there the chunk is too, so its prefills take several chunks. */
#ifdef RILL_CUDA_EMU
constexpr int kMoeChunk = 16;
#else
constexpr int kMoeChunk = 256;
#endif
constexpr int kMaxGraphs = 16;

/* The step the device operations run on (set by run_layers): its sequences and its metadata on the device. */
struct cuda_step {
  int S;
  const int32_t *tokens, *positions, *tok_seq, *query_start, *tables, *tables_win;
};

} // namespace

struct rill_cuda {
  rill_model_config cfg;
  rill_limits lim;
  int32_t max_rows, qkv_dim, table_stride;
  cudaStream_t stream;
  layer_dev *layers; /* host array of device pointers */
  __nv_bfloat16 *embed, *head;
  float *final_norm, *inv_freq;
  __nv_bfloat16 *kc, *vc;
  rill_kv_geom geom;     /* geom.num_blocks = lim.num_blocks + 1: the last block is scratch for padding tokens */
  int32_t scratch_block; /* = lim.num_blocks */
  /* With kv_split, the sliding layers' pool (rill.h), addressed by the batch's sliding_block_tables: same layout,
   * its own scratch block, which also stands for the entries before a window (zeroed at create, so the positions a
   * granule reads before a row's window are finite, and get probability 0). Layer l is layer kv_layer[l] of its pool. */
  int kv_split;
  __nv_bfloat16 *kc_win, *vc_win;
  rill_kv_geom geom_win;
  int32_t scratch_win;
  int32_t kv_layer[RILL_MAX_TYPED_LAYERS];
  /* Graphs per bucket of fed tokens, ascending (graph_tokens[i] tokens and logits rows). */
  int num_graphs;
  int32_t graph_tokens[kMaxGraphs];
  cudaGraphExec_t graphs[kMaxGraphs];
  /* Per fed token, [max_batch_tokens × width]: the fp32 residual stream and projections' outputs; xb, for steps above
   * the GEMV threshold, the bf16 GEMM input (normed rows, then SiLU·mul), [max_batch_tokens × max(hidden, inter)]. */
  float *x, *qkv, *attn, *gu;
  __nv_bfloat16 *xb;
  /* gpt-oss, per fed token: the experts' fp32 input [hidden], router logits [experts], the chosen experts and their
   * weights [k]; per (token, expert) pair of a chunk of kMoeChunk tokens: gate/up [2I], activation [I], output
   * [hidden]. */
  float *moe_xn, *moe_logits, *moe_w, *moe_gu, *moe_act, *moe_y;
  int32_t *moe_sel;
  int32_t *moe_start, *moe_order; /* a chunk's pairs grouped by expert [E + 1], [pairs] (rill_k_moe_group) */
  __nv_bfloat16 *row_hidden; /* [max_rows × hidden]: final-normed rows for slices above the GEMV threshold */
  float *logits;             /* [max_rows × vocab] */
  float *part_ml, *part_acc; /* split-KV partials (kernels.cuh) */
  /* device: tokens, positions, tok_seq, rows [T each], query_start [S + 1], tables [S rows, + 1 for a graph's
   * padding sequence], with kv_split the sliding tables [S + 1 rows] */
  int32_t *meta;
  int32_t *meta_host;         /* pinned mirror */
  size_t meta_cap;
  float *logits_host; /* pinned, [max_rows × vocab] */
  /* Device sampling (sample.cuh): host-packed inputs in one pinned block mirrored on the device, outputs likewise. */
  int host_sampling;         /* RILL_CUDA_HOST_SAMPLER=1 at create: rows go to the host sampler */
  int32_t hist_cap, bias_cap; /* entries the packed history and bias hold */
  size_t words;               /* mask words per row */
  void *samp_in, *samp_in_host;
  size_t samp_in_bytes;
  void *samp_out, *samp_out_host;
  size_t samp_out_bytes;
  void *samp_scratch;
  /* cuBLASLt for steps above the GEMV threshold (gemm_lt.cuh); lt_on 0: the tiled kernel, for lt_why's reason. */
  rill_gemm_lt lt;
  int lt_on;
  char lt_why[192];
  /* The EAGLE-3 head (eagle3_device.cuh), or NULL: tapped and followed inside run_layers, so inside the graphs. */
  rill_cuda_e3 *e3;
  cuda_step step;
  const rill_device_ops *ops; /* what run_layers runs: NULL for this device's own (tests install wrapping ones) */
};

/* The packed sampling inputs and outputs: parts at 64-byte-aligned offsets of one block, so one copy moves each. */
namespace {
struct samp_layout {
  size_t jobs, history, bias_ids, bias_values, drafts, mask, in_bytes;
  size_t tok, lp, top_ids, top_lp, out_bytes;
};
samp_layout layout_of(size_t R, size_t hist, size_t bias, size_t words, size_t L) {
  samp_layout l;
  l.jobs = 0;
  l.history = l.jobs + rill_align64(R * sizeof(rill_sample_job));
  l.bias_ids = l.history + rill_align64(hist * sizeof(int32_t));
  l.bias_values = l.bias_ids + rill_align64(bias * sizeof(int32_t));
  l.drafts = l.bias_values + rill_align64(bias * sizeof(float));
  l.mask = l.drafts + rill_align64(R * sizeof(int32_t));
  l.in_bytes = l.mask + rill_align64(R * words * sizeof(uint32_t));
  l.tok = 0;
  l.lp = rill_align64(R * sizeof(int32_t));
  l.top_ids = l.lp + rill_align64(R * sizeof(float));
  l.top_lp = l.top_ids + rill_align64(R * L * sizeof(int32_t));
  l.out_bytes = l.top_lp + rill_align64(R * L * sizeof(float));
  return l;
}
} // namespace

rill_status rill_cuda_probe(char *err, size_t err_cap) {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    return rill_fail(err, err_cap, RILL_ERR_DEVICE, "device cuda: no usable GPU (%s)", cudaGetErrorString(e));
  }
  if (count < 1) return rill_fail(err, err_cap, RILL_ERR_DEVICE, "device cuda: no CUDA GPU found");
  cudaDeviceProp prop;
  CU(cudaGetDeviceProperties(&prop, 0));
  if (prop.major < 8) {
    return rill_fail(err, err_cap, RILL_ERR_DEVICE, "device cuda: %s is sm_%d%d; the CUDA device needs sm_80 or newer",
                     prop.name, prop.major, prop.minor);
  }
  return RILL_OK;
}

template <typename V> static rill_status upload(V **dst, const void *src, size_t count, char *err, size_t err_cap) {
  *dst = nullptr;
  if (src == nullptr) return RILL_OK;
  CU(cudaMalloc(reinterpret_cast<void **>(dst), count * sizeof(V)));
  CU(cudaMemcpy(*dst, src, count * sizeof(V), cudaMemcpyHostToDevice));
  return RILL_OK;
}

static rill_status upload_matrix(__nv_bfloat16 **dst, const rill_matrix *m, char *err, size_t err_cap) {
  if (m->type != RILL_W_BF16 || m->ld != (size_t)m->cols) {
    return rill_fail(err, err_cap, RILL_ERR_INTERNAL, "device cuda: weights must be loaded as dense bf16");
  }
  return upload(dst, m->data, (size_t)m->rows * (size_t)m->cols, err, err_cap);
}

void rill_cuda_destroy(rill_cuda *d) {
  if (d == nullptr) return;
  /* Errors while freeing are not actionable; every pointer is released regardless. */
  if (d->layers != nullptr) {
    for (int l = 0; l < d->cfg.num_layers; l++) {
      layer_dev *L = &d->layers[l];
      void *ptrs[] = {L->attn_norm, L->ffn_norm,  L->q_norm,  L->k_norm,    L->qkv_bias,  L->o_bias,
                      L->qkv,       L->o,         L->gate_up, L->down,      L->sinks,     L->router_bias,
                      L->gu_bias,   L->dn_bias,   L->router,  L->gu_blocks, L->gu_scales, L->dn_blocks,
                      L->dn_scales};
      for (void *p : ptrs) cudaFree(p);
    }
    free(d->layers);
  }
  cudaFree(d->kc_win);
  cudaFree(d->vc_win);
  void *ptrs[] = {d->embed,  d->head,       d->final_norm, d->inv_freq, d->kc,      d->vc,     d->x,
                  d->xb,     d->qkv,        d->attn,       d->gu,       d->row_hidden, d->logits, d->meta,
                  d->part_ml, d->part_acc,  d->moe_xn,     d->moe_logits, d->moe_w,  d->moe_gu, d->moe_act,
                  d->moe_y,  d->moe_sel,   d->moe_start,  d->moe_order};
  for (void *p : ptrs) cudaFree(p);
  rill_cuda_e3_destroy(d->e3);
  rill_gemm_lt_destroy(&d->lt);
  cudaFree(d->samp_in);
  cudaFree(d->samp_out);
  cudaFree(d->samp_scratch);
  cudaFreeHost(d->samp_in_host);
  cudaFreeHost(d->samp_out_host);
  cudaFreeHost(d->meta_host);
  cudaFreeHost(d->logits_host);
  for (int i = 0; i < d->num_graphs; i++) cudaGraphExecDestroy(d->graphs[i]);
  if (d->stream != nullptr) cudaStreamDestroy(d->stream);
  free(d);
}

static rill_status check_shapes(const rill_model_config *c, const rill_limits *lim, char *err, size_t err_cap) {
  /* Fed tokens index a grid dimension that CUDA caps at 65535. */
  if (lim->max_batch_tokens > 65535) {
    return rill_fail(err, err_cap, RILL_ERR_UNSUPPORTED, "device cuda: max_batch_tokens %d (at most 65535)",
                     lim->max_batch_tokens);
  }
  const int64_t qd = (int64_t)c->num_heads * c->head_dim;
  if (c->head_dim % 2 != 0 || c->head_dim > 256) {
    return rill_fail(err, err_cap, RILL_ERR_UNSUPPORTED, "device cuda: head_dim %d (supported: even, at most 256)",
                     c->head_dim);
  }
  if (c->hidden_size % 8 != 0 || c->intermediate_size % 8 != 0 || qd % 8 != 0) {
    return rill_fail(err, err_cap, RILL_ERR_UNSUPPORTED,
                     "device cuda: hidden_size, intermediate_size and heads × head_dim must be multiples of 8");
  }
  if (c->num_kv_heads < 1 || c->num_heads % c->num_kv_heads != 0) {
    return rill_fail(err, err_cap, RILL_ERR_UNSUPPORTED, "device cuda: num_heads must be a multiple of num_kv_heads");
  }
  if (!rill_attention_supports(c->num_heads, c->num_kv_heads, c->head_dim)) {
    return rill_fail(err, err_cap, RILL_ERR_UNSUPPORTED,
                     "device cuda: %d query heads per KV head of head_dim %d (attention takes at most 64, and at most "
                     "4096 values per KV head)",
                     c->num_heads / c->num_kv_heads, c->head_dim);
  }
  return RILL_OK;
}

/* An fp32 matrix (gpt-oss's router, held in fp32 on the host) as bf16 on the device. */
static rill_status upload_f32_as_bf16(__nv_bfloat16 **dst, const rill_matrix *m, char *err, size_t err_cap) {
  if (m->type != RILL_W_F32 || m->ld != (size_t)m->cols) {
    return rill_fail(err, err_cap, RILL_ERR_INTERNAL, "device cuda: the router must be held as dense fp32");
  }
  const size_t n = (size_t)m->rows * (size_t)m->cols;
  __nv_bfloat16 *tmp = static_cast<__nv_bfloat16 *>(malloc(n * sizeof(__nv_bfloat16)));
  if (tmp == nullptr) return rill_fail(err, err_cap, RILL_ERR_OUT_OF_MEMORY, "out of memory");
  for (size_t i = 0; i < n; i++) tmp[i] = __float2bfloat16_rn(static_cast<const float *>(m->data)[i]);
  const rill_status s = upload(dst, tmp, n, err, err_cap);
  free(tmp);
  return s;
}

/* A layer's MoE weights: sinks, router and the packed experts as the host holds them. */
static rill_status upload_moe(const rill_model_config *c, const rill_layer_weights *src, layer_dev *L, char *err,
                              size_t err_cap) {
  rill_status s;
  const rill_mxfp4_experts *gu = &src->experts_gate_up, *dn = &src->experts_down;
  const size_t gu_sc = (size_t)gu->experts * gu->rows * gu->nblocks, dn_sc = (size_t)dn->experts * dn->rows * dn->nblocks;
  if ((s = upload(&L->sinks, src->sinks, (size_t)c->num_heads, err, err_cap)) != RILL_OK) return s;
  if ((s = upload(&L->router_bias, src->router_bias, (size_t)c->num_experts, err, err_cap)) != RILL_OK) return s;
  if ((s = upload_f32_as_bf16(&L->router, &src->router, err, err_cap)) != RILL_OK) return s;
  if ((s = upload(&L->gu_blocks, gu->blocks, gu_sc * 16, err, err_cap)) != RILL_OK) return s;
  if ((s = upload(&L->gu_scales, gu->scales, gu_sc, err, err_cap)) != RILL_OK) return s;
  if ((s = upload(&L->gu_bias, gu->bias, (size_t)gu->experts * gu->rows, err, err_cap)) != RILL_OK) return s;
  if ((s = upload(&L->dn_blocks, dn->blocks, dn_sc * 16, err, err_cap)) != RILL_OK) return s;
  if ((s = upload(&L->dn_scales, dn->scales, dn_sc, err, err_cap)) != RILL_OK) return s;
  return upload(&L->dn_bias, dn->bias, (size_t)dn->experts * dn->rows, err, err_cap);
}

static rill_status upload_weights(rill_cuda *d, const rill_model_weights *w, const float *inv_freq, char *err,
                                  size_t err_cap) {
  const rill_model_config *c = &d->cfg;
  const size_t H = (size_t)c->hidden_size, D = (size_t)c->head_dim;
  d->layers = static_cast<layer_dev *>(calloc((size_t)c->num_layers, sizeof(layer_dev)));
  if (d->layers == nullptr) return rill_fail(err, err_cap, RILL_ERR_OUT_OF_MEMORY, "out of memory");
  rill_status s = RILL_OK;
  for (int l = 0; l < c->num_layers && s == RILL_OK; l++) {
    const rill_layer_weights *src = &w->layers[l];
    layer_dev *L = &d->layers[l];
    if ((s = upload(&L->attn_norm, src->attn_norm, H, err, err_cap)) != RILL_OK) break;
    if ((s = upload(&L->ffn_norm, src->ffn_norm, H, err, err_cap)) != RILL_OK) break;
    if ((s = upload(&L->q_norm, src->q_norm, D, err, err_cap)) != RILL_OK) break;
    if ((s = upload(&L->k_norm, src->k_norm, D, err, err_cap)) != RILL_OK) break;
    if ((s = upload(&L->qkv_bias, src->qkv_bias, (size_t)d->qkv_dim, err, err_cap)) != RILL_OK) break;
    if ((s = upload(&L->o_bias, src->o_bias, H, err, err_cap)) != RILL_OK) break;
    if ((s = upload_matrix(&L->qkv, &src->qkv, err, err_cap)) != RILL_OK) break;
    if ((s = upload_matrix(&L->o, &src->o, err, err_cap)) != RILL_OK) break;
    if (c->num_experts > 0) {
      s = upload_moe(c, src, L, err, err_cap);
      continue;
    }
    if ((s = upload_matrix(&L->gate_up, &src->gate_up, err, err_cap)) != RILL_OK) break;
    s = upload_matrix(&L->down, &src->down, err, err_cap);
  }
  if (s != RILL_OK) return s;
  if ((s = upload_matrix(&d->embed, &w->embed, err, err_cap)) != RILL_OK) return s;
  if (w->tied) {
    d->head = nullptr;
  } else if ((s = upload_matrix(&d->head, &w->lm_head, err, err_cap)) != RILL_OK) {
    return s;
  }
  if ((s = upload(&d->final_norm, w->final_norm, H, err, err_cap)) != RILL_OK) return s;
  return upload(&d->inv_freq, inv_freq, D / 2, err, err_cap);
}

static rill_status alloc_buffers(rill_cuda *d, char *err, size_t err_cap) {
  const rill_model_config *c = &d->cfg;
  const size_t T = (size_t)d->lim.max_batch_tokens, H = (size_t)c->hidden_size, I = (size_t)c->intermediate_size;
  const size_t QD = (size_t)c->num_heads * (size_t)c->head_dim, V = (size_t)c->vocab_size, R = (size_t)d->max_rows;
  CU(cudaMalloc(&d->x, T * H * sizeof(float)));
  CU(cudaMalloc(&d->xb, T * (H > I ? H : I) * sizeof(__nv_bfloat16)));
  CU(cudaMalloc(&d->qkv, T * (size_t)d->qkv_dim * sizeof(float)));
  CU(cudaMalloc(&d->attn, T * QD * sizeof(float)));
  if (c->num_experts > 0) {
    const size_t K = (size_t)c->experts_per_tok, E = (size_t)c->num_experts;
    const size_t P = (T < (size_t)kMoeChunk ? T : (size_t)kMoeChunk) * K;
    CU(cudaMalloc(&d->moe_xn, T * H * sizeof(float)));
    CU(cudaMalloc(&d->moe_logits, T * E * sizeof(float)));
    CU(cudaMalloc(&d->moe_w, T * K * sizeof(float)));
    CU(cudaMalloc(&d->moe_sel, T * K * sizeof(int32_t)));
    CU(cudaMalloc(&d->moe_gu, P * 2 * I * sizeof(float)));
    CU(cudaMalloc(&d->moe_act, P * I * sizeof(float)));
    CU(cudaMalloc(&d->moe_y, P * H * sizeof(float)));
    CU(cudaMalloc(&d->moe_start, (E + 1) * sizeof(int32_t)));
    CU(cudaMalloc(&d->moe_order, P * sizeof(int32_t)));
  } else {
    CU(cudaMalloc(&d->gu, T * 2 * I * sizeof(float)));
  }
  CU(cudaMalloc(&d->row_hidden, R * H * sizeof(__nv_bfloat16)));
  CU(cudaMalloc(&d->logits, R * V * sizeof(float)));
  const size_t parts = (size_t)kSplitMaxTokens * (size_t)c->num_heads * (size_t)rill_attention_granules(d->geom);
  CU(cudaMalloc(&d->part_ml, parts * 2 * sizeof(float)));
  CU(cudaMalloc(&d->part_acc, parts * (size_t)c->head_dim * sizeof(float)));
  /* One sequence more than max_seqs: a graph's padding sequence. */
  d->meta_cap = 4 * T + ((size_t)d->lim.max_seqs + 2) +
                ((size_t)d->lim.max_seqs + 1) * (size_t)d->table_stride * (d->kv_split ? 2 : 1);
  CU(cudaMalloc(&d->meta, d->meta_cap * sizeof(int32_t)));
  CU(cudaMallocHost(&d->meta_host, d->meta_cap * sizeof(int32_t)));
  CU(cudaMallocHost(&d->logits_host, R * V * sizeof(float)));
  /* History and bias for device sampling: a long history or a huge bias falls back to the host sampler rather than
   * allocating after create (OpenAI caps logit_bias at 300 entries per request). */
  const int64_t hist = (int64_t)d->lim.max_seqs * 4096;
  d->hist_cap = (int32_t)(hist > (1 << 24) ? (1 << 24) : (hist < 65536 ? 65536 : hist));
  d->bias_cap = d->lim.max_seqs * 300;
  d->words = (V + 31) / 32;
  const samp_layout l = layout_of(R, (size_t)d->hist_cap, (size_t)d->bias_cap, d->words,
                                  (size_t)d->lim.max_top_logprobs);
  d->samp_in_bytes = l.in_bytes;
  d->samp_out_bytes = l.out_bytes;
  CU(cudaMalloc(&d->samp_in, l.in_bytes));
  CU(cudaMallocHost(&d->samp_in_host, l.in_bytes));
  CU(cudaMalloc(&d->samp_out, l.out_bytes));
  CU(cudaMallocHost(&d->samp_out_host, l.out_bytes));
  const size_t slots = R < (size_t)kSampleSlots ? R : (size_t)kSampleSlots;
  CU(cudaMalloc(&d->samp_scratch, slots * rill_sample_slot_bytes((int)V)));
  /* cuBLASLt is optional: without it (or when it cannot start) the tiled kernel serves every batch size. Its cast
   * buffer holds the one fp32 GEMM input, the attention output. */
  d->lt_on = rill_gemm_lt_create(&d->lt, T * QD, d->lt_why, sizeof d->lt_why) == RILL_OK;
  const char *host = getenv("RILL_CUDA_HOST_SAMPLER");
  d->host_sampling = host != nullptr && strcmp(host, "1") == 0;
  return RILL_OK;
}

static rill_status capture_graphs(rill_cuda *d, char *err, size_t err_cap);

rill_status rill_cuda_create(const rill_cuda_setup *setup, rill_cuda **out, rill_cuda_info *info, char *err,
                             size_t err_cap) {
  *out = nullptr;
  const rill_model_config *c = setup->cfg;
  rill_status s = check_shapes(c, setup->lim, err, err_cap);
  if (s != RILL_OK) return s;
  CU(cudaSetDevice(0));
  cudaDeviceProp prop;
  CU(cudaGetDeviceProperties(&prop, 0));
  size_t free0 = 0, total = 0;
  CU(cudaMemGetInfo(&free0, &total));

  rill_cuda *d = static_cast<rill_cuda *>(calloc(1, sizeof(rill_cuda)));
  if (d == nullptr) return rill_fail(err, err_cap, RILL_ERR_OUT_OF_MEMORY, "out of memory");
  d->cfg = *c;
  d->lim = *setup->lim;
  d->max_rows = setup->max_rows;
  d->qkv_dim = (c->num_heads + 2 * c->num_kv_heads) * c->head_dim;
  d->table_stride = (d->lim.max_positions + d->lim.block_size - 1) / d->lim.block_size;
  d->geom = rill_kv_geom{0, d->lim.block_size, c->num_kv_heads, c->head_dim, d->table_stride,
                         rill_attention_granule(d->lim.max_positions)};
  d->geom_win = d->geom;
  /* The CPU device's rule (engine.c plan_kv_pools): a second pool when both kinds of layer are there and the window
   * is shorter than the context. */
  const int32_t W = c->sliding_window, bs = d->lim.block_size;
  int32_t sliding_layers = 0;
  for (int l = 0; l < c->num_layers; l++) sliding_layers += W > 0 && c->layer_sliding[l];
  d->kv_split = sliding_layers > 0 && sliding_layers < c->num_layers && W < d->lim.max_positions &&
                setup->sliding_kv_in_main == 0;
  const int32_t full_layers = d->kv_split ? c->num_layers - sliding_layers : c->num_layers;
  for (int l = 0, nf = 0, nw = 0; l < c->num_layers; l++) {
    d->kv_layer[l] = d->kv_split && c->layer_sliding[l] ? nw++ : nf++;
  }
  s = [&]() -> rill_status {
    CU(cudaStreamCreateWithFlags(&d->stream, cudaStreamNonBlocking));
    rill_status st = upload_weights(d, setup->w, setup->inv_freq, err, err_cap);
    if (st != RILL_OK) return st;
    if ((st = alloc_buffers(d, err, err_cap)) != RILL_OK) return st;
    if (setup->eagle3 != nullptr &&
        (st = rill_cuda_e3_create(setup->eagle3, setup->eagle3_inv_freq, d->embed, &d->lim, d->lt_on ? &d->lt : nullptr,
                                  &d->e3, err, err_cap)) != RILL_OK) {
      return st;
    }
    size_t free1 = 0;
    CU(cudaMemGetInfo(&free1, &total));
    const size_t per_layer = 2 * (size_t)c->num_kv_heads * (size_t)bs * (size_t)c->head_dim * 2;
    /* The target's full-attention layers' K and V, and the head's K, V and features when it has one. */
    const size_t target_block_bytes = (size_t)full_layers * per_layer, win_block_bytes = (size_t)sliding_layers * per_layer;
    const size_t block_bytes = target_block_bytes + (d->e3 != nullptr ? rill_cuda_e3_block_bytes(d->e3) : 0);
    int64_t win_blocks = 0;
    if (d->kv_split) {
      const int64_t per_seq = (d->lim.max_positions + bs - 1) / bs;
      win_blocks = setup->num_sliding_blocks;
      if (win_blocks == 0) {
        win_blocks = (int64_t)d->lim.max_seqs * ((W + d->lim.max_drafts + bs - 1) / bs + 1) +
                     (d->lim.max_batch_tokens + bs - 1) / bs;
        if (win_blocks > (int64_t)d->lim.max_seqs * per_seq) win_blocks = (int64_t)d->lim.max_seqs * per_seq;
      }
      if (win_blocks > INT32_MAX / bs - 1) win_blocks = INT32_MAX / bs - 1;
    }
    const int64_t win_bytes = d->kv_split ? (win_blocks + 1) * (int64_t)win_block_bytes : 0; /* + scratch */
    int64_t blocks = setup->num_blocks;
    if (blocks == 0) {
      int64_t budget = setup->kv_bytes;
      if (budget == 0) {
        const double frac = setup->gpu_memory_fraction > 0.0f ? (double)setup->gpu_memory_fraction : 0.9;
        budget = (int64_t)(frac * (double)free0) - (int64_t)(free0 - free1);
      }
      blocks = (budget - win_bytes) / (int64_t)block_bytes - 1; /* one block is scratch */
      if (blocks > INT32_MAX / d->lim.block_size - 1) blocks = INT32_MAX / d->lim.block_size - 1;
    }
    if (blocks >= INT32_MAX / d->lim.block_size) {
      return rill_fail(err, err_cap, RILL_ERR_UNSUPPORTED, "device cuda: %lld KV blocks (fewer than %d)",
                       (long long)blocks, INT32_MAX / d->lim.block_size);
    }
    if (blocks < 1) {
      return rill_fail(err, err_cap, RILL_ERR_OUT_OF_MEMORY,
                       "device cuda: no memory left for the KV pool (%.1f GiB free of %.1f GiB after %.1f GiB of "
                       "weights and buffers); raise gpu_memory_fraction or lower max_batch_tokens",
                       (double)free1 / 1073741824.0, (double)total / 1073741824.0,
                       (double)(free0 - free1) / 1073741824.0);
    }
    d->lim.num_blocks = (int32_t)blocks;
    d->scratch_block = (int32_t)blocks;
    d->geom.num_blocks = d->lim.num_blocks + 1;
    const size_t half = (size_t)(blocks + 1) * target_block_bytes / 2;
    CU(cudaMalloc(&d->kc, half));
    CU(cudaMalloc(&d->vc, half));
    info->kv_bytes = (int64_t)(2 * half);
    if (d->kv_split) {
      d->lim.num_sliding_blocks = (int32_t)win_blocks;
      d->lim.sliding_window = W;
      d->scratch_win = (int32_t)win_blocks;
      d->geom_win.num_blocks = (int32_t)win_blocks + 1;
      const size_t win_half = (size_t)win_bytes / 2;
      CU(cudaMalloc(&d->kc_win, win_half));
      CU(cudaMalloc(&d->vc_win, win_half));
      CU(cudaMemset(d->kc_win, 0, win_half));
      CU(cudaMemset(d->vc_win, 0, win_half));
      info->kv_bytes += win_bytes;
      info->sliding_kv_bytes = win_bytes;
    }
    if (d->e3 != nullptr) {
      if ((st = rill_cuda_e3_alloc_pool(d->e3, (int32_t)blocks + 1, err, err_cap)) != RILL_OK) return st;
      info->kv_bytes += rill_cuda_e3_state_bytes(d->e3);
      info->draft_weight_bytes = rill_cuda_e3_weight_bytes(d->e3);
    }
    timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    if ((st = capture_graphs(d, err, err_cap)) != RILL_OK) return st;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    info->graphs = d->num_graphs;
    info->capture_s = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    return RILL_OK;
  }();
  if (s != RILL_OK) {
    rill_cuda_destroy(d);
    return s;
  }
  setup->lim->num_blocks = d->lim.num_blocks;
  setup->lim->num_sliding_blocks = d->lim.num_sliding_blocks;
  setup->lim->sliding_window = d->lim.sliding_window;
  info->weight_bytes = (int64_t)setup->w->bytes;
  snprintf(info->device, sizeof info->device, "cuda:0");
  /* The GEMM above the GEMV threshold and the number of graphs ride along in isa: "sm_90 cublasLt g10", or
   * "sm_90 tiled: <short reason> g10". */
  const char *gemm = d->lt_on                                        ? "cublasLt"
                     : strncmp(d->lt_why, "no libcublasLt", 14) == 0 ? "tiled: no cublasLt"
                     : strstr(d->lt_why, "missing symbol") != nullptr ? "tiled: symbol missing"
                     : strcmp(d->lt_why, "host emulation") == 0      ? "tiled: emulation"
                                                                      : "tiled: init failed";
  snprintf(info->isa, sizeof info->isa, "sm_%d%d %s g%d", prop.major, prop.minor, gemm, d->num_graphs);
  snprintf(info->gemm, sizeof info->gemm, "%s", d->lt_on ? "cublasLt" : d->lt_why);
  *out = d;
  return RILL_OK;
}

/* rill_k_linear, through cuBLASLt above the GEMV threshold when it is loaded and has an algorithm for the shape. */
static cudaError_t linear(rill_cuda *d, const float *x, int T, int K, const __nv_bfloat16 *W, int N, const float *bias,
                          int accumulate, float *y) {
  if (d->lt_on && T > kGemvMaxTokens) {
    const cudaError_t e = rill_gemm_lt_linear(&d->lt, d->stream, x, T, K, W, N, bias, accumulate, y);
    if (e != cudaErrorNotSupported) return e;
  }
  return rill_k_linear(d->stream, x, T, K, W, N, bias, accumulate, y);
}

/* The same for bf16 x (steps above the GEMV threshold): cuBLASLt, else the tiled kernel. */
static cudaError_t linear_bf16x(rill_cuda *d, const __nv_bfloat16 *x, int T, int K, const __nv_bfloat16 *W, int N,
                                const float *bias, int accumulate, float *y) {
  if (d->lt_on) {
    const cudaError_t e = rill_gemm_lt_linear_bf16x(&d->lt, d->stream, x, T, K, W, N, bias, accumulate, y);
    if (e != cudaErrorNotSupported) return e;
  }
  return rill_k_linear_bf16x(d->stream, x, T, K, W, N, bias, accumulate, y);
}

/* y = RMSNorm(x rows src(r)) · Wᵀ (rill_k_rms_norm's rows): fused into the streaming kernel for at most kGemvMaxTokens
 * rows, otherwise normed into bf16 xb for the GEMM. */
static cudaError_t norm_linear(rill_cuda *d, const float *x, const int32_t *rows, const float *norm_w, int T, int K,
                               __nv_bfloat16 *xb, const __nv_bfloat16 *W, int N, const float *bias, float *y) {
  const float eps = d->cfg.rms_norm_eps;
  if (T <= kGemvMaxTokens) return rill_k_linear_norm(d->stream, x, rows, norm_w, eps, T, K, W, N, bias, 0, y);
  const cudaError_t e = rill_k_rms_norm(d->stream, x, rows, norm_w, K, eps, T, xb);
  return e != cudaSuccess ? e : linear_bf16x(d, xb, T, K, W, N, bias, 0, y);
}

/* ---- the device operations (device_ops.h) ----
 * Decode and verify steps (T ≤ kGemvMaxTokens) take 6 kernels per dense layer (7 with the split-KV merge): qkv with
 * the attention RMSNorm, q/k norm + RoPE + KV write, attention, o with the residual add, gate_up with the FFN RMSNorm,
 * down with SiLU·mul and the residual add. Larger steps norm and multiply in separate kernels through bf16. Every
 * operation only enqueues on d->stream, so a graph captures the pass. */

static rill_cuda *dev_of(void *dev) { return static_cast<rill_cuda *>(dev); }

static rill_status op_embed(void *dev, int32_t, int32_t T, char *err, size_t err_cap) {
  rill_cuda *d = dev_of(dev);
  CU(rill_k_embed(d->stream, d->embed, d->cfg.hidden_size, d->step.tokens, T, d->x));
  return RILL_OK;
}

static rill_status op_tap(void *dev, int32_t layer, int32_t T, char *err, size_t err_cap) {
  rill_cuda *d = dev_of(dev);
  CU(rill_cuda_e3_tap(d->e3, d->stream, layer, d->x, T));
  return RILL_OK;
}

/* The q/k/v bias is added here, by the projection. */
static rill_status op_qkv(void *dev, int32_t layer, int32_t T, char *err, size_t err_cap) {
  rill_cuda *d = dev_of(dev);
  const layer_dev *L = &d->layers[layer];
  CU(norm_linear(d, d->x, nullptr, L->attn_norm, T, d->cfg.hidden_size, d->xb, L->qkv, d->qkv_dim, L->qkv_bias,
                 d->qkv));
  return RILL_OK;
}

/* The pool, tables and geometry layer l's K/V live in. */
struct kv_view {
  const int32_t *tables;
  const rill_kv_geom *geom;
  __nv_bfloat16 *kc, *vc;
};

static kv_view kv_of(const rill_cuda *d, int32_t layer) {
  const bool win = d->kv_split && d->cfg.layer_sliding[layer];
  return win ? kv_view{d->step.tables_win, &d->geom_win, d->kc_win, d->vc_win}
             : kv_view{d->step.tables, &d->geom, d->kc, d->vc};
}

static rill_status op_rope_kv(void *dev, int32_t layer, int32_t T, char *err, size_t err_cap) {
  rill_cuda *d = dev_of(dev);
  const rill_model_config *c = &d->cfg;
  const layer_dev *L = &d->layers[layer];
  const kv_view kv = kv_of(d, layer);
  CU(rill_k_qk_rope_kv(d->stream, d->qkv, T, c->num_heads, c->num_kv_heads, c->head_dim, L->q_norm, L->k_norm,
                       c->rms_norm_eps, d->inv_freq, c->rope_attn_factor, d->step.positions, d->step.tok_seq,
                       kv.tables, *kv.geom, d->kv_layer[layer], kv.kc, kv.vc));
  return RILL_OK;
}

static rill_status op_attend(void *dev, int32_t layer, int32_t T, char *err, size_t err_cap) {
  rill_cuda *d = dev_of(dev);
  const rill_model_config *c = &d->cfg;
  const kv_view kv = kv_of(d, layer);
  const int window = c->layer_sliding[layer] ? c->sliding_window : 0;
  CU(rill_k_attention(d->stream, d->qkv, T, d->step.S, c->num_heads, d->step.positions, d->step.query_start,
                      kv.tables, *kv.geom, d->kv_layer[layer], window, d->layers[layer].sinks, kv.kc, kv.vc, d->attn,
                      d->part_ml, d->part_acc));
  return RILL_OK;
}

static rill_status op_attn_out(void *dev, int32_t layer, int32_t T, char *err, size_t err_cap) {
  rill_cuda *d = dev_of(dev);
  const layer_dev *L = &d->layers[layer];
  CU(linear(d, d->attn, T, d->cfg.num_heads * d->cfg.head_dim, L->o, d->cfg.hidden_size, L->o_bias, 1, d->x));
  return RILL_OK;
}

static rill_status op_gate_up(void *dev, int32_t layer, int32_t T, char *err, size_t err_cap) {
  rill_cuda *d = dev_of(dev);
  const layer_dev *L = &d->layers[layer];
  CU(norm_linear(d, d->x, nullptr, L->ffn_norm, T, d->cfg.hidden_size, d->xb, L->gate_up,
                 2 * d->cfg.intermediate_size, nullptr, d->gu));
  return RILL_OK;
}

static rill_status op_down(void *dev, int32_t layer, int32_t T, char *err, size_t err_cap) {
  rill_cuda *d = dev_of(dev);
  const int H = d->cfg.hidden_size, I = d->cfg.intermediate_size;
  const layer_dev *L = &d->layers[layer];
  if (T <= kGemvMaxTokens) {
    CU(rill_k_linear_silu_mul(d->stream, d->gu, T, I, L->down, H, d->x));
  } else {
    CU(rill_k_silu_mul(d->stream, d->gu, T, I, d->xb));
    CU(linear_bf16x(d, d->xb, T, I, L->down, H, nullptr, 1, d->x));
  }
  return RILL_OK;
}

static rill_status op_router(void *dev, int32_t layer, int32_t T, char *err, size_t err_cap) {
  rill_cuda *d = dev_of(dev);
  const rill_model_config *c = &d->cfg;
  const layer_dev *L = &d->layers[layer];
  CU(rill_k_rms_norm_f32(d->stream, d->x, L->ffn_norm, c->hidden_size, c->rms_norm_eps, T, d->moe_xn));
  CU(rill_k_linear(d->stream, d->moe_xn, T, c->hidden_size, L->router, c->num_experts, nullptr, 0, d->moe_logits));
  return RILL_OK;
}

/* Routing on the device (no host round trip), then the experts in chunks of kMoeChunk tokens. */
static rill_status op_experts(void *dev, int32_t layer, int32_t T, char *err, size_t err_cap) {
  rill_cuda *d = dev_of(dev);
  const rill_model_config *c = &d->cfg;
  const int H = c->hidden_size, I = c->intermediate_size, E = c->num_experts, K = c->experts_per_tok;
  const layer_dev *L = &d->layers[layer];
  cudaStream_t st = d->stream;
  CU(rill_k_moe_route(st, d->moe_logits, L->router_bias, T, E, K, d->moe_sel, d->moe_w));
  for (int t0 = 0; t0 < T; t0 += kMoeChunk) {
    const int n = T - t0 < kMoeChunk ? T - t0 : kMoeChunk, P = n * K;
    const int32_t *sel = d->moe_sel + (size_t)t0 * K;
    /* One token reads its K experts once anyway; several are grouped so each expert is read once per chunk. */
    if (n == 1) {
      CU(rill_k_mxfp4_experts(st, d->moe_xn + (size_t)t0 * H, H, 1, P, K, sel, L->gu_blocks, L->gu_scales,
                              L->gu_bias, 2 * I, H, d->moe_gu));
      CU(rill_k_moe_act(st, d->moe_gu, P, I, c->swiglu_limit, d->moe_act));
      CU(rill_k_mxfp4_experts(st, d->moe_act, I, 0, P, K, sel, L->dn_blocks, L->dn_scales, L->dn_bias, H, I,
                              d->moe_y));
    } else {
      CU(rill_k_moe_group(st, sel, P, E, d->moe_start, d->moe_order));
      CU(rill_k_mxfp4_experts_grouped(st, d->moe_xn + (size_t)t0 * H, H, 1, E, K, d->moe_start, d->moe_order,
                                      L->gu_blocks, L->gu_scales, L->gu_bias, 2 * I, H, d->moe_gu));
      CU(rill_k_moe_act(st, d->moe_gu, P, I, c->swiglu_limit, d->moe_act));
      CU(rill_k_mxfp4_experts_grouped(st, d->moe_act, I, 0, E, K, d->moe_start, d->moe_order, L->dn_blocks,
                                      L->dn_scales, L->dn_bias, H, I, d->moe_y));
    }
    CU(rill_k_moe_combine(st, d->moe_y, d->moe_w + (size_t)t0 * K, n, K, H, d->x + (size_t)t0 * H));
  }
  return RILL_OK;
}

static const rill_device_ops kCudaOps = {
    op_embed, op_tap, op_qkv, op_rope_kv, op_attend, op_attn_out, op_gate_up, op_down, op_router, op_experts,
};

const rill_device_ops *rill_cuda_ops(const rill_cuda *d) { return d->ops != nullptr ? d->ops : &kCudaOps; }

void rill_cuda_set_ops(rill_cuda *d, const rill_device_ops *ops) { d->ops = ops; }

rill_cuda_buffers rill_cuda_step_buffers(rill_cuda *d) {
  return rill_cuda_buffers{d->x, d->qkv, d->attn, d->gu, d->moe_xn, d->moe_logits};
}

/* The layers over the step's T fed tokens of S sequences (device metadata), the residual stream left in d->x, and
 * the EAGLE-3 head's follow-up when the device holds one. Enqueues only, so it is also what a graph captures (with
 * the final norm and head). */
static rill_status run_layers(rill_cuda *d, int T, int S, const int32_t *tokens, const int32_t *positions,
                              const int32_t *tok_seq, const int32_t *query_start, const int32_t *tables,
                              const int32_t *tables_win, char *err, size_t err_cap) {
  d->step = cuda_step{S, tokens, positions, tok_seq, query_start, tables, tables_win};
  const rill_status s = rill_forward_layers(rill_cuda_ops(d), d, &d->cfg, T, d->e3 != nullptr, err, err_cap);
  if (s != RILL_OK) return s;
  if (d->e3 != nullptr) CU(rill_cuda_e3_follow(d->e3, d->stream, T, tokens, positions, tok_seq, tables));
  return RILL_OK;
}

/* Final norm and output projection of rows[0, n) of d->x into d->logits[0, n). */
static rill_status head_rows(rill_cuda *d, const int32_t *drows, int n, char *err, size_t err_cap) {
  const rill_model_config *c = &d->cfg;
  const __nv_bfloat16 *head = d->head != nullptr ? d->head : d->embed;
  CU(norm_linear(d, d->x, drows, d->final_norm, n, c->hidden_size, d->row_hidden, head, c->vocab_size, nullptr,
                 d->logits));
  return RILL_OK;
}

/* Whether a step of T fed tokens and R logits rows takes the kernels that bucket Tb's graph replays: the same attention
 * kernel (split-KV or prefill) and the same side of the GEMV threshold for the layers, and for the head (no rows:
 * nothing to match). The graph then computes the real rows exactly as an eager step would. */
static bool same_kernels(int T, int R, int Tb) {
  const bool gemv = Tb <= kGemvMaxTokens, split = Tb <= kSplitMaxTokens;
  return (T <= kSplitMaxTokens) == split && (T <= kGemvMaxTokens) == gemv && (R == 0 || (R <= kGemvMaxTokens) == gemv);
}

/* Sequences a bucket of Tb tokens is laid out for: a step has at most one per fed token and at most max_seqs. */
static int bucket_seqs(const rill_cuda *d, int Tb) { return Tb < d->lim.max_seqs ? Tb : d->lim.max_seqs; }

/* The graph a step of T fed tokens and R logits rows replays, or -1: run it eagerly. */
static int graph_for(const rill_cuda *d, int T, int R) {
  for (int i = 0; i < d->num_graphs; i++) {
    const int Tb = d->graph_tokens[i];
    if (Tb >= T) return same_kernels(T, R, Tb) ? i : -1;
  }
  return -1;
}

/* Padding in the host metadata laid out for Tb tokens and Sb sequences, over a step of T tokens, R logits rows and S
 * sequences: sequences [S, Sb) are empty (query_start = T), so attention serves no padding token; tokens [T, Tb) are
 * token 0 at position 0 of the padding sequence Sb, whose table row is the scratch block, so their KV writes land
 * there; logits rows [R, Tb) read token 0. */
static void pad_meta(rill_cuda *d, int T, int R, int S, int Tb, int Sb) {
  int32_t *tokens = d->meta_host, *positions = tokens + Tb, *tok_seq = positions + Tb, *rows = tok_seq + Tb;
  int32_t *query_start = rows + Tb, *tables = query_start + Sb + 1;
  for (int t = T; t < Tb; t++) {
    tokens[t] = 0;
    positions[t] = 0;
    tok_seq[t] = Sb;
  }
  for (int r = R; r < Tb; r++) rows[r] = 0;
  for (int s = S; s <= Sb; s++) query_start[s] = T;
  tables[(size_t)Sb * d->table_stride] = d->scratch_block;
  if (d->kv_split) tables[(size_t)(2 * Sb + 1) * d->table_stride] = d->scratch_win;
}

/* The forward pass and the logits of the sampled (or all) rows. to_host: copied to dst in slices of max_rows and
 * synchronised; otherwise R ≤ max_rows and the rows stay in d->logits, the stream not synchronised. */
static rill_status forward_rows(rill_cuda *d, const rill_step_batch *b, int all_rows, int to_host, float *dst,
                                int32_t *num_rows, char *err, size_t err_cap) {
  const rill_model_config *c = &d->cfg;
  const int T = b->num_tokens, V = c->vocab_size, bs = d->lim.block_size;
  int32_t R = 0;
  if (all_rows) {
    R = T;
  } else {
    for (int s = 0; s < b->num_seqs; s++) {
      if (!b->sample_flags[s]) continue;
      const int n = b->draft_counts[s] + 1;
      if (n > b->query_start[s + 1] - b->query_start[s]) {
        return rill_fail(err, err_cap, RILL_ERR_INVALID_ARGUMENT, "draft_counts[%d]: %d drafts but only %d fed tokens",
                         s, n - 1, b->query_start[s + 1] - b->query_start[s]);
      }
      R += n;
    }
  }
  /* Rows beyond max_rows (rill_forward_logits of a long prefill) go in slices: eager only. */
  const int g = R <= d->max_rows ? graph_for(d, T, R) : -1;
  /* The metadata's layout: the bucket's tokens and sequences, or the step's. */
  const int Tp = g >= 0 ? d->graph_tokens[g] : T, Sp = g >= 0 ? bucket_seqs(d, Tp) : b->num_seqs;
  int32_t *tokens = d->meta_host, *positions = tokens + Tp, *tok_seq = positions + Tp, *rows = tok_seq + Tp;
  if (all_rows) {
    for (int t = 0; t < T; t++) rows[t] = t;
  } else {
    int32_t r = 0;
    for (int s = 0; s < b->num_seqs; s++) {
      if (!b->sample_flags[s]) continue;
      const int end = b->query_start[s + 1];
      for (int t = end - b->draft_counts[s] - 1; t < end; t++) rows[r++] = t;
    }
  }
  int32_t *query_start = rows + Tp, *tables = query_start + Sp + 1;
  memcpy(query_start, b->query_start, ((size_t)b->num_seqs + 1) * sizeof(int32_t));
  /* The batch was validated: every block a fed position needs is inside its row of the caller's table. */
  for (int s = 0; s < b->num_seqs; s++) {
    int32_t need = 0;
    for (int t = b->query_start[s]; t < b->query_start[s + 1]; t++) {
      tok_seq[t] = s;
      const int32_t blocks = b->positions[t] / bs + 1;
      need = blocks > need ? blocks : need;
    }
    memcpy(tables + (size_t)s * d->table_stride, b->block_tables + (size_t)s * b->block_table_stride,
           (size_t)need * sizeof(int32_t));
    if (d->kv_split) {
      /* Validated from the window of the first fed position on; before it, the scratch block. */
      int32_t *row = tables + (size_t)(Sp + 1 + s) * d->table_stride;
      const int32_t *src = b->sliding_block_tables + (size_t)s * b->block_table_stride;
      const int32_t p0 = b->context_lens[s] - (b->query_start[s + 1] - b->query_start[s]);
      const int32_t from = p0 - d->cfg.sliding_window + 1;
      const int32_t j0 = from > 0 ? from / bs : 0;
      for (int32_t j = 0; j < need; j++) row[j] = j < j0 ? d->scratch_win : src[j];
    }
  }
  memcpy(tokens, b->tokens, (size_t)T * sizeof(int32_t));
  memcpy(positions, b->positions, (size_t)T * sizeof(int32_t));
  if (g >= 0) pad_meta(d, T, R, b->num_seqs, Tp, Sp);
  const size_t meta_len = 4 * (size_t)Tp + (size_t)Sp + 1 +
                          (size_t)(d->kv_split ? 2 * Sp + 1 + (g >= 0) : Sp + (g >= 0)) * d->table_stride;
  cudaStream_t st = d->stream;
  CU(cudaMemcpyAsync(d->meta, d->meta_host, meta_len * sizeof(int32_t), cudaMemcpyHostToDevice, st));
  const int32_t *dtokens = d->meta, *dpositions = dtokens + Tp, *dtok_seq = dpositions + Tp, *drows = dtok_seq + Tp;
  const int32_t *dquery_start = drows + Tp, *dtables = dquery_start + Sp + 1;
  const int32_t *dtables_win = dtables + (size_t)(Sp + 1) * d->table_stride;
  if (g >= 0) {
    CU(cudaGraphLaunch(d->graphs[g], st));
    if (to_host && R > 0) {
      CU(cudaMemcpyAsync(dst, d->logits, (size_t)R * V * sizeof(float), cudaMemcpyDeviceToHost, st));
    }
  } else {
    rill_status s = run_layers(d, T, b->num_seqs, dtokens, dpositions, dtok_seq, dquery_start, dtables, dtables_win,
                               err, err_cap);
    if (s != RILL_OK) return s;
    /* rill_forward_logits may ask for more rows than the step buffers hold: go in slices of max_rows. */
    for (int32_t r0 = 0; r0 < R; r0 += d->max_rows) {
      const int32_t n = R - r0 < d->max_rows ? R - r0 : d->max_rows;
      if ((s = head_rows(d, drows + r0, n, err, err_cap)) != RILL_OK) return s;
      if (to_host) {
        CU(cudaMemcpyAsync(dst + (size_t)r0 * V, d->logits, (size_t)n * V * sizeof(float), cudaMemcpyDeviceToHost,
                           st));
      }
    }
  }
  if (to_host) CU(cudaStreamSynchronize(st));
  *num_rows = R;
  return RILL_OK;
}

/* The forward kernels for a bucket of Tb tokens over metadata laid out for it (a capture's contents). */
static rill_status bucket_kernels(rill_cuda *d, int Tb, char *err, size_t err_cap) {
  const int Sb = bucket_seqs(d, Tb);
  const int32_t *dtokens = d->meta, *dpositions = dtokens + Tb, *dtok_seq = dpositions + Tb, *drows = dtok_seq + Tb;
  const int32_t *dquery_start = drows + Tb, *dtables = dquery_start + Sb + 1;
  const int32_t *dtables_win = dtables + (size_t)(Sb + 1) * d->table_stride;
  const rill_status s =
      run_layers(d, Tb, Sb, dtokens, dpositions, dtok_seq, dquery_start, dtables, dtables_win, err, err_cap);
  return s != RILL_OK ? s : head_rows(d, drows, Tb, err, err_cap);
}

/* Captures one graph per bucket and uploads it (its first replay then costs what the others do). The first bucket of
 * each kernel set (same_kernels) first runs eagerly on a batch of padding only, which loads every kernel the graphs
 * use outside a capture, and so does every bucket cuBLASLt serves, which picks its algorithms; the stream is
 * synchronised after each, so a fault is reported at create and the host metadata is free to rewrite.
 * RILL_CUDA_GRAPHS=0 at create: none. */
static rill_status capture_graphs(rill_cuda *d, char *err, size_t err_cap) {
  const char *env = getenv("RILL_CUDA_GRAPHS");
  if (env != nullptr && strcmp(env, "0") == 0) return RILL_OK;
  const int top = d->max_rows < kMaxGraphTokens ? d->max_rows : kMaxGraphTokens;
  if (top < 1) return RILL_OK;
  cudaStream_t st = d->stream;
  int warmed = 0; /* the last bucket run eagerly */
  for (int Tb = 1; d->num_graphs < kMaxGraphs; Tb = Tb * 2 < top ? Tb * 2 : top) {
    rill_status s = RILL_OK;
    if (warmed == 0 || !same_kernels(Tb, Tb, warmed) || (d->lt_on && Tb > kGemvMaxTokens)) {
      warmed = Tb;
      const int Sb = bucket_seqs(d, Tb);
      pad_meta(d, 0, 0, 0, Tb, Sb);
      const size_t meta_len =
          4 * (size_t)Tb + (size_t)Sb + 1 + ((size_t)Sb + 1) * d->table_stride * (d->kv_split ? 2 : 1);
      CU(cudaMemcpyAsync(d->meta, d->meta_host, meta_len * sizeof(int32_t), cudaMemcpyHostToDevice, st));
      if ((s = bucket_kernels(d, Tb, err, err_cap)) != RILL_OK) return s;
      CU(cudaStreamSynchronize(st));
    }
    CU(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
    /* The capture always ends, so the stream is usable (and destroyable) whatever failed inside it. */
    s = bucket_kernels(d, Tb, err, err_cap);
    cudaGraph_t graph = nullptr;
    const cudaError_t ended = cudaStreamEndCapture(st, &graph);
    if (s != RILL_OK) {
      if (graph != nullptr) cudaGraphDestroy(graph);
      return s;
    }
    if (ended != cudaSuccess) return cuda_fail(err, err_cap, "cudaStreamEndCapture", ended);
    cudaGraphExec_t exec = nullptr;
    const cudaError_t made = cudaGraphInstantiate(&exec, graph, 0);
    const cudaError_t freed = cudaGraphDestroy(graph); /* the executable graph does not need it */
    if (made != cudaSuccess) return cuda_fail(err, err_cap, "cudaGraphInstantiate", made);
    d->graphs[d->num_graphs] = exec;
    d->graph_tokens[d->num_graphs++] = Tb;
    if (freed != cudaSuccess) return cuda_fail(err, err_cap, "cudaGraphDestroy", freed);
    CU(cudaGraphUpload(exec, st));
    if (Tb == top) break;
  }
  CU(cudaStreamSynchronize(st));
  return RILL_OK;
}

rill_status rill_cuda_forward(rill_cuda *d, const rill_step_batch *b, int all_rows, float *out, const float **logits,
                              int32_t *num_rows, char *err, size_t err_cap) {
  const rill_status s = forward_rows(d, b, all_rows, 1, all_rows ? out : d->logits_host, num_rows, err, err_cap);
  if (s == RILL_OK && logits != nullptr) *logits = d->logits_host;
  return s;
}

int rill_cuda_samples_on_device(const rill_cuda *d, const rill_step_batch *b) {
  if (d->host_sampling) return 0;
  int64_t rows = 0, hist = 0, bias = 0;
  for (int32_t i = 0; i < b->num_seqs; i++) {
    if (!b->sample_flags[i]) continue;
    rows += b->draft_counts[i] + 1;
    hist += b->history_start[i + 1] - b->history_start[i];
    bias += b->bias_start[i + 1] - b->bias_start[i];
  }
  return rows <= d->max_rows && hist <= d->hist_cap && bias <= d->bias_cap;
}

rill_status rill_cuda_step(rill_cuda *d, const rill_step_batch *b, rill_step_result *res, char *err, size_t err_cap) {
  const int32_t V = d->cfg.vocab_size, L = d->lim.max_top_logprobs, K1 = d->lim.max_drafts + 1;
  const samp_layout l = layout_of((size_t)d->max_rows, (size_t)d->hist_cap, (size_t)d->bias_cap, d->words, (size_t)L);
  uint8_t *in = static_cast<uint8_t *>(d->samp_in_host);
  rill_sample_job *jobs = reinterpret_cast<rill_sample_job *>(in + l.jobs);
  int32_t *hist = reinterpret_cast<int32_t *>(in + l.history), *bias_ids = reinterpret_cast<int32_t *>(in + l.bias_ids);
  float *bias_values = reinterpret_cast<float *>(in + l.bias_values);
  int32_t *drafts = reinterpret_cast<int32_t *>(in + l.drafts);
  uint32_t *mask = reinterpret_cast<uint32_t *>(in + l.mask);
  /* Pack, in batch order: one job per sampled row, each sequence's history, bias, drafts and mask rows once. */
  int32_t R = 0, H = 0, B = 0, mask_rows = 0;
  for (int32_t i = 0; i < b->num_seqs; i++) {
    if (!b->sample_flags[i]) continue;
    const int32_t dc = b->draft_counts[i], hs = b->history_start[i], hl = b->history_start[i + 1] - hs;
    const int32_t bs = b->bias_start[i], bl = b->bias_start[i + 1] - bs;
    if (hl > 0) memcpy(hist + H, b->history + hs, (size_t)hl * sizeof(int32_t));
    if (bl > 0) {
      memcpy(bias_ids + B, b->bias_ids + bs, (size_t)bl * sizeof(int32_t));
      memcpy(bias_values + B, b->bias_values + bs, (size_t)bl * sizeof(float));
    }
    const int32_t *seq_drafts = rill_sample_drafts(b, i);
    const int plain = rill_sample_plain(b, i);
    for (int32_t r = 0; r <= dc; r++) {
      rill_sample_job *j = &jobs[R + r];
      j->r = r;
      j->plain = plain;
      j->p = rill_sample_row_at(b, i);
      j->position = rill_sample_position(b, i, r);
      j->mask_row = -1;
      if (b->mask_row_start[i] >= 0) {
        memcpy(mask + (size_t)mask_rows * d->words,
               b->allowed_mask + ((size_t)b->mask_row_start[i] + (size_t)r) * d->words, d->words * sizeof(uint32_t));
        j->mask_row = mask_rows++;
      }
      j->hist_off = H;
      j->hist_len = hl;
      j->hist_prompt = b->history_prompt_lens[i];
      j->bias_off = B;
      j->bias_len = bl;
      j->drafts_off = R;
      drafts[R + r] = r < dc ? seq_drafts[r] : 0;
    }
    R += dc + 1;
    H += hl;
    B += bl;
  }
  int32_t rows = 0;
  rill_status s = forward_rows(d, b, 0, 0, nullptr, &rows, err, err_cap);
  if (s != RILL_OK) return s;
  cudaStream_t st = d->stream;
  /* The whole packed block up to the mask rows used: the parts are at fixed offsets. */
  const size_t in_bytes = l.mask + (size_t)mask_rows * d->words * sizeof(uint32_t);
  CU(cudaMemcpyAsync(d->samp_in, d->samp_in_host, in_bytes, cudaMemcpyHostToDevice, st));
  uint8_t *din = static_cast<uint8_t *>(d->samp_in), *dout = static_cast<uint8_t *>(d->samp_out);
  CU(rill_k_sample(st, d->logits, R, V, reinterpret_cast<const rill_sample_job *>(din + l.jobs),
                   reinterpret_cast<const int32_t *>(din + l.history), reinterpret_cast<const int32_t *>(din + l.bias_ids),
                   reinterpret_cast<const float *>(din + l.bias_values), reinterpret_cast<const int32_t *>(din + l.drafts),
                   reinterpret_cast<const uint32_t *>(din + l.mask), d->samp_scratch, L,
                   reinterpret_cast<int32_t *>(dout + l.tok), reinterpret_cast<float *>(dout + l.lp),
                   reinterpret_cast<int32_t *>(dout + l.top_ids), reinterpret_cast<float *>(dout + l.top_lp)));
  CU(cudaMemcpyAsync(d->samp_out_host, d->samp_out, l.out_bytes, cudaMemcpyDeviceToHost, st));
  CU(cudaStreamSynchronize(st));
  const uint8_t *out = static_cast<const uint8_t *>(d->samp_out_host);
  const int32_t *tok = reinterpret_cast<const int32_t *>(out + l.tok);
  const float *lp = reinterpret_cast<const float *>(out + l.lp);
  const int32_t *top_ids = reinterpret_cast<const int32_t *>(out + l.top_ids);
  const float *top_lp = reinterpret_cast<const float *>(out + l.top_lp);
  /* Verification (docs/backend-step.md): drafts accepted while the row's token equals the draft; rows past the first
   * mismatch are not part of the result (nor, as on the CPU device, their mask failures). */
  int32_t row = 0;
  for (int32_t i = 0; i < b->num_seqs; i++) {
    res->counts[i] = 0;
    if (!b->sample_flags[i]) continue;
    const int32_t dc = b->draft_counts[i], n = b->logprobs[i];
    int32_t count = dc + 1;
    for (int32_t r = 0; r <= dc; r++) {
      const int32_t x = tok[row + r];
      if (x < 0) return rill_sample_fail_no_token(b, i, r, err, err_cap);
      const size_t slot = (size_t)i * K1 + (size_t)r;
      res->tokens[slot] = x;
      res->logprobs[slot] = lp[row + r];
      if (n > 0) {
        memcpy(res->top_ids + slot * L, top_ids + (size_t)(row + r) * L, (size_t)n * sizeof(int32_t));
        memcpy(res->top_logprobs + slot * L, top_lp + (size_t)(row + r) * L, (size_t)n * sizeof(float));
      }
      if (rill_sample_rejects(b, i, r, x)) {
        count = r + 1;
        break;
      }
    }
    res->counts[i] = count;
    row += dc + 1;
  }
  return RILL_OK;
}

int rill_cuda_has_head(const rill_cuda *d) { return d->e3 != nullptr; }

namespace {
rill_status dev_forward(void *state, const rill_step_batch *b, int all_rows, float *out, const float **logits,
                        int32_t *num_rows, char *err, size_t err_cap) {
  return rill_cuda_forward(static_cast<rill_cuda *>(state), b, all_rows, out, logits, num_rows, err, err_cap);
}
int dev_samples(const void *state, const rill_step_batch *b) {
  return rill_cuda_samples_on_device(static_cast<const rill_cuda *>(state), b);
}
rill_status dev_step(void *state, const rill_step_batch *b, rill_step_result *r, char *err, size_t err_cap) {
  return rill_cuda_step(static_cast<rill_cuda *>(state), b, r, err, err_cap);
}
int dev_has_head(const void *state) { return rill_cuda_has_head(static_cast<const rill_cuda *>(state)); }
rill_status dev_propose(void *state, const rill_step_batch *b, rill_step_result *r, char *err, size_t err_cap) {
  return rill_cuda_propose(static_cast<rill_cuda *>(state), b, r, err, err_cap);
}
void dev_destroy(void *state) { rill_cuda_destroy(static_cast<rill_cuda *>(state)); }
} // namespace

/* The head follows every forward pass inside run_layers, so there is nothing to follow afterwards. */
rill_device rill_cuda_device(rill_cuda *d) {
  return rill_device{d, dev_forward, dev_samples, dev_step, dev_has_head, dev_propose, nullptr, dev_destroy};
}

rill_status rill_cuda_propose(rill_cuda *d, const rill_step_batch *b, rill_step_result *r, char *err, size_t err_cap) {
  if (d->e3 == nullptr) return rill_fail(err, err_cap, RILL_ERR_INTERNAL, "device cuda: no eagle3 head");
  return rill_cuda_e3_propose(d->e3, d->stream, b, r, err, err_cap);
}

rill_status rill_cuda_head_rows(rill_cuda *d, float *logits, float *hidden, int32_t cap, int32_t *rows, char *err,
                                size_t err_cap) {
  if (d->e3 == nullptr) return rill_fail(err, err_cap, RILL_ERR_INTERNAL, "device cuda: no eagle3 head");
  return rill_cuda_e3_last_rows(d->e3, d->stream, logits, hidden, cap, rows, err, err_cap);
}
