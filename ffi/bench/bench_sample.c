/*
 * Time of the sampling stage of a step (ffi/src/sample.c) on its own: the serial loop over a batch's sequences
 * against the same batch spread over a thread pool, alternated so machine noise hits both alike. Logits are random
 * (standard normal), so nothing but the work per row depends on them.
 *
 *   bench_sample [--vocab V] [--seqs N] [--threads T] [--temperature X] [--reps R]
 *
 * Prints the medians in ms per step and their ratio. Built from the library's sources (it calls internal functions).
 */
#define _POSIX_C_SOURCE 200809L

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "philox.h"
#include "sample.h"
#include "thread_pool.h"

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
  int32_t V = 151936, N = 8, threads = 0, reps = 15;
  float temperature = 1.0f;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (strcmp(argv[i], "--vocab") == 0) V = atoi(argv[i + 1]);
    else if (strcmp(argv[i], "--seqs") == 0) N = atoi(argv[i + 1]);
    else if (strcmp(argv[i], "--threads") == 0) threads = atoi(argv[i + 1]);
    else if (strcmp(argv[i], "--temperature") == 0) temperature = (float)atof(argv[i + 1]);
    else if (strcmp(argv[i], "--reps") == 0) reps = atoi(argv[i + 1]);
  }
  if (V < 2 || N < 1 || N > 256 || reps < 1 || reps > 101) {
    fprintf(stderr, "bench_sample: bad arguments\n");
    return 2;
  }
  if (threads < 1) threads = rill_cpu_count();
  float *logits = malloc((size_t)N * (size_t)V * sizeof(float));
  int32_t *i32 = calloc((size_t)N * 16 + 16, sizeof(int32_t));
  float *f32 = calloc((size_t)N * 8, sizeof(float));
  uint64_t *seeds = calloc((size_t)N, sizeof(uint64_t));
  uint8_t *flags = calloc((size_t)N, 1);
  void *scratch = malloc(rill_sample_scratch_bytes(V));
  const size_t pool_bytes = rill_sample_pool_scratch_bytes(V, threads, N);
  void *pool_scratch = aligned_alloc(64, (pool_bytes + 63) & ~(size_t)63);
  rill_pool *pool = NULL;
  if (logits == NULL || i32 == NULL || f32 == NULL || seeds == NULL || flags == NULL || scratch == NULL ||
      pool_scratch == NULL || rill_pool_create(threads, &pool) != RILL_OK) {
    fprintf(stderr, "bench_sample: out of memory\n");
    return 1;
  }
  /* Box-Muller over the counter-based RNG: reproducible logits. */
  for (size_t j = 0; j < (size_t)N * (size_t)V; j++) {
    const double u1 = rill_uniform(7, (uint32_t)j, 0), u2 = rill_uniform(7, (uint32_t)j, 1);
    logits[j] = (float)(sqrt(-2.0 * log(u1 > 0 ? u1 : 1e-300)) * cos(6.283185307179586 * u2));
  }
  int32_t *seq_ids = i32, *tokens = i32 + N, *positions = i32 + 2 * N, *query_start = i32 + 3 * N,
          *context_lens = i32 + 4 * N + 1, *draft_counts = i32 + 5 * N + 1, *top_k = i32 + 6 * N + 1,
          *logprobs = i32 + 7 * N + 1, *mask_row_start = i32 + 8 * N + 1, *history_start = i32 + 9 * N + 1,
          *history_prompt_lens = i32 + 10 * N + 2, *counts = i32 + 11 * N + 2, *out_tokens = i32 + 12 * N + 2,
          *bias_start = i32 + 14 * N + 2;
  float *temp = f32, *top_p = f32 + N, *min_p = f32 + 2 * N, *pp = f32 + 3 * N, *fp = f32 + 4 * N,
        *rp = f32 + 5 * N, *out_lp = f32 + 6 * N;
  for (int32_t i = 0; i < N; i++) {
    seq_ids[i] = i + 1;
    tokens[i] = i;
    positions[i] = 100;
    query_start[i] = i;
    context_lens[i] = 101;
    logprobs[i] = -1;
    mask_row_start[i] = -1;
    flags[i] = 1;
    temp[i] = temperature;
    top_p[i] = 1.0f;
    rp[i] = 1.0f;
    seeds[i] = 99u + (uint64_t)i;
  }
  query_start[N] = N;
  rill_step_batch b = {.num_seqs = N, .num_tokens = N, .block_table_stride = 1, .seq_ids = seq_ids, .tokens = tokens,
                       .positions = positions, .query_start = query_start, .context_lens = context_lens,
                       .draft_counts = draft_counts, .sample_flags = flags, .temperature = temp, .top_p = top_p,
                       .top_k = top_k, .min_p = min_p, .presence_penalty = pp, .frequency_penalty = fp,
                       .repetition_penalty = rp, .seeds = seeds, .logprobs = logprobs,
                       .mask_row_start = mask_row_start, .history_start = history_start,
                       .history_prompt_lens = history_prompt_lens, .bias_start = bias_start};
  rill_step_result r = {.counts = counts, .tokens = out_tokens, .logprobs = out_lp};
  char err[256];
  double serial[101], pooled[101];
  for (int k = 0; k < reps; k++) {
    double t0 = now();
    if (rill_sample_batch(&b, logits, V, 0, 0, scratch, &r, err, sizeof err) != RILL_OK) {
      fprintf(stderr, "bench_sample: %s\n", err);
      return 1;
    }
    serial[k] = now() - t0;
    t0 = now();
    if (rill_sample_batch_pooled(&b, logits, V, 0, 0, N, pool, pool_scratch, &r, err, sizeof err) != RILL_OK) {
      fprintf(stderr, "bench_sample: %s\n", err);
      return 1;
    }
    pooled[k] = now() - t0;
  }
  qsort(serial, (size_t)reps, sizeof(double), cmp_double);
  qsort(pooled, (size_t)reps, sizeof(double), cmp_double);
  const double s = serial[reps / 2] * 1e3, p = pooled[reps / 2] * 1e3;
  printf("sampling %d rows of %d (temperature %g): serial %.2f ms, %d threads %.2f ms (%.2fx)\n", N, V,
         (double)temperature, s, threads, p, s / p);
  rill_pool_destroy(pool);
  free(pool_scratch);
  free(scratch);
  free(flags);
  free(seeds);
  free(f32);
  free(i32);
  free(logits);
  return 0;
}
