/*
 * EAGLE-3 speculation inside rill_step. The loader: random heads in the public layout with and without d2t, tapped
 * layers configured and defaulted, their own embeddings or the target's; a missing tensor, a misshaped one, another
 * vocabulary, a draft vocabulary without d2t, d2t leaving the vocabulary, bad layer ids are each a one-line error.
 * Decoding: with proposals fed back as drafts the greedy tokens equal plain decoding's alone, batched with mixed k,
 * with chunked prefill, after preemption (recomputed in other blocks) and on a shared prefix block; and the head's
 * proposals are a function of the token history alone (the same wherever two runs reach the same position), which is
 * what keeping its KV and features in step through the block tables means. Reference: two committed random heads
 * (scripts/eagle3_reference.py) on the random target propose the tokens, with the draft-vocabulary logits of every
 * round, that a float64 torch forward computed. Behind a gpt-oss (MoE) target: greedy tokens with speculation equal
 * plain decoding's, and the captured taps are the target's residual stream computed without a head — the embeddings,
 * the stream after the first MoE layer (the final norm and output projection of a one-layer copy of the target give
 * its logits) and after the last.
 */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "cpu/eagle3.h"
#include "eagle3_fixture.h"
#include "engine.h"
#include "json.h"
#include "rill.h"
#include "test_model_batch.h"
#include "text_replace.h"

#define TARGET "tests/fixtures/checkpoints/llama3-fp32"
#define V 96
#define BS 4
#define MAXPOS 64
#define KMAX 4
#define PER_SEQ (MAXPOS / BS)

#include "spec_step_outputs.h"

#define NUM_BLOCKS (6 * PER_SEQ)

static char tmp_root[256];
static int tmp_count = 0;

/* A fresh directory holding head h. */
static const char *write_head(const head_spec *h, char *dir, size_t cap) {
  snprintf(dir, cap, "%s/head%d", tmp_root, tmp_count++);
  mkdir(dir, 0700);
  CHECK_MSG(fx_write_head(dir, h) == 0, "write %s", dir);
  return dir;
}

static void remove_head(const char *dir) {
  char p[512];
  snprintf(p, sizeof p, "%s/config.json", dir);
  unlink(p);
  snprintf(p, sizeof p, "%s/model.safetensors", dir);
  unlink(p);
  rmdir(dir);
}

/* Head A: the target's hidden size, a draft vocabulary of 64 with d2t, the target's embeddings, default taps. */
static head_spec head_a(void) {
  head_spec h = {.hidden = 32, .inter = 48, .heads = 4, .kv_heads = 2, .head_dim = 8, .vocab = V, .draft_vocab = 64,
                 .target_hidden = 32, .own_embed = 0, .ids = {-1, -1, -1}, .llama3_rope = 0, .seed = 7u};
  return h;
}

/* Head B: its own hidden size and embeddings, the full vocabulary, pinned taps, llama3 RoPE. */
static head_spec head_b(void) {
  head_spec h = {.hidden = 24, .inter = 40, .heads = 3, .kv_heads = 1, .head_dim = 8, .vocab = V, .draft_vocab = V,
                 .target_hidden = 32, .own_embed = 1, .ids = {0, 1, 1}, .llama3_rope = 1, .seed = 99u};
  return h;
}

static rill_engine *open_with(const char *head, rill_status *status) {
  rill_options o = {0};
  o.threads = 2;
  o.block_size = BS;
  o.num_blocks = NUM_BLOCKS;
  o.max_batch_tokens = 256;
  o.max_seqs = 8;
  o.max_drafts = KMAX;
  o.draft_model_dir = head;
  rill_engine *e = NULL;
  *status = rill_engine_create(TARGET, &o, &e);
  return e;
}

