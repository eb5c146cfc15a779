/*
 * Building step batches for the model tests: sequences are appended one by one with their fed tokens, first
 * position and block table; everything else is greedy with no penalties, mask or history.
 */
#ifndef RILL_TEST_MODEL_BATCH_H
#define RILL_TEST_MODEL_BATCH_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rill.h"

#define MB_MAX_SEQS 16
#define MB_MAX_TOKENS 2048
#define MB_STRIDE 256

typedef struct model_batch {
  int32_t num_seqs, num_tokens;
  int32_t seq_ids[MB_MAX_SEQS], tokens[MB_MAX_TOKENS], positions[MB_MAX_TOKENS], query_start[MB_MAX_SEQS + 1];
  int32_t context_lens[MB_MAX_SEQS], draft_counts[MB_MAX_SEQS];
  uint8_t sample_flags[MB_MAX_SEQS];
  int32_t block_tables[MB_MAX_SEQS * MB_STRIDE];
#define MB_SAMPLING_ARRAY(name, type, limit, neutral) type name[MB_MAX_SEQS];
  RILL_SAMPLING_FIELDS(MB_SAMPLING_ARRAY)
#undef MB_SAMPLING_ARRAY
  int32_t mask_row_start[MB_MAX_SEQS];
  int32_t history_start[MB_MAX_SEQS + 1], history_prompt_lens[MB_MAX_SEQS], bias_start[MB_MAX_SEQS + 1];
} model_batch;

static inline void mb_init(model_batch *m) { memset(m, 0, sizeof *m); }

/* Appends a sequence feeding tokens[0..n) at positions first_pos.. with block table table[0..table_len). */
static inline void mb_add(model_batch *m, int32_t seq_id, const int32_t *tokens, int32_t n, int32_t first_pos,
                          const int32_t *table, int32_t table_len, int sample, int32_t drafts) {
  int32_t i = m->num_seqs++;
  if (i >= MB_MAX_SEQS || m->num_tokens + n > MB_MAX_TOKENS || table_len > MB_STRIDE) {
    fprintf(stderr, "model_batch: capacity exceeded\n");
    exit(2);
  }
  m->seq_ids[i] = seq_id;
  m->query_start[i] = m->num_tokens;
  for (int32_t j = 0; j < n; j++) {
    m->tokens[m->num_tokens] = tokens[j];
    m->positions[m->num_tokens] = first_pos + j;
    m->num_tokens++;
  }
  m->query_start[i + 1] = m->num_tokens;
  m->context_lens[i] = first_pos + n;
  m->draft_counts[i] = drafts;
  m->sample_flags[i] = (uint8_t)(sample != 0);
  for (int32_t j = 0; j < MB_STRIDE; j++) m->block_tables[i * MB_STRIDE + j] = j < table_len ? table[j] : -1;
#define MB_SAMPLING_NEUTRAL(name, type, limit, neutral) m->name[i] = (type)(neutral);
  RILL_SAMPLING_FIELDS(MB_SAMPLING_NEUTRAL)
#undef MB_SAMPLING_NEUTRAL
  m->seeds[i] = 42;
  m->mask_row_start[i] = -1;
}

static inline rill_step_batch mb_batch(model_batch *m) {
  rill_step_batch b;
  memset(&b, 0, sizeof b);
  b.num_seqs = m->num_seqs;
  b.num_tokens = m->num_tokens;
  b.block_table_stride = MB_STRIDE;
  b.seq_ids = m->seq_ids;
  b.tokens = m->tokens;
  b.positions = m->positions;
  b.query_start = m->query_start;
  b.context_lens = m->context_lens;
  b.draft_counts = m->draft_counts;
  b.sample_flags = m->sample_flags;
  b.block_tables = m->block_tables;
  /* Models with a sliding-layer pool read the same ids there (the tests size that pool at least as large). */
  b.sliding_block_tables = m->block_tables;
#define MB_SAMPLING_POINTER(name, type, limit, neutral) b.name = m->name;
  RILL_SAMPLING_FIELDS(MB_SAMPLING_POINTER)
#undef MB_SAMPLING_POINTER
  b.mask_row_start = m->mask_row_start;
  for (int32_t i = 0; i <= m->num_seqs; i++) m->history_start[i] = 0;
  b.history_start = m->history_start;
  b.history_prompt_lens = m->history_prompt_lens;
  for (int32_t i = 0; i <= m->num_seqs; i++) m->bias_start[i] = 0;
  b.bias_start = m->bias_start;
  return b;
}

/* Reads a whole file into a NUL-terminated malloc'd buffer, or NULL. */
static inline char *mb_read_file(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (f == NULL) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *buf = (char *)malloc((size_t)n + 1);
  if (buf != NULL && fread(buf, 1, (size_t)n, f) != (size_t)n) {
    free(buf);
    buf = NULL;
  }
  fclose(f);
  if (buf != NULL) {
    buf[n] = '\0';
    *len = (size_t)n;
  }
  return buf;
}

#endif /* RILL_TEST_MODEL_BATCH_H */
