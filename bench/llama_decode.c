/*
 * llama.cpp on a GGUF file, measured the way ffi/bench/bench_decode measures rill, for bench/gptoss_bench.ts: compiled
 * against the llama.h of the llama.cpp release that the node-llama-cpp npm package bundles, linked to its prebuilt
 * CPU libraries (the CPU variant picked at run time from LIBDIR, as llama.cpp does).
 *
 *   llama_decode MODEL.gguf LIBDIR --threads N [--prompt P] [--long P2] [--steps S] [--reps R]
 *   llama_decode MODEL.gguf LIBDIR --threads N --logits OUT.f32 TOKEN...
 *
 * The first form prints one line: load time, prefill of P and of P2 tokens (one sequence, one llama_decode call,
 * llama.cpp's default micro-batch; P2 once, as it takes minutes on a large model), decode without sampling at 1 stream
 * and at 8 (one llama_decode of 8 tokens, one per sequence id, per step), medians over R repetitions; then, in an
 * untimed repeat of the 8-stream steps, the experts a step reads (distinct experts selected across its 8 tokens, per
 * layer, averaged, from the ffn_moe_topk tensors); and the process's peak resident memory (VmHWM, which counts the memory-mapped weights it touched). Fed tokens are
 * bench_decode's: token j of stream i is ((context + j) · 7919 + i · 104729) mod vocab, whatever the model predicts.
 * The second form writes the logits of every position of the prompt TOKEN... as float32 rows to OUT.f32.
 */
#define _DEFAULT_SOURCE

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../ffi/bench/read_bandwidth.h"
#include "ggml-backend.h"
#include "ggml.h"
#include "llama.h"

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

static void quiet(enum ggml_log_level level, const char *text, void *user) {
  (void)user;
  if (level == GGML_LOG_LEVEL_ERROR) fputs(text, stderr);
}

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

static int32_t g_vocab;

static llama_token token_at(int stream, int pos) {
  return (llama_token)(((int64_t)pos * 7919 + (int64_t)stream * 104729) % g_vocab);
}

/* Appends `n` tokens of stream `stream` (sequence id = stream) from position `pos`; the last one outputs logits. */
static void add_run(struct llama_batch *b, int stream, int pos, int n) {
  for (int j = 0; j < n; j++) {
    const int k = b->n_tokens++;
    b->token[k] = token_at(stream, pos + j);
    b->pos[k] = pos + j;
    b->n_seq_id[k] = 1;
    b->seq_id[k][0] = stream;
    b->logits[k] = j == n - 1;
  }
}

static int decode(struct llama_context *ctx, struct llama_batch *b) {
  const int32_t rc = llama_decode(ctx, *b);
  if (rc != 0) fprintf(stderr, "llama_decode: %d\n", rc);
  b->n_tokens = 0;
  return rc;
}

/* ---- experts per step: distinct experts among the step's tokens, summed over layers ---- */

typedef struct route_count {
  int active;       /* counting is on (only in the untimed routing pass) */
  int n_expert;     /* experts per layer */
  int64_t distinct; /* summed over the layers and steps counted */
} route_count;

