/*
 * Output buffers of a speculative rill_step for the tests: up to MB_MAX_SEQS sequences, each with up to KMAX drafts
 * verified (KMAX + 1 tokens) and KMAX proposals, with top-20 logprobs. The including test defines KMAX first; it is the
 * stride of tokens (KMAX + 1) and proposed (KMAX) per sequence.
 */
#ifndef RILL_TEST_SPEC_STEP_OUTPUTS_H
#define RILL_TEST_SPEC_STEP_OUTPUTS_H

#include "rill.h"
#include "test_model_batch.h"

#ifndef KMAX
#error "define KMAX (the most drafts and proposals per sequence) before including spec_step_outputs.h"
#endif

typedef struct outputs {
  int32_t counts[MB_MAX_SEQS], tokens[MB_MAX_SEQS * (KMAX + 1)], proposed_counts[MB_MAX_SEQS],
      proposed[MB_MAX_SEQS * KMAX];
  float logprobs[MB_MAX_SEQS * (KMAX + 1)], top_lp[MB_MAX_SEQS * (KMAX + 1) * 20];
  int32_t top_ids[MB_MAX_SEQS * (KMAX + 1) * 20];
} outputs;

/* The step result that writes into o. */
static inline rill_step_result result_of(outputs *o) {
  rill_step_result r = {.counts = o->counts, .tokens = o->tokens, .logprobs = o->logprobs, .top_ids = o->top_ids,
                        .top_logprobs = o->top_lp, .proposed_counts = o->proposed_counts, .proposed = o->proposed};
  return r;
}

#endif /* RILL_TEST_SPEC_STEP_OUTPUTS_H */
