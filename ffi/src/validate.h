/*
 * Validation of a step batch against the engine's limits (docs/backend-step.md). Every index the forward pass and
 * the sampler use is checked here first, so after RILL_OK nothing downstream reads out of bounds.
 */
#ifndef RILL_VALIDATE_H
#define RILL_VALIDATE_H

#include <stddef.h>
#include <stdint.h>

#include "rill.h"

typedef struct rill_limits {
  int32_t vocab_size, max_positions, block_size, num_blocks, max_batch_tokens, max_seqs, max_drafts, max_top_logprobs;
} rill_limits;

/* RILL_OK, or RILL_ERR_INVALID_ARGUMENT with a one-line message naming the field written to err (NUL-terminated,
 * truncated to err_cap). err may be NULL when err_cap is 0. */
rill_status rill_validate_batch(const rill_step_batch *b, const rill_limits *lim, char *err, size_t err_cap);

#endif /* RILL_VALIDATE_H */
