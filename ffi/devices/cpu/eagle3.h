/*
 * EAGLE-3 speculation inside rill_step (CPU device). The target's forward pass captures its residual stream at the
 * head's three tapped layers for every fed token (rill_eagle3_capture); the head then keeps two paged stores
 * addressed by the step's block tables, like the draft model's KV pool, so prefix sharing, chunked prefill and
 * preemption keep it in step:
 *   - features: g_p = fc(concat of the taps at p) for every fed position p;
 *   - the head's own KV (one layer): slot p holds the head's keys and values for the pair (g_{p-1}, token at p), at
 *     RoPE position p − 1 (the published heads' convention: features of p − 1 with the next token). Slot 0 holds no
 *     pair and is never read. Both depend only on the tokens at 0..p, so a shared prefix block is valid for every
 *     sequence listing it.
 * Proposals: for a sequence whose last accepted token a sits at position P, round 0 runs the head's layer on
 * (g_{P-1}, a) at slot P; round j feeds the previous round's pre-norm hidden state with its greedy token (mapped to a
 * target id through d2t) at slot P + j. Later steps recompute those slots from the target's real features.
 */
#ifndef RILL_EAGLE3_H
#define RILL_EAGLE3_H

#include "eagle3_head.h"
#include "engine.h"

typedef struct rill_eagle3 rill_eagle3;

/* Loads the head in dir for the CPU engine e (its limits, block geometry and KV dtype) and allocates every buffer
 * a step needs. On failure writes one line into err. */
rill_status rill_eagle3_create(rill_engine *e, const char *dir, rill_eagle3 **out, char *err, size_t err_cap);
void rill_eagle3_destroy(rill_eagle3 *x);
size_t rill_eagle3_weight_bytes(const rill_eagle3 *x);
size_t rill_eagle3_state_bytes(const rill_eagle3 *x); /* the head's KV and feature stores */
const rill_eagle3_head *rill_eagle3_head_of(const rill_eagle3 *x);

/* Called by the target's forward pass with its residual stream x ([T × hidden]) at the input of layer `layer_input`
 * (0: the embeddings, num_layers: after the last layer); keeps the rows of the tapped layers. */
void rill_eagle3_capture(rill_eagle3 *x, int32_t layer_input, const float *resid, int32_t T);

/* After the target's forward pass over b: features and the head's KV for b's fed tokens. */
rill_status rill_eagle3_follow(rill_engine *e, const rill_step_batch *b);

/* rill_eagle3_follow, then for b->propose_counts (if any) the chain of greedy proposals; contract as
 * rill_draft_propose. */
rill_status rill_eagle3_propose(rill_engine *e, const rill_step_batch *b, rill_step_result *r);

/* The last proposal round's draft-vocabulary logits, [sequences proposing in that round × draft_vocab], in batch
 * order, and their count (for tests against a reference). */
const float *rill_eagle3_last_logits(const rill_eagle3 *x, int32_t *rows);
/* The same round's pre-norm hidden states, [rows × head hidden] (tests). */
const float *rill_eagle3_last_hidden(const rill_eagle3 *x, int32_t *rows);
/* The last forward pass's captured taps, [fed tokens × 3 × target hidden] in batch order, tap i at i × target hidden
 * of each row (tests). */
const float *rill_eagle3_last_taps(const rill_eagle3 *x, int32_t *rows);

#endif /* RILL_EAGLE3_H */
