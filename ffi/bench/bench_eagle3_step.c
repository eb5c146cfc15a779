/*
 * The cost of one decode step with and without EAGLE-3 proposals, through the public ABI: after a 100-token prompt,
 * steps feeding 1..4 tokens (the last accepted token plus 0..3 drafts being verified), each without proposals and,
 * with a head, proposing 3 tokens; best of 200 calls each (the slots are rewritten in place, so every call does the
 * same work). What bounds speculation on a model: K + 1 fed tokens against one, plus the head's catch-up and rounds.
 *
 *   bench_eagle3_step MODEL_DIR [HEAD_DIR] [--threads N] [--dtype fp32|bf16|int8]
 *
 * Prints one line per case: "fed F propose K: T us".
 */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rill.h"

#define PROMPT 100
#define BS 16
#define TABLE 16

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

typedef struct batch {
  int32_t tokens[PROMPT], positions[PROMPT], query_start[2], context_lens[1], draft_counts[1], block_tables[TABLE];
  int32_t top_k[1], logprobs[1], mask_row_start[1], history_start[2], history_prompt_lens[1], bias_start[2];
  int32_t propose[1], seq_ids[1];
  uint8_t sample_flags[1];
  float temperature[1], top_p[1], min_p[1], presence[1], frequency[1], repetition[1];
  uint64_t seeds[1];
} batch;

/* One sequence feeding toks[0..n) at positions first.., the last `drafts` of them drafts, greedy. */
static rill_step_batch make(batch *m, const int32_t *toks, int n, int first, int drafts, int propose) {
  memset(m, 0, sizeof *m);
  for (int i = 0; i < n; i++) {
    m->tokens[i] = toks[i];
    m->positions[i] = first + i;
  }
  m->query_start[1] = n;
  m->context_lens[0] = first + n;
  m->draft_counts[0] = drafts;
  m->sample_flags[0] = 1;
  for (int i = 0; i < TABLE; i++) m->block_tables[i] = i;
  m->top_p[0] = 1.0f;
  m->repetition[0] = 1.0f;
  m->logprobs[0] = -1;
  m->mask_row_start[0] = -1;
  m->propose[0] = propose;
  m->seq_ids[0] = 1;
  rill_step_batch b;
  memset(&b, 0, sizeof b);
  b.num_seqs = 1;
  b.num_tokens = n;
  b.block_table_stride = TABLE;
  b.seq_ids = m->seq_ids;
  b.tokens = m->tokens;
  b.positions = m->positions;
  b.query_start = m->query_start;
  b.context_lens = m->context_lens;
  b.draft_counts = m->draft_counts;
  b.sample_flags = m->sample_flags;
  b.block_tables = m->block_tables;
  b.temperature = m->temperature;
  b.top_p = m->top_p;
  b.top_k = m->top_k;
  b.min_p = m->min_p;
  b.presence_penalty = m->presence;
  b.frequency_penalty = m->frequency;
  b.repetition_penalty = m->repetition;
  b.seeds = m->seeds;
  b.logprobs = m->logprobs;
  b.mask_row_start = m->mask_row_start;
  b.history_start = m->history_start;
  b.history_prompt_lens = m->history_prompt_lens;
  b.bias_start = m->bias_start;
  b.propose_counts = propose > 0 ? m->propose : NULL;
  return b;
}

int main(int argc, char **argv) {
  const char *model = NULL, *head = NULL, *dtype = NULL;
  int threads = 1;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc) {
      threads = atoi(argv[++i]);
    } else if (strcmp(argv[i], "--dtype") == 0 && i + 1 < argc) {
      dtype = argv[++i];
    } else if (model == NULL) {
      model = argv[i];
    } else {
      head = argv[i];
    }
  }
  if (model == NULL) {
    fprintf(stderr, "usage: bench_eagle3_step MODEL_DIR [HEAD_DIR] [--threads N] [--dtype fp32|bf16|int8]\n");
    return 2;
  }
  rill_options o;
  memset(&o, 0, sizeof o);
  o.threads = threads;
  o.dtype = dtype;
  o.block_size = BS;
  o.num_blocks = TABLE;
  o.max_seqs = 1;
  o.max_batch_tokens = 256;
  o.max_drafts = 4;
  o.max_top_logprobs = 1;
  o.draft_model_dir = head;
  rill_engine *e = NULL;
  if (rill_engine_create(model, &o, &e) != RILL_OK) {
    fprintf(stderr, "%s\n", rill_global_error());
    return 1;
  }
  static int32_t counts[1], tokens[5], proposed_counts[1], proposed[4], top_ids[5];
  static float logprobs[5], top_logprobs[5];
  rill_step_result r = {.counts = counts, .tokens = tokens, .logprobs = logprobs, .top_ids = top_ids,
                        .top_logprobs = top_logprobs, .proposed_counts = proposed_counts, .proposed = proposed};
  int32_t prompt[PROMPT];
  for (int i = 0; i < PROMPT; i++) prompt[i] = (i * 37 + 11) % 512;
  batch m;
  rill_step_batch b = make(&m, prompt, PROMPT, 0, 0, 0);
  if (rill_step(e, &b, &r) != RILL_OK) {
    fprintf(stderr, "%s\n", rill_last_error(e));
    return 1;
  }
  const int32_t fed[4] = {5, 6, 7, 8};
  for (int n = 1; n <= 4; n++) {
    for (int k = 0; k <= (head != NULL ? 3 : 0); k += 3) {
      double best = 1e9;
      for (int rep = 0; rep < 200; rep++) {
        b = make(&m, fed, n, PROMPT, n - 1, k);
        const double t0 = now();
        if (rill_step(e, &b, &r) != RILL_OK) {
          fprintf(stderr, "%s\n", rill_last_error(e));
          return 1;
        }
        const double dt = now() - t0;
        if (dt < best) best = dt;
      }
      printf("fed %d propose %d: %.1f us\n", n, k, best * 1e6);
    }
  }
  rill_engine_destroy(e);
  return 0;
}