/* The gpt-oss fixture (or a copy at model) over this file's pool, its positions capped at MAXPOS. */
static rill_engine *open_gptoss(const char *model, const char *head) {
  rill_options o = {0};
  o.threads = 2;
  o.block_size = BS;
  o.num_blocks = NUM_BLOCKS;
  o.max_batch_tokens = 256;
  o.max_seqs = 8;
  o.max_drafts = KMAX;
  o.max_model_len = MAXPOS;
  o.draft_model_dir = head;
  rill_engine *e = NULL;
  rill_status s = rill_engine_create(model, &o, &e);
  CHECK_MSG(s == RILL_OK && e != NULL, "create %s with head %s: %s", model, head ? head : "(none)",
            rill_global_error());
  return e;
}

static rill_engine *open_engine(const char *head) {
  rill_status s;
  rill_engine *e = open_with(head, &s);
  CHECK_MSG(s == RILL_OK && e != NULL, "create with head %s: %s", head ? head : "(none)", rill_global_error());
  return e;
}

static void expect_error(const head_spec *h, const char *needle) {
  char dir[300];
  write_head(h, dir, sizeof dir);
  rill_status s;
  rill_engine *e = open_with(dir, &s);
  const char *msg = rill_global_error();
  CHECK_MSG(e == NULL && s == RILL_ERR_MODEL, "%s: status %d", needle, s);
  CHECK_MSG(strstr(msg, "eagle3 head ") == msg && strstr(msg, needle) != NULL, "expected \"%s\" in: %s", needle,
            msg);
  CHECK_MSG(strchr(msg, '\n') == NULL, "one line: %s", msg);
  rill_engine_destroy(e);
  remove_head(dir);
}

static void test_loader(void) {
  char dir[300];
  head_spec a = head_a();
  rill_engine *e = open_engine(write_head(&a, dir, sizeof dir));
  if (e != NULL) {
    CHECK(e->eagle3 != NULL && e->draft == NULL);
    const rill_eagle3_head *h = rill_eagle3_head_of(e->eagle3);
    /* Two target layers: (2, L/2, L − 3) clamped to the layer inputs 0..2. */
    CHECK_EQ_INT(h->taps[0], 2);
    CHECK_EQ_INT(h->taps[1], 1);
    CHECK_EQ_INT(h->taps[2], 0);
    CHECK(!h->own_embed);
    CHECK_EQ_INT(h->draft_vocab, 64);
    CHECK_EQ_INT(h->d2t[0], 0);
    CHECK_EQ_INT(h->d2t[1], 1);
    CHECK_EQ_INT(h->d2t[63], 94);
    CHECK_EQ_INT(h->cfg.rope_scaling, RILL_ROPE_NONE);
    rill_info info;
    CHECK(rill_engine_info(e, &info) == RILL_OK);
    CHECK(info.draft_weight_bytes == (int64_t)rill_eagle3_weight_bytes(e->eagle3) && info.draft_weight_bytes > 0);
  }
  rill_engine_destroy(e);
  remove_head(dir);

  head_spec b = head_b();
  e = open_engine(write_head(&b, dir, sizeof dir));
  if (e != NULL) {
    const rill_eagle3_head *h = rill_eagle3_head_of(e->eagle3);
    /* Configured ids are target layer outputs: layer j's output is the input of j + 1. */
    CHECK_EQ_INT(h->taps[0], 1);
    CHECK_EQ_INT(h->taps[1], 2);
    CHECK_EQ_INT(h->taps[2], 2);
    CHECK(h->own_embed);
    CHECK_EQ_INT(h->draft_vocab, V);
    CHECK_EQ_INT(h->d2t[50], 50);
    CHECK_EQ_INT(h->cfg.rope_scaling, RILL_ROPE_LLAMA3);
    CHECK_EQ_INT(h->cfg.hidden_size, 24);
  }
  rill_engine_destroy(e);
  remove_head(dir);

  head_spec x = head_a();
  x.drop = "midlayer.mlp.down_proj.weight";
  expect_error(&x, "missing tensor midlayer.mlp.down_proj.weight");
  x = head_a();
  x.misshape = "fc.weight";
  expect_error(&x, "tensor fc.weight has shape [32, 95]; expected [32, 96]");
  x = head_a();
  x.misshape = "midlayer.self_attn.k_proj.weight";
  expect_error(&x, "tensor midlayer.self_attn.k_proj.weight has shape [16, 63]; expected [16, 64]");
  x = head_a();
  x.misshape = "lm_head.weight";
  expect_error(&x, "tensor lm_head.weight has shape [64, 31]; expected [64, 32]");
  x = head_a();
  x.vocab = 100;
  expect_error(&x, "vocab_size 100, the target's has 96");
  x = head_a();
  x.drop = "d2t";
  expect_error(&x, "missing tensor d2t (draft_vocab_size 64 is smaller than vocab_size 96)");
  x = head_a();
  x.d2t_offset = -1;
  expect_error(&x, "d2t[0] maps draft token 0 to -1, outside the vocabulary of 96");
  x = head_b();
  x.drop = "embed_tokens.weight";
  expect_error(&x, "missing tensor embed_tokens.weight (hidden_size 24 differs from the target's 32");
  x = head_b();
  x.ids[2] = 2;
  expect_error(&x, "eagle_aux_hidden_state_layer_ids[2] must be a layer of the target (0..1)");
  x = head_b();
  x.misshape = "embed_tokens.weight";
  expect_error(&x, "tensor embed_tokens.weight has shape [96, 23]; expected [96, 24]");
}

