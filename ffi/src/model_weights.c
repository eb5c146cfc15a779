#include "model_weights.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fail.h"
#include "tensor_shape.h"

typedef struct loader {
  const rill_checkpoint *ck;
  rill_pool *pool;
  const char *ck_name;
  char *err;
  size_t err_cap;
} loader;

/* The tensor named name with shape [d0] (d1 < 0) or [d0, d1], else an error naming file and tensor. */
static const rill_tensor *need(loader *l, const char *name, int64_t d0, int64_t d1, rill_status *s) {
  if (*s != RILL_OK) return NULL;
  const rill_tensor *t = rill_checkpoint_find(l->ck, name);
  if (t == NULL) {
    snprintf(l->err, l->err_cap, "%s: missing tensor %s", l->ck_name, name);
    *s = RILL_ERR_MODEL;
    return NULL;
  }
  if (t->dtype == RILL_TENSOR_OTHER) {
    snprintf(l->err, l->err_cap, "%s: tensor %s has dtype %s; expected F32, F16 or BF16", t->file, name,
             t->dtype_name);
    *s = RILL_ERR_MODEL;
    return NULL;
  }
  *s = rill_tensor_check_shape(t, name, d0, d1, l->err, l->err_cap);
  return *s == RILL_OK ? t : NULL;
}

static float *vector(loader *l, const char *name, int64_t n, rill_status *s) {
  const rill_tensor *t = need(l, name, n, -1, s);
  if (t == NULL) return NULL;
  float *v = malloc((size_t)n * sizeof(float));
  if (v == NULL) {
    snprintf(l->err, l->err_cap, "out of memory");
    *s = RILL_ERR_OUT_OF_MEMORY;
    return NULL;
  }
  for (int64_t i = 0; i < n; i++) v[i] = rill_tensor_get(t, i);
  return v;
}

static void matrix(loader *l, rill_matrix *m, rill_wtype type, const rill_tensor *const *parts, int nparts, int cols,
                   rill_status *s) {
  if (*s != RILL_OK) return;
  *s = rill_matrix_load(m, type, parts, nparts, cols, l->pool);
  if (*s != RILL_OK) snprintf(l->err, l->err_cap, "out of memory loading %s", parts[0]->name);
}

/* gpt-oss's per-layer tensors beyond the attention projections: sinks, router, MXFP4 experts. */
static void check_moe(loader *l, const rill_model_config *c, int i, rill_status *s) {
  char name[160];
  const int64_t H = c->hidden_size, I = c->intermediate_size, E = c->num_experts;
  snprintf(name, sizeof name, "model.layers.%d.self_attn.sinks", i);
  need(l, name, c->num_heads, -1, s);
  snprintf(name, sizeof name, "model.layers.%d.mlp.router.weight", i);
  need(l, name, E, H, s);
  snprintf(name, sizeof name, "model.layers.%d.mlp.router.bias", i);
  need(l, name, E, -1, s);
  if (*s != RILL_OK) return;
  snprintf(name, sizeof name, "model.layers.%d.mlp.experts.gate_up_proj_", i);
  *s = rill_mxfp4_experts_check(l->ck, l->ck_name, name, (int32_t)E, (int32_t)(2 * I), (int32_t)H, l->err, l->err_cap);
  if (*s != RILL_OK) return;
  snprintf(name, sizeof name, "model.layers.%d.mlp.experts.down_proj_", i);
  *s = rill_mxfp4_experts_check(l->ck, l->ck_name, name, (int32_t)E, (int32_t)H, (int32_t)I, l->err, l->err_cap);
}

static void load_moe(loader *l, const rill_model_config *c, int i, rill_layer_weights *L, rill_status *s) {
  char name[160];
  const int64_t H = c->hidden_size, I = c->intermediate_size, E = c->num_experts;
  snprintf(name, sizeof name, "model.layers.%d.self_attn.sinks", i);
  L->sinks = vector(l, name, c->num_heads, s);
  snprintf(name, sizeof name, "model.layers.%d.mlp.router.bias", i);
  L->router_bias = vector(l, name, E, s);
  snprintf(name, sizeof name, "model.layers.%d.mlp.router.weight", i);
  const rill_tensor *router = rill_checkpoint_find(l->ck, name);
  matrix(l, &L->router, RILL_W_F32, &router, 1, (int)H, s);
  if (*s != RILL_OK) return;
  snprintf(name, sizeof name, "model.layers.%d.mlp.experts.gate_up_proj_", i);
  *s = rill_mxfp4_experts_load(l->ck, name, (int32_t)E, (int32_t)(2 * I), (int32_t)H, l->pool, &L->experts_gate_up,
                               l->err, l->err_cap);
  if (*s != RILL_OK) return;
  snprintf(name, sizeof name, "model.layers.%d.mlp.experts.down_proj_", i);
  *s = rill_mxfp4_experts_load(l->ck, name, (int32_t)E, (int32_t)H, (int32_t)I, l->pool, &L->experts_down, l->err,
                               l->err_cap);
}

