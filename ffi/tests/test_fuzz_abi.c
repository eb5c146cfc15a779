/*
 * Fuzz of the step ABI with invalid batches: thousands of random batches, each a valid one with one or more
 * corruptions that make it invalid, or plain random garbage. Against rill_validate_batch directly and against a real
 * engine on a bundled model (rill_step, rill_forward_logits): every corrupted batch gets RILL_ERR_INVALID_ARGUMENT
 * and a message, nothing crashes or reads out of bounds (the program runs under AddressSanitizer/UBSan, and every
 * array is allocated at exactly the size its count declares), and the engine still serves valid steps afterwards.
 * Run from the repository root (it opens models/rill-tiny-chatml).
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "rill.h"
#include "validate.h"

#define MODEL_DIR "models/rill-tiny-chatml"
#define CAP 1024 /* logical capacity of every array; the materialised copies are exactly sized */

static uint64_t rng_state = 0x853c49e6748fea9bull;
static uint64_t next_u64(void) {
  rng_state ^= rng_state >> 12;
  rng_state ^= rng_state << 25;
  rng_state ^= rng_state >> 27;
  return rng_state * 2685821657736338717ull;
}
static int32_t rnd(int32_t lo, int32_t hi) { /* inclusive */
  return lo + (int32_t)(next_u64() % (uint64_t)((int64_t)hi - lo + 1));
}
static float rndf(float lo, float hi) { return lo + (hi - lo) * (float)((next_u64() >> 40) / 16777216.0); }

/* A batch described logically: counts plus arrays of ample capacity. */
typedef struct logical {
  int32_t num_seqs, num_tokens, stride, num_mask_rows, history_len, bias_len;
  int32_t seq_ids[CAP], tokens[CAP], positions[CAP], query_start[CAP], context_lens[CAP], draft_counts[CAP];
  uint8_t sample_flags[CAP];
  int32_t block_tables[CAP];
#define SAMPLING_ARRAY(name, type, limit, neutral) type name[CAP];
  RILL_SAMPLING_FIELDS(SAMPLING_ARRAY)
#undef SAMPLING_ARRAY
  int32_t mask_row_start[CAP], history_start[CAP], history[CAP], prompt_lens[CAP];
  int32_t bias_start[CAP], bias_ids[CAP];
  float bias_values[CAP];
  uint32_t mask[CAP];
  int null_field; /* -1: none; else the index of a required pointer to pass as NULL */
} logical;

/* The exactly-sized arrays handed to the library. */
enum {
#define SAMPLING_ONE(name, type, limit, neutral) +1
  SAMPLING_COUNT = 0 RILL_SAMPLING_FIELDS(SAMPLING_ONE)
#undef SAMPLING_ONE
};

typedef struct materialised {
  void *arrays[16 + SAMPLING_COUNT]; /* the 16 other arrays and the sampling arrays */
  rill_step_batch b;
} materialised;

static void *copy_exact(const void *src, int64_t count, size_t elem) {
  if (count <= 0) return NULL;
  void *p = malloc((size_t)count * elem);
  memcpy(p, src, (size_t)count * elem);
  return p;
}

static int32_t clamp_count(int64_t n) { return n < 0 ? 0 : (n > CAP ? CAP : (int32_t)n); }

