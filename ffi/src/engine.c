#define _DEFAULT_SOURCE

#include "engine.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "aligned_buffer.h"
#include "draft.h"
#include "cpu/eagle3.h"
#include "rope.h"
#include "safetensors.h"
#include "sample.h"

static _Thread_local char global_err[RILL_ERR_CAP];

RILL_API int32_t rill_abi_version(void) { return RILL_ABI_VERSION; }

RILL_API const char *rill_global_error(void) { return global_err; }

RILL_API const char *rill_last_error(const rill_engine *e) { return e == NULL ? "no engine" : e->err; }

static rill_status set_global(rill_status s, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(global_err, sizeof global_err, fmt, ap);
  va_end(ap);
  return s;
}

static void free_buffers(rill_engine *e) {
  free(e->x);
  free(e->xn);
  free(e->qkv);
  free(e->attn);
  free(e->proj);
  free(e->gu);
  free(e->act);
  free(e->rope_cos);
  free(e->rope_sin);
  free(e->slot_block);
  free(e->slot_in_block);
  free(e->slot_win_block);
  free(e->tok_seq);
  free(e->attn_groups);
  free(e->xq);
  free(e->xs);
  free(e->inv_freq);
  free(e->att_scratch);
  free(e->rows);
  free(e->row_hidden);
  free(e->logits);
  free(e->sample_scratch);
  rill_moe_scratch_free(&e->moe);
  free(e->dr_tokens);
  free(e->dr_positions);
  free(e->dr_query_start);
  free(e->dr_context_lens);
  free(e->dr_left);
  free(e->dr_cur_tok);
  free(e->dr_cur_pos);
}

RILL_API void rill_engine_destroy(rill_engine *e) {
  if (e == NULL) return;
  if (e->dev.destroy != NULL) e->dev.destroy(e->dev.state);
  rill_engine_destroy(e->draft);
  rill_eagle3_destroy(e->eagle3);
  if (e->owns_pool) rill_pool_destroy(e->pool);
  rill_kv_pool_destroy(&e->kv);
  rill_kv_pool_destroy(&e->kv_win);
  rill_model_weights_free(&e->w);
  free_buffers(e);
  free(e);
}

static int32_t or_default(int32_t v, int32_t def) { return v == 0 ? def : v; }

static rill_status alloc_buffers(rill_engine *e) {
  const rill_model_config *c = &e->cfg;
  const size_t T = (size_t)e->lim.max_batch_tokens, H = (size_t)c->hidden_size, I = (size_t)c->intermediate_size;
  const size_t D = (size_t)c->head_dim, QD = (size_t)c->num_heads * D;
  const size_t widest = I > QD ? (I > H ? I : H) : (QD > H ? QD : H);
  const size_t wblocks = (widest + RILL_Q8_BLOCK - 1) / RILL_Q8_BLOCK;
  const size_t G = (size_t)(c->num_heads / c->num_kv_heads);
  const size_t threads = (size_t)rill_pool_threads(e->pool);
  e->x = rill_alloc_floats(T * H);
  e->xn = rill_alloc_floats(T * H);
  e->qkv = rill_alloc_floats(T * (size_t)e->qkv_dim);
  e->attn = rill_alloc_floats(T * QD);
  e->proj = rill_alloc_floats(T * H);
  /* A mixture of experts keeps its per-expert buffers in e->moe instead of the dense MLP's. */
  const size_t mlp_T = c->num_experts > 0 ? 1 : T;
  e->gu = rill_alloc_floats(mlp_T * 2 * I);
  e->act = rill_alloc_floats(mlp_T * I);
  if (c->num_experts > 0 && rill_moe_scratch_alloc(&e->moe, c, e->lim.max_batch_tokens) != RILL_OK) {
    return RILL_ERR_OUT_OF_MEMORY;
  }
  e->rope_cos = rill_alloc_floats(T * D / 2);
  e->rope_sin = rill_alloc_floats(T * D / 2);
  e->slot_block = malloc(T * sizeof(int64_t));
  e->slot_in_block = malloc(T * sizeof(int32_t));
  e->slot_win_block = malloc(T * sizeof(int64_t));
  e->tok_seq = malloc(T * sizeof(int32_t));
  e->xq = aligned_alloc(64, (T * wblocks * RILL_Q8_BLOCK + 63) & ~(size_t)63);
  e->xs = rill_alloc_floats(T * wblocks);
  e->inv_freq = rill_alloc_floats(D / 2);
  /* Scores of the query rows of one attention group (rill_attn_group_tokens tokens × G heads) over the longest
   * context, then as many output rows. */
  e->attn_rows = (size_t)rill_attn_group_tokens((int)G) * G;
  e->attn_groups = malloc((T + 1) * sizeof(int32_t));
  e->att_scratch_stride = (e->attn_rows * (size_t)e->lim.max_positions + e->attn_rows * D + 15) & ~(size_t)15;
  e->att_scratch = rill_alloc_floats(threads * e->att_scratch_stride);
  e->rows = malloc(T * sizeof(int32_t));
  e->row_hidden = rill_alloc_floats((size_t)e->max_rows * H);
  e->logits = rill_alloc_floats((size_t)e->max_rows * (size_t)c->vocab_size);
  size_t sb = rill_sample_pool_scratch_bytes(c->vocab_size, (int)threads, e->lim.max_seqs);
  e->sample_scratch = sb == 0 ? NULL : aligned_alloc(64, (sb + 63) & ~(size_t)63);
  if (e->x == NULL || e->xn == NULL || e->qkv == NULL || e->attn == NULL || e->proj == NULL || e->gu == NULL ||
      e->act == NULL || e->rope_cos == NULL || e->rope_sin == NULL || e->slot_block == NULL ||
      e->slot_in_block == NULL || e->slot_win_block == NULL || e->tok_seq == NULL || e->attn_groups == NULL || e->xq == NULL || e->xs == NULL || e->inv_freq == NULL ||
      e->att_scratch == NULL || e->rows == NULL || e->row_hidden == NULL || e->logits == NULL ||
      e->sample_scratch == NULL) {
    return RILL_ERR_OUT_OF_MEMORY;
  }
  rill_rope_inv_freq(c, e->inv_freq);
  return RILL_OK;
}

