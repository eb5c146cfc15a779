/*
 * The device interface, in two parts. rill_device: a step as the engine (engine.c) drives it on any device — the
 * forward pass of a validated batch with its logits rows, sampling on the device where the device has its own sampler,
 * and an EAGLE-3 head's proposals where the device holds one. rill_device_ops: the operations a decoder layer is made
 * of, which every device (ffi/devices/cpu, ffi/devices/cuda) implements over its own weights, KV pool and step
 * buffers, and the forward pass written once over them (rill_forward_layers). A device sets up a step (its batch's tokens, positions, block tables) before the pass and
 * computes the logits rows after it; in between only these operations run, in this order, so the CUDA device's graphs
 * capture exactly what an eager step enqueues.
 *
 * Every operation reads and writes the device's step buffers for the step's first T fed tokens: x (the residual
 * stream, fp32), qkv, attn, and the MLP's intermediates. `layer` is the decoder layer. Each returns RILL_OK or a
 * device error with a one-line reason in err.
 */
#ifndef RILL_DEVICE_OPS_H
#define RILL_DEVICE_OPS_H

#include <stddef.h>
#include <stdint.h>

#include "model_config.h"
#include "rill.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct rill_device {
  void *state; /* the device's own: passed to every function below */
  /* The forward pass of a validated batch. all_rows: every fed token's logits into out ([T × V], host memory);
   * otherwise the sampled rows (the last draft_counts + 1 tokens of each sequence with sample_flags, batch order) into
   * *logits (host memory the device owns, valid until its next call), their count in *num_rows. */
  rill_status (*forward)(void *state, const rill_step_batch *b, int all_rows, float *out, const float **logits,
                         int32_t *num_rows, char *err, size_t err_cap);
  /* Whether step samples this batch on the device (step NULL: the device has no sampler; the engine samples forward's
   * rows on the host). */
  int (*samples)(const void *state, const rill_step_batch *b);
  rill_status (*step)(void *state, const rill_step_batch *b, rill_step_result *r, char *err, size_t err_cap);
  /* Whether the device holds an EAGLE-3 head; after a step of b (r->counts and r->tokens filled), its chained
   * proposals for b->propose_counts into r (rill_step's contract); after rill_forward_logits, follow keeps the head's
   * state in step with the pass (NULL: the forward pass already did). */
  int (*has_head)(const void *state);
  rill_status (*propose)(void *state, const rill_step_batch *b, rill_step_result *r, char *err, size_t err_cap);
  rill_status (*follow)(void *state, const rill_step_batch *b, char *err, size_t err_cap);
  /* Frees what the device holds beyond the engine's own (NULL: nothing). */
  void (*destroy)(void *state);
} rill_device;

typedef rill_status (*rill_layer_op)(void *dev, int32_t layer, int32_t T, char *err, size_t err_cap);

typedef struct rill_device_ops {
  /* x = the embedding rows of the step's tokens (layer unused). */
  rill_layer_op embed;
  /* EAGLE-3: keep x as the residual stream at the input of `layer` (num_layers: the last layer's output) for the
   * head's taps. Called only when the device holds a head. */
  rill_layer_op tap;
  /* qkv = RMSNorm(x; attention norm) · Wqkvᵀ, q, k and v stacked per token. */
  rill_layer_op qkv;
  /* The q/k/v bias (where qkv left it out), q and k RMSNorms per head (Qwen3), RoPE on q and k at each token's
   * position, and k, v written into the token's slot of the layer's KV pool (the sliding layers' pool for a sliding
   * layer when the device splits them). */
  rill_layer_op rope_kv;
  /* attn = each token's attention over its sequence's cached positions up to its own (only the last sliding_window on
   * a sliding layer), with the layer's sinks as extra softmax columns; scale 1/√head_dim. */
  rill_layer_op attend;
  /* x += attn · Woᵀ + bo. */
  rill_layer_op attn_out;
  /* Dense MLP: gu = RMSNorm(x; FFN norm) · Wguᵀ (gate and up stacked). */
  rill_layer_op gate_up;
  /* Dense MLP: x += (SiLU(gate) · up) · Wdᵀ. */
  rill_layer_op down;
  /* Mixture of experts: xn = RMSNorm(x; FFN norm) and the router's logits xn · Wrᵀ (bias not yet added). */
  rill_layer_op router;
  /* Mixture of experts: per token the experts_per_tok largest biased logits, softmax over them, and x += Σ wₑ · yₑ with
   * yₑ = W₂ act(W₁ xn + b₁) + b₂ (gpt-oss's clamped SwiGLU), each expert's MXFP4 weights read once per group of
   * tokens routed to it. */
  rill_layer_op experts;
} rill_device_ops;

/* Embedding and every layer over the step's T fed tokens, the residual stream left in the device's x; with taps the
 * EAGLE-3 taps before each layer and after the last. Stops at the first failing operation. */
rill_status rill_forward_layers(const rill_device_ops *ops, void *dev, const rill_model_config *c, int32_t T, int taps,
                                char *err, size_t err_cap);

#ifdef __cplusplus
}
#endif
#endif /* RILL_DEVICE_OPS_H */