/* Copies each array at the size its declared count implies (0 or negative counts: NULL). */
static void materialise(const logical *l, int32_t vocab, materialised *m) {
  const int32_t B = clamp_count(l->num_seqs), T = clamp_count(l->num_tokens);
  const int32_t W = (vocab + 31) / 32;
  const int64_t bt = (int64_t)B * (l->stride > 0 ? l->stride : 0);
  const int64_t mask_words = (int64_t)(l->num_mask_rows > 0 ? l->num_mask_rows : 0) * W;
  int k = 0;
  memset(m, 0, sizeof *m);
  rill_step_batch *b = &m->b;
  b->num_seqs = l->num_seqs;
  b->num_tokens = l->num_tokens;
  b->block_table_stride = l->stride;
  b->num_mask_rows = l->num_mask_rows;
  b->history_len = l->history_len;
  b->bias_len = l->bias_len;
#define COPY(field, src, n) b->field = m->arrays[k++] = copy_exact(src, (n), sizeof((src)[0]))
  COPY(seq_ids, l->seq_ids, B);
  COPY(tokens, l->tokens, T);
  COPY(positions, l->positions, T);
  COPY(query_start, l->query_start, B + 1);
  COPY(context_lens, l->context_lens, B);
  COPY(draft_counts, l->draft_counts, B);
  COPY(sample_flags, l->sample_flags, B);
  COPY(block_tables, l->block_tables, bt > CAP ? CAP : bt);
#define COPY_SAMPLING(name, type, limit, neutral) COPY(name, l->name, B);
  RILL_SAMPLING_FIELDS(COPY_SAMPLING)
#undef COPY_SAMPLING
  COPY(mask_row_start, l->mask_row_start, B);
  COPY(allowed_mask, l->mask, mask_words > CAP ? CAP : mask_words);
  COPY(history_start, l->history_start, B + 1);
  COPY(history, l->history, clamp_count(l->history_len));
  COPY(history_prompt_lens, l->prompt_lens, B);
  COPY(bias_start, l->bias_start, B + 1);
  COPY(bias_ids, l->bias_ids, clamp_count(l->bias_len));
  COPY(bias_values, l->bias_values, clamp_count(l->bias_len));
#undef COPY
  if (l->null_field >= 0) {
    const void **fields[] = {(const void **)&b->seq_ids,       (const void **)&b->tokens,
                             (const void **)&b->positions,     (const void **)&b->query_start,
                             (const void **)&b->context_lens,  (const void **)&b->draft_counts,
                             (const void **)&b->sample_flags,  (const void **)&b->block_tables,
#define SAMPLING_FIELD(name, type, limit, neutral) (const void **)&b->name,
                             RILL_SAMPLING_FIELDS(SAMPLING_FIELD)
#undef SAMPLING_FIELD
                             (const void **)&b->mask_row_start,
                             (const void **)&b->history_start, (const void **)&b->history_prompt_lens,
                             (const void **)&b->bias_start};
    *fields[l->null_field % (int)(sizeof fields / sizeof fields[0])] = NULL;
  }
}

static void release_materialised(materialised *m) {
  for (size_t k = 0; k < sizeof m->arrays / sizeof m->arrays[0]; k++) free(m->arrays[k]);
}

