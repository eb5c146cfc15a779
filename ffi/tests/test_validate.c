/* rill_validate_batch: a valid batch passes; each malformed field is rejected with a message naming it. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "batch_fixture.h"
#include "check.h"
#include "validate.h"

#define V 100

/* Three sequences: a prefill chunk (not sampled), a decode with 2 drafts, a decode with history and a mask. */
static void valid(fixture *f) {
  const int32_t fed[3] = {20, 3, 1}, ctx[3] = {20, 40, 17};
  fixture_init(f, 3, fed, ctx);
  f->sample_flags[0] = 0;
  f->draft_counts[1] = 2;
  f->logprobs[1] = 5;
  f->temperature[2] = 0.7f;
  f->top_p[2] = 0.9f;
  f->top_k[2] = 40;
  f->min_p[2] = 0.05f;
  f->num_mask_rows = 4;
  f->mask_row_start[1] = 1;
  f->mask_row_start[2] = 0;
  f->history_len = 6;
  const int32_t h[6] = {5, 6, 7, 8, 9, 10};
  memcpy(f->history, h, sizeof h);
  f->history_start[0] = 0;
  f->history_start[1] = 0;
  f->history_start[2] = 2;
  f->history_start[3] = 6;
  f->history_prompt_lens[1] = 1;
  f->history_prompt_lens[2] = 4;
  f->bias_len = 3;
  const int32_t ids[3] = {3, 0, 12};
  const float values[3] = {-100.0f, 5.0f, 100.0f};
  memcpy(f->bias_ids, ids, sizeof ids);
  memcpy(f->bias_values, values, sizeof values);
  f->bias_start[0] = 0;
  f->bias_start[1] = 1;
  f->bias_start[2] = 1;
  f->bias_start[3] = 3;
}

typedef void (*mutation)(fixture *f, rill_step_batch *b, rill_limits *lim);

#define MUT(name, body) \
  static void name(fixture *f, rill_step_batch *b, rill_limits *lim) { \
    (void)f;                                                           \
    (void)b;                                                           \
    (void)lim;                                                         \
    body;                                                              \
  }

MUT(m_null_batch, (void)0)
MUT(m_zero_seqs, b->num_seqs = 0)
MUT(m_many_seqs, b->num_seqs = lim->max_seqs + 1)
MUT(m_few_tokens, b->num_tokens = 2)
MUT(m_many_tokens, lim->max_batch_tokens = 23)
MUT(m_stride, b->block_table_stride = 0)
MUT(m_neg_mask_rows, b->num_mask_rows = -1)
MUT(m_neg_history, b->history_len = -3)
MUT(m_null_tokens, b->tokens = NULL)
MUT(m_null_seeds, b->seeds = NULL)
MUT(m_null_hist_prompt, b->history_prompt_lens = NULL)
MUT(m_null_mask, b->allowed_mask = NULL)
MUT(m_null_history, b->history = NULL)
MUT(m_token_high, f->tokens[21] = V)
MUT(m_token_neg, f->tokens[0] = -1)
MUT(m_qs0, f->query_start[0] = 1)
MUT(m_qs_end, f->query_start[3] = 23)
MUT(m_qs_flat, f->query_start[2] = f->query_start[1])
MUT(m_qs_back, f->query_start[2] = 5)
MUT(m_pos_gap, f->positions[5] = 6)
MUT(m_pos_end, f->positions[23] = 17)
MUT(m_ctx_small, f->context_lens[0] = 19)
MUT(m_ctx_big, lim->max_positions = 39)
MUT(m_block_high, f->block_tables[FX_STRIDE + 2] = lim->num_blocks)
MUT(m_block_missing, f->block_tables[FX_STRIDE + 1] = -1)
MUT(m_stride_short, (b->block_table_stride = 2, lim->max_positions = 40))
MUT(m_flag, f->sample_flags[2] = 2)
MUT(m_draft_neg, f->draft_counts[2] = -1)
MUT(m_draft_max, lim->max_drafts = 1)
MUT(m_draft_fed, (f->draft_counts[1] = 3, lim->max_drafts = 8))
MUT(m_draft_unsampled, f->draft_counts[0] = 1)
MUT(m_logprobs_low, f->logprobs[0] = -2)
MUT(m_logprobs_high, f->logprobs[1] = lim->max_top_logprobs + 1)
MUT(m_mask_neg, f->mask_row_start[2] = -2)
MUT(m_mask_past, f->mask_row_start[1] = 2)
MUT(m_hist_start0, f->history_start[0] = 7)
MUT(m_hist_back, (f->history_start[1] = 3, f->history_start[2] = 1))
MUT(m_hist_past, f->history_start[3] = 7)
MUT(m_hist_token, f->history[4] = V + 5)
MUT(m_hist_prompt, f->history_prompt_lens[2] = 5)
MUT(m_hist_prompt_neg, f->history_prompt_lens[1] = -1)
MUT(m_temp_nan, f->temperature[2] = NAN)
MUT(m_temp_neg, f->temperature[1] = -0.5f)
MUT(m_temp_inf, f->temperature[0] = INFINITY)
MUT(m_top_p, f->top_p[2] = 1.5f)
MUT(m_top_p_nan, f->top_p[1] = NAN)
MUT(m_top_k, f->top_k[1] = -1)
MUT(m_min_p, f->min_p[1] = -0.1f)
MUT(m_presence, f->presence_penalty[1] = INFINITY)
MUT(m_frequency, f->frequency_penalty[2] = NAN)
MUT(m_repetition, f->repetition_penalty[2] = 0.0f)
MUT(m_bad_limits, lim->vocab_size = 0)
MUT(m_neg_bias_len, b->bias_len = -1)
MUT(m_null_bias_start, b->bias_start = NULL)
MUT(m_null_bias_ids, b->bias_ids = NULL)
MUT(m_null_bias_values, b->bias_values = NULL)
MUT(m_bias_back, (f->bias_start[1] = 2, f->bias_start[2] = 1))
MUT(m_bias_past, f->bias_start[3] = 4)
MUT(m_bias_id_high, f->bias_ids[2] = V)
MUT(m_bias_id_neg, f->bias_ids[0] = -1)
MUT(m_bias_nan, f->bias_values[1] = NAN)
MUT(m_bias_inf, f->bias_values[2] = -INFINITY)

