/*
 * Decode and prefill speed of the native CPU device on a model directory, per weight precision, with this machine's
 * memory read bandwidth so decode can be stated as a fraction of its roofline (bytes of weights streamed per token ÷
 * bandwidth). Uses only the public ABI.
 *
 *   bench_decode MODEL_DIR [--dtype fp32|bf16|int8|all] [--threads N] [--prompt P] [--long P2] [--steps S]
 *                [--reps R] [--temperature T]
 *   bench_decode --bandwidth [--threads N]
 *
 * Prints one line per measurement; medians over R repetitions. --long P2 also times the prefill of a P2-token prompt,
 * once (on a large model it takes minutes).
 * Each line ends with the process's peak resident memory (VmHWM): the larger of its peak while the engine loads and
 * its peak while it runs, the latter counted after the bandwidth probe's buffer is freed (the probe is not the
 * engine's). Decoding is greedy unless --temperature T > 0 (then
 * sampled with the API's defaults otherwise: no top-p, top-k or min-p, so every row exponentiates and sums the whole
 * vocabulary). --bandwidth prints only the best read bandwidth of 5 passes over 1 GB, in GB/s, with N threads
 * (default: all cores).
 */
#define _DEFAULT_SOURCE

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/mman.h>
#include <unistd.h>

#include "rill.h"

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

#include "read_bandwidth.h"

/* Peak resident set in bytes (VmHWM), or -1. */
static double peak_rss(void) {
  FILE *f = fopen("/proc/self/status", "r");
  if (f == NULL) return -1.0;
  char line[256];
  double kb = -1.0;
  while (fgets(line, sizeof line, f) != NULL) {
    if (strncmp(line, "VmHWM:", 6) == 0) kb = atof(line + 6);
  }
  fclose(f);
  return kb * 1024.0;
}

/* Resets VmHWM to the current resident set (Linux: clear_refs 5); 0 on success. */
/* The share of the process's anonymous memory in transparent huge pages (the weights ask for them; when memory is too
 * fragmented the kernel falls back to 4 KB pages, and every weight byte streamed costs more), or -1 if unknown. */
static double huge_page_share(void) {
  FILE *f = fopen("/proc/self/smaps_rollup", "r");
  if (f == NULL) return -1.0;
  char line[256];
  double anon = -1.0, huge = -1.0;
  while (fgets(line, sizeof line, f) != NULL) {
    if (strncmp(line, "Anonymous:", 10) == 0) anon = atof(line + 10);
    if (strncmp(line, "AnonHugePages:", 14) == 0) huge = atof(line + 14);
  }
  fclose(f);
  return anon > 0.0 && huge >= 0.0 ? huge / anon : -1.0;
}

static int reset_peak_rss(void) {
  FILE *f = fopen("/proc/self/clear_refs", "w");
  if (f == NULL) return -1;
  int ok = fputs("5", f) >= 0;
  return fclose(f) == 0 && ok ? 0 : -1;
}

/* ---- batches ---- */

typedef struct seqs {
  int n;
  int32_t ctx[64];
} seqs;

typedef struct batch_buf {
  int32_t *seq_ids, *tokens, *positions, *query_start, *context_lens, *draft_counts, *block_tables, *top_k, *logprobs,
      *mask_row_start, *history_start, *history_prompt_lens, *bias_start;
  uint8_t *sample_flags;
  float *temperature, *top_p, *min_p, *pp, *fp, *rp;
  uint64_t *seeds;
  int32_t *counts, *out_tokens, *top_ids;
  float *out_lp, *top_lp;
} batch_buf;

#define MAXB 64
#define MAXT 4096
#define STRIDE 512