/* A valid batch within lim whose sequences use disjoint blocks. */
static void make_valid(logical *l, const rill_limits *lim) {
  memset(l, 0, sizeof *l);
  for (int32_t i = 0; i < CAP; i++) {
#define SAMPLING_NEUTRAL(name, type, limit, neutral) l->name[i] = (type)(neutral);
    RILL_SAMPLING_FIELDS(SAMPLING_NEUTRAL)
#undef SAMPLING_NEUTRAL
  }
  l->null_field = -1;
  const int32_t B = rnd(1, lim->max_seqs < 4 ? lim->max_seqs : 4);
  const int32_t max_ctx = lim->max_positions < 40 ? lim->max_positions : 40;
  int32_t fed[8], need_blocks = 1;
  int32_t T = 0;
  for (int32_t i = 0; i < B; i++) {
    fed[i] = rnd(1, 6);
    if (T + fed[i] > lim->max_batch_tokens) fed[i] = 1;
    T += fed[i];
    l->context_lens[i] = fed[i] + rnd(0, max_ctx - fed[i]);
    const int32_t blocks = (l->context_lens[i] + lim->block_size - 1) / lim->block_size;
    if (blocks > need_blocks) need_blocks = blocks;
  }
  l->num_seqs = B;
  l->num_tokens = T;
  l->stride = need_blocks + rnd(0, 2);
  int32_t t = 0, mask_rows = 0, hist = 0;
  const int32_t W = (lim->vocab_size + 31) / 32;
  for (int32_t i = 0; i < B; i++) {
    l->seq_ids[i] = rnd(0, 1000000);
    l->query_start[i] = t;
    for (int32_t j = 0; j < fed[i]; j++, t++) {
      l->tokens[t] = rnd(0, lim->vocab_size - 1);
      l->positions[t] = l->context_lens[i] - fed[i] + j;
    }
    for (int32_t j = 0; j < l->stride; j++) {
      const int32_t used = (l->context_lens[i] + lim->block_size - 1) / lim->block_size;
      l->block_tables[i * l->stride + j] = j < used ? (i * l->stride + j) % lim->num_blocks : -1;
    }
    l->sample_flags[i] = (uint8_t)(rnd(0, 4) != 0);
    l->draft_counts[i] = l->sample_flags[i] ? rnd(0, fed[i] - 1 < lim->max_drafts ? fed[i] - 1 : lim->max_drafts) : 0;
    l->temperature[i] = rnd(0, 1) ? 0.0f : rndf(0.1f, 2.0f);
    l->top_p[i] = rnd(0, 1) ? 1.0f : rndf(0.0f, 1.0f);
    l->top_k[i] = rnd(0, 1) ? 0 : rnd(1, 50);
    l->min_p[i] = rnd(0, 1) ? 0.0f : rndf(0.0f, 0.3f);
    l->presence_penalty[i] = rnd(0, 2) ? 0.0f : rndf(-2.0f, 2.0f);
    l->frequency_penalty[i] = rnd(0, 2) ? 0.0f : rndf(-2.0f, 2.0f);
    l->repetition_penalty[i] = rnd(0, 2) ? 1.0f : rndf(0.5f, 2.0f);
    l->seeds[i] = next_u64();
    l->logprobs[i] = rnd(-1, lim->max_top_logprobs);
    if (rnd(0, 2) == 0) {
      l->mask_row_start[i] = mask_rows;
      for (int32_t r = 0; r <= l->draft_counts[i]; r++, mask_rows++) {
        for (int32_t w = 0; w < W; w++) l->mask[mask_rows * W + w] = (uint32_t)next_u64();
        const int32_t allowed = rnd(0, lim->vocab_size - 1);
        l->mask[mask_rows * W + allowed / 32] |= 1u << (allowed % 32);
      }
    } else {
      l->mask_row_start[i] = -1;
    }
    l->history_start[i] = hist;
    const int32_t h = rnd(0, 12);
    for (int32_t j = 0; j < h; j++) l->history[hist + j] = rnd(0, lim->vocab_size - 1);
    l->prompt_lens[i] = rnd(0, h);
    hist += h;
    l->bias_start[i] = l->bias_len;
    const int32_t nb = rnd(0, 2) ? 0 : rnd(1, 4);
    for (int32_t j = 0; j < nb; j++, l->bias_len++) {
      l->bias_ids[l->bias_len] = rnd(0, lim->vocab_size - 1);
      l->bias_values[l->bias_len] = rndf(-100.0f, 100.0f);
    }
  }
  l->bias_start[B] = l->bias_len;
  l->query_start[B] = T;
  l->history_start[B] = hist;
  l->history_len = hist;
  l->num_mask_rows = mask_rows;
}

#define NUM_CORRUPTIONS 34