typedef struct seq_state {
  int32_t tokens[MAXPOS];
  int32_t len, computed, k;
  int32_t drafts[KMAX], num_drafts;
  int32_t table[PER_SEQ];
  int chunk;      /* > 0: prefill at most this many tokens per step (unsampled until the last chunk) */
  int preempt_at; /* > 0: when len first reaches this, forget everything and recompute in blocks table2 */
  int32_t table2[PER_SEQ];
  /* prop[P][j]: the j-th proposal made when the last accepted token sat at P (-1: none made there). */
  int32_t prop[MAXPOS][KMAX];
} seq_state;

static void init_seq(seq_state *s, uint32_t seed, int k, int base_block) {
  memset(s, 0, sizeof *s);
  s->len = 9;
  for (int i = 0; i < s->len; i++) {
    seed = seed * 1664525u + 1013904223u;
    s->tokens[i] = (int32_t)((seed >> 8) % V);
  }
  s->k = k;
  for (int j = 0; j < PER_SEQ; j++) s->table[j] = base_block + j;
  for (int p = 0; p < MAXPOS; p++) {
    for (int j = 0; j < KMAX; j++) s->prop[p][j] = -1;
  }
}

/* Decodes every sequence to `total` tokens as the engine does: prefill (in chunks if asked), then each step feeds
 * the last token plus the previous step's proposals as drafts. Returns drafts accepted; *drafted counts drafts fed. */