static rill_status parse_wtype(const char *s, rill_wtype *out) {
  if (strcmp(s, "fp32") == 0) {
    *out = RILL_W_F32;
  } else if (strcmp(s, "bf16") == 0) {
    *out = RILL_W_BF16;
  } else if (strcmp(s, "int8") == 0) {
    *out = RILL_W_INT8;
  } else {
    return RILL_ERR_INVALID_ARGUMENT;
  }
  return RILL_OK;
}

static const char *wtype_name(rill_wtype t) { return t == RILL_W_F32 ? "fp32" : t == RILL_W_BF16 ? "bf16" : "int8"; }

/* Checks options and fills the engine's limits (everything but the KV pool size, which needs the model). */
static rill_status read_options(const rill_options *o, rill_engine *e) {
  if (o->device != NULL && strcmp(o->device, "cpu") != 0 && strcmp(o->device, "auto") != 0 &&
      strcmp(o->device, "cuda") != 0) {
    return set_global(RILL_ERR_INVALID_ARGUMENT, "device %.32s: expected cpu, cuda or auto", o->device);
  }
  if (!(o->gpu_memory_fraction >= 0.0f && o->gpu_memory_fraction <= 1.0f)) {
    return set_global(RILL_ERR_INVALID_ARGUMENT, "gpu_memory_fraction %g: out of range 0..1",
                      (double)o->gpu_memory_fraction);
  }
  if (o->draft_model_dir != NULL && o->draft_model_dir[0] == '\0') {
    return set_global(RILL_ERR_INVALID_ARGUMENT, "draft_model_dir: empty path");
  }
  rill_wtype wt;
  if (o->dtype != NULL && parse_wtype(o->dtype, &wt) != RILL_OK) {
    return set_global(RILL_ERR_INVALID_ARGUMENT, "dtype %.32s: expected fp32, bf16 or int8", o->dtype);
  }
  if (o->kv_dtype != NULL && strcmp(o->kv_dtype, "fp32") != 0 && strcmp(o->kv_dtype, "bf16") != 0) {
    return set_global(RILL_ERR_INVALID_ARGUMENT, "kv_dtype %.32s: expected fp32 or bf16", o->kv_dtype);
  }
  struct {
    const char *name;
    int64_t v;
    int64_t max;
  } ranges[] = {{"threads", o->threads, 1024},         {"block_size", o->block_size, 4096},
                {"num_blocks", o->num_blocks, INT32_MAX}, {"kv_bytes", o->kv_bytes, INT64_MAX},
                {"max_seqs", o->max_seqs, 1 << 20},     {"max_batch_tokens", o->max_batch_tokens, 1 << 24},
                {"max_drafts", o->max_drafts, 64},      {"max_top_logprobs", o->max_top_logprobs, 1024},
                {"max_model_len", o->max_model_len, INT32_MAX}, {"num_sliding_blocks", o->num_sliding_blocks, INT32_MAX},
                {"sliding_kv_in_main", o->sliding_kv_in_main, 1}};
  for (size_t i = 0; i < sizeof ranges / sizeof ranges[0]; i++) {
    if (ranges[i].v < 0 || ranges[i].v > ranges[i].max) {
      return set_global(RILL_ERR_INVALID_ARGUMENT, "%s %lld: out of range 0..%lld", ranges[i].name,
                        (long long)ranges[i].v, (long long)ranges[i].max);
    }
  }
  e->lim.block_size = or_default(o->block_size, 16);
  e->lim.max_seqs = or_default(o->max_seqs, 256);
  e->lim.max_batch_tokens = or_default(o->max_batch_tokens, 8192);
  e->lim.max_drafts = or_default(o->max_drafts, 8);
  e->lim.max_top_logprobs = or_default(o->max_top_logprobs, 20);
  return RILL_OK;
}