/* Makes a valid batch invalid in one way; every branch is a violation docs/backend-step.md names. */
static void corrupt(logical *l, const rill_limits *lim, int kind) {
  const int32_t B = l->num_seqs, T = l->num_tokens;
  /* a second corruption after one that broke the counts has nothing safe to index: the batch is invalid already */
  if (B < 1 || B >= CAP || T < 1 || T > CAP || l->stride < 1 || (int64_t)B * l->stride > CAP || l->history_len < 0 ||
      l->history_len >= CAP || l->bias_len < 0 || l->bias_len >= CAP)
    return;
  const int32_t i = rnd(0, B - 1);
  const int32_t fed = l->query_start[i + 1] - l->query_start[i];
  switch (kind) {
    case 0: l->tokens[rnd(0, T - 1)] = rnd(0, 1) ? rnd(lim->vocab_size, INT32_MAX) : rnd(INT32_MIN, -1); break;
    case 1: l->block_tables[i * l->stride] = rnd(0, 1) ? rnd(lim->num_blocks, INT32_MAX) : rnd(INT32_MIN, -1); break;
    case 2: l->query_start[0] = rnd(1, T); break;
    case 3: l->query_start[B] = T + rnd(1, 5); break;
    case 4: l->query_start[i + 1] = l->query_start[i] - rnd(0, 3); break;
    case 5: l->positions[rnd(0, T - 1)] += rnd(0, 1) ? rnd(1, 100) : -rnd(1, 100); break;
    case 6: l->context_lens[i] = rnd(0, 1) ? rnd(INT32_MIN, fed - 1) : lim->max_positions + rnd(1, 1000); break;
    case 7: l->draft_counts[i] = rnd(0, 1) ? rnd(INT32_MIN, -1) : lim->max_drafts + rnd(1, 100); break;
    case 8: l->sample_flags[i] = 1; l->draft_counts[i] = fed + rnd(0, 3); break;
    case 9: l->logprobs[i] = rnd(0, 1) ? rnd(INT32_MIN, -2) : lim->max_top_logprobs + rnd(1, 100); break;
    case 10: l->mask_row_start[i] = rnd(0, 1) ? rnd(INT32_MIN, -2) : l->num_mask_rows + rnd(0, 5); break;
    case 11: l->history_start[B] = l->history_len + rnd(1, 50); break;
    case 12: l->history_start[0] = rnd(INT32_MIN, -1); break;
    case 13:
      if (l->history_len == 0) {
        l->history_len = 1;
        l->history_start[B] = 1;
      }
      l->history[rnd(0, l->history_len - 1)] = rnd(0, 1) ? rnd(lim->vocab_size, INT32_MAX) : rnd(INT32_MIN, -1);
      break;
    case 14:
    {
      const int64_t span = (int64_t)l->history_start[i + 1] - l->history_start[i];
      l->prompt_lens[i] = rnd(0, 1) || span < 0 || span > 1000 ? rnd(INT32_MIN, -1) : (int32_t)span + rnd(1, 9);
      break;
    }
    case 15: l->temperature[i] = rnd(0, 2) == 0 ? NAN : (rnd(0, 1) ? INFINITY : -rndf(0.01f, 5.0f)); break;
    case 16: l->top_p[i] = rnd(0, 1) ? NAN : (rnd(0, 1) ? rndf(1.01f, 5.0f) : -rndf(0.01f, 5.0f)); break;
    case 17: l->top_k[i] = rnd(INT32_MIN, -1); break;
    case 18: l->min_p[i] = rnd(0, 1) ? NAN : rndf(1.01f, 3.0f); break;
    case 19: l->presence_penalty[i] = rnd(0, 1) ? INFINITY : NAN; break;
    case 20: l->frequency_penalty[i] = rnd(0, 1) ? -INFINITY : NAN; break;
    case 21: l->repetition_penalty[i] = rnd(0, 1) ? -rndf(0.0f, 3.0f) : NAN; break;
    case 22: l->sample_flags[i] = (uint8_t)rnd(2, 255); break;
    case 23: l->num_seqs = rnd(0, 1) ? rnd(INT32_MIN, 0) : lim->max_seqs + rnd(1, 100); break;
    case 24: /* more tokens than the batch may hold (the arrays grow with the count) */
      l->num_tokens = lim->max_batch_tokens + rnd(1, 10);
      if (l->num_tokens > CAP) l->num_tokens = CAP;
      break;
    case 25: l->num_tokens = rnd(0, 1) ? rnd(INT32_MIN, 0) : B - 1; break;
    case 26: { /* a stride too small for the longest context */
      int32_t need = 1;
      for (int32_t s = 0; s < B; s++) {
        const int32_t blocks = (l->context_lens[s] + lim->block_size - 1) / lim->block_size;
        if (blocks > need) need = blocks;
      }
      l->stride = rnd(0, 1) ? rnd(INT32_MIN, 0) : need - 1;
      break;
    }
    case 27: l->null_field = rnd(0, 1000); break;
    case 28: l->num_mask_rows = rnd(INT32_MIN, -1); break;
    case 29: l->history_len = rnd(INT32_MIN, -1); break;
    case 30: l->bias_len = rnd(INT32_MIN, -1); break;
    case 31: l->bias_start[B] = l->bias_len + rnd(1, 50); break;
    case 32:
      if (l->bias_len == 0) {
        l->bias_len = 1;
        l->bias_start[B] = 1;
      }
      l->bias_ids[rnd(0, l->bias_len - 1)] = rnd(0, 1) ? rnd(lim->vocab_size, INT32_MAX) : rnd(INT32_MIN, -1);
      break;
    case 33:
      if (l->bias_len == 0) {
        l->bias_len = 1;
        l->bias_start[B] = 1;
      }
      l->bias_values[rnd(0, l->bias_len - 1)] = rnd(0, 2) == 0 ? NAN : (rnd(0, 1) ? INFINITY : -INFINITY);
      break;
    default: break;
  }
}

