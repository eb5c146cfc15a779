/*
 * The weights of a decoder-only transformer (Llama / Mistral / Qwen2 / Qwen3 / gpt-oss layout) read from a checkpoint:
 * every tensor is checked for presence, dtype (F32, F16 or BF16; U8 for MXFP4 blocks and scales) and shape before
 * anything is converted. gpt-oss's experts stay MXFP4 whatever the weight type; its router is held in fp32 (E × hidden
 * values: routing is a discrete choice that a rounded router would flip on near-ties).
 */
#ifndef RILL_MODEL_WEIGHTS_H
#define RILL_MODEL_WEIGHTS_H

#include <stdbool.h>
#include <stddef.h>

#include "matrix.h"
#include "model_config.h"
#include "mxfp4.h"
#include "safetensors.h"

typedef struct rill_layer_weights {
  float *attn_norm, *ffn_norm; /* [hidden] */
  float *q_norm, *k_norm;      /* [head_dim] when qk_norm */
  rill_matrix qkv;             /* rows: q (heads × head_dim), k, v (kv_heads × head_dim each); cols: hidden */
  float *qkv_bias;             /* [qkv.rows] or NULL */
  rill_matrix o;               /* rows: hidden; cols: heads × head_dim */
  float *o_bias;               /* [hidden] or NULL */
  rill_matrix gate_up;         /* rows: gate (intermediate), then up (intermediate); cols: hidden */
  rill_matrix down;            /* rows: hidden; cols: intermediate */
  /* gpt-oss (cfg num_experts > 0; gate_up and down then stay empty). */
  float *sinks;                /* [heads]: each query head's sink logit */
  rill_matrix router;          /* [experts, hidden], fp32 */
  float *router_bias;          /* [experts] */
  rill_mxfp4_experts experts_gate_up; /* rows 2 × intermediate, gate and up interleaved (2i gate, 2i + 1 up) */
  rill_mxfp4_experts experts_down;    /* rows hidden, cols intermediate */
} rill_layer_weights;

typedef struct rill_model_weights {
  rill_matrix embed;   /* [vocab, hidden]; also the output projection when tied */
  rill_matrix lm_head; /* [vocab, hidden] when not tied */
  bool tied;
  float *final_norm; /* [hidden] */
  rill_layer_weights *layers;
  int32_t num_layers;
  size_t bytes; /* as held */
} rill_model_weights;

/* The weight type a checkpoint holds by default: BF16 checkpoints stay bf16, everything else becomes fp32. */
rill_wtype rill_checkpoint_default_wtype(const rill_checkpoint *ck);

/* Conversion runs on the pool's threads. */
rill_status rill_model_weights_load(const rill_checkpoint *ck, const char *ck_name, const rill_model_config *cfg,
                                    rill_wtype type, rill_pool *pool, rill_model_weights *w, char *err,
                                    size_t err_cap);
/* Regroups every INT8 matrix a product reads (the layers' and the output projection, not an untied embedding) for
 * the CPU device's gemm_q8_g16 (matrix.h rill_matrix_group16). */
void rill_model_weights_group16(rill_model_weights *w, rill_pool *pool);
void rill_model_weights_free(rill_model_weights *w);

#endif /* RILL_MODEL_WEIGHTS_H */