static rill_status attach_draft(rill_engine *e, const char *dir, const rill_options *o);
static rill_status plan_kv_pools(rill_engine *e, const rill_options *o, bool kv_bf16);
static rill_status attach_eagle3(rill_engine *e, const char *dir);

/* What every device reports the same way; device, isa, dtypes and byte counts are the caller's. */
static void fill_info(rill_engine *e, int threads) {
  const rill_model_config *c = &e->cfg;
  rill_info *i = &e->info;
  i->abi_version = RILL_ABI_VERSION;
  i->vocab_size = c->vocab_size;
  i->max_positions = e->lim.max_positions;
  i->block_size = e->lim.block_size;
  i->num_blocks = e->lim.num_blocks;
  i->max_batch_tokens = e->lim.max_batch_tokens;
  i->max_seqs = e->lim.max_seqs;
  i->max_drafts = e->lim.max_drafts;
  i->max_top_logprobs = e->lim.max_top_logprobs;
  i->shares_prefix_blocks = 1;
  i->num_layers = c->num_layers;
  i->hidden_size = c->hidden_size;
  i->num_heads = c->num_heads;
  i->num_kv_heads = c->num_kv_heads;
  i->head_dim = c->head_dim;
  i->threads = threads;
  i->sliding_window = e->lim.sliding_window;
  i->num_sliding_blocks = e->lim.num_sliding_blocks;
  snprintf(i->architecture, sizeof i->architecture, "%s", c->architecture);
}

/* The CUDA half of engine_create: the host keeps config, limits and the sampler's buffers; weights go to the device
 * and the host copy is freed. On failure the engine is destroyed. */