rill_wtype rill_checkpoint_default_wtype(const rill_checkpoint *ck) {
  const rill_tensor *t = rill_checkpoint_find(ck, "model.embed_tokens.weight");
  return t != NULL && t->dtype == RILL_TENSOR_BF16 ? RILL_W_BF16 : RILL_W_F32;
}

rill_status rill_model_weights_load(const rill_checkpoint *ck, const char *ck_name, const rill_model_config *c,
                                    rill_wtype type, rill_pool *pool, rill_model_weights *w, char *err,
                                    size_t err_cap) {
  memset(w, 0, sizeof *w);
  loader l = {.ck = ck, .pool = pool, .ck_name = ck_name, .err = err, .err_cap = err_cap};
  rill_status s = RILL_OK;
  const int64_t H = c->hidden_size, I = c->intermediate_size, V = c->vocab_size, D = c->head_dim;
  const int64_t QD = (int64_t)c->num_heads * D, KD = (int64_t)c->num_kv_heads * D;
  char name[160];

  /* Check every tensor before converting any, so a bad checkpoint fails fast. */
  const rill_tensor *embed = need(&l, "model.embed_tokens.weight", V, H, &s);
  need(&l, "model.norm.weight", H, -1, &s);
  const rill_tensor *head = rill_checkpoint_find(ck, "lm_head.weight");
  w->tied = c->tie_word_embeddings || head == NULL;
  if (!w->tied) head = need(&l, "lm_head.weight", V, H, &s);
  for (int i = 0; i < c->num_layers && s == RILL_OK; i++) {
    static const char *const vec1[] = {"input_layernorm", "post_attention_layernorm"};
    for (int k = 0; k < 2; k++) {
      snprintf(name, sizeof name, "model.layers.%d.%s.weight", i, vec1[k]);
      need(&l, name, H, -1, &s);
    }
    static const char *const proj[] = {"q_proj", "k_proj", "v_proj", "o_proj"};
    const int64_t rows[] = {QD, KD, KD, H}, cols[] = {H, H, H, QD};
    for (int k = 0; k < 4; k++) {
      snprintf(name, sizeof name, "model.layers.%d.self_attn.%s.weight", i, proj[k]);
      need(&l, name, rows[k], cols[k], &s);
      if ((k < 3 && c->qkv_bias) || (k == 3 && c->o_bias)) {
        snprintf(name, sizeof name, "model.layers.%d.self_attn.%s.bias", i, proj[k]);
        need(&l, name, rows[k], -1, &s);
      }
    }
    if (c->qk_norm) {
      snprintf(name, sizeof name, "model.layers.%d.self_attn.q_norm.weight", i);
      need(&l, name, D, -1, &s);
      snprintf(name, sizeof name, "model.layers.%d.self_attn.k_norm.weight", i);
      need(&l, name, D, -1, &s);
    }
    if (c->num_experts > 0) {
      check_moe(&l, c, i, &s);
      continue;
    }
    static const char *const mlp[] = {"gate_proj", "up_proj", "down_proj"};
    const int64_t mrows[] = {I, I, H}, mcols[] = {H, H, I};
    for (int k = 0; k < 3; k++) {
      snprintf(name, sizeof name, "model.layers.%d.mlp.%s.weight", i, mlp[k]);
      need(&l, name, mrows[k], mcols[k], &s);
    }
  }
  if (s != RILL_OK) return s;

  w->num_layers = c->num_layers;
  w->layers = calloc((size_t)c->num_layers, sizeof *w->layers);
  if (w->layers == NULL) {
    return rill_fail(err, err_cap, RILL_ERR_OUT_OF_MEMORY, "out of memory");
  }
  matrix(&l, &w->embed, type, &embed, 1, (int)H, &s);
  rill_checkpoint_drop_resident(ck);
  if (!w->tied) matrix(&l, &w->lm_head, type, &head, 1, (int)H, &s);
  w->final_norm = vector(&l, "model.norm.weight", H, &s);
  /* Each part's source pages are let go once it is copied out: the resident peak is the copy plus one layer, not
   * the copy plus the checkpoint. */
  for (int i = 0; i < c->num_layers && s == RILL_OK; i++) {
    rill_checkpoint_drop_resident(ck);
    rill_layer_weights *L = &w->layers[i];
    snprintf(name, sizeof name, "model.layers.%d.input_layernorm.weight", i);
    L->attn_norm = vector(&l, name, H, &s);
    snprintf(name, sizeof name, "model.layers.%d.post_attention_layernorm.weight", i);
    L->ffn_norm = vector(&l, name, H, &s);
    if (c->qk_norm) {
      snprintf(name, sizeof name, "model.layers.%d.self_attn.q_norm.weight", i);
      L->q_norm = vector(&l, name, D, &s);
      snprintf(name, sizeof name, "model.layers.%d.self_attn.k_norm.weight", i);
      L->k_norm = vector(&l, name, D, &s);
    }
    const rill_tensor *qkv[3];
    static const char *const qkvn[] = {"q_proj", "k_proj", "v_proj"};
    for (int k = 0; k < 3; k++) {
      snprintf(name, sizeof name, "model.layers.%d.self_attn.%s.weight", i, qkvn[k]);
      qkv[k] = rill_checkpoint_find(ck, name);
    }
    matrix(&l, &L->qkv, type, qkv, 3, (int)H, &s);
    if (c->qkv_bias && s == RILL_OK) {
      L->qkv_bias = malloc((size_t)(QD + 2 * KD) * sizeof(float));
      if (L->qkv_bias == NULL) {
        snprintf(err, err_cap, "out of memory");
        s = RILL_ERR_OUT_OF_MEMORY;
        break;
      }
      int64_t off = 0;
      for (int k = 0; k < 3; k++) {
        snprintf(name, sizeof name, "model.layers.%d.self_attn.%s.bias", i, qkvn[k]);
        const rill_tensor *b = rill_checkpoint_find(ck, name);
        for (int64_t j = 0; j < b->shape[0]; j++) L->qkv_bias[off + j] = rill_tensor_get(b, j);
        off += b->shape[0];
      }
    }
    snprintf(name, sizeof name, "model.layers.%d.self_attn.o_proj.weight", i);
    const rill_tensor *o = rill_checkpoint_find(ck, name);
    matrix(&l, &L->o, type, &o, 1, (int)QD, &s);
    if (c->o_bias) {
      snprintf(name, sizeof name, "model.layers.%d.self_attn.o_proj.bias", i);
      L->o_bias = vector(&l, name, H, &s);
    }
    if (c->num_experts > 0) {
      load_moe(&l, c, i, L, &s);
      w->bytes += rill_matrix_bytes(&L->qkv) + rill_matrix_bytes(&L->o) + rill_matrix_bytes(&L->router) +
                  rill_mxfp4_experts_bytes(&L->experts_gate_up) + rill_mxfp4_experts_bytes(&L->experts_down);
      continue;
    }
    const rill_tensor *gu[2];
    snprintf(name, sizeof name, "model.layers.%d.mlp.gate_proj.weight", i);
    gu[0] = rill_checkpoint_find(ck, name);
    snprintf(name, sizeof name, "model.layers.%d.mlp.up_proj.weight", i);
    gu[1] = rill_checkpoint_find(ck, name);
    matrix(&l, &L->gate_up, type, gu, 2, (int)H, &s);
    snprintf(name, sizeof name, "model.layers.%d.mlp.down_proj.weight", i);
    const rill_tensor *down = rill_checkpoint_find(ck, name);
    matrix(&l, &L->down, type, &down, 1, (int)I, &s);
    w->bytes += rill_matrix_bytes(&L->qkv) + rill_matrix_bytes(&L->o) + rill_matrix_bytes(&L->gate_up) +
                rill_matrix_bytes(&L->down);
  }
  rill_checkpoint_drop_resident(ck);
  if (s != RILL_OK) {
    rill_model_weights_free(w);
    return s;
  }
  w->bytes += rill_matrix_bytes(&w->embed) + (w->tied ? 0 : rill_matrix_bytes(&w->lm_head));
  return RILL_OK;
}