static void bb_alloc(batch_buf *b, int K1, int L) {
  b->seq_ids = calloc(MAXB, 4);
  b->tokens = calloc(MAXT, 4);
  b->positions = calloc(MAXT, 4);
  b->query_start = calloc(MAXB + 1, 4);
  b->context_lens = calloc(MAXB, 4);
  b->draft_counts = calloc(MAXB, 4);
  b->block_tables = calloc((size_t)MAXB * STRIDE, 4);
  b->top_k = calloc(MAXB, 4);
  b->logprobs = calloc(MAXB, 4);
  b->mask_row_start = calloc(MAXB, 4);
  b->history_start = calloc(MAXB + 1, 4);
  b->history_prompt_lens = calloc(MAXB, 4);
  b->bias_start = calloc(MAXB + 1, 4);
  b->sample_flags = calloc(MAXB, 1);
  b->temperature = calloc(MAXB, 4);
  b->top_p = calloc(MAXB, 4);
  b->min_p = calloc(MAXB, 4);
  b->pp = calloc(MAXB, 4);
  b->fp = calloc(MAXB, 4);
  b->rp = calloc(MAXB, 4);
  b->seeds = calloc(MAXB, 8);
  b->counts = calloc(MAXB, 4);
  b->out_tokens = calloc((size_t)MAXB * (size_t)K1, 4);
  b->out_lp = calloc((size_t)MAXB * (size_t)K1, 4);
  b->top_ids = calloc((size_t)MAXB * (size_t)K1 * (size_t)L, 4);
  b->top_lp = calloc((size_t)MAXB * (size_t)K1 * (size_t)L, 4);
}

/* One step: sequence i feeds fed[i] tokens after ctx[i] cached ones, in its own run of blocks: sequence 0's first
 * block is 0 and it has g_first_blocks of them; sequence i > 0 starts at g_first_blocks + (i - 1) · blocks_per_seq. */
static float g_temperature = 0.0f;
static int g_first_blocks = 64;

static rill_status step(rill_engine *e, batch_buf *bb, int n, const int *fed, int32_t *ctx, int block_size,
                        int blocks_per_seq) {
  rill_info info;
  rill_engine_info(e, &info);
  const int64_t vocab = info.vocab_size;
  int t = 0;
  for (int i = 0; i < n; i++) {
    bb->seq_ids[i] = i + 1;
    bb->query_start[i] = t;
    for (int j = 0; j < fed[i]; j++, t++) {
      bb->tokens[t] = (int32_t)(((int64_t)(ctx[i] + j) * 7919 + i * 104729) % vocab);
      bb->positions[t] = ctx[i] + j;
    }
    ctx[i] += fed[i];
    bb->context_lens[i] = ctx[i];
    bb->sample_flags[i] = 1;
    bb->temperature[i] = g_temperature;
    bb->top_p[i] = 1.0f;
    bb->seeds[i] = 1234u + (uint64_t)i;
    bb->rp[i] = 1.0f;
    bb->logprobs[i] = -1;
    bb->mask_row_start[i] = -1;
    for (int j = 0; j < STRIDE; j++) {
      const int base = i == 0 ? 0 : g_first_blocks + (i - 1) * blocks_per_seq;
      bb->block_tables[i * STRIDE + j] = j * block_size < ctx[i] ? base + j : -1;
    }
  }
  bb->query_start[n] = t;
  rill_step_batch b = {
      .num_seqs = n, .num_tokens = t, .block_table_stride = STRIDE, .seq_ids = bb->seq_ids, .tokens = bb->tokens,
      .positions = bb->positions, .query_start = bb->query_start, .context_lens = bb->context_lens,
      .draft_counts = bb->draft_counts, .sample_flags = bb->sample_flags, .block_tables = bb->block_tables,
      .sliding_block_tables = bb->block_tables,
      .temperature = bb->temperature, .top_p = bb->top_p, .top_k = bb->top_k, .min_p = bb->min_p,
      .presence_penalty = bb->pp, .frequency_penalty = bb->fp, .repetition_penalty = bb->rp, .seeds = bb->seeds,
      .logprobs = bb->logprobs, .mask_row_start = bb->mask_row_start, .history_start = bb->history_start,
      .history_prompt_lens = bb->history_prompt_lens, .bias_start = bb->bias_start};
  rill_step_result r = {bb->counts, bb->out_tokens, bb->out_lp, bb->top_ids, bb->top_lp, NULL, NULL};
  return rill_step(e, &b, &r);
}

static int fail(rill_engine *e) {
  fprintf(stderr, "step: %s\n", rill_last_error(e));
  return 1;
}

static int tied(const char *dir) {
  char path[1024];
  snprintf(path, sizeof path, "%s/config.json", dir);
  FILE *f = fopen(path, "rb");
  if (f == NULL) return 0;
  char buf[1 << 16];
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = '\0';
  const char *p = strstr(buf, "\"tie_word_embeddings\"");
  if (p == NULL) return 0;
  p = strchr(p, ':');
  while (p != NULL && (*p == ':' || *p == ' ')) p++;
  return p != NULL && strncmp(p, "true", 4) == 0;
}

