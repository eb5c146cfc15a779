/*
 * Draft-model speculation inside rill_step (rill.h): after the target has sampled, the draft model catches up on the
 * step's fed tokens and proposes greedy continuations of each sequence's accepted tokens, batched across sequences.
 */
#ifndef RILL_DRAFT_H
#define RILL_DRAFT_H

#include "engine.h"

/* e->draft must be set, b validated against e's limits (propose_counts included), r filled by rill_sample_batch for
 * b and its proposed buffers non-NULL when b->propose_counts is. Writes proposed_counts and proposed. */
rill_status rill_draft_propose(rill_engine *e, const rill_step_batch *b, rill_step_result *r);

/* Only the KV side: the draft model processes b's fed tokens (rill_forward_logits keeps it in step too). */
rill_status rill_draft_follow(rill_engine *e, const rill_step_batch *b);

#endif /* RILL_DRAFT_H */
