/*
 * Draft-model speculation inside rill_step: option errors (empty path, missing directory, another vocabulary),
 * batch errors for propose_counts (no draft model, over max_drafts, unsampled sequence, lookahead slots outside the
 * block table or past max_positions), and decoding with proposals fed back as drafts: a model drafting for itself
 * has every draft accepted, another checkpoint with the same vocabulary some, and in both cases (and batched) the
 * greedy tokens equal plain decoding's — also for gpt-oss as target and as draft (MoE, sinks, a 20-position window over
 * 4-slot blocks); and a fuzz of random batches around the lookahead rule.
 */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "rill.h"
#include "test_model_batch.h"

#define TARGET "tests/fixtures/checkpoints/llama3-fp32"
#define OTHER "tests/fixtures/checkpoints/qwen2-fp32"
#define GPTOSS "tests/fixtures/checkpoints/gptoss-bf16"
#define BIG_VOCAB "models/rill-tiny-chatml"
#define V 96
#define BS 4
#define MAXPOS 64
#define KMAX 4
#define PER_SEQ (MAXPOS / BS)

#include "spec_step_outputs.h"

/* The model the engines under test serve. */
static const char *target = TARGET;

static rill_engine *open_with(const char *draft, rill_status *status) {
  rill_options o = {0};
  o.threads = 2;
  o.block_size = BS;
  o.num_blocks = 4 * PER_SEQ;
  o.max_batch_tokens = 256;
  o.max_seqs = 8;
  o.max_drafts = KMAX;
  o.draft_model_dir = draft;
  o.max_model_len = MAXPOS; /* a draft must cover the target's positions: gpt-oss has far more than the others */
  rill_engine *e = NULL;
  *status = rill_engine_create(target, &o, &e);
  return e;
}

static rill_engine *open_engine(const char *draft) {
  rill_status s;
  rill_engine *e = open_with(draft, &s);
  CHECK_MSG(s == RILL_OK && e != NULL, "create with draft %s: %s", draft ? draft : "(none)", rill_global_error());
  return e;
}

static void test_bad_options(void) {
  rill_status s;
  rill_engine *e = open_with("", &s);
  CHECK(e == NULL && s == RILL_ERR_INVALID_ARGUMENT);
  e = open_with("tests/fixtures/no-such-model", &s);
  CHECK(e == NULL && s != RILL_OK);
  CHECK_MSG(strstr(rill_global_error(), "draft model: ") == rill_global_error(), "missing dir: %s",
            rill_global_error());
  e = open_with(BIG_VOCAB, &s);
  CHECK(e == NULL && s == RILL_ERR_INVALID_ARGUMENT);
  CHECK_MSG(strstr(rill_global_error(), "vocabulary of 1024 tokens, the target's has 96") != NULL, "vocab: %s",
            rill_global_error());
  CHECK(strchr(rill_global_error(), '\n') == NULL);
  e = open_engine(OTHER);
  rill_info info;
  CHECK(rill_engine_info(e, &info) == RILL_OK);
  CHECK(info.draft_weight_bytes > 0);
  CHECK_EQ_INT(info.abi_version, RILL_ABI_VERSION);
  rill_engine_destroy(e);
  e = open_engine(NULL);
  CHECK(rill_engine_info(e, &info) == RILL_OK);
  CHECK_EQ_INT(info.draft_weight_bytes, 0);
  rill_engine_destroy(e);
}

