/*
 * A step batch with fixed-capacity storage for the C tests: fixture_init lays out B sequences with the given fed
 * counts and context lengths (consecutive positions, one distinct block per 16 tokens, greedy, no penalties, no
 * mask, no history); tests then change what they exercise and call fixture_batch.
 */
#ifndef RILL_BATCH_FIXTURE_H
#define RILL_BATCH_FIXTURE_H

#include <string.h>

#include "rill.h"
#include "validate.h"

#define FX_MAX_SEQS 8
#define FX_MAX_TOKENS 256
#define FX_STRIDE 32
#define FX_BLOCK 16
#define FX_MAX_MASK_ROWS 64
#define FX_MAX_MASK_WORDS 64
#define FX_MAX_HISTORY 512
#define FX_MAX_BIAS 64

typedef struct fixture {
  int32_t num_seqs, num_tokens, num_mask_rows, history_len, bias_len;
  int32_t seq_ids[FX_MAX_SEQS], tokens[FX_MAX_TOKENS], positions[FX_MAX_TOKENS], query_start[FX_MAX_SEQS + 1];
  int32_t context_lens[FX_MAX_SEQS], draft_counts[FX_MAX_SEQS];
  uint8_t sample_flags[FX_MAX_SEQS];
  int32_t block_tables[FX_MAX_SEQS * FX_STRIDE];
#define FX_SAMPLING_ARRAY(name, type, limit, neutral) type name[FX_MAX_SEQS];
  RILL_SAMPLING_FIELDS(FX_SAMPLING_ARRAY)
#undef FX_SAMPLING_ARRAY
  int32_t mask_row_start[FX_MAX_SEQS];
  uint32_t allowed_mask[FX_MAX_MASK_ROWS * FX_MAX_MASK_WORDS];
  int32_t history_start[FX_MAX_SEQS + 1], history[FX_MAX_HISTORY], history_prompt_lens[FX_MAX_SEQS];
  int32_t bias_start[FX_MAX_SEQS + 1], bias_ids[FX_MAX_BIAS];
  float bias_values[FX_MAX_BIAS];
} fixture;

/* fed[i] tokens (all token id 1) ending at context_lens ctx[i]; sequence i's blocks are i * FX_STRIDE + j. */
static inline void fixture_init(fixture *f, int32_t num_seqs, const int32_t *fed, const int32_t *ctx) {
  memset(f, 0, sizeof *f);
  f->num_seqs = num_seqs;
  int32_t t = 0;
  for (int32_t i = 0; i < num_seqs; i++) {
    f->seq_ids[i] = 100 + i;
    f->query_start[i] = t;
    for (int32_t j = 0; j < fed[i]; j++, t++) {
      f->tokens[t] = 1;
      f->positions[t] = ctx[i] - fed[i] + j;
    }
    f->context_lens[i] = ctx[i];
    f->sample_flags[i] = 1;
    for (int32_t j = 0; j < FX_STRIDE; j++)
      f->block_tables[i * FX_STRIDE + j] = j * FX_BLOCK < ctx[i] ? i * FX_STRIDE + j : -1;
#define FX_SAMPLING_NEUTRAL(name, type, limit, neutral) f->name[i] = (type)(neutral);
    RILL_SAMPLING_FIELDS(FX_SAMPLING_NEUTRAL)
#undef FX_SAMPLING_NEUTRAL
    f->seeds[i] = 1234 + (uint64_t)i;
    f->mask_row_start[i] = -1;
  }
  f->query_start[num_seqs] = t;
  f->num_tokens = t;
}

static inline rill_step_batch fixture_batch(fixture *f) {
  rill_step_batch b;
  memset(&b, 0, sizeof b);
  b.num_seqs = f->num_seqs;
  b.num_tokens = f->num_tokens;
  b.block_table_stride = FX_STRIDE;
  b.num_mask_rows = f->num_mask_rows;
  b.history_len = f->history_len;
  b.seq_ids = f->seq_ids;
  b.tokens = f->tokens;
  b.positions = f->positions;
  b.query_start = f->query_start;
  b.context_lens = f->context_lens;
  b.draft_counts = f->draft_counts;
  b.sample_flags = f->sample_flags;
  b.block_tables = f->block_tables;
  /* Models with a sliding-layer pool read the same ids there (engines for these batches size it like the main one). */
  b.sliding_block_tables = f->block_tables;
#define FX_SAMPLING_POINTER(name, type, limit, neutral) b.name = f->name;
  RILL_SAMPLING_FIELDS(FX_SAMPLING_POINTER)
#undef FX_SAMPLING_POINTER
  b.mask_row_start = f->mask_row_start;
  b.allowed_mask = f->allowed_mask;
  b.history_start = f->history_start;
  b.history = f->history;
  b.history_prompt_lens = f->history_prompt_lens;
  b.bias_len = f->bias_len;
  b.bias_start = f->bias_start;
  b.bias_ids = f->bias_ids;
  b.bias_values = f->bias_values;
  return b;
}

/* Limits that the fixture's defaults satisfy. */
static inline rill_limits fixture_limits(int32_t vocab_size) {
  rill_limits lim = {vocab_size, FX_STRIDE * FX_BLOCK, FX_BLOCK, FX_MAX_SEQS * FX_STRIDE, FX_MAX_TOKENS,
                     FX_MAX_SEQS, 8, 20, 0, 0};
  return lim;
}

#endif /* RILL_BATCH_FIXTURE_H */
