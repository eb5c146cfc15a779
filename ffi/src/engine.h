/*
 * The engine behind the public handle: model, KV pool, thread pool, kernels and every buffer a step needs,
 * allocated once at create for the largest batch the engine accepts, so a step never allocates. Steps go through dev
 * (device_ops.h). On the CUDA device (cuda != NULL) the device owns weights, KV pool and forward buffers; the host
 * keeps config, limits and the sampler.
 */
#ifndef RILL_ENGINE_H
#define RILL_ENGINE_H

#include <stddef.h>
#include <stdint.h>

#include "cpu/kernels.h"
#include "cpu/kv_pool.h"
#include "cpu/moe.h"
#include "cuda/cuda_device.h"
#include "device_ops.h"
#include "model_config.h"
#include "model_weights.h"
#include "rill.h"
#include "thread_pool.h"
#include "validate.h"

#define RILL_ERR_CAP 512

struct rill_engine {
  rill_model_config cfg;
  rill_model_weights w;
  rill_kv_pool kv;     /* every layer, or with a split only the full-attention layers */
  rill_kv_pool kv_win; /* the sliding layers when the engine splits (info.sliding_window > 0; empty otherwise),
                          addressed by the batch's sliding_block_tables */
  /* Layer l's KV is layer kv_layer[l] of kv_win when kv_split and cfg.layer_sliding[l], else of kv. */
  int32_t kv_layer[RILL_MAX_TYPED_LAYERS];
  int kv_split;
  rill_pool *pool;
  const rill_kernels *k;
  rill_limits lim;
  rill_info info;
  int32_t max_rows; /* most logits rows a step computes */
  int32_t qkv_dim;  /* (heads + 2 × kv_heads) × head_dim */

  /* Per fed token, [max_batch_tokens × width]. */
  float *x, *xn, *qkv, *attn, *proj, *gu, *act;
  float *rope_cos, *rope_sin; /* [T × head_dim / 2] */
  int64_t *slot_block;        /* [T] block id of the token's KV slot */
  int32_t *slot_in_block;     /* [T] */
  int64_t *slot_win_block;    /* [T] with a split: block id of the token's slot in the sliding pool */
  int32_t *tok_seq;           /* [T] the sequence each token belongs to */
  int32_t *attn_groups;       /* [T + 1] first token of each attention group of the step (cpu/forward.c), then T */
  size_t attn_rows;           /* query rows of one attention group: rill_attn_group_tokens(G) · G */
  int8_t *xq;                 /* int8 activations, [T × widest row in blocks × 32] */
  float *xs;                  /* their scales */
  float *inv_freq;            /* [head_dim / 2] */
  float *att_scratch;         /* per thread: attn_rows × max_positions scores, then attn_rows × head_dim sums */
  size_t att_scratch_stride;  /* floats per thread */
  int32_t *rows;              /* [max_batch_tokens] fed-token index of each logits row */
  float *row_hidden;          /* [max_rows × hidden] */
  float *logits;              /* [max_rows × vocab] */
  void *sample_scratch;
  rill_moe_scratch moe; /* gpt-oss's router logits and expert buffers (empty for dense models) */

  rill_device dev; /* the device the steps run on: rill_cpu_device(this engine), or rill_cuda_device(cuda) */
  rill_cuda *cuda; /* the CUDA device when it runs the forward pass (dev's state); NULL on the CPU device */
  const rill_step_batch *batch; /* the batch rill_forward is running, for the CPU device's operations; NULL between */
  const rill_device_ops *ops;   /* what rill_forward runs: rill_cpu_ops (tests may install wrappers around them) */

  /* The draft model (NULL without one): a whole engine of its own (weights, a KV pool of the same num_blocks and
   * block_size addressed by the same block tables, buffers) that borrows this engine's thread pool. */
  struct rill_engine *draft;
  int owns_pool;
  /* The draft's per-round batch, [max_seqs (+ 1)]: one fed token per proposing sequence. */
  int32_t *dr_tokens, *dr_positions, *dr_query_start, *dr_context_lens;
  int32_t *dr_left;    /* proposals still to make */
  int32_t *dr_cur_tok; /* the token the next round feeds */
  int32_t *dr_cur_pos; /* position of the last accepted token */

  /* The EAGLE-3 head (NULL without one; never together with a draft model): see eagle3.h. */
  struct rill_eagle3 *eagle3;

  char err[RILL_ERR_CAP];
};

/* Which fed tokens get logits. */
typedef enum rill_rows {
  RILL_ROWS_SAMPLED, /* the last draft_counts + 1 tokens of each sequence with sample_flags, into engine->logits */
  RILL_ROWS_ALL,     /* every fed token, into out ([T × V]) */
  RILL_ROWS_LAST,    /* the last fed token of each sequence that feeds any, into engine->logits (draft proposals) */
  RILL_ROWS_NONE     /* none: only the KV is written (the draft model keeping up with the target) */
} rill_rows;

/* Runs the layers over the batch's fed tokens (writing their K/V) and then the final norm and output projection for
 * the rows `mode` picks, their count in *num_rows. The batch must have been validated, except that internal
 * RILL_ROWS_LAST batches may give a sequence no fed tokens (it is then skipped). */
rill_status rill_forward(rill_engine *e, const rill_step_batch *b, rill_rows mode, float *out, int32_t *num_rows);

/* The CPU device's operations over an engine's host buffers (dev: the rill_engine; ffi/devices/cpu/forward.c). */
extern const rill_device_ops rill_cpu_ops;

/* The CPU device as the engine drives it, over engine e's host buffers, sampler-less (the engine samples on the host). */
rill_device rill_cpu_device(rill_engine *e);

#endif /* RILL_ENGINE_H */