static void test_bad_batches(void) {
  int32_t table[PER_SEQ];
  for (int j = 0; j < PER_SEQ; j++) table[j] = j;
  const int32_t prompt[6] = {3, 14, 15, 92, 65, 35};
  outputs out;
  rill_step_result r = result_of(&out);

  rill_engine *plain = open_engine(NULL);
  model_batch mb;
  mb_init(&mb);
  mb_add(&mb, 1, prompt, 6, 0, table, PER_SEQ, 1, 0);
  rill_step_batch b = mb_batch(&mb);
  int32_t propose[MB_MAX_SEQS] = {2};
  b.propose_counts = propose;
  CHECK(rill_step(plain, &b, &r) == RILL_ERR_INVALID_ARGUMENT);
  CHECK_MSG(strstr(rill_last_error(plain), "no draft model") != NULL, "%s", rill_last_error(plain));
  propose[0] = 0;
  CHECK_MSG(rill_step(plain, &b, &r) == RILL_OK, "%s", rill_last_error(plain));
  CHECK_EQ_INT(out.proposed_counts[0], 0);
  rill_engine_destroy(plain);

  rill_engine *e = open_engine(TARGET);
  propose[0] = KMAX + 1;
  CHECK(rill_step(e, &b, &r) == RILL_ERR_INVALID_ARGUMENT);
  CHECK(strstr(rill_last_error(e), "propose_counts[0]") != NULL);
  /* Lookahead slots past the table: context 6 + 3 proposals needs 3 blocks of 4, the table lists 2. */
  mb_init(&mb);
  mb_add(&mb, 1, prompt, 6, 0, table, 2, 1, 0);
  b = mb_batch(&mb);
  b.propose_counts = propose;
  propose[0] = 3;
  CHECK(rill_step(e, &b, &r) == RILL_ERR_INVALID_ARGUMENT);
  CHECK_MSG(strstr(rill_last_error(e), "lookahead") != NULL, "%s", rill_last_error(e));
  propose[0] = 2; /* 6 + 2 fits two blocks */
  CHECK_MSG(rill_step(e, &b, &r) == RILL_OK, "%s", rill_last_error(e));
  CHECK_EQ_INT(out.proposed_counts[0], 2);
  /* Not sampled. */
  mb_init(&mb);
  mb_add(&mb, 1, prompt, 6, 0, table, PER_SEQ, 0, 0);
  b = mb_batch(&mb);
  b.propose_counts = propose;
  CHECK(rill_step(e, &b, &r) == RILL_ERR_INVALID_ARGUMENT);
  CHECK(strstr(rill_last_error(e), "not sampled") != NULL);
  /* Past max_positions: context 62 + 3. */
  int32_t longp[62];
  for (int i = 0; i < 62; i++) longp[i] = (i * 7) % V;
  mb_init(&mb);
  mb_add(&mb, 1, longp, 62, 0, table, PER_SEQ, 1, 0);
  b = mb_batch(&mb);
  b.propose_counts = propose;
  propose[0] = 3;
  CHECK(rill_step(e, &b, &r) == RILL_ERR_INVALID_ARGUMENT);
  CHECK(strstr(rill_last_error(e), "max_positions") != NULL);
  /* NULL proposal buffers. */
  propose[0] = 1;
  rill_step_result r2 = r;
  r2.proposed = NULL;
  CHECK(rill_step(e, &b, &r2) == RILL_ERR_INVALID_ARGUMENT);
  rill_engine_destroy(e);
}

typedef struct seq_state {
  int32_t tokens[MAXPOS];
  int32_t len, computed, k; /* k: proposals asked each step (0: no speculation) */
  int32_t drafts[KMAX], num_drafts;
} seq_state;

/* Decodes every sequence to `total` tokens the way the engine does: prefill, then each step feeds the last token plus
 * the previous step's proposals as drafts. Sequence i uses blocks i × PER_SEQ ... Returns drafts accepted. */
