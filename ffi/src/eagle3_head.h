/*
 * An EAGLE-3 draft head read from the checkpoint layout the public heads use: config.json (LlamaForCausalLMEagle3
 * style: one decoder layer with its own hidden and intermediate sizes, heads, RoPE settings; optional
 * draft_vocab_size and eagle_config.eagle_aux_hidden_state_layer_ids) and the tensors fc, midlayer.*, norm, lm_head,
 * optional d2t (target id = draft id + d2t[draft id]) and embed_tokens. Every tensor is checked for presence, dtype
 * and shape against the config and the target before anything is converted; t2d is ignored.
 */
#ifndef RILL_EAGLE3_HEAD_H
#define RILL_EAGLE3_HEAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "matrix.h"
#include "model_config.h"
#include "thread_pool.h"

typedef struct rill_eagle3_head {
  /* The head's own sizes and RoPE (num_layers 1, vocab_size the target's); head_dim, heads, eps as configured. */
  rill_model_config cfg;
  int32_t draft_vocab;   /* rows of lm_head */
  int32_t target_hidden; /* fc takes 3 × this */
  /* The residual stream is captured at the input of target layer taps[i] (0: the embeddings; num_layers: after the
   * last layer). A configured id j is the output of target layer j, so tap j + 1; the default is the engines'
   * (2, L/2, L − 3), each clamped to 0..L for targets of fewer than four layers. */
  int32_t taps[3];
  bool own_embed;      /* embed_tokens in the checkpoint; otherwise the target's embeddings serve */
  rill_matrix embed;   /* [vocab, hidden] when own_embed */
  rill_matrix fc;      /* [hidden, 3 × target_hidden] */
  float *input_norm;   /* [hidden]: on the token embedding */
  float *hidden_norm;  /* [hidden]: on the fed hidden state */
  float *post_norm;    /* [hidden] */
  float *final_norm;   /* [hidden] */
  rill_matrix qkv;     /* rows q (heads × head_dim), k, v (kv_heads × head_dim each); cols 2 × hidden */
  rill_matrix o;       /* [hidden, heads × head_dim] */
  rill_matrix gate_up; /* [2 × intermediate, hidden] */
  rill_matrix down;    /* [hidden, intermediate] */
  rill_matrix lm_head; /* [draft_vocab, hidden] */
  int32_t *d2t;        /* [draft_vocab]: the target id of each draft id (the identity without d2t) */
  size_t bytes;        /* weights as held */
} rill_eagle3_head;

/* True when dir/config.json names an EAGLE-3 architecture (an "architectures" entry containing "Eagle3"); false for
 * anything else, unreadable files included (the ordinary loader then reports those). */
bool rill_eagle3_is_head(const char *dir);

/* Loads dir against the target's config (vocabulary, hidden size, layer count). Weights are held in bf16 when fc is
 * stored in BF16, else fp32; conversion runs on the pool's threads. On failure h is empty and err holds one line. */
rill_status rill_eagle3_head_load(const char *dir, const rill_model_config *target, rill_pool *pool,
                                  rill_eagle3_head *h, char *err, size_t err_cap);
void rill_eagle3_head_free(rill_eagle3_head *h);

#endif /* RILL_EAGLE3_HEAD_H */