static int decode(rill_engine *e, seq_state *seqs, int n, int total, int *drafted) {
  int accepted = 0;
  *drafted = 0;
  outputs out;
  rill_step_result r = result_of(&out);
  for (int guard = 0; guard < 300; guard++) {
    model_batch mb;
    mb_init(&mb);
    int32_t propose[MB_MAX_SEQS] = {0};
    int live[MB_MAX_SEQS], nl = 0;
    for (int i = 0; i < n; i++) {
      seq_state *s = &seqs[i];
      if (s->len >= total) continue;
      if (s->preempt_at > 0 && s->len >= s->preempt_at) {
        s->preempt_at = 0;
        s->computed = 0;
        s->num_drafts = 0;
        memcpy(s->table, s->table2, sizeof s->table);
      }
      int32_t fed[MAXPOS];
      int nf = 0, sample = 1;
      int end = s->len;
      if (s->chunk > 0 && s->len - s->computed > s->chunk) {
        end = s->computed + s->chunk;
        sample = 0;
      }
      for (int p = s->computed; p < end; p++) fed[nf++] = s->tokens[p];
      int nd = sample ? s->num_drafts : 0;
      if (nd > total - s->len - 1) nd = total - s->len - 1 > 0 ? total - s->len - 1 : 0;
      for (int d = 0; d < nd; d++) fed[nf++] = s->drafts[d];
      mb_add(&mb, i + 1, fed, nf, s->computed, s->table, PER_SEQ, sample, nd);
      int ctx = s->len + nd;
      int k = s->k < MAXPOS - ctx ? s->k : MAXPOS - ctx;
      propose[nl] = sample ? k : 0;
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
      if (!mb.sample_flags[q]) {
        s->computed = mb.context_lens[q];
        continue;
      }
      int c = out.counts[q];
      int nd = mb.draft_counts[q];
      CHECK(c >= 1 && c <= nd + 1);
      accepted += c - 1;
      s->computed = s->len + c - 1;
      for (int j = 0; j < c && s->len < total; j++) s->tokens[s->len++] = out.tokens[q * (KMAX + 1) + j];
      CHECK_EQ_INT(out.proposed_counts[q], propose[q]);
      s->num_drafts = out.proposed_counts[q];
      const int P = mb.context_lens[q] - nd + c - 1;
      for (int d = 0; d < s->num_drafts; d++) {
        int32_t t = out.proposed[q * KMAX + d];
        CHECK(t >= 0 && t < V);
        s->drafts[d] = t;
        if (P < MAXPOS) s->prop[P][d] = t;
      }
    }
  }
  CHECK_MSG(0, "decode did not finish");
  return accepted;
}

/* Where both runs proposed at the same position with the same k, the proposals agree; returns how many agreed. */
static int same_proposals(const seq_state *a, const seq_state *b, const char *what) {
  int agreed = 0;
  for (int p = 0; p < MAXPOS; p++) {
    if (a->prop[p][0] < 0 || b->prop[p][0] < 0) continue;
    int same = 1;
    for (int j = 0; j < KMAX; j++) {
      if (a->prop[p][j] >= 0 && b->prop[p][j] >= 0 && a->prop[p][j] != b->prop[p][j]) same = 0;
    }
    CHECK_MSG(same, "%s: proposals at position %d differ", what, p);
    agreed += same;
  }
  return agreed;
}