void rill_model_weights_group16(rill_model_weights *w, rill_pool *pool) {
  for (int i = 0; i < w->num_layers; i++) {
    rill_layer_weights *L = &w->layers[i];
    rill_matrix *ms[] = {&L->qkv, &L->o, &L->gate_up, &L->down};
    for (size_t k = 0; k < sizeof ms / sizeof ms[0]; k++) rill_matrix_group16(ms[k], pool);
  }
  /* An untied embedding is only ever read a row at a time: regrouping it would buy nothing. */
  rill_matrix_group16(w->tied ? &w->embed : &w->lm_head, pool);
}

void rill_model_weights_free(rill_model_weights *w) {
  if (w->layers != NULL) {
    for (int i = 0; i < w->num_layers; i++) {
      rill_layer_weights *L = &w->layers[i];
      free(L->attn_norm);
      free(L->ffn_norm);
      free(L->q_norm);
      free(L->k_norm);
      free(L->qkv_bias);
      free(L->o_bias);
      rill_matrix_free(&L->qkv);
      rill_matrix_free(&L->o);
      rill_matrix_free(&L->gate_up);
      rill_matrix_free(&L->down);
      free(L->sinks);
      free(L->router_bias);
      rill_matrix_free(&L->router);
      rill_mxfp4_experts_free(&L->experts_gate_up);
      rill_mxfp4_experts_free(&L->experts_down);
    }
    free(w->layers);
  }
  rill_matrix_free(&w->embed);
  rill_matrix_free(&w->lm_head);
  free(w->final_norm);
  memset(w, 0, sizeof *w);
}