int main(int argc, char **argv) {
  if (argc >= 2 && strcmp(argv[1], "--bandwidth") == 0) {
    int threads = argc >= 4 && strcmp(argv[2], "--threads") == 0 ? atoi(argv[3]) : 0;
    if (threads < 1) threads = (int)sysconf(_SC_NPROCESSORS_ONLN);
    if (threads < 1 || threads > 64) threads = 1;
    printf("read bandwidth %.3f GB/s (%d threads)\n", read_bandwidth(threads), threads);
    return 0;
  }
  if (argc < 2) {
    fprintf(stderr, "usage: bench_decode MODEL_DIR [--dtype fp32|bf16|int8|all] [--threads N] [--prompt P] [--long P2] "
                    "[--steps S] [--reps R]\n");
    return 2;
  }
  const char *dir = argv[1], *dtype_arg = "all";
  int threads = 0, prompt = 128, long_prompt = 0, steps = 16, reps = 3;
  for (int i = 2; i + 1 < argc; i += 2) {
    if (strcmp(argv[i], "--dtype") == 0) dtype_arg = argv[i + 1];
    else if (strcmp(argv[i], "--threads") == 0) threads = atoi(argv[i + 1]);
    else if (strcmp(argv[i], "--prompt") == 0) prompt = atoi(argv[i + 1]);
    else if (strcmp(argv[i], "--long") == 0) long_prompt = atoi(argv[i + 1]);
    else if (strcmp(argv[i], "--steps") == 0) steps = atoi(argv[i + 1]);
    else if (strcmp(argv[i], "--reps") == 0) reps = atoi(argv[i + 1]);
    else if (strcmp(argv[i], "--temperature") == 0) g_temperature = (float)atof(argv[i + 1]);
  }
  if (reps > 15) reps = 15;
  const int biggest = long_prompt > prompt ? long_prompt : prompt;
  if (prompt < 1 || long_prompt < 0 || steps < 1 || biggest + steps > MAXT || reps < 1) {
    fprintf(stderr, "--prompt and --long plus --steps must be within 1..%d, --reps at least 1\n", MAXT);
    return 2;
  }
  /* Sequence 0 holds the longest prompt and its decode steps; the others, the 8-stream runs' short contexts. */
  const int bps = 64; /* blocks per other sequence: 1024 positions */
  g_first_blocks = (biggest + steps + 15) / 16 > bps ? (biggest + steps + 15) / 16 : bps;
  const char *dtypes[3] = {"fp32", "bf16", "int8"};
  int first = 0, last = 2;
  for (int d = 0; d < 3; d++) {
    if (strcmp(dtype_arg, dtypes[d]) == 0) first = last = d;
  }
  const int is_tied = tied(dir);
  double best_bw = 0.0, decode1[3] = {0}, streamed[3] = {0};
  for (int d = first; d <= last; d++) {
    rill_options o = {0};
    o.dtype = dtypes[d];
    o.threads = threads;
    o.max_seqs = 8;
    o.max_batch_tokens = biggest > 256 ? biggest : 256;
    o.num_blocks = g_first_blocks + 7 * bps;
    o.num_sliding_blocks = o.num_blocks; /* gpt-oss: the sliding layers address the same ids in their own pool */
    o.block_size = 16;
    o.max_drafts = 1;
    o.max_top_logprobs = 1;
    rill_engine *e = NULL;
    double t0 = now();
    if (rill_engine_create(dir, &o, &e) != RILL_OK) {
      fprintf(stderr, "create (%s): %s\n", dtypes[d], rill_global_error());
      return 1;
    }
    double load = now() - t0;
    const double rss_load = peak_rss(), huge_share = huge_page_share();
    rill_info info;
    rill_engine_info(e, &info);
    /* Measured next to each precision's run: on a shared machine the bandwidth available drifts. */
    double bw = read_bandwidth(info.threads);
    const int rss_reset = reset_peak_rss();
    /* Bytes streamed per decoded token: every layer matrix and the output projection; the embedding table is read
     * one row at a time unless it is the (tied) output projection. */
    const int nb = (int)((info.hidden_size + 31) / 32);
    const double q8_row = (double)((((size_t)nb * 34 + 63) / 64) * 64); /* ffi/devices/cpu/kernels.h rill_q8_row_bytes */
    double embed_bytes =
        (double)info.vocab_size * (d == 0 ? 4.0 * info.hidden_size : d == 1 ? 2.0 * info.hidden_size : q8_row);
    double per_token = (double)info.weight_bytes - (is_tied ? 0.0 : embed_bytes);
    double roofline = bw * 1e9 / per_token;
    batch_buf bb;
    bb_alloc(&bb, 2, 1);
    double pf[15], d1[15], d8[15], pl[15];
    for (int r = 0; r < reps; r++) {
      int32_t ctx[8] = {0};
      int fed[8] = {prompt, 1, 1, 1, 1, 1, 1, 1};
      double s = now();
      if (step(e, &bb, 1, fed, ctx, 16, bps) != RILL_OK) {
        fprintf(stderr, "prefill: %s\n", rill_last_error(e));
        return 1;
      }
      pf[r] = prompt / (now() - s);
      s = now();
      for (int k = 0; k < steps; k++) {
        fed[0] = 1;
        if (step(e, &bb, 1, fed, ctx, 16, bps) != RILL_OK) return fail(e);
      }
      d1[r] = steps / (now() - s);
      /* 8 streams: short prompts, then decode together. */
      int32_t ctx8[8] = {0};
      int fed8[8];
      for (int i = 0; i < 8; i++) fed8[i] = 16 + i;
      if (step(e, &bb, 8, fed8, ctx8, 16, bps) != RILL_OK) return fail(e);
      for (int i = 0; i < 8; i++) fed8[i] = 1;
      s = now();
      for (int k = 0; k < steps; k++) {
        if (step(e, &bb, 8, fed8, ctx8, 16, bps) != RILL_OK) return fail(e);
      }
      d8[r] = 8.0 * steps / (now() - s);
      pl[r] = 0.0;
      if (long_prompt > 0 && r == 0) {
        int32_t ctxl[8] = {0};
        int fedl[8] = {long_prompt};
        s = now();
        if (step(e, &bb, 1, fedl, ctxl, 16, bps) != RILL_OK) return fail(e);
        pl[r] = long_prompt / (now() - s);
      }
    }
    const double rss_run = peak_rss();
    const double rss = rss_reset == 0 ? (rss_run > rss_load ? rss_run : rss_load) : rss_run;
    double mpf = median(pf, reps), md1 = median(d1, reps), md8 = median(d8, reps), mpl = pl[0];
    double bw_after = read_bandwidth(info.threads);
    best_bw = bw > best_bw ? bw : best_bw;
    best_bw = bw_after > best_bw ? bw_after : best_bw;
    decode1[d] = md1;
    streamed[d] = per_token;
    double loadavg = -1.0;
    FILE *la = fopen("/proc/loadavg", "r");
    if (la != NULL) {
      if (fscanf(la, "%lf", &loadavg) != 1) loadavg = -1.0;
      fclose(la);
    }
    printf("%s: isa %s, threads %d, load %.1f s, weights %.0f MB, streamed %.0f MB/token | read bandwidth %.2f GB/s "
           "(%.2f after) | prefill %d: %.1f tok/s | decode x1: %.2f tok/s (roofline %.2f, %.0f%%) | decode x8: %.2f "
           "tok/s | loadavg %.2f | peak rss %.2f GB (load %.2f GB, %.0f%% in huge pages)",
           dtypes[d], info.isa, info.threads, load, info.weight_bytes / 1e6, per_token / 1e6, bw, bw_after, prompt,
           mpf, md1, roofline, 100.0 * md1 / roofline, md8, loadavg, rss / 1e9, rss_load / 1e9, 100.0 * huge_share);
    if (long_prompt > 0) printf(" | prefill %d: %.1f tok/s", long_prompt, mpl);
    printf(" | kv %s\n", info.kv_dtype);
    fflush(stdout);
    rill_engine_destroy(e);
  }
  /* The machine's roofline is its best read bandwidth; on a shared machine any single reading may be low. */
  printf("decode x1 vs roofline at the best read bandwidth seen (%.2f GB/s):", best_bw);
  for (int d = first; d <= last; d++) {
    double roof = best_bw * 1e9 / streamed[d];
    printf(" %s %.2f/%.2f tok/s = %.0f%%;", dtypes[d], decode1[d], roof, 100.0 * decode1[d] / roof);
  }
  printf("\n");
  return 0;
}
