/*
 * The machine's memory read bandwidth as the decode benchmarks measure it (ffi/bench/bench_decode.c for rill,
 * bench/llama_decode.c for llama.cpp): every thread sums its share of a 1 GB buffer, far larger than the caches, in
 * 2 MB pages as the weights are; the best of five passes, in GB/s. Header-only: each tool includes it once.
 */
#ifndef RILL_BENCH_READ_BANDWIDTH_H
#define RILL_BENCH_READ_BANDWIDTH_H

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>

static double bw_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}


typedef struct bw_job {
  const uint64_t *p;
  size_t n;
  uint64_t sum;
} bw_job;

#if defined(__x86_64__)
#include <immintrin.h>
/* Wide loads, several in flight, so the loop measures memory rather than the adder; each line is prefetched into L2
 * PROBE_PF bytes ahead, as the decode kernels prefetch their weight rows, since the hardware prefetcher alone leaves
 * a single stream short of what the memory delivers. */
#define PROBE_PF 8192
__attribute__((target("avx2"))) static uint64_t read_avx2(const uint64_t *p, size_t n) {
  __m256i a = _mm256_setzero_si256(), b = a, c = a, d = a;
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    _mm_prefetch((const char *)(p + i) + PROBE_PF, _MM_HINT_T1);
    _mm_prefetch((const char *)(p + i) + PROBE_PF + 64, _MM_HINT_T1);
    a = _mm256_xor_si256(a, _mm256_loadu_si256((const __m256i *)(p + i)));
    b = _mm256_xor_si256(b, _mm256_loadu_si256((const __m256i *)(p + i + 4)));
    c = _mm256_xor_si256(c, _mm256_loadu_si256((const __m256i *)(p + i + 8)));
    d = _mm256_xor_si256(d, _mm256_loadu_si256((const __m256i *)(p + i + 12)));
  }
  a = _mm256_xor_si256(_mm256_xor_si256(a, b), _mm256_xor_si256(c, d));
  uint64_t out[4];
  _mm256_storeu_si256((__m256i *)out, a);
  return out[0] ^ out[1] ^ out[2] ^ out[3];
}
#endif

static void *bw_read(void *arg) {
  bw_job *j = arg;
#if defined(__x86_64__)
  if (__builtin_cpu_supports("avx2")) {
    j->sum = read_avx2(j->p, j->n);
    return NULL;
  }
#endif
  uint64_t acc[8] = {0};
  for (size_t i = 0; i + 8 <= j->n; i += 8) {
    for (int l = 0; l < 8; l++) acc[l] ^= j->p[i + (size_t)l];
  }
  j->sum = acc[0] ^ acc[1] ^ acc[2] ^ acc[3] ^ acc[4] ^ acc[5] ^ acc[6] ^ acc[7];
  return NULL;
}

static double read_bandwidth(int threads) {
  /* Twice the largest last-level cache seen on the machines rill benches on, in 2 MB pages as the weights are. */
  const size_t bytes = (size_t)1 << 30;
  uint64_t *buf = aligned_alloc((size_t)2 << 20, bytes);
  if (buf == NULL) return 0.0;
  (void)madvise(buf, bytes, MADV_HUGEPAGE);
  for (size_t i = 0; i < bytes / 8; i++) buf[i] = i;
  double best = 0.0;
  for (int rep = 0; rep < 5; rep++) {
    pthread_t th[64];
    bw_job jobs[64];
    size_t per = bytes / 8 / (size_t)threads;
    double t0 = bw_now();
    for (int i = 0; i < threads; i++) {
      jobs[i] = (bw_job){buf + (size_t)i * per, per, 0};
      pthread_create(&th[i], NULL, bw_read, &jobs[i]);
    }
    uint64_t total = 0;
    for (int i = 0; i < threads; i++) {
      pthread_join(th[i], NULL);
      total ^= jobs[i].sum;
    }
    double dt = bw_now() - t0;
    if (total == 42) fprintf(stderr, "(checksum %llu)\n", (unsigned long long)total);
    double gbs = (double)bytes / dt / 1e9;
    if (gbs > best) best = gbs;
  }
  free(buf);
  return best;
}

#endif /* RILL_BENCH_READ_BANDWIDTH_H */
