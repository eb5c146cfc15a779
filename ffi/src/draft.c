#include "draft.h"

#include <stdio.h>
#include <string.h>

#include "argmax.h"

static rill_status draft_failed(rill_engine *e, rill_status s) {
  snprintf(e->err, sizeof e->err, "draft model: %.480s", e->draft->err);
  return s;
}

rill_status rill_draft_follow(rill_engine *e, const rill_step_batch *b) {
  int32_t rows = 0;
  rill_status s = rill_forward(e->draft, b, RILL_ROWS_NONE, NULL, &rows);
  return s == RILL_OK ? RILL_OK : draft_failed(e, s);
}

rill_status rill_draft_propose(rill_engine *e, const rill_step_batch *b, rill_step_result *r) {
  rill_engine *d = e->draft;
  rill_status s = rill_draft_follow(e, b);
  if (s != RILL_OK || b->propose_counts == NULL) return s;
  const int32_t B = b->num_seqs, K1 = e->lim.max_drafts + 1, KD = e->lim.max_drafts, V = d->cfg.vocab_size;
  /* Round 0 feeds each proposing sequence's last accepted token (not in any KV yet) at its position; round j feeds
   * proposal j at the next position. Validation guaranteed the block table covers context_lens + k positions, and
   * the last accepted token sits at or below context_lens, so every slot written lies inside the table. */
  int32_t rounds = 0;
  for (int32_t i = 0; i < B; i++) {
    r->proposed_counts[i] = 0;
    const int32_t k = b->propose_counts[i], n = r->counts[i];
    e->dr_left[i] = 0;
    if (k <= 0 || n < 1) continue;
    e->dr_left[i] = k;
    e->dr_cur_tok[i] = r->tokens[(size_t)i * K1 + (size_t)(n - 1)];
    e->dr_cur_pos[i] = b->context_lens[i] - b->draft_counts[i] + n - 1;
    if (k > rounds) rounds = k;
  }
  for (int32_t j = 0; j < rounds; j++) {
    int32_t T = 0;
    for (int32_t i = 0; i < B; i++) {
      e->dr_query_start[i] = T;
      e->dr_context_lens[i] = 0;
      if (e->dr_left[i] <= j) continue;
      e->dr_tokens[T] = e->dr_cur_tok[i];
      e->dr_positions[T] = e->dr_cur_pos[i] + j;
      e->dr_context_lens[i] = e->dr_cur_pos[i] + j + 1;
      T++;
    }
    e->dr_query_start[B] = T;
    rill_step_batch ib;
    memset(&ib, 0, sizeof ib);
    ib.num_seqs = B;
    ib.num_tokens = T;
    ib.block_table_stride = b->block_table_stride;
    ib.block_tables = b->block_tables;
    ib.tokens = e->dr_tokens;
    ib.positions = e->dr_positions;
    ib.query_start = e->dr_query_start;
    ib.context_lens = e->dr_context_lens;
    int32_t rows = 0;
    s = rill_forward(d, &ib, RILL_ROWS_LAST, NULL, &rows);
    if (s != RILL_OK) return draft_failed(e, s);
    int32_t row = 0;
    for (int32_t i = 0; i < B; i++) {
      if (e->dr_left[i] <= j) continue;
      int32_t tok = rill_argmax(d->logits + (size_t)row * (size_t)V, V);
      row++;
      r->proposed[(size_t)i * KD + (size_t)j] = tok;
      r->proposed_counts[i] = j + 1;
      e->dr_cur_tok[i] = tok;
    }
    if (row != rows) {
      snprintf(e->err, sizeof e->err, "draft model: %d logits rows for %d proposing sequences", rows, row);
      return RILL_ERR_INTERNAL;
    }
  }
  return RILL_OK;
}