static void test_decoding_with(const head_spec *spec) {
  enum { TOTAL = 56 };
  char dir[300];
  write_head(spec, dir, sizeof dir);
  rill_engine *plain = open_engine(NULL);
  seq_state ref[3];
  int drafted = 0;
  for (int i = 0; i < 3; i++) {
    init_seq(&ref[i], 11u + (uint32_t)i, 0, 0);
    decode(plain, &ref[i], 1, TOTAL, &drafted);
  }
  rill_engine_destroy(plain);

  rill_engine *e = open_engine(dir);
  if (e == NULL) return;
  /* Alone. */
  seq_state alone[3];
  for (int i = 0; i < 3; i++) {
    init_seq(&alone[i], 11u + (uint32_t)i, KMAX, 0);
    decode(e, &alone[i], 1, TOTAL, &drafted);
    CHECK_MSG(memcmp(alone[i].tokens, ref[i].tokens, sizeof ref[i].tokens) == 0, "alone %d", i);
    CHECK(drafted > 0);
  }
  /* Batched with the same k: the same tokens and the same proposals. */
  seq_state three[3];
  for (int i = 0; i < 3; i++) init_seq(&three[i], 11u + (uint32_t)i, KMAX, i * PER_SEQ);
  int acc = decode(e, three, 3, TOTAL, &drafted);
  for (int i = 0; i < 3; i++) {
    CHECK_MSG(memcmp(three[i].tokens, ref[i].tokens, sizeof ref[i].tokens) == 0, "batched %d", i);
    CHECK_MSG(same_proposals(&three[i], &alone[i], "batched") > 3, "batched %d: too few positions compared", i);
  }
  printf("eagle3 head (hidden %d, draft vocab %d): %d of %d drafts accepted\n", spec->hidden, spec->draft_vocab, acc,
         drafted);
  /* Mixed k, one sequence not speculating. */
  for (int i = 0; i < 3; i++) init_seq(&three[i], 11u + (uint32_t)i, i == 1 ? 0 : i + 1, i * PER_SEQ);
  decode(e, three, 3, TOTAL, &drafted);
  for (int i = 0; i < 3; i++) CHECK_MSG(memcmp(three[i].tokens, ref[i].tokens, sizeof ref[i].tokens) == 0, "mixed %d", i);
  /* Chunked prefill (3 tokens a step) beside a decoding sequence. */
  for (int i = 0; i < 3; i++) {
    init_seq(&three[i], 11u + (uint32_t)i, KMAX, i * PER_SEQ);
    three[i].chunk = i == 0 ? 0 : 2 + i;
  }
  decode(e, three, 3, TOTAL, &drafted);
  for (int i = 0; i < 3; i++) {
    CHECK_MSG(memcmp(three[i].tokens, ref[i].tokens, sizeof ref[i].tokens) == 0, "chunked %d", i);
    CHECK_MSG(same_proposals(&three[i], &alone[i], "chunked") > 3, "chunked %d: too few positions compared", i);
  }
  /* Preempted at 30 tokens and recomputed in other blocks. */
  for (int i = 0; i < 3; i++) {
    init_seq(&three[i], 11u + (uint32_t)i, KMAX, i * PER_SEQ);
    three[i].preempt_at = 30;
    for (int j = 0; j < PER_SEQ; j++) three[i].table2[j] = (3 + i) * PER_SEQ + j;
  }
  decode(e, three, 3, TOTAL, &drafted);
  for (int i = 0; i < 3; i++) {
    CHECK_MSG(memcmp(three[i].tokens, ref[i].tokens, sizeof ref[i].tokens) == 0, "preempted %d", i);
    CHECK_MSG(same_proposals(&three[i], &alone[i], "preempted") > 3, "preempted %d: too few positions compared", i);
  }
  /* A shared prefix: sequence 0 decodes; sequence 1 has the same first 8 tokens, lists sequence 0's first two blocks
   * and feeds only from position 8 (the head's KV and features there were written by sequence 0). */
  seq_state first, second, second_ref;
  init_seq(&first, 11u, KMAX, 0);
  decode(e, &first, 1, TOTAL, &drafted);
  init_seq(&second, 12u, KMAX, PER_SEQ);
  memcpy(second.tokens, first.tokens, 8 * sizeof(int32_t));
  second_ref = second;
  second.table[0] = 0;
  second.table[1] = 1;
  second.computed = 8;
  decode(e, &second, 1, TOTAL, &drafted);
  rill_engine_destroy(e);
  plain = open_engine(NULL);
  second_ref.k = 0;
  decode(plain, &second_ref, 1, TOTAL, &drafted);
  rill_engine_destroy(plain);
  CHECK_MSG(memcmp(second.tokens, second_ref.tokens, sizeof second.tokens) == 0, "shared prefix");
  e = open_engine(dir);
  seq_state second_alone;
  init_seq(&second_alone, 12u, KMAX, PER_SEQ);
  memcpy(second_alone.tokens, first.tokens, 8 * sizeof(int32_t));
  decode(e, &second_alone, 1, TOTAL, &drafted);
  CHECK_MSG(same_proposals(&second, &second_alone, "shared prefix") > 3, "shared prefix: too few positions compared");
  rill_engine_destroy(e);
  remove_head(dir);
}

#define GPTOSS "tests/fixtures/checkpoints/gptoss-bf16"

