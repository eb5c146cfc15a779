/*
 * Sampling and draft verification of a validated step batch (docs/backend-step.md, "Sampling, specified once").
 * Logits never leave the library; this turns them into accepted tokens, logprobs and top alternatives.
 */
#ifndef RILL_SAMPLE_H
#define RILL_SAMPLE_H

#include <stddef.h>
#include <stdint.h>

#include "rill.h"
#include "thread_pool.h"

/* Bytes of scratch rill_sample_batch needs for a vocabulary of vocab_size tokens (0 when vocab_size < 1). */
size_t rill_sample_scratch_bytes(int32_t vocab_size);

/*
 * The batch must have passed rill_validate_batch with the same vocab_size, max_drafts and max_top_logprobs.
 * logits: the rows to sample in batch order: for each sequence i with sample_flags[i], draft_counts[i] + 1 rows of
 * vocab_size floats (the rows after its last draft_counts[i] + 1 fed tokens). scratch: rill_sample_scratch_bytes(V)
 * bytes, any alignment of max_align_t. Writes counts for every sequence (0 when not sampled) and, for sampled ones,
 * tokens/logprobs and, when logprobs[i] > 0, top alternatives in their result rows (row width max_drafts + 1).
 * Fails with RILL_ERR_INVALID_ARGUMENT (message in err) when a sampled row has no allowed token.
 */
rill_status rill_sample_batch(const rill_step_batch *b, const float *logits, int32_t vocab_size, int32_t max_drafts,
                              int32_t max_top_logprobs, void *scratch, rill_step_result *out, char *err,
                              size_t err_cap);

/* Bytes of scratch rill_sample_batch_pooled needs: a rill_sample_scratch_bytes(V) part per thread, per-thread failure
 * records and the row offsets of max_seqs sequences (0 when any argument is < 1). */
size_t rill_sample_pool_scratch_bytes(int32_t vocab_size, int threads, int32_t max_seqs);

/*
 * rill_sample_batch with its sequences spread over pool's threads (each sequence on one thread, with that thread's
 * scratch): the same outputs bit for bit, and on failure the same status and message (the lowest failing sequence's).
 * scratch: rill_sample_pool_scratch_bytes(V, rill_pool_threads(pool), max_seqs) bytes, 64-byte aligned; a batch of
 * more than max_seqs sequences is refused.
 */
rill_status rill_sample_batch_pooled(const rill_step_batch *b, const float *logits, int32_t vocab_size,
                                     int32_t max_drafts, int32_t max_top_logprobs, int32_t max_seqs, rill_pool *pool,
                                     void *scratch, rill_step_result *out, char *err, size_t err_cap);

#endif /* RILL_SAMPLE_H */