/* Random counts and contents: anything may happen except a crash; a rejection carries a message. */
static void make_garbage(logical *l, const rill_limits *lim) {
  memset(l, 0, sizeof *l);
  l->null_field = rnd(0, 9) == 0 ? rnd(0, 100) : -1;
  l->num_seqs = rnd(-2, 10);
  l->num_tokens = rnd(-2, 40);
  l->stride = rnd(-1, 5);
  l->num_mask_rows = rnd(-1, 6);
  l->history_len = rnd(-1, 20);
  l->bias_len = rnd(-1, 10);
  for (int32_t k = 0; k < 64; k++) {
    l->seq_ids[k] = rnd(-5, 5);
    l->tokens[k] = rnd(-2, lim->vocab_size + 2);
    l->positions[k] = rnd(-2, 40);
    l->query_start[k] = rnd(-2, 40);
    l->context_lens[k] = rnd(-2, 50);
    l->draft_counts[k] = rnd(-1, lim->max_drafts + 1);
    l->sample_flags[k] = (uint8_t)rnd(0, 2);
    l->block_tables[k] = rnd(-2, lim->num_blocks + 1);
    l->temperature[k] = rndf(-0.5f, 2.0f);
    l->top_p[k] = rndf(-0.2f, 1.2f);
    l->top_k[k] = rnd(-2, 20);
    l->min_p[k] = rndf(-0.2f, 1.2f);
    l->presence_penalty[k] = rndf(-2.0f, 2.0f);
    l->frequency_penalty[k] = rndf(-2.0f, 2.0f);
    l->repetition_penalty[k] = rndf(-0.5f, 2.0f);
    l->seeds[k] = next_u64();
    l->logprobs[k] = rnd(-2, lim->max_top_logprobs + 1);
    l->mask_row_start[k] = rnd(-2, 6);
    l->history_start[k] = rnd(-2, 20);
    l->history[k] = rnd(-2, lim->vocab_size + 2);
    l->prompt_lens[k] = rnd(-2, 20);
    l->bias_start[k] = rnd(-2, 12);
    l->bias_ids[k] = rnd(-2, lim->vocab_size + 2);
    l->bias_values[k] = rndf(-150.0f, 150.0f);
  }
  for (int32_t k = 0; k < CAP; k++) l->mask[k] = (uint32_t)next_u64();
}

static logical g_logical;

