/*
 * gpt-oss's mixture-of-experts MLP on the CPU device: per token, the router's logits (computed by the caller) pick the
 * experts_per_tok largest (ties to the lower index), weighted by a softmax over those k; each chosen expert computes
 * h = W₁x + b₁ (gate and up interleaved by row), a = (clamp(up, ±limit) + 1) · g · σ(1.702 · g) with g = min(gate,
 * limit), y = W₂a + b₂; the token's x gains Σ wⱼ · yⱼ in the order the experts were picked.
 *
 * A step's tokens are grouped by expert, so each chosen expert's MXFP4 weights are read once per chunk of
 * RILL_MOE_CHUNK tokens for all the tokens routed to it. Each (token, expert) product goes through the same kernel
 * operations whatever else is routed there, and the weighted sum is per token, so results are batch invariant.
 */
#ifndef RILL_MOE_H
#define RILL_MOE_H

#include <stdint.h>

#include "kernels.h"
#include "model_config.h"
#include "model_weights.h"
#include "thread_pool.h"

/* Tokens whose expert products are computed together (bounds the scratch, not the batch). */
#define RILL_MOE_CHUNK 256

typedef struct rill_moe_task {
  int32_t expert, r0, r1;
} rill_moe_task;

typedef struct rill_moe_scratch {
  int32_t chunk;        /* tokens per chunk: min(RILL_MOE_CHUNK, the step's most tokens) */
  float *logits;        /* [max tokens × experts]: the caller's router output */
  int32_t *sel;         /* [chunk × k] chosen experts, by rank */
  float *weight;        /* [chunk × k] their softmax weights */
  int32_t *offset;      /* [experts + 1]: expert e's pairs are [offset[e], offset[e + 1]) */
  int32_t *pair_token;  /* [chunk × k] token of each pair, grouped by expert, tokens ascending within one */
  int32_t *pair_of;     /* [chunk × k] pair index of (token, rank) */
  /* Per pair: gathered input [hidden] and activation [I], both in MXFP4 order (kernels.h rill_mxfp4_xpos); gate/up
   * [2I] and expert output [hidden] in row order. */
  float *x, *gu, *act, *y;
  /* With int8_activations (the engine's dtype int8; off after alloc), x and act are also quantised once per pair into quantize_q8 blocks (xq, xs
   * and aq, as, in the same MXFP4 order) and the experts run gemm_mxfp4_q8: 8-bit activations, int32 block dots.
   * Without, gemm_mxfp4 over the fp32 activations. */
  int int8_activations;
  int8_t *xq, *aq;
  float *xs, *as;
  rill_moe_task *tasks;
  int32_t max_tasks;
} rill_moe_scratch;

/* With int8 activations, where the kernels have gemm_mxfp4_q8_g16: regroups every MoE layer's experts in place
 * (rill_mxfp4_group16, rows spread over the pool) and marks them group16, so rill_moe_forward reads them that way.
 * Experts whose rows are wider than RILL_MXFP4_G16_MAX_BLOCKS stay as released. */
void rill_moe_regroup_experts(rill_model_weights *w, const rill_kernels *k, rill_pool *pool);
rill_status rill_moe_scratch_alloc(rill_moe_scratch *s, const rill_model_config *c, int32_t max_tokens);
void rill_moe_scratch_free(rill_moe_scratch *s);

/* x[t] += the layer's MoE output for xn[t], t < T; s->logits must hold the router's logits (bias not yet added). */
void rill_moe_forward(const rill_model_config *c, const rill_layer_weights *L, const rill_kernels *k, rill_pool *pool,
                      rill_moe_scratch *s, const float *xn, int T, float *x);

#endif /* RILL_MOE_H */