/* Relative difference of lm_head(final_norm(x)) in double (the target's weights) from logits. */
static double head_of_stream_diff(const rill_engine *e, const float *x, const float *logits) {
  const rill_model_config *c = &e->cfg;
  const int H = c->hidden_size, NV = c->vocab_size;
  const rill_matrix *out = e->w.tied ? &e->w.embed : &e->w.lm_head;
  double ss = 0.0;
  for (int i = 0; i < H; i++) ss += (double)x[i] * (double)x[i];
  const double inv = 1.0 / sqrt(ss / H + (double)c->rms_norm_eps);
  float row[512];
  double scale = 0.0, diff = 0.0;
  for (int v = 0; v < NV; v++) {
    rill_matrix_row(out, v, row);
    double dot = 0.0;
    for (int i = 0; i < H; i++) dot += (double)row[i] * (double)e->w.final_norm[i] * (double)x[i] * inv;
    scale = fabs(dot) > scale ? fabs(dot) : scale;
    diff = fabs(dot - (double)logits[v]) > diff ? fabs(dot - (double)logits[v]) : diff;
  }
  return diff / (1.0 + scale);
}

/* A copy of the gpt-oss fixture with only its first layer (config edited, tensors linked; the second layer's are
 * left unread) in dir. */
static int write_one_layer_gptoss(const char *dir) {
  mkdir(dir, 0700);
  size_t len = 0;
  char *text = mb_read_file(GPTOSS "/config.json", &len);
  if (text == NULL) return -1;
  char *a = replace(text, "\"num_hidden_layers\": 2", "\"num_hidden_layers\": 1");
  char *b = a != NULL ? replace(a, ",\n    \"full_attention\"", "") : NULL;
  free(text);
  free(a);
  if (b == NULL) return -1;
  char path[512], target[512];
  snprintf(path, sizeof path, "%s/config.json", dir);
  FILE *f = fopen(path, "w");
  int rc = f != NULL && fputs(b, f) >= 0 ? 0 : -1;
  if (f != NULL && fclose(f) != 0) rc = -1;
  free(b);
  static const char *const files[] = {"model-00000-of-00001.safetensors", "model-00001-of-00001.safetensors",
                                      "model.safetensors.index.json"};
  char cwd[256];
  if (getcwd(cwd, sizeof cwd) == NULL) return -1;
  for (int i = 0; i < 3; i++) {
    snprintf(path, sizeof path, "%s/%s", dir, files[i]);
    snprintf(target, sizeof target, "%s/" GPTOSS "/%s", cwd, files[i]);
    if (symlink(target, path) != 0) rc = -1;
  }
  return rc;
}

static void remove_one_layer_gptoss(const char *dir) {
  static const char *const files[] = {"config.json", "model-00000-of-00001.safetensors",
                                      "model-00001-of-00001.safetensors", "model.safetensors.index.json"};
  char path[512];
  for (int i = 0; i < 4; i++) {
    snprintf(path, sizeof path, "%s/%s", dir, files[i]);
    unlink(path);
  }
  rmdir(dir);
}