static rill_status create_on_cuda(rill_engine *e, const rill_options *o, int threads) {
  rill_cuda_setup setup = {.cfg = &e->cfg, .w = &e->w, .inv_freq = NULL, .lim = &e->lim, .num_blocks = o->num_blocks,
                           .kv_bytes = o->kv_bytes, .gpu_memory_fraction = o->gpu_memory_fraction,
                           .max_rows = e->max_rows, .num_sliding_blocks = o->num_sliding_blocks,
                           .sliding_kv_in_main = o->sliding_kv_in_main};
  e->inv_freq = rill_alloc_floats((size_t)e->cfg.head_dim / 2);
  size_t sb = rill_sample_pool_scratch_bytes(e->cfg.vocab_size, rill_pool_threads(e->pool), e->lim.max_seqs);
  e->sample_scratch = sb == 0 ? NULL : aligned_alloc(64, (sb + 63) & ~(size_t)63);
  if (e->inv_freq == NULL || e->sample_scratch == NULL) {
    rill_engine_destroy(e);
    return set_global(RILL_ERR_OUT_OF_MEMORY, "out of memory for step buffers");
  }
  rill_rope_inv_freq(&e->cfg, e->inv_freq);
  setup.inv_freq = e->inv_freq;
  /* An EAGLE-3 head goes to the device with the target, whose graphs then capture its taps and follow-up. */
  rill_eagle3_head head;
  memset(&head, 0, sizeof head);
  float *head_inv_freq = NULL;
  const bool with_head = o->draft_model_dir != NULL && rill_eagle3_is_head(o->draft_model_dir);
  if (with_head) {
    char msg[RILL_ERR_CAP];
    rill_status hs = rill_eagle3_head_load(o->draft_model_dir, &e->cfg, e->pool, &head, msg, sizeof msg);
    if (hs == RILL_OK) {
      head_inv_freq = rill_alloc_floats((size_t)head.cfg.head_dim / 2 + 1);
      if (head_inv_freq == NULL) {
        rill_eagle3_head_free(&head);
        snprintf(msg, sizeof msg, "out of memory");
        hs = RILL_ERR_OUT_OF_MEMORY;
      }
    }
    if (hs != RILL_OK) {
      rill_engine_destroy(e);
      return set_global(hs, "eagle3 head %.200s: %.280s", o->draft_model_dir, msg);
    }
    rill_rope_inv_freq(&head.cfg, head_inv_freq);
    setup.eagle3 = &head;
    setup.eagle3_inv_freq = head_inv_freq;
  }
  rill_cuda_info ci;
  memset(&ci, 0, sizeof ci);
  rill_status s = rill_cuda_create(&setup, &e->cuda, &ci, global_err, sizeof global_err);
  if (with_head) {
    rill_eagle3_head_free(&head);
    free(head_inv_freq);
  }
  if (s != RILL_OK) {
    rill_engine_destroy(e);
    return s;
  }
  e->dev = rill_cuda_device(e->cuda);
  rill_model_weights_free(&e->w);
  fill_info(e, threads);
  e->info.weight_bytes = ci.weight_bytes;
  e->info.kv_bytes = ci.kv_bytes;
  e->info.sliding_kv_bytes = ci.sliding_kv_bytes;
  e->info.draft_weight_bytes = ci.draft_weight_bytes;
  snprintf(e->info.device, sizeof e->info.device, "%s", ci.device);
  snprintf(e->info.isa, sizeof e->info.isa, "%s", ci.isa);
  snprintf(e->info.dtype, sizeof e->info.dtype, "bf16");
  snprintf(e->info.kv_dtype, sizeof e->info.kv_dtype, "bf16");
  return RILL_OK;
}

/* The end of engine_create on every device: the draft model, if any, then the handle. */
static rill_status finish_create(rill_engine *e, const rill_options *o, rill_engine **out) {
  if (o->draft_model_dir != NULL) {
    rill_status s = rill_eagle3_is_head(o->draft_model_dir) ? attach_eagle3(e, o->draft_model_dir)
                                                             : attach_draft(e, o->draft_model_dir, o);
    if (s != RILL_OK) {
      rill_engine_destroy(e);
      return s;
    }
  }
  *out = e;
  return RILL_OK;
}

/* One engine for model_dir; `shared_pool` non-NULL: borrow that thread pool (the draft model shares its target's);
 * `rows_cap` > 0: at most that many logits rows per forward (a draft model needs one per sequence). */
