/*
 * Random EAGLE-3 heads in the public checkpoint layout (config.json + model.safetensors) written into a directory,
 * for the loader and decoding tests: sizes, draft vocabulary with d2t, own embeddings, pinned tapped layers and
 * deliberate defects (a tensor left out, one misshaped, another vocabulary) are chosen per head.
 */
#ifndef RILL_EAGLE3_FIXTURE_H
#define RILL_EAGLE3_FIXTURE_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_rng.h"

typedef struct head_spec {
  int hidden, inter, heads, kv_heads, head_dim, vocab, draft_vocab, target_hidden;
  int own_embed;
  int ids[3]; /* eagle_aux_hidden_state_layer_ids; ids[0] < 0: not configured */
  int llama3_rope;
  uint32_t seed;
  const char *drop;     /* a tensor left out, or NULL */
  const char *misshape; /* a tensor written with one column too few, or NULL */
  int d2t_offset;       /* added to d2t[0] (pushes draft id 0 outside the vocabulary when large) */
  int bf16;             /* float tensors stored as BF16 (the same values rounded), else F32 */
} head_spec;

static inline float fx_rand(uint32_t *s) { return (float)((lcg32(s) >> 8) & 0xFFFFFF) / 16777216.0f * 2.0f - 1.0f; }

typedef struct fx_tensor {
  char name[96];
  const char *dtype;
  int ndim;
  int64_t shape[2];
  unsigned char *data;
  size_t nbytes;
} fx_tensor;

typedef struct fx_file {
  fx_tensor t[24];
  int n;
} fx_file;

/* A float tensor: values uniform in ±scale around `center`. */
static inline void fx_add(fx_file *f, const head_spec *h, const char *name, int64_t d0, int64_t d1, float center,
                          float scale, uint32_t *seed) {
  if (h->drop != NULL && strcmp(h->drop, name) == 0) return;
  if (h->misshape != NULL && strcmp(h->misshape, name) == 0) {
    if (d1 > 0) d1 -= 1;
    else d0 -= 1;
  }
  fx_tensor *t = &f->t[f->n++];
  snprintf(t->name, sizeof t->name, "%s", name);
  t->dtype = h->bf16 ? "BF16" : "F32";
  t->ndim = d1 > 0 ? 2 : 1;
  t->shape[0] = d0;
  t->shape[1] = d1;
  size_t n = (size_t)d0 * (size_t)(d1 > 0 ? d1 : 1);
  const size_t width = h->bf16 ? 2 : 4;
  t->nbytes = n * width;
  t->data = (unsigned char *)malloc(t->nbytes);
  for (size_t i = 0; i < n; i++) {
    float v = center + scale * fx_rand(seed);
    uint32_t u;
    memcpy(&u, &v, 4);
    if (h->bf16) {
      const uint16_t b = (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16); /* round to nearest even */
      memcpy(t->data + i * 2, &b, 2);
    } else {
      memcpy(t->data + i * 4, &u, 4);
    }
  }
}

static inline int fx_write_safetensors(const fx_file *f, const char *path) {
  char header[8192];
  size_t off = 0, pos = 0;
  pos += (size_t)snprintf(header + pos, sizeof header - pos, "{");
  for (int i = 0; i < f->n; i++) {
    const fx_tensor *t = &f->t[i];
    if (t->ndim == 1) {
      pos += (size_t)snprintf(header + pos, sizeof header - pos,
                              "%s\"%s\":{\"dtype\":\"%s\",\"shape\":[%lld],\"data_offsets\":[%zu,%zu]}", i ? "," : "",
                              t->name, t->dtype, (long long)t->shape[0], off, off + t->nbytes);
    } else {
      pos += (size_t)snprintf(header + pos, sizeof header - pos,
                              "%s\"%s\":{\"dtype\":\"%s\",\"shape\":[%lld,%lld],\"data_offsets\":[%zu,%zu]}",
                              i ? "," : "", t->name, t->dtype, (long long)t->shape[0], (long long)t->shape[1], off,
                              off + t->nbytes);
    }
    off += t->nbytes;
  }
  pos += (size_t)snprintf(header + pos, sizeof header - pos, "}");
  while (pos % 8 != 0) header[pos++] = ' ';
  FILE *fp = fopen(path, "wb");
  if (fp == NULL) return -1;
  uint64_t hl = pos;
  unsigned char le[8];
  for (int i = 0; i < 8; i++) le[i] = (unsigned char)(hl >> (8 * i));
  fwrite(le, 1, 8, fp);
  fwrite(header, 1, pos, fp);
  for (int i = 0; i < f->n; i++) fwrite(f->t[i].data, 1, f->t[i].nbytes, fp);
  return fclose(fp) == 0 ? 0 : -1;
}

