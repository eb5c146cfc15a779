#include "validate.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>

#include "fail.h"

#define FAIL(...) return rill_fail(err, err_cap, RILL_ERR_INVALID_ARGUMENT, __VA_ARGS__)

#define REQUIRE_PTR(field)                                              \
  do {                                                                  \
    if (b->field == NULL) FAIL("batch." #field " is NULL");             \
  } while (0)

static int finite_f(float x) { return isfinite(x) != 0; }

/* The limit kinds of RILL_SAMPLING_FIELDS (rill.h): whether a value (widened to double, exact for every field type
 * but the 64-bit ANY) is accepted, and the phrase an error gives. */
static int limit_NONNEG(double v, const rill_limits *lim) { return (void)lim, isfinite(v) && v >= 0; }
static int limit_UNIT(double v, const rill_limits *lim) { return (void)lim, v >= 0 && v <= 1; }
static int limit_COUNT(double v, const rill_limits *lim) { return (void)lim, v >= 0; }
static int limit_FINITE(double v, const rill_limits *lim) { return (void)lim, isfinite(v) != 0; }
static int limit_POSITIVE(double v, const rill_limits *lim) { return (void)lim, isfinite(v) && v > 0; }
static int limit_ANY(double v, const rill_limits *lim) { return (void)v, (void)lim, 1; }
static int limit_TOP_LOGPROBS(double v, const rill_limits *lim) { return v >= -1 && v <= lim->max_top_logprobs; }

static const char *limit_text_NONNEG(const rill_limits *lim, char *buf, size_t cap) {
  return (void)lim, (void)buf, (void)cap, "finite and >= 0";
}
static const char *limit_text_UNIT(const rill_limits *lim, char *buf, size_t cap) {
  return (void)lim, (void)buf, (void)cap, "in 0..1";
}
static const char *limit_text_COUNT(const rill_limits *lim, char *buf, size_t cap) {
  return (void)lim, (void)buf, (void)cap, ">= 0";
}
static const char *limit_text_FINITE(const rill_limits *lim, char *buf, size_t cap) {
  return (void)lim, (void)buf, (void)cap, "finite";
}
static const char *limit_text_POSITIVE(const rill_limits *lim, char *buf, size_t cap) {
  return (void)lim, (void)buf, (void)cap, "finite and > 0";
}
static const char *limit_text_ANY(const rill_limits *lim, char *buf, size_t cap) {
  return (void)lim, (void)buf, (void)cap, "anything";
}
static const char *limit_text_TOP_LOGPROBS(const rill_limits *lim, char *buf, size_t cap) {
  snprintf(buf, cap, "in -1..%d (max_top_logprobs)", lim->max_top_logprobs);
  return buf;
}

/* RILL_SAMPLING_FIELDS agrees with rill_step_batch: each entry is the struct's field of that name and type, the
 * entries sit in consecutive pointer slots in list order, and mask_row_start follows the last (so a field added to
 * the struct between them, or to the list alone, or reordered, fails to compile). */
enum {
#define SAMPLING_INDEX(name, type, limit, neutral) sampling_index_##name,
  RILL_SAMPLING_FIELDS(SAMPLING_INDEX)
#undef SAMPLING_INDEX
  sampling_count
};
#define SAMPLING_AGREES(name, type, limit, neutral)                                                              \
  _Static_assert(_Generic(((rill_step_batch *)0)->name, const type *: 1, default: 0),                            \
                 "rill_step_batch." #name " is not const " #type " *");                                          \
  _Static_assert(offsetof(rill_step_batch, name) ==                                                              \
                     offsetof(rill_step_batch, temperature) + sampling_index_##name * sizeof(const void *),     \
                 "rill_step_batch." #name " is out of RILL_SAMPLING_FIELDS order");
RILL_SAMPLING_FIELDS(SAMPLING_AGREES)
#undef SAMPLING_AGREES
_Static_assert(offsetof(rill_step_batch, mask_row_start) ==
                   offsetof(rill_step_batch, temperature) + sampling_count * sizeof(const void *),
               "rill_step_batch has a sampling field missing from RILL_SAMPLING_FIELDS");

rill_status rill_validate_batch(const rill_step_batch *b, const rill_limits *lim, char *err, size_t err_cap) {
  if (err != NULL && err_cap > 0) err[0] = '\0';
  if (b == NULL) FAIL("batch is NULL");
  if (lim == NULL) FAIL("limits are NULL");
  if (lim->vocab_size < 1 || lim->max_positions < 1 || lim->block_size < 1 || lim->num_blocks < 1 ||
      lim->max_batch_tokens < 1 || lim->max_seqs < 1 || lim->max_drafts < 0 || lim->max_top_logprobs < 0)
    FAIL("engine limits are invalid");

  const int32_t B = b->num_seqs, T = b->num_tokens, V = lim->vocab_size;
  if (B < 1 || B > lim->max_seqs) FAIL("num_seqs = %d is outside 1..%d (max_seqs)", B, lim->max_seqs);
  if (T < B || T > lim->max_batch_tokens)
    FAIL("num_tokens = %d is outside %d (num_seqs)..%d (max_batch_tokens)", T, B, lim->max_batch_tokens);
  if (b->block_table_stride < 1) FAIL("block_table_stride = %d must be at least 1", b->block_table_stride);
  if (b->num_mask_rows < 0) FAIL("num_mask_rows = %d is negative", b->num_mask_rows);
  if (b->history_len < 0) FAIL("history_len = %d is negative", b->history_len);
  if (b->bias_len < 0) FAIL("bias_len = %d is negative", b->bias_len);

  REQUIRE_PTR(seq_ids);
  REQUIRE_PTR(tokens);
  REQUIRE_PTR(positions);
  REQUIRE_PTR(query_start);
  REQUIRE_PTR(context_lens);
  REQUIRE_PTR(draft_counts);
  REQUIRE_PTR(sample_flags);
  REQUIRE_PTR(block_tables);
#define REQUIRE_SAMPLING_PTR(name, type, limit, neutral) REQUIRE_PTR(name);
  RILL_SAMPLING_FIELDS(REQUIRE_SAMPLING_PTR)
#undef REQUIRE_SAMPLING_PTR
  REQUIRE_PTR(mask_row_start);
  REQUIRE_PTR(history_start);
  REQUIRE_PTR(history_prompt_lens);
  REQUIRE_PTR(bias_start);
  if (b->bias_len > 0 && (b->bias_ids == NULL || b->bias_values == NULL))
    FAIL("batch.bias_ids or batch.bias_values is NULL with bias_len %d", b->bias_len);
  if (b->num_mask_rows > 0 && b->allowed_mask == NULL) FAIL("batch.allowed_mask is NULL with %d mask rows", b->num_mask_rows);
  if (b->history_len > 0 && b->history == NULL) FAIL("batch.history is NULL with history_len %d", b->history_len);

  for (int32_t t = 0; t < T; t++) {
    if (b->tokens[t] < 0 || b->tokens[t] >= V)
      FAIL("tokens[%d] = %d is outside the vocabulary 0..%d", t, b->tokens[t], V - 1);
  }

  if (b->query_start[0] != 0) FAIL("query_start[0] = %d, must be 0", b->query_start[0]);
  if (b->query_start[B] != T) FAIL("query_start[%d] = %d, must equal num_tokens %d", B, b->query_start[B], T);
  for (int32_t i = 0; i < B; i++) {
    if (b->query_start[i + 1] <= b->query_start[i] || b->query_start[i + 1] > T)
      FAIL("query_start[%d] = %d is not increasing (query_start[%d] = %d; every sequence feeds at least one token)",
           i + 1, b->query_start[i + 1], i, b->query_start[i]);
  }

  if (b->history_start[0] < 0 || b->history_start[0] > b->history_len)
    FAIL("history_start[0] = %d is outside 0..%d (history_len)", b->history_start[0], b->history_len);
  for (int32_t i = 0; i < B; i++) {
    if (b->history_start[i + 1] < b->history_start[i] || b->history_start[i + 1] > b->history_len)
      FAIL("history_start[%d] = %d is outside %d..%d (history_len)", i + 1, b->history_start[i + 1],
           b->history_start[i], b->history_len);
  }
  for (int32_t h = b->history_start[0]; h < b->history_start[B]; h++) {
    if (b->history[h] < 0 || b->history[h] >= V)
      FAIL("history[%d] = %d is outside the vocabulary 0..%d", h, b->history[h], V - 1);
  }

  if (b->bias_start[0] < 0 || b->bias_start[0] > b->bias_len)
    FAIL("bias_start[0] = %d is outside 0..%d (bias_len)", b->bias_start[0], b->bias_len);
  for (int32_t i = 0; i < B; i++) {
    if (b->bias_start[i + 1] < b->bias_start[i] || b->bias_start[i + 1] > b->bias_len)
      FAIL("bias_start[%d] = %d is outside %d..%d (bias_len)", i + 1, b->bias_start[i + 1], b->bias_start[i],
           b->bias_len);
  }
  for (int32_t k = b->bias_start[0]; k < b->bias_start[B]; k++) {
    if (b->bias_ids[k] < 0 || b->bias_ids[k] >= V)
      FAIL("bias_ids[%d] = %d is outside the vocabulary 0..%d", k, b->bias_ids[k], V - 1);
    if (!finite_f(b->bias_values[k])) FAIL("bias_values[%d] = %g must be finite", k, (double)b->bias_values[k]);
  }

  const int32_t stride = b->block_table_stride;
  for (int32_t i = 0; i < B; i++) {
    const int32_t fed = b->query_start[i + 1] - b->query_start[i];
    const int32_t ctx = b->context_lens[i];
    if (ctx < fed || ctx > lim->max_positions)
      FAIL("context_lens[%d] = %d is outside %d (tokens fed)..%d (max_positions)", i, ctx, fed, lim->max_positions);
    const int32_t first = ctx - fed;
    for (int32_t j = 0; j < fed; j++) {
      const int32_t t = b->query_start[i] + j;
      if (b->positions[t] != first + j)
        FAIL("positions[%d] = %d, expected %d (sequence %d: consecutive, ending at context_lens - 1 = %d)", t,
             b->positions[t], first + j, i, ctx - 1);
    }
    const int64_t blocks = ((int64_t)ctx + lim->block_size - 1) / lim->block_size;
    if (blocks > stride)
      FAIL("block_table_stride = %d is too small for context_lens[%d] = %d (needs %lld blocks of %d)", stride, i, ctx,
           (long long)blocks, lim->block_size);
    for (int64_t j = 0; j < blocks; j++) {
      const int32_t blk = b->block_tables[(int64_t)i * stride + j];
      if (blk < 0 || blk >= lim->num_blocks)
        FAIL("block_tables[%d][%lld] = %d is outside the pool 0..%d", i, (long long)j, blk, lim->num_blocks - 1);
    }

    const uint8_t flag = b->sample_flags[i];
    if (flag > 1) FAIL("sample_flags[%d] = %d, must be 0 or 1", i, flag);
    const int32_t d = b->draft_counts[i];
    if (d < 0 || d > lim->max_drafts) FAIL("draft_counts[%d] = %d is outside 0..%d (max_drafts)", i, d, lim->max_drafts);
    if (d >= fed) FAIL("draft_counts[%d] = %d must be less than the %d tokens the sequence feeds", i, d, fed);
    if (d > 0 && flag == 0) FAIL("draft_counts[%d] = %d on a sequence that is not sampled (sample_flags[%d] = 0)", i, d, i);

    const int32_t k = b->propose_counts != NULL ? b->propose_counts[i] : 0;
    if (k < 0 || k > lim->max_drafts) FAIL("propose_counts[%d] = %d is outside 0..%d (max_drafts)", i, k, lim->max_drafts);
    if (k > 0 && flag == 0) FAIL("propose_counts[%d] = %d on a sequence that is not sampled (sample_flags[%d] = 0)", i, k, i);
    if (k > 0) {
      /* The draft model writes lookahead KV up to position context_lens + k - 1: those slots must exist too. */
      if ((int64_t)ctx + k > lim->max_positions)
        FAIL("propose_counts[%d] = %d: context_lens %d + proposals is over max_positions %d", i, k, ctx,
             lim->max_positions);
      const int64_t ahead = ((int64_t)ctx + k + lim->block_size - 1) / lim->block_size;
      if (ahead > stride)
        FAIL("block_table_stride = %d is too small for context_lens[%d] = %d plus %d proposals (needs %lld blocks)",
             stride, i, ctx, k, (long long)ahead);
      for (int64_t j = blocks; j < ahead; j++) {
        const int32_t blk = b->block_tables[(int64_t)i * stride + j];
        if (blk < 0 || blk >= lim->num_blocks)
          FAIL("block_tables[%d][%lld] = %d is outside the pool 0..%d (lookahead for propose_counts[%d] = %d)", i,
               (long long)j, blk, lim->num_blocks - 1, i, k);
      }
    }

    const int32_t m = b->mask_row_start[i];
    if (m != -1 && (m < 0 || (int64_t)m + d + 1 > b->num_mask_rows))
      FAIL("mask_row_start[%d] = %d: rows %d..%lld are outside the %d mask rows", i, m, m, (long long)m + d,
           b->num_mask_rows);

    const int32_t hlen = b->history_start[i + 1] - b->history_start[i];
    if (b->history_prompt_lens[i] < 0 || b->history_prompt_lens[i] > hlen)
      FAIL("history_prompt_lens[%d] = %d is outside 0..%d (its history length)", i, b->history_prompt_lens[i], hlen);

    char why[48];
#define CHECK_SAMPLING_LIMIT(name, type, limit, neutral)                                 \
    if (!limit_##limit((double)b->name[i], lim))                                        \
      FAIL(#name "[%d] = %g must be %s", i, (double)b->name[i], limit_text_##limit(lim, why, sizeof why));
    RILL_SAMPLING_FIELDS(CHECK_SAMPLING_LIMIT)
#undef CHECK_SAMPLING_LIMIT
  }
  return RILL_OK;
}