typedef struct mcase {
  const char *name;
  mutation fn;
  const char *field; /* the message must name it */
} mcase;

static const mcase CASES[] = {
    {"null batch", m_null_batch, "batch"},
    {"zero seqs", m_zero_seqs, "num_seqs"},
    {"over max_seqs", m_many_seqs, "num_seqs"},
    {"fewer tokens than seqs", m_few_tokens, "num_tokens"},
    {"over max_batch_tokens", m_many_tokens, "num_tokens"},
    {"stride 0", m_stride, "block_table_stride"},
    {"negative mask rows", m_neg_mask_rows, "num_mask_rows"},
    {"negative history_len", m_neg_history, "history_len"},
    {"NULL tokens", m_null_tokens, "tokens"},
    {"NULL seeds", m_null_seeds, "seeds"},
    {"NULL history_prompt_lens", m_null_hist_prompt, "history_prompt_lens"},
    {"NULL allowed_mask", m_null_mask, "allowed_mask"},
    {"NULL history", m_null_history, "history"},
    {"token = V", m_token_high, "tokens[21]"},
    {"token < 0", m_token_neg, "tokens[0]"},
    {"query_start[0] != 0", m_qs0, "query_start[0]"},
    {"query_start[B] != T", m_qs_end, "query_start[3]"},
    {"query_start flat", m_qs_flat, "query_start[2]"},
    {"query_start backwards", m_qs_back, "query_start[2]"},
    {"positions gap", m_pos_gap, "positions[5]"},
    {"positions end", m_pos_end, "positions[23]"},
    {"context < fed", m_ctx_small, "context_lens[0]"},
    {"context > max_positions", m_ctx_big, "context_lens[1]"},
    {"block id = num_blocks", m_block_high, "block_tables[1][2]"},
    {"block missing", m_block_missing, "block_tables[1][1]"},
    {"stride too short", m_stride_short, "block_table_stride"},
    {"sample flag 2", m_flag, "sample_flags[2]"},
    {"negative drafts", m_draft_neg, "draft_counts[2]"},
    {"drafts over max_drafts", m_draft_max, "draft_counts[1]"},
    {"drafts = fed", m_draft_fed, "draft_counts[1]"},
    {"drafts on unsampled", m_draft_unsampled, "draft_counts[0]"},
    {"logprobs -2", m_logprobs_low, "logprobs[0]"},
    {"logprobs over max", m_logprobs_high, "logprobs[1]"},
    {"mask_row_start -2", m_mask_neg, "mask_row_start[2]"},
    {"mask rows past the end", m_mask_past, "mask_row_start[1]"},
    {"history_start[0] past end", m_hist_start0, "history_start[0]"},
    {"history_start backwards", m_hist_back, "history_start[2]"},
    {"history_start past end", m_hist_past, "history_start[3]"},
    {"history token = V + 5", m_hist_token, "history[4]"},
    {"prompt longer than history", m_hist_prompt, "history_prompt_lens[2]"},
    {"negative prompt length", m_hist_prompt_neg, "history_prompt_lens[1]"},
    {"temperature NaN", m_temp_nan, "temperature[2]"},
    {"temperature negative", m_temp_neg, "temperature[1]"},
    {"temperature inf", m_temp_inf, "temperature[0]"},
    {"top_p > 1", m_top_p, "top_p[2]"},
    {"top_p NaN", m_top_p_nan, "top_p[1]"},
    {"top_k < 0", m_top_k, "top_k[1]"},
    {"min_p < 0", m_min_p, "min_p[1]"},
    {"presence inf", m_presence, "presence_penalty[1]"},
    {"frequency NaN", m_frequency, "frequency_penalty[2]"},
    {"repetition 0", m_repetition, "repetition_penalty[2]"},
    {"bad limits", m_bad_limits, "limits"},
    {"bias_len negative", m_neg_bias_len, "bias_len"},
    {"NULL bias_start", m_null_bias_start, "bias_start"},
    {"NULL bias_ids", m_null_bias_ids, "bias_ids"},
    {"NULL bias_values", m_null_bias_values, "bias_values"},
    {"bias_start backwards", m_bias_back, "bias_start[2]"},
    {"bias_start past end", m_bias_past, "bias_start[3]"},
    {"bias id = V", m_bias_id_high, "bias_ids[2]"},
    {"bias id negative", m_bias_id_neg, "bias_ids[0]"},
    {"bias value NaN", m_bias_nan, "bias_values[1]"},
    {"bias value -inf", m_bias_inf, "bias_values[2]"},
};