static rill_status engine_create(const char *model_dir, const rill_options *o, rill_pool *shared_pool,
                                 int32_t rows_cap, rill_engine **out) {
  rill_engine *e = calloc(1, sizeof *e);
  if (e == NULL) return set_global(RILL_ERR_OUT_OF_MEMORY, "out of memory");
  e->ops = &rill_cpu_ops;
  e->dev = rill_cpu_device(e);
  rill_status s = read_options(o, e);
  if (s != RILL_OK) {
    free(e);
    return s;
  }
  /* "auto" takes the GPU when one is usable and quietly falls back to the CPU; "cuda" without one is an error. */
  bool want_cuda = false;
  if (o->device != NULL && strcmp(o->device, "cpu") != 0) {
    char why[RILL_ERR_CAP];
    s = rill_cuda_probe(why, sizeof why);
    want_cuda = s == RILL_OK;
    if (s != RILL_OK && strcmp(o->device, "cuda") == 0) {
      free(e);
      return set_global(s, "%s", why);
    }
  }
  /* The CUDA device holds bf16 only: "auto" asked for other types runs on the CPU. */
  bool bf16_only = (o->dtype == NULL || strcmp(o->dtype, "bf16") == 0) &&
                   (o->kv_dtype == NULL || strcmp(o->kv_dtype, "bf16") == 0);
  if (want_cuda && !bf16_only && strcmp(o->device, "auto") == 0) want_cuda = false;
  if (want_cuda && !bf16_only) {
    free(e);
    return set_global(RILL_ERR_UNSUPPORTED, "device cuda: holds bf16 weights and a bf16 KV cache only");
  }
  s = rill_model_config_read(model_dir, &e->cfg, global_err, sizeof global_err);
  if (s != RILL_OK) {
    free(e);
    return s;
  }
  const rill_model_config *c = &e->cfg;
  if (o->max_model_len > c->max_positions) {
    int32_t model_max = c->max_positions;
    free(e);
    return set_global(RILL_ERR_INVALID_ARGUMENT, "max_model_len %d: over the model's %d positions", o->max_model_len,
                      model_max);
  }
  e->lim.vocab_size = c->vocab_size;
  e->lim.max_positions = or_default(o->max_model_len, c->max_positions);
  e->qkv_dim = (c->num_heads + 2 * c->num_kv_heads) * c->head_dim;

  int threads = o->threads > 0 ? o->threads : rill_cpu_count();
  if (shared_pool != NULL) {
    e->pool = shared_pool;
    threads = rill_pool_threads(shared_pool);
  } else {
    s = rill_pool_create(threads, &e->pool);
    if (s != RILL_OK) {
      free(e);
      return set_global(s, "cannot start %d threads", threads);
    }
    e->owns_pool = 1;
  }
  rill_checkpoint *ck = NULL;
  s = rill_checkpoint_open(model_dir, &ck, global_err, sizeof global_err);
  if (s != RILL_OK) {
    rill_engine_destroy(e);
    return s;
  }
  /* The option was checked by read_options; without it the checkpoint decides. */
  rill_wtype wt = want_cuda ? RILL_W_BF16 : rill_checkpoint_default_wtype(ck);
  if (o->dtype != NULL) parse_wtype(o->dtype, &wt);
  s = rill_model_weights_load(ck, rill_checkpoint_name(ck), c, wt, e->pool, &e->w, global_err, sizeof global_err);
  rill_checkpoint_close(ck);
  if (s != RILL_OK) {
    rill_engine_destroy(e);
    return s;
  }

  int64_t rows = (int64_t)e->lim.max_seqs * (e->lim.max_drafts + 1);
  e->max_rows = (int32_t)(rows < e->lim.max_batch_tokens ? rows : e->lim.max_batch_tokens);
  if (rows_cap > 0 && rows_cap < e->max_rows) e->max_rows = rows_cap;
  if (want_cuda) {
    s = create_on_cuda(e, o, threads);
    return s != RILL_OK ? s : finish_create(e, o, out);
  }

  bool kv_bf16 = o->kv_dtype != NULL && strcmp(o->kv_dtype, "bf16") == 0;
  s = plan_kv_pools(e, o, kv_bf16);
  if (s != RILL_OK) {
    rill_engine_destroy(e);
    return s;
  }

  /* RILL_CPU_ISA (portable, avx2, avx512) caps the kernels, so tests can compare instruction sets; avx512bf16 opts in
   * to bf16-rounded activations for bf16 weights (ffi/devices/cpu/kernels_select.c). */
  e->k = rill_kernels_select(getenv("RILL_CPU_ISA"));
  s = alloc_buffers(e);
  if (s != RILL_OK) {
    rill_engine_destroy(e);
    return set_global(s, "out of memory for step buffers (max_batch_tokens %d)", e->lim.max_batch_tokens);
  }
  /* dtype int8 takes 8-bit activations into the MXFP4 experts too (moe.h). The experts and the int8 matrices are
   * regrouped once here, on the CPU device's own copy, where the table's kernels read them so. */
  e->moe.int8_activations = wt == RILL_W_INT8;
  if (e->moe.int8_activations) rill_moe_regroup_experts(&e->w, e->k, e->pool);
  if (wt == RILL_W_INT8 && e->k->gemm_q8_g16 != NULL) rill_model_weights_group16(&e->w, e->pool);

  fill_info(e, threads);
  e->info.weight_bytes = (int64_t)e->w.bytes;
  e->info.kv_bytes = (int64_t)(e->kv.bytes + e->kv_win.bytes);
  e->info.sliding_kv_bytes = (int64_t)e->kv_win.bytes;
  snprintf(e->info.device, sizeof e->info.device, "cpu");
  snprintf(e->info.isa, sizeof e->info.isa, "%s", e->k->isa);
  snprintf(e->info.dtype, sizeof e->info.dtype, "%s", wtype_name(wt));
  snprintf(e->info.kv_dtype, sizeof e->info.kv_dtype, "%s", kv_bf16 ? "bf16" : "fp32");
  return finish_create(e, o, out);
}