static int decode(rill_engine *e, seq_state *seqs, int n, int total, int *drafted) {
  int accepted = 0;
  *drafted = 0;
  outputs out;
  rill_step_result r = result_of(&out);
  for (int guard = 0; guard < 200; guard++) {
    model_batch mb;
    mb_init(&mb);
    int32_t propose[MB_MAX_SEQS] = {0};
    int live[MB_MAX_SEQS], nl = 0;
    for (int i = 0; i < n; i++) {
      seq_state *s = &seqs[i];
      if (s->len >= total) continue;
      int32_t table[PER_SEQ];
      for (int j = 0; j < PER_SEQ; j++) table[j] = i * PER_SEQ + j;
      int32_t fed[MAXPOS];
      int nf = 0;
      for (int p = s->computed; p < s->len; p++) fed[nf++] = s->tokens[p];
      int nd = s->num_drafts;
      if (nd > total - s->len - 1) nd = total - s->len - 1 > 0 ? total - s->len - 1 : 0;
      for (int d = 0; d < nd; d++) fed[nf++] = s->drafts[d];
      mb_add(&mb, i + 1, fed, nf, s->computed, table, PER_SEQ, 1, nd);
      int ctx = s->len + nd;
      int k = s->k < MAXPOS - ctx ? s->k : MAXPOS - ctx;
      propose[nl] = k;
      live[nl++] = i;
      *drafted += nd;
    }
    if (nl == 0) return accepted;
    rill_step_batch b = mb_batch(&mb);
    b.propose_counts = propose;
    rill_status st = rill_step(e, &b, &r);
    CHECK_MSG(st == RILL_OK, "step: %s", rill_last_error(e));
    if (st != RILL_OK) return -1;
    for (int q = 0; q < nl; q++) {
      seq_state *s = &seqs[live[q]];
      int c = out.counts[q];
      int nd = mb.draft_counts[q];
      CHECK(c >= 1 && c <= nd + 1);
      accepted += c - 1;
      s->computed = s->len + c - 1;
      for (int j = 0; j < c && s->len < total; j++) s->tokens[s->len++] = out.tokens[q * (KMAX + 1) + j];
      CHECK_EQ_INT(out.proposed_counts[q], propose[q]);
      s->num_drafts = out.proposed_counts[q];
      for (int d = 0; d < s->num_drafts; d++) {
        int32_t t = out.proposed[q * KMAX + d];
        CHECK(t >= 0 && t < V);
        s->drafts[d] = t;
      }
    }
  }
  CHECK_MSG(0, "decode did not finish");
  return accepted;
}

static void init_seq(seq_state *s, uint32_t seed, int k) {
  memset(s, 0, sizeof *s);
  s->len = 7;
  for (int i = 0; i < s->len; i++) {
    seed = seed * 1664525u + 1013904223u;
    s->tokens[i] = (int32_t)((seed >> 8) % V);
  }
  s->k = k;
}

/* Decoding on `target` with itself and with `other` as the draft model; `some`: other's drafts must be accepted at
 * times (a pair of random models that agree rarely is only held to an unchanged output). */
static void test_decoding(const char *other_dir, int some) {
  enum { TOTAL = 60 };
  rill_engine *plain = open_engine(NULL);
  seq_state ref[3];
  int drafted = 0;
  for (int i = 0; i < 3; i++) {
    init_seq(&ref[i], 11u + (uint32_t)i, 0);
    decode(plain, &ref[i], 1, TOTAL, &drafted);
  }
  rill_engine_destroy(plain);

  /* The target drafting for itself: every proposal is the target's own greedy token. */
  rill_engine *self = open_engine(target);
  seq_state s;
  init_seq(&s, 11u, KMAX);
  int acc = decode(self, &s, 1, TOTAL, &drafted);
  CHECK(memcmp(s.tokens, ref[0].tokens, sizeof s.tokens) == 0);
  CHECK_MSG(drafted > 0 && acc == drafted, "self draft: %d of %d accepted", acc, drafted);
  /* Batched, mixed k (one sequence not speculating): the same tokens. */
  seq_state three[3];
  for (int i = 0; i < 3; i++) init_seq(&three[i], 11u + (uint32_t)i, i == 1 ? 0 : 1 + i);
  decode(self, three, 3, TOTAL, &drafted);
  for (int i = 0; i < 3; i++) CHECK_MSG(memcmp(three[i].tokens, ref[i].tokens, sizeof s.tokens) == 0, "batched %d", i);
  rill_engine_destroy(self);

  /* Another random checkpoint with the same vocabulary: some drafts rejected, the output unchanged. */
  rill_engine *other = open_engine(other_dir);
  for (int i = 0; i < 3; i++) init_seq(&three[i], 11u + (uint32_t)i, KMAX);
  acc = decode(other, three, 3, TOTAL, &drafted);
  for (int i = 0; i < 3; i++) CHECK_MSG(memcmp(three[i].tokens, ref[i].tokens, sizeof s.tokens) == 0, "other %d", i);
  CHECK_MSG(drafted > 0 && (acc > 0 || !some) && acc < drafted, "other draft: %d of %d accepted", acc, drafted);
  printf("%s drafting for %s: %d of %d drafts accepted\n", other_dir, target, acc, drafted);
  rill_engine_destroy(other);
}

