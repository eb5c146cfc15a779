/*
 * A Hugging Face config.json read into the numbers the forward pass needs. Supported: LlamaForCausalLM (Llama 1/2/3.x,
 * rope_scaling "llama3" or "linear"), MistralForCausalLM, Qwen2ForCausalLM (q/k/v bias), Qwen3ForCausalLM (per-head
 * q/k RMSNorm), GptOssForCausalLM (mixture of MXFP4 experts, attention sinks, sliding-window layers, YaRN). Anything
 * else is RILL_ERR_MODEL naming what is unsupported.
 */
#ifndef RILL_MODEL_CONFIG_H
#define RILL_MODEL_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "rill.h"

typedef enum rill_rope_scaling { RILL_ROPE_NONE, RILL_ROPE_LINEAR, RILL_ROPE_LLAMA3, RILL_ROPE_YARN } rill_rope_scaling;

/* The most layers a layer_types list may name. */
#define RILL_MAX_TYPED_LAYERS 1024

typedef struct rill_model_config {
  char architecture[64];
  int32_t vocab_size, hidden_size, intermediate_size, num_layers, num_heads, num_kv_heads, head_dim;
  int32_t max_positions; /* max_position_embeddings, capped at a sliding window that is in effect */
  float rms_norm_eps;
  float rope_theta;
  rill_rope_scaling rope_scaling;
  float rope_factor, rope_low_freq_factor, rope_high_freq_factor;
  int32_t rope_original_max_positions;
  float rope_beta_fast, rope_beta_slow; /* YaRN: rotations bounding the interpolation ramp */
  bool rope_truncate;                   /* YaRN: ramp bounds floored / ceiled (transformers' default when absent) */
  float rope_attn_factor;               /* cos and sin are both multiplied by it (YaRN's concentration); else 1 */
  bool tie_word_embeddings; /* as configured; a checkpoint without lm_head.weight is tied regardless */
  bool qkv_bias;            /* q/k/v projections carry a bias */
  bool o_bias;              /* o_proj carries a bias */
  bool qk_norm;             /* Qwen3: RMSNorm over each head of q and k before RoPE */
  /* gpt-oss: each layer's MLP is a mixture of num_experts experts (MXFP4), experts_per_tok chosen per token, with
   * the clamped SwiGLU of swiglu_limit; every attention layer has one sink logit per query head; the layers marked in
   * layer_sliding attend to the last sliding_window positions only. num_experts 0: a dense model. */
  int32_t num_experts, experts_per_tok;
  float swiglu_limit;
  bool attn_sinks;
  int32_t sliding_window;                       /* 0: no layer slides */
  uint8_t layer_sliding[RILL_MAX_TYPED_LAYERS]; /* 1: layer i attends to its last sliding_window positions */
} rill_model_config;

/* Reads dir/config.json. */
rill_status rill_model_config_read(const char *dir, rill_model_config *cfg, char *err, size_t err_cap);

#endif /* RILL_MODEL_CONFIG_H */