/* The CPU device's KV pools. Sliding layers get a pool of their own (kv_split) when the model has both kinds of layer
 * and its window is shorter than the context, unless the options keep them in the main pool; sizes as rill.h says. */
static rill_status plan_kv_pools(rill_engine *e, const rill_options *o, bool kv_bf16) {
  const rill_model_config *c = &e->cfg;
  const int32_t bs = e->lim.block_size, W = c->sliding_window;
  int32_t sliding_layers = 0;
  for (int l = 0; l < c->num_layers; l++) sliding_layers += W > 0 && c->layer_sliding[l];
  e->kv_split = sliding_layers > 0 && sliding_layers < c->num_layers && W < e->lim.max_positions &&
                o->sliding_kv_in_main == 0;
  const int32_t full_layers = e->kv_split ? c->num_layers - sliding_layers : c->num_layers;
  for (int l = 0, nf = 0, nw = 0; l < c->num_layers; l++) {
    e->kv_layer[l] = e->kv_split && c->layer_sliding[l] ? nw++ : nf++;
  }
  const size_t block_bytes = rill_kv_block_bytes(full_layers, bs, c->num_kv_heads, c->head_dim, kv_bf16);
  const size_t win_block_bytes =
      e->kv_split ? rill_kv_block_bytes(sliding_layers, bs, c->num_kv_heads, c->head_dim, kv_bf16) : 0;
  const int64_t per_seq = (e->lim.max_positions + bs - 1) / bs;
  int64_t win_blocks = 0;
  if (e->kv_split) {
    win_blocks = o->num_sliding_blocks;
    if (win_blocks == 0) {
      win_blocks = (int64_t)e->lim.max_seqs * ((W + e->lim.max_drafts + bs - 1) / bs + 1) +
                   (e->lim.max_batch_tokens + bs - 1) / bs;
      if (win_blocks > (int64_t)e->lim.max_seqs * per_seq) win_blocks = (int64_t)e->lim.max_seqs * per_seq;
    }
  }
  int64_t blocks = o->num_blocks;
  if (blocks == 0) {
    int64_t budget = o->kv_bytes;
    if (budget == 0) {
      long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
      int64_t quarter = pages > 0 && page > 0 ? (int64_t)pages * page / 4 : (int64_t)1 << 30;
      int64_t want = (int64_t)e->lim.max_seqs * per_seq * (int64_t)block_bytes + win_blocks * (int64_t)win_block_bytes;
      budget = want < quarter ? want : quarter;
    }
    if (e->kv_split && o->num_sliding_blocks == 0 && win_blocks * (int64_t)win_block_bytes > budget / 2) {
      win_blocks = budget / 2 / (int64_t)win_block_bytes;
    }
    blocks = (budget - win_blocks * (int64_t)win_block_bytes) / (int64_t)block_bytes;
    if (blocks > INT32_MAX / bs) blocks = INT32_MAX / bs;
  }
  if (blocks < 1) return set_global(RILL_ERR_INVALID_ARGUMENT, "kv_bytes: too small for one block of %zu bytes", block_bytes);
  if (e->kv_split && win_blocks < 1) {
    return set_global(RILL_ERR_INVALID_ARGUMENT, "kv_bytes: too small for one sliding-layer block of %zu bytes",
                      win_block_bytes);
  }
  if (win_blocks > INT32_MAX / bs) win_blocks = INT32_MAX / bs;
  e->lim.num_blocks = (int32_t)blocks;
  e->lim.num_sliding_blocks = (int32_t)win_blocks;
  e->lim.sliding_window = e->kv_split ? W : 0;
  rill_status s = rill_kv_pool_create(&e->kv, full_layers, e->lim.num_blocks, bs, c->num_kv_heads, c->head_dim, kv_bf16);
  if (s != RILL_OK) return set_global(s, "out of memory for a KV pool of %d blocks", e->lim.num_blocks);
  if (e->kv_split) {
    s = rill_kv_pool_create(&e->kv_win, sliding_layers, e->lim.num_sliding_blocks, bs, c->num_kv_heads, c->head_dim,
                            kv_bf16);
    if (s != RILL_OK) {
      return set_global(s, "out of memory for a sliding-layer KV pool of %d blocks", e->lim.num_sliding_blocks);
    }
  }
  return RILL_OK;
}