int main(void) {
  fixture f;
  char err[256];
  valid(&f);
  rill_step_batch b = fixture_batch(&f);
  rill_limits lim = fixture_limits(V);
  strcpy(err, "stale");
  CHECK(rill_validate_batch(&b, &lim, err, sizeof err) == RILL_OK);
  CHECK_MSG(err[0] == '\0', "valid batch left a message: %s", err);
  /* a context exactly at max_positions and a block table exactly as wide as needed pass */
  lim.max_positions = 40;
  b.block_table_stride = FX_STRIDE;
  CHECK(rill_validate_batch(&b, &lim, err, sizeof err) == RILL_OK);

  for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++) {
    valid(&f);
    b = fixture_batch(&f);
    lim = fixture_limits(V);
    CASES[i].fn(&f, &b, &lim);
    err[0] = '\0';
    const rill_status st = rill_validate_batch(CASES[i].fn == m_null_batch ? NULL : &b, &lim, err, sizeof err);
    CHECK_MSG(st == RILL_ERR_INVALID_ARGUMENT, "%s: status %d", CASES[i].name, (int)st);
    CHECK_MSG(strstr(err, CASES[i].field) != NULL, "%s: message \"%s\" does not name %s", CASES[i].name, err,
              CASES[i].field);
  }
  /* a tiny buffer gets a truncated, terminated message; a NULL buffer is allowed */
  valid(&f);
  b = fixture_batch(&f);
  lim = fixture_limits(V);
  f.tokens[0] = -5;
  char tiny[8];
  memset(tiny, 'x', sizeof tiny);
  CHECK(rill_validate_batch(&b, &lim, tiny, sizeof tiny) == RILL_ERR_INVALID_ARGUMENT);
  CHECK(memchr(tiny, '\0', sizeof tiny) != NULL);
  CHECK(rill_validate_batch(&b, &lim, NULL, 0) == RILL_ERR_INVALID_ARGUMENT);
  return check_summary();
}
