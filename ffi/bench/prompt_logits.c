/*
 * The native CPU device's logits for one prompt, every position, as float32 rows: the reference side of
 * bench/gptoss_bench.ts's check that llama.cpp, run on the GGUF conversion of the same checkpoint, computes the same
 * model. Uses only the public ABI (rill_forward_logits).
 *
 *   prompt_logits MODEL_DIR DTYPE THREADS OUT.f32 TOKEN...
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "rill.h"

int main(int argc, char **argv) {
  if (argc < 6) {
    fprintf(stderr, "usage: prompt_logits MODEL_DIR DTYPE THREADS OUT.f32 TOKEN...\n");
    return 2;
  }
  const int T = argc - 5;
  if (T > 4096) {
    fprintf(stderr, "at most 4096 tokens\n");
    return 2;
  }
  rill_options o = {0};
  o.dtype = argv[2];
  o.threads = atoi(argv[3]);
  o.max_seqs = 1;
  o.max_batch_tokens = T < 256 ? 256 : T;
  o.block_size = 16;
  o.num_blocks = (T + 15) / 16 + 1;
  o.num_sliding_blocks = o.num_blocks; /* gpt-oss: the sliding layers address the same ids in their own pool */
  o.max_drafts = 1;
  o.max_top_logprobs = 1;
  rill_engine *e = NULL;
  if (rill_engine_create(argv[1], &o, &e) != RILL_OK) {
    fprintf(stderr, "create: %s\n", rill_global_error());
    return 1;
  }
  rill_info info;
  rill_engine_info(e, &info);
  const int32_t blocks = o.num_blocks, zero1[2] = {0, 0};
  int32_t *tokens = calloc((size_t)T, 4), *positions = calloc((size_t)T, 4), *table = calloc((size_t)blocks, 4);
  float *logits = malloc((size_t)T * (size_t)info.vocab_size * sizeof(float));
  if (tokens == NULL || positions == NULL || table == NULL || logits == NULL) return 1;
  for (int i = 0; i < T; i++) {
    tokens[i] = atoi(argv[5 + i]);
    positions[i] = i;
  }
  for (int j = 0; j < blocks; j++) table[j] = j;
  const int32_t seq = 1, query_start[2] = {0, T}, context = T, none = 0, lp = -1, mask_row = -1;
  const uint8_t flag = 0;
  const float one = 1.0f, zero = 0.0f;
  const uint64_t seed = 1;
  rill_step_batch b = {.num_seqs = 1, .num_tokens = T, .block_table_stride = blocks, .seq_ids = &seq,
                       .tokens = tokens, .positions = positions, .query_start = query_start,
                       .context_lens = &context, .draft_counts = &none, .sample_flags = &flag,
                       .block_tables = table, .sliding_block_tables = table, .temperature = &zero, .top_p = &one,
                       .top_k = &none, .min_p = &zero,
                       .presence_penalty = &zero, .frequency_penalty = &zero, .repetition_penalty = &one,
                       .seeds = &seed, .logprobs = &lp, .mask_row_start = &mask_row, .history_start = zero1,
                       .history_prompt_lens = &none, .bias_start = zero1};
  if (rill_forward_logits(e, &b, logits) != RILL_OK) {
    fprintf(stderr, "forward: %s\n", rill_last_error(e));
    return 1;
  }
  FILE *f = fopen(argv[4], "wb");
  const size_t n = (size_t)T * (size_t)info.vocab_size;
  if (f == NULL || fwrite(logits, sizeof(float), n, f) != n || fclose(f) != 0) {
    fprintf(stderr, "cannot write %s\n", argv[4]);
    return 1;
  }
  printf("logits: %d positions x %d (%s)\n", T, info.vocab_size, info.dtype);
  rill_engine_destroy(e);
  free(tokens);
  free(positions);
  free(table);
  free(logits);
  return 0;
}