/* Loads the draft model with the target's pool geometry (same block ids and block size, same limits), so the step's
 * block tables address both pools; refuses a different vocabulary before reading any weights. */
static rill_status attach_draft(rill_engine *e, const char *dir, const rill_options *o) {
  char msg[RILL_ERR_CAP];
  rill_model_config dc;
  rill_status s = rill_model_config_read(dir, &dc, msg, sizeof msg);
  if (s != RILL_OK) return set_global(s, "draft model: %.480s", msg);
  if (dc.vocab_size != e->cfg.vocab_size) {
    return set_global(RILL_ERR_INVALID_ARGUMENT,
                      "draft_model_dir %.300s: vocabulary of %d tokens, the target's has %d (a draft model needs the "
                      "target's tokenizer)",
                      dir, dc.vocab_size, e->cfg.vocab_size);
  }
  rill_options d = *o;
  d.draft_model_dir = NULL;
  d.device = "cpu"; /* a draft beside a CUDA target runs on the host */
  /* The main block tables list every block of a context, so a draft keeps all its layers there: it then needs
   * nothing of the sliding tables, whatever its own window. */
  d.sliding_kv_in_main = 1;
  d.num_sliding_blocks = 0;
  d.block_size = e->lim.block_size;
  d.num_blocks = e->lim.num_blocks;
  d.max_model_len = e->lim.max_positions;
  s = engine_create(dir, &d, e->pool, e->lim.max_seqs, &e->draft);
  if (s != RILL_OK) {
    snprintf(msg, sizeof msg, "%s", global_err);
    return set_global(s, "draft model: %.480s", msg);
  }
  const size_t B = (size_t)e->lim.max_seqs + 1;
  e->dr_tokens = malloc(B * sizeof(int32_t));
  e->dr_positions = malloc(B * sizeof(int32_t));
  e->dr_query_start = malloc(B * sizeof(int32_t));
  e->dr_context_lens = malloc(B * sizeof(int32_t));
  e->dr_left = malloc(B * sizeof(int32_t));
  e->dr_cur_tok = malloc(B * sizeof(int32_t));
  e->dr_cur_pos = malloc(B * sizeof(int32_t));
  if (e->dr_tokens == NULL || e->dr_positions == NULL || e->dr_query_start == NULL || e->dr_context_lens == NULL ||
      e->dr_left == NULL || e->dr_cur_tok == NULL || e->dr_cur_pos == NULL) {
    return set_global(RILL_ERR_OUT_OF_MEMORY, "out of memory for the draft model's step buffers");
  }
  e->info.draft_weight_bytes = (int64_t)e->draft->w.bytes;
  e->info.kv_bytes += (int64_t)e->draft->kv.bytes;
  return RILL_OK;
}

/* An EAGLE-3 head on the CPU device (on the CUDA device, create_on_cuda gave it to the device). */
static rill_status attach_eagle3(rill_engine *e, const char *dir) {
  if (e->dev.has_head(e->dev.state)) return RILL_OK;
  char msg[RILL_ERR_CAP];
  rill_status s = rill_eagle3_create(e, dir, &e->eagle3, msg, sizeof msg);
  if (s != RILL_OK) return set_global(s, "eagle3 head %.200s: %.280s", dir, msg);
  e->info.draft_weight_bytes = (int64_t)rill_eagle3_weight_bytes(e->eagle3);
  e->info.kv_bytes += (int64_t)rill_eagle3_state_bytes(e->eagle3);
  return RILL_OK;
}

RILL_API rill_status rill_engine_create(const char *model_dir, const rill_options *options, rill_engine **out) {
  global_err[0] = '\0';
  if (out == NULL) return set_global(RILL_ERR_INVALID_ARGUMENT, "out: NULL");
  *out = NULL;
  if (model_dir == NULL) return set_global(RILL_ERR_INVALID_ARGUMENT, "model_dir: NULL");
  rill_options defaults;
  memset(&defaults, 0, sizeof defaults);
  return engine_create(model_dir, options != NULL ? options : &defaults, NULL, 0, out);
}