/* Direct validation: corrupted batches are always rejected with a message; garbage never crashes. */
static void fuzz_validate(int rounds) {
  const rill_limits lim = {200, 64, 8, 40, 48, 6, 3, 4, 0, 0};
  char err[256];
  int corrupted = 0, corrupted_rejected = 0, corrupted_with_message = 0, valid_ok = 0, valid = 0;
  int garbage_rejected = 0, garbage_silent = 0;
  for (int n = 0; n < rounds; n++) {
    materialised m;
    const int mode = n % 4;
    if (mode == 3) {
      make_garbage(&g_logical, &lim);
    } else {
      make_valid(&g_logical, &lim);
      if (mode != 0) {
        corrupt(&g_logical, &lim, rnd(0, NUM_CORRUPTIONS - 1));
        if (rnd(0, 3) == 0) corrupt(&g_logical, &lim, rnd(0, NUM_CORRUPTIONS - 1));
      }
    }
    materialise(&g_logical, lim.vocab_size, &m);
    strcpy(err, "");
    const rill_status st = rill_validate_batch(&m.b, &lim, err, sizeof err);
    if (mode == 0) {
      valid++;
      if (st == RILL_OK) valid_ok++;
      else fprintf(stderr, "valid batch rejected: %s\n", err);
    } else if (mode == 3) {
      if (st != RILL_OK) {
        garbage_rejected++;
        if (err[0] == '\0') garbage_silent++;
      }
    } else {
      corrupted++;
      if (st == RILL_ERR_INVALID_ARGUMENT) corrupted_rejected++;
      else if (corrupted - corrupted_rejected <= 5) fprintf(stderr, "corrupted batch accepted (round %d)\n", n);
      if (err[0] != '\0') corrupted_with_message++;
    }
    release_materialised(&m);
  }
  CHECK_EQ_INT(valid_ok, valid);
  CHECK_EQ_INT(corrupted_rejected, corrupted);
  CHECK_EQ_INT(corrupted_with_message, corrupted);
  CHECK(garbage_rejected > rounds / 8);
  CHECK_EQ_INT(garbage_silent, 0);
}

/* The engine: corrupted steps are rejected with rill_last_error set, valid ones keep working in between. */
static void fuzz_engine(int rounds) {
  rill_options opts;
  memset(&opts, 0, sizeof opts);
  opts.threads = 1;
  opts.block_size = 8;
  opts.num_blocks = 64;
  opts.max_seqs = 6;
  opts.max_batch_tokens = 48;
  opts.max_drafts = 3;
  opts.max_top_logprobs = 4;
  rill_engine *e = NULL;
  const rill_status created = rill_engine_create(MODEL_DIR, &opts, &e);
  CHECK_MSG(created == RILL_OK && e != NULL, "rill_engine_create(%s): %s (run from the repository root)", MODEL_DIR,
            rill_global_error());
  if (e == NULL) return;
  rill_info info;
  CHECK(rill_engine_info(e, &info) == RILL_OK);
  const rill_limits lim = {info.vocab_size, info.max_positions, info.block_size, info.num_blocks,
                           info.max_batch_tokens, info.max_seqs, info.max_drafts, info.max_top_logprobs, info.sliding_window,
                           info.num_sliding_blocks};
  const int32_t K1 = lim.max_drafts + 1, L = lim.max_top_logprobs;
  int32_t *counts = calloc((size_t)CAP, sizeof(int32_t)), *tokens = calloc((size_t)CAP * K1, sizeof(int32_t));
  float *lps = calloc((size_t)CAP * K1, sizeof(float));
  int32_t *top_ids = calloc((size_t)CAP * K1 * L, sizeof(int32_t));
  float *top_lps = calloc((size_t)CAP * K1 * L, sizeof(float));
  float *logits = malloc((size_t)lim.max_batch_tokens * lim.vocab_size * sizeof(float));
  rill_step_result res = {counts, tokens, lps, top_ids, top_lps, NULL, NULL};

  int corrupted = 0, rejected = 0, with_message = 0, valid = 0, valid_ok = 0, results_ok = 0, garbage = 0;
  for (int n = 0; n < rounds; n++) {
    materialised m;
    /* 0: valid step, 1: valid forward_logits, 2-4: garbage, else corrupted (valid steps run the model: keep them few) */
    const int mode = n % 40 < 2 ? n % 40 : (n % 40 < 5 ? 2 : 3);
    if (mode == 2) {
      make_garbage(&g_logical, &lim);
    } else {
      make_valid(&g_logical, &lim);
      if (mode >= 3) corrupt(&g_logical, &lim, rnd(0, NUM_CORRUPTIONS - 1));
    }
    materialise(&g_logical, lim.vocab_size, &m);
    const int use_logits = mode == 1 || (mode >= 3 && rnd(0, 3) == 0);
    const rill_status st = use_logits ? rill_forward_logits(e, &m.b, logits) : rill_step(e, &m.b, &res);
    const char *msg = rill_last_error(e);
    if (mode <= 1) {
      valid++;
      if (st == RILL_OK) valid_ok++;
      else fprintf(stderr, "valid batch failed: %s\n", msg);
      if (st == RILL_OK && mode == 0) {
        int ok = 1;
        for (int32_t i = 0; i < m.b.num_seqs; i++) {
          const int32_t c = counts[i];
          if (!g_logical.sample_flags[i]) {
            ok = ok && c == 0;
            continue;
          }
          ok = ok && c >= 1 && c <= g_logical.draft_counts[i] + 1;
          for (int32_t r = 0; r < c && ok; r++) ok = tokens[i * K1 + r] >= 0 && tokens[i * K1 + r] < lim.vocab_size;
        }
        results_ok += ok;
      } else if (st == RILL_OK) {
        results_ok++;
      }
    } else if (mode == 2) {
      garbage++;
      if (st != RILL_OK && msg[0] == '\0') CHECK_MSG(0, "garbage batch rejected without a message");
    } else {
      corrupted++;
      if (st == RILL_ERR_INVALID_ARGUMENT) rejected++;
      if (st != RILL_OK && msg[0] != '\0') with_message++;
    }
    release_materialised(&m);
  }
  CHECK_EQ_INT(valid_ok, valid);
  CHECK_EQ_INT(results_ok, valid);
  CHECK_EQ_INT(rejected, corrupted);
  CHECK_EQ_INT(with_message, corrupted);
  CHECK(garbage > 0);

  /* NULL arguments are errors, not crashes */
  CHECK(rill_step(NULL, NULL, NULL) != RILL_OK);
  CHECK(rill_step(e, NULL, &res) == RILL_ERR_INVALID_ARGUMENT);
  make_valid(&g_logical, &lim);
  materialised m;
  materialise(&g_logical, lim.vocab_size, &m);
  CHECK(rill_step(e, &m.b, NULL) == RILL_ERR_INVALID_ARGUMENT);
  CHECK(rill_forward_logits(e, &m.b, NULL) == RILL_ERR_INVALID_ARGUMENT);
  CHECK(rill_forward_logits(NULL, &m.b, logits) != RILL_OK);
  release_materialised(&m);
  CHECK(rill_engine_info(NULL, &info) != RILL_OK);
  CHECK(rill_engine_info(e, NULL) != RILL_OK);
  CHECK(rill_release(e, -5) == RILL_OK);
  CHECK(rill_release(NULL, 1) != RILL_OK);
  CHECK(rill_last_error(NULL) != NULL);

  free(counts);
  free(tokens);
  free(lps);
  free(top_ids);
  free(top_lps);
  free(logits);
  rill_engine_destroy(e);
  rill_engine_destroy(NULL);
}

