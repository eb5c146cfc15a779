/*
 * A Hugging Face config.json read into the numbers the forward pass needs. Supported: LlamaForCausalLM (Llama 1/2/3.x,
 * rope_scaling "llama3" or "linear"), MistralForCausalLM, Qwen2ForCausalLM (q/k/v bias), Qwen3ForCausalLM (per-head
 * q/k RMSNorm). Anything else is RILL_ERR_MODEL naming what is unsupported.
 */
#ifndef RILL_MODEL_CONFIG_H
#define RILL_MODEL_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "rill.h"

typedef enum rill_rope_scaling { RILL_ROPE_NONE, RILL_ROPE_LINEAR, RILL_ROPE_LLAMA3 } rill_rope_scaling;

typedef struct rill_model_config {
  char architecture[64];
  int32_t vocab_size, hidden_size, intermediate_size, num_layers, num_heads, num_kv_heads, head_dim;
  int32_t max_positions; /* max_position_embeddings, capped at a sliding window that is in effect */
  float rms_norm_eps;
  float rope_theta;
  rill_rope_scaling rope_scaling;
  float rope_factor, rope_low_freq_factor, rope_high_freq_factor;
  int32_t rope_original_max_positions;
  bool tie_word_embeddings; /* as configured; a checkpoint without lm_head.weight is tied regardless */
  bool qkv_bias;            /* q/k/v projections carry a bias */
  bool o_bias;              /* o_proj carries a bias */
  bool qk_norm;             /* Qwen3: RMSNorm over each head of q and k before RoPE */
} rill_model_config;

/* Reads dir/config.json. */
rill_status rill_model_config_read(const char *dir, rill_model_config *cfg, char *err, size_t err_cap);

#endif /* RILL_MODEL_CONFIG_H */
