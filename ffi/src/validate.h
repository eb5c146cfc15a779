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
  int32_t sliding_window, num_sliding_blocks; /* a second pool for sliding layers when > 0 (rill_info's fields) */
} rill_limits;

/* RILL_OK, or RILL_ERR_INVALID_ARGUMENT with a one-line message naming the field written to err (NUL-terminated,
 * truncated to err_cap). err may be NULL when err_cap is 0. */
rill_status rill_validate_batch(const rill_step_batch *b, const rill_limits *lim, char *err, size_t err_cap);

/* With lim->sliding_window > 0: checks sliding_block_tables (validate_sliding.c) of a batch rill_validate_batch
 * accepted: present, and every entry a fed token's window reaches inside the sliding pool. Same error contract. */
rill_status rill_validate_sliding_tables(const rill_step_batch *b, const rill_limits *lim, char *err, size_t err_cap);

#endif /* RILL_VALIDATE_H */