static uint32_t fuzz_seed = 12345u;

static int32_t RND(int32_t n) {
  fuzz_seed = fuzz_seed * 1664525u + 1013904223u;
  return (int32_t)((fuzz_seed >> 8) % (uint32_t)n);
}

/* Random batches around the lookahead rule (tables cut short or holding bad ids, counts out of range, unsampled
 * rows): every call either succeeds with in-range proposals or is rejected with a message; ASan checks the rest. */
static void test_fuzz(void) {
  rill_engine *e = open_engine(OTHER);
  int ok = 0, rejected = 0;
  outputs out;
  rill_step_result r = result_of(&out);
  for (int round = 0; round < 400; round++) {
    model_batch mb;
    mb_init(&mb);
    int32_t propose[MB_MAX_SEQS] = {0};
    const int B = 1 + RND(3);
    for (int i = 0; i < B; i++) {
      int32_t toks[MAXPOS];
      const int ctx = 1 + RND(MAXPOS);
      for (int j = 0; j < ctx; j++) toks[j] = RND(V);
      int32_t table[PER_SEQ];
      const int listed = RND(PER_SEQ + 1);
      for (int j = 0; j < PER_SEQ; j++) table[j] = j < listed ? i * PER_SEQ + j : -1;
      if (RND(8) == 0) {
        const int32_t at = RND(PER_SEQ);
        table[at] = RND(2) ? 4 * PER_SEQ + RND(100) : -2 - RND(100);
      }
      const int fed = 1 + RND(ctx);
      mb_add(&mb, i + 1, toks + ctx - fed, fed, ctx - fed, table, PER_SEQ, RND(5) != 0, 0);
      propose[i] = RND(10) == 0 ? -1 - RND(5) : RND(KMAX + 3);
    }
    rill_step_batch b = mb_batch(&mb);
    b.propose_counts = propose;
    const rill_status st = rill_step(e, &b, &r);
    if (st == RILL_OK) {
      ok++;
      for (int i = 0; i < B; i++) {
        CHECK_EQ_INT(out.proposed_counts[i], propose[i]);
        for (int j = 0; j < out.proposed_counts[i]; j++) CHECK(out.proposed[i * KMAX + j] >= 0 && out.proposed[i * KMAX + j] < V);
      }
    } else {
      rejected++;
      CHECK_MSG(st == RILL_ERR_INVALID_ARGUMENT && rill_last_error(e)[0] != '\0', "status %d: %s", st,
                rill_last_error(e));
    }
  }
  CHECK_MSG(ok > 20 && rejected > 20, "fuzz: %d accepted, %d rejected", ok, rejected);
  rill_engine_destroy(e);
}

int main(void) {
  test_bad_options();
  test_bad_batches();
  test_decoding(OTHER, 1);
  test_fuzz();
  target = GPTOSS;
  test_decoding(TARGET, 0);
  target = TARGET;
  test_decoding(GPTOSS, 0);
  return check_summary();
}