static void fuzz_create(void) {
  static char sentinel;
  rill_engine *e = (rill_engine *)(void *)&sentinel; /* rill_engine_create must reset it to NULL on failure */
  CHECK(rill_engine_create(NULL, NULL, &e) != RILL_OK && e == NULL);
  CHECK(rill_engine_create("/nonexistent/rill-model", NULL, &e) != RILL_OK && e == NULL);
  CHECK(rill_global_error()[0] != '\0');
  CHECK(rill_engine_create(MODEL_DIR, NULL, NULL) != RILL_OK);
  rill_options bad;
  memset(&bad, 0, sizeof bad);
  bad.block_size = -3;
  CHECK(rill_engine_create(MODEL_DIR, &bad, &e) != RILL_OK && e == NULL);
  memset(&bad, 0, sizeof bad);
  bad.device = "no-such-device";
  CHECK(rill_engine_create(MODEL_DIR, &bad, &e) != RILL_OK && e == NULL);
  memset(&bad, 0, sizeof bad);
  bad.dtype = "fp7";
  CHECK(rill_engine_create(MODEL_DIR, &bad, &e) != RILL_OK && e == NULL);
}

int main(void) {
  fuzz_validate(20000);
  fuzz_engine(4000);
  fuzz_create();
  return check_summary();
}