static void test_gptoss(void) {
  enum { TOTAL = 40 };
  /* Its own embeddings (the target's hidden size is 96), default taps: layer inputs 2, 1, 0 of the two MoE layers. */
  head_spec spec = head_a();
  spec.target_hidden = 96;
  spec.own_embed = 1;
  spec.seed = 5u;
  char dir[300];
  write_head(&spec, dir, sizeof dir);
  rill_engine *plain = open_gptoss(GPTOSS, NULL);
  rill_engine *e = open_gptoss(GPTOSS, dir);
  if (plain == NULL || e == NULL) {
    rill_engine_destroy(plain);
    rill_engine_destroy(e);
    remove_head(dir);
    return;
  }
  /* Greedy identity, alone and batched. */
  seq_state ref[3], three[3];
  int drafted = 0;
  for (int i = 0; i < 3; i++) {
    init_seq(&ref[i], 61u + (uint32_t)i, 0, 0);
    decode(plain, &ref[i], 1, TOTAL, &drafted);
    init_seq(&three[i], 61u + (uint32_t)i, KMAX, i * PER_SEQ);
  }
  seq_state alone;
  init_seq(&alone, 61u, KMAX, 0);
  decode(e, &alone, 1, TOTAL, &drafted);
  CHECK_MSG(memcmp(alone.tokens, ref[0].tokens, sizeof alone.tokens) == 0, "gpt-oss alone");
  CHECK(drafted > 0);
  int acc = decode(e, three, 3, TOTAL, &drafted);
  for (int i = 0; i < 3; i++) {
    CHECK_MSG(memcmp(three[i].tokens, ref[i].tokens, sizeof ref[i].tokens) == 0, "gpt-oss batched %d", i);
  }
  CHECK_MSG(same_proposals(&three[0], &alone, "gpt-oss batched") > 3, "gpt-oss: too few positions compared");
  printf("eagle3 head behind gpt-oss: %d of %d drafts accepted\n", acc, drafted);

  /* The taps of a 12-token prefill against the residual stream without a head. */
  const rill_eagle3_head *h = rill_eagle3_head_of(e->eagle3);
  CHECK(h->taps[0] == 2 && h->taps[1] == 1 && h->taps[2] == 0);
  char one_dir[300];
  snprintf(one_dir, sizeof one_dir, "%s/gptoss-one-layer", tmp_root);
  CHECK_MSG(write_one_layer_gptoss(one_dir) == 0, "write %s", one_dir);
  rill_engine *one = open_gptoss(one_dir, NULL);
  enum { T = 12 };
  const int Ht = e->cfg.hidden_size;
  int32_t table[PER_SEQ];
  for (int j = 0; j < PER_SEQ; j++) table[j] = j;
  model_batch mb;
  mb_init(&mb);
  mb_add(&mb, 1, ref[1].tokens, T, 0, table, PER_SEQ, 1, 0);
  rill_step_batch b = mb_batch(&mb);
  float *with_head = malloc((size_t)T * V * sizeof(float)), *two_layers = malloc((size_t)T * V * sizeof(float));
  float *one_layer = malloc((size_t)T * V * sizeof(float)), embed[512];
  CHECK(rill_forward_logits(e, &b, with_head) == RILL_OK && rill_forward_logits(plain, &b, two_layers) == RILL_OK);
  CHECK(one != NULL && rill_forward_logits(one, &b, one_layer) == RILL_OK);
  int32_t rows = 0;
  const float *taps = rill_eagle3_last_taps(e->eagle3, &rows);
  CHECK_EQ_INT(rows, T);
  CHECK(memcmp(with_head, two_layers, (size_t)T * V * sizeof(float)) == 0);
  double worst = 0.0;
  for (int t = 0; t < T && rows == T && one != NULL; t++) {
    const float *row = taps + (size_t)t * 3 * Ht;
    /* Layer input 0: the token's embedding. */
    rill_matrix_row(&e->w.embed, ref[1].tokens[t], embed);
    CHECK_MSG(memcmp(row + 2 * Ht, embed, (size_t)Ht * sizeof(float)) == 0, "position %d: tap 0 is not the embedding", t);
    /* Layer input 2, after the last MoE layer: the target's own logits; input 1: the one-layer copy's. */
    const double d2 = head_of_stream_diff(e, row, two_layers + (size_t)t * V);
    const double d1 = head_of_stream_diff(e, row + Ht, one_layer + (size_t)t * V);
    CHECK_MSG(d2 <= 1e-5 && d1 <= 1e-5, "position %d: taps after the MoE layers differ from the stream by %g, %g", t,
              d1, d2);
    worst = d1 > worst ? d1 : worst;
    worst = d2 > worst ? d2 : worst;
  }
  printf("gpt-oss taps against the residual stream without a head: largest logit difference %.3g\n", worst);
  free(with_head);
  free(two_layers);
  free(one_layer);
  rill_engine_destroy(one);
  remove_one_layer_gptoss(one_dir);
  rill_engine_destroy(plain);
  rill_engine_destroy(e);
  remove_head(dir);
}

#define REF_DIR "tests/fixtures/eagle3"

/* Each committed head, proposing k = 1..3 after the prompt: the target's greedy token, the proposals and the last
 * round's logits match the float64 reference (fp32 here: agreement to 1e-4 of the logits' scale). */