static bool observe(struct ggml_tensor *t, bool ask, void *user) {
  route_count *rc = user;
  const int wanted = rc->active && strncmp(t->name, "ffn_moe_topk-", 13) == 0;
  if (ask) return wanted;
  if (!wanted || t->type != GGML_TYPE_I32 || !ggml_backend_buffer_is_host(t->buffer)) return true;
  uint8_t seen[256] = {0};
  for (int64_t tok = 0; tok < t->ne[1]; tok++) {
    const char *row = (const char *)t->data + tok * (int64_t)t->nb[1];
    for (int64_t k = 0; k < t->ne[0]; k++) {
      const int32_t e = *(const int32_t *)(row + k * (int64_t)t->nb[0]);
      if (e >= 0 && e < rc->n_expert && e < 256 && !seen[e]) {
        seen[e] = 1;
        rc->distinct++;
      }
    }
  }
  return true;
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: llama_decode MODEL.gguf LIBDIR --threads N [--prompt P] [--long P2] [--steps S] [--reps R]"
                    " | --logits OUT.f32 TOKEN...\n");
    return 2;
  }
  const char *path = argv[1], *libdir = argv[2], *logits_out = NULL;
  int threads = 1, prompt = 128, long_prompt = 2048, steps = 16, reps = 3, first_token = argc;
  for (int i = 3; i < argc; i++) {
    const char *v = i + 1 < argc ? argv[i + 1] : "0";
    if (strcmp(argv[i], "--threads") == 0) threads = atoi(v), i++;
    else if (strcmp(argv[i], "--prompt") == 0) prompt = atoi(v), i++;
    else if (strcmp(argv[i], "--long") == 0) long_prompt = atoi(v), i++;
    else if (strcmp(argv[i], "--steps") == 0) steps = atoi(v), i++;
    else if (strcmp(argv[i], "--reps") == 0) reps = atoi(v), i++;
    else if (strcmp(argv[i], "--logits") == 0) {
      logits_out = v;
      first_token = i + 2;
      break;
    } else {
      fprintf(stderr, "unknown argument %s\n", argv[i]);
      return 2;
    }
  }
  if (reps < 1 || reps > 15 || prompt < 1 || long_prompt < 1 || steps < 1 || threads < 1) {
    fprintf(stderr, "bad arguments\n");
    return 2;
  }
  llama_log_set(quiet, NULL);
  ggml_backend_load_all_from_path(libdir);
  llama_backend_init();

  /* The bandwidth this run had, measured as bench_decode measures rill's: before the load (so the probe's buffer is not
   * in the peak resident memory) and again at the end. */
  const double bw = logits_out != NULL ? 0.0 : read_bandwidth(threads);
  struct llama_model_params mp = llama_model_default_params();
  double t0 = now();
  struct llama_model *model = llama_model_load_from_file(path, mp);
  if (model == NULL) {
    fprintf(stderr, "cannot load %s\n", path);
    return 1;
  }
  const double load = now() - t0;
  g_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));

  const int n_prompt_tokens = logits_out != NULL ? argc - first_token : 0;
  /* The largest batch: a prompt, or the 8 streams' first step (16 + i tokens for stream i). */
  int biggest = n_prompt_tokens > long_prompt ? n_prompt_tokens : long_prompt > prompt ? long_prompt : prompt;
  if (biggest < 8 * (16 + 7)) biggest = 8 * (16 + 7);
  route_count routes = {0, 0, 0};
  struct llama_context_params cp = llama_context_default_params();
  cp.n_ctx = (uint32_t)((biggest + steps + 64 + 255) / 256 * 256);
  cp.n_batch = (uint32_t)(biggest > 512 ? biggest : 512);
  cp.n_seq_max = 8;
  /* One KV buffer for all sequences, so the single-sequence runs can use the whole context. */
  cp.kv_unified = true;
  cp.n_threads = threads;
  cp.n_threads_batch = threads;
  cp.no_perf = true;
  struct llama_context *ctx = llama_init_from_model(model, cp);
  if (ctx == NULL) {
    fprintf(stderr, "cannot create a context\n");
    return 1;
  }
  llama_memory_t mem = llama_get_memory(ctx);
  struct llama_batch b = llama_batch_init(biggest, 0, 8);
  b.n_tokens = 0;

  if (logits_out != NULL) {
    for (int i = 0; i < n_prompt_tokens; i++) {
      b.token[i] = (llama_token)atoi(argv[first_token + i]);
      b.pos[i] = i;
      b.n_seq_id[i] = 1;
      b.seq_id[i][0] = 0;
      b.logits[i] = 1;
    }
    b.n_tokens = n_prompt_tokens;
    if (decode(ctx, &b) != 0) return 1;
    FILE *f = fopen(logits_out, "wb");
    if (f == NULL) return 1;
    for (int i = 0; i < n_prompt_tokens; i++) {
      const float *row = llama_get_logits_ith(ctx, i);
      if (row == NULL || fwrite(row, sizeof(float), (size_t)g_vocab, f) != (size_t)g_vocab) return 1;
    }
    fclose(f);
    printf("logits: %d positions x %d\n", n_prompt_tokens, g_vocab);
    return 0;
  }

  double pf[15], pl[1], d1[15], d8[15];
  for (int r = 0; r < reps; r++) {
    double s;
    if (r == 0) {
      llama_memory_clear(mem, true);
      add_run(&b, 0, 0, long_prompt);
      s = now();
      if (decode(ctx, &b) != 0) return 1;
      pl[0] = long_prompt / (now() - s);
    }

    llama_memory_clear(mem, true);
    add_run(&b, 0, 0, prompt);
    s = now();
    if (decode(ctx, &b) != 0) return 1;
    pf[r] = prompt / (now() - s);
    s = now();
    for (int k = 0; k < steps; k++) {
      add_run(&b, 0, prompt + k, 1);
      if (decode(ctx, &b) != 0) return 1;
    }
    d1[r] = steps / (now() - s);

    llama_memory_clear(mem, true);
    for (int i = 0; i < 8; i++) add_run(&b, i, 0, 16 + i);
    if (decode(ctx, &b) != 0) return 1;
    s = now();
    for (int k = 0; k < steps; k++) {
      for (int i = 0; i < 8; i++) add_run(&b, i, 16 + i + k, 1);
      if (decode(ctx, &b) != 0) return 1;
    }
    d8[r] = 8.0 * steps / (now() - s);
  }
  /* The routing pass: the same 8-stream steps again in a context that observes the routing, untimed (observing
   * splits the graph at every observed tensor). */
  llama_free(ctx);
  {
    char buf[32];
    if (llama_model_meta_val_str(model, "gpt-oss.expert_count", buf, sizeof buf) > 0) routes.n_expert = atoi(buf);
  }
  cp.cb_eval = observe;
  cp.cb_eval_user_data = &routes;
  ctx = llama_init_from_model(model, cp);
  if (ctx == NULL) {
    fprintf(stderr, "cannot create a context\n");
    return 1;
  }
  for (int i = 0; i < 8; i++) add_run(&b, i, 0, 16 + i);
  if (decode(ctx, &b) != 0) return 1;
  routes.active = 1;
  for (int k = 0; k < steps; k++) {
    for (int i = 0; i < 8; i++) add_run(&b, i, 16 + i + k, 1);
    if (decode(ctx, &b) != 0) return 1;
  }
  routes.active = 0;
  const int layers = llama_model_n_layer(model);
  const double rss = peak_rss(), bw_after = read_bandwidth(threads);
  printf("llama.cpp: threads %d, load %.2f s | read bandwidth %.2f GB/s (%.2f after) | prefill %d: %.1f tok/s | "
         "prefill %d: %.1f tok/s | decode x1: %.2f tok/s | decode x8: %.2f tok/s | x8 experts read %.2f per layer per "
         "step | peak rss %.2f GB\n",
         threads, load, bw, bw_after, prompt, median(pf, reps), long_prompt, pl[0], median(d1, reps), median(d8, reps),
         (double)routes.distinct / ((double)steps * layers), rss / 1e9);
  llama_batch_free(b);
  llama_free(ctx);
  llama_model_free(model);
  llama_backend_free();
  return 0;
}