/* Writes dir/config.json and dir/model.safetensors for h (dir must exist). */
static inline int fx_write_head(const char *dir, const head_spec *h) {
  char path[512];
  snprintf(path, sizeof path, "%s/config.json", dir);
  FILE *fp = fopen(path, "w");
  if (fp == NULL) return -1;
  fprintf(fp,
          "{\"architectures\":[\"LlamaForCausalLMEagle3\"],\"model_type\":\"llama\",\"hidden_size\":%d,"
          "\"intermediate_size\":%d,\"num_hidden_layers\":1,\"num_attention_heads\":%d,\"num_key_value_heads\":%d,"
          "\"head_dim\":%d,\"hidden_act\":\"silu\",\"rms_norm_eps\":1e-05,\"vocab_size\":%d,\"draft_vocab_size\":%d,"
          "\"max_position_embeddings\":64,\"rope_theta\":%s,\"tie_word_embeddings\":false",
          h->hidden, h->inter, h->heads, h->kv_heads, h->head_dim, h->vocab, h->draft_vocab,
          h->llama3_rope ? "500000.0" : "10000.0");
  if (h->llama3_rope) {
    fprintf(fp, ",\"rope_scaling\":{\"rope_type\":\"llama3\",\"factor\":8.0,\"low_freq_factor\":1.0,"
                "\"high_freq_factor\":4.0,\"original_max_position_embeddings\":16}");
  }
  if (h->ids[0] >= 0) {
    fprintf(fp, ",\"eagle_config\":{\"eagle_aux_hidden_state_layer_ids\":[%d,%d,%d],\"use_aux_hidden_state\":true}",
            h->ids[0], h->ids[1], h->ids[2]);
  }
  fprintf(fp, "}\n");
  fclose(fp);

  fx_file f;
  memset(&f, 0, sizeof f);
  uint32_t seed = h->seed;
  const int H = h->hidden, QD = h->heads * h->head_dim, KD = h->kv_heads * h->head_dim;
  fx_add(&f, h, "fc.weight", H, 3 * h->target_hidden, 0.0f, 1.0f / sqrtf(3.0f * (float)h->target_hidden), &seed);
  fx_add(&f, h, "midlayer.input_layernorm.weight", H, -1, 1.0f, 0.2f, &seed);
  fx_add(&f, h, "midlayer.hidden_norm.weight", H, -1, 1.0f, 0.2f, &seed);
  fx_add(&f, h, "midlayer.self_attn.q_proj.weight", QD, 2 * H, 0.0f, 1.5f / sqrtf(2.0f * (float)H), &seed);
  fx_add(&f, h, "midlayer.self_attn.k_proj.weight", KD, 2 * H, 0.0f, 1.5f / sqrtf(2.0f * (float)H), &seed);
  fx_add(&f, h, "midlayer.self_attn.v_proj.weight", KD, 2 * H, 0.0f, 1.0f / sqrtf(2.0f * (float)H), &seed);
  fx_add(&f, h, "midlayer.self_attn.o_proj.weight", H, QD, 0.0f, 1.0f / sqrtf((float)QD), &seed);
  fx_add(&f, h, "midlayer.post_attention_layernorm.weight", H, -1, 1.0f, 0.2f, &seed);
  fx_add(&f, h, "midlayer.mlp.gate_proj.weight", h->inter, H, 0.0f, 1.0f / sqrtf((float)H), &seed);
  fx_add(&f, h, "midlayer.mlp.up_proj.weight", h->inter, H, 0.0f, 1.0f / sqrtf((float)H), &seed);
  fx_add(&f, h, "midlayer.mlp.down_proj.weight", H, h->inter, 0.0f, 1.0f / sqrtf((float)h->inter), &seed);
  fx_add(&f, h, "norm.weight", H, -1, 1.0f, 0.2f, &seed);
  fx_add(&f, h, "lm_head.weight", h->draft_vocab, H, 0.0f, 2.0f / sqrtf((float)H), &seed);
  if (h->own_embed) fx_add(&f, h, "embed_tokens.weight", h->vocab, H, 0.0f, 1.0f, &seed);
  if (h->draft_vocab < h->vocab && !(h->drop != NULL && strcmp(h->drop, "d2t") == 0)) {
    /* Draft id i is target id (i × vocab) / draft_vocab: increasing, distinct, spread over the vocabulary. */
    fx_tensor *t = &f.t[f.n++];
    snprintf(t->name, sizeof t->name, "d2t");
    t->dtype = "I64";
    t->ndim = 1;
    t->shape[0] = h->draft_vocab;
    t->nbytes = (size_t)h->draft_vocab * 8;
    t->data = (unsigned char *)malloc(t->nbytes);
    for (int i = 0; i < h->draft_vocab; i++) {
      int64_t d = (int64_t)i * h->vocab / h->draft_vocab - i + (i == 0 ? h->d2t_offset : 0);
      memcpy(t->data + (size_t)i * 8, &d, 8);
    }
  }
  snprintf(path, sizeof path, "%s/model.safetensors", dir);
  int rc = fx_write_safetensors(&f, path);
  for (int i = 0; i < f.n; i++) free(f.t[i].data);
  return rc;
}

#endif /* RILL_EAGLE3_FIXTURE_H */