static void test_reference(void) {
  size_t len = 0;
  char *text = mb_read_file(REF_DIR "/reference.json", &len);
  CHECK_MSG(text != NULL, "read " REF_DIR "/reference.json");
  if (text == NULL) return;
  char jerr[192];
  rill_json_doc *doc = rill_json_parse(text, len, jerr, sizeof jerr);
  free(text);
  CHECK_MSG(doc != NULL, "reference.json: %s", jerr);
  if (doc == NULL) return;
  const rill_json *root = rill_json_root(doc), *prompt = rill_json_get(root, "prompt");
  int32_t ids[MAXPOS];
  const int n = (int)prompt->length;
  for (int i = 0; i < n; i++) ids[i] = (int32_t)rill_json_at(prompt, (size_t)i)->integer;
  static const char *const heads[] = {"head-a", "head-b"};
  for (int h = 0; h < 2; h++) {
    const rill_json *ref = rill_json_get(rill_json_get(root, "heads"), heads[h]);
    const rill_json *rounds = rill_json_get(ref, "rounds");
    char dir[128];
    snprintf(dir, sizeof dir, REF_DIR "/%s", heads[h]);
    rill_engine *e = open_engine(dir);
    if (e == NULL) continue;
    int32_t table[PER_SEQ];
    for (int j = 0; j < PER_SEQ; j++) table[j] = j;
    double worst = 0.0;
    for (int k = 1; k <= (int)rounds->length; k++) {
      model_batch mb;
      mb_init(&mb);
      mb_add(&mb, 1, ids, n, 0, table, PER_SEQ, 1, 0);
      rill_step_batch b = mb_batch(&mb);
      int32_t propose[MB_MAX_SEQS] = {k};
      b.propose_counts = propose;
      outputs out;
      rill_step_result r = result_of(&out);
      CHECK_MSG(rill_step(e, &b, &r) == RILL_OK, "%s", rill_last_error(e));
      CHECK_EQ_INT(out.tokens[0], rill_json_get(ref, "accepted")->integer);
      CHECK_EQ_INT(out.proposed_counts[0], k);
      for (int j = 0; j < k; j++) {
        CHECK_EQ_INT(out.proposed[j], rill_json_get(rill_json_at(rounds, (size_t)j), "proposed")->integer);
      }
      int32_t rows = 0;
      const float *logits = rill_eagle3_last_logits(e->eagle3, &rows);
      const rill_json *want = rill_json_get(rill_json_at(rounds, (size_t)(k - 1)), "logits");
      const int32_t VD = rill_eagle3_head_of(e->eagle3)->draft_vocab;
      CHECK_EQ_INT(rows, 1);
      CHECK_EQ_INT((int32_t)want->length, VD);
      double scale = 0.0, diff = 0.0;
      for (int32_t i = 0; i < VD && i < (int32_t)want->length; i++) {
        const double w = rill_json_at(want, (size_t)i)->number;
        scale = fabs(w) > scale ? fabs(w) : scale;
        diff = fabs(w - (double)logits[i]) > diff ? fabs(w - (double)logits[i]) : diff;
      }
      CHECK_MSG(diff <= 1e-4 * (1.0 + scale), "%s round %d: logits differ by %g (scale %g)", heads[h], k - 1, diff,
                scale);
      worst = diff > worst ? diff : worst;
    }
    printf("%s against the float64 reference: largest logit difference %.3g\n", heads[h], worst);
    rill_engine_destroy(e);
  }
  rill_json_free(doc);
}

int main(void) {
  snprintf(tmp_root, sizeof tmp_root, "/tmp/rill-eagle3-XXXXXX");
  if (mkdtemp(tmp_root) == NULL) {
    fprintf(stderr, "mkdtemp failed\n");
    return 2;
  }
  test_loader();
  test_reference();
  head_spec a = head_a(), b = head_b();
  test_decoding_with(&a);
  test_decoding_with(&b);
  test_gptoss();
  rmdir(tmp_root);
  return check_summary();
}