RILL_API rill_status rill_engine_info(const rill_engine *e, rill_info *out) {
  if (e == NULL || out == NULL) return RILL_ERR_INVALID_ARGUMENT;
  *out = e->info;
  return RILL_OK;
}

static rill_status check_batch(rill_engine *e, const rill_step_batch *b) {
  if (b == NULL) {
    snprintf(e->err, sizeof e->err, "batch: NULL");
    return RILL_ERR_INVALID_ARGUMENT;
  }
  rill_status s = rill_validate_batch(b, &e->lim, e->err, sizeof e->err);
  return s != RILL_OK ? s : rill_validate_sliding_tables(b, &e->lim, e->err, sizeof e->err);
}

RILL_API rill_status rill_step(rill_engine *e, const rill_step_batch *b, rill_step_result *r) {
  if (e == NULL) return RILL_ERR_INVALID_ARGUMENT;
  e->err[0] = '\0';
  if (r == NULL || r->counts == NULL || r->tokens == NULL || r->logprobs == NULL ||
      (e->lim.max_top_logprobs > 0 && (r->top_ids == NULL || r->top_logprobs == NULL))) {
    snprintf(e->err, sizeof e->err, "result: NULL buffer");
    return RILL_ERR_INVALID_ARGUMENT;
  }
  rill_status s = check_batch(e, b);
  if (s != RILL_OK) return s;
  if (b->propose_counts != NULL) {
    for (int32_t i = 0; i < b->num_seqs; i++) {
      if (b->propose_counts[i] > 0 && e->draft == NULL && !e->dev.has_head(e->dev.state)) {
        snprintf(e->err, sizeof e->err, "propose_counts[%d] = %d: this engine has no draft model", i,
                 b->propose_counts[i]);
        return RILL_ERR_INVALID_ARGUMENT;
      }
    }
    if (r->proposed_counts == NULL || (e->lim.max_drafts > 0 && r->proposed == NULL)) {
      snprintf(e->err, sizeof e->err, "result: NULL proposed buffer with propose_counts set");
      return RILL_ERR_INVALID_ARGUMENT;
    }
  }
  const rill_device *d = &e->dev;
  if (d->step != NULL && d->samples(d->state, b)) {
    s = d->step(d->state, b, r, e->err, sizeof e->err);
  } else {
    int32_t rows = 0;
    const float *logits = NULL;
    s = d->forward(d->state, b, 0, NULL, &logits, &rows, e->err, sizeof e->err);
    if (s != RILL_OK) return s;
    s = rill_sample_batch_pooled(b, logits, e->cfg.vocab_size, e->lim.max_drafts, e->lim.max_top_logprobs,
                                 e->lim.max_seqs, e->pool, e->sample_scratch, r, e->err, sizeof e->err);
  }
  if (s != RILL_OK) return s;
  if (e->draft != NULL) return rill_draft_propose(e, b, r);
  if (d->has_head(d->state)) return d->propose(d->state, b, r, e->err, sizeof e->err);
  if (b->propose_counts != NULL) memset(r->proposed_counts, 0, (size_t)b->num_seqs * sizeof(int32_t));
  return RILL_OK;
}

RILL_API rill_status rill_forward_logits(rill_engine *e, const rill_step_batch *b, float *logits_out) {
  if (e == NULL) return RILL_ERR_INVALID_ARGUMENT;
  e->err[0] = '\0';
  if (logits_out == NULL) {
    snprintf(e->err, sizeof e->err, "logits_out: NULL");
    return RILL_ERR_INVALID_ARGUMENT;
  }
  rill_status s = check_batch(e, b);
  if (s != RILL_OK) return s;
  int32_t rows = 0;
  const rill_device *d = &e->dev;
  s = d->forward(d->state, b, 1, logits_out, NULL, &rows, e->err, sizeof e->err);
  if (s != RILL_OK) return s;
  if (d->follow != NULL && (s = d->follow(d->state, b, e->err, sizeof e->err)) != RILL_OK) return s;
  return e->draft == NULL ? RILL_OK : rill_draft_follow(e, b);
}

RILL_API rill_status rill_release(rill_engine *e, int32_t seq_id) {
  (void)seq_id;
  return e == NULL ? RILL_ERR_INVALID_ARGUMENT : RILL_OK;
}
