#include "eagle3_head.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config_fields.h"
#include "config_json.h"
#include "fail.h"
#include "json.h"
#include "safetensors.h"
#include "tensor_shape.h"

#define CFG "config.json"

static bool names_eagle3(const rill_json *root) {
  const rill_json *archs = rill_json_get(root, "architectures");
  for (size_t i = 0; archs != NULL && archs->kind == RILL_JSON_ARRAY && i < archs->length; i++) {
    const rill_json *a = rill_json_at(archs, i);
    if (a != NULL && a->kind == RILL_JSON_STRING && strstr(a->string, "Eagle3") != NULL) return true;
  }
  return false;
}

bool rill_eagle3_is_head(const char *dir) {
  char err[256];
  rill_json_doc *doc = NULL;
  if (rill_config_json_read(dir, &doc, err, sizeof err) != RILL_OK) return false;
  bool yes = rill_json_root(doc)->kind == RILL_JSON_OBJECT && names_eagle3(rill_json_root(doc));
  rill_json_free(doc);
  return yes;
}

typedef rill_config_reader reader;

static bool true_field(const rill_json *obj, const char *key) {
  const rill_json *v = rill_json_get(obj, key);
  return v != NULL && v->kind == RILL_JSON_TRUE;
}

/* The head's rope_scaling: default, linear or llama3 (the released gpt-oss heads use llama3, not the target's YaRN). */
static void read_rope(reader *r, rill_model_config *c) {
  c->rope_scaling = RILL_ROPE_NONE;
  const rill_json *rs = rill_json_get(r->root, "rope_scaling");
  if (r->failed || rs == NULL || rs->kind == RILL_JSON_NULL) return;
  const char *type = rill_config_string(rs, "rope_type");
  if (type == NULL) type = rill_config_string(rs, "type");
  if (rs->kind != RILL_JSON_OBJECT || type == NULL) {
    snprintf(r->err, r->err_cap, CFG ": rope_scaling must be an object with rope_type");
    r->failed = true;
    return;
  }
  if (strcmp(type, "default") == 0) return;
  if (strcmp(type, "linear") == 0) {
    c->rope_scaling = RILL_ROPE_LINEAR;
    c->rope_factor = (float)rill_config_number(r, rs, "factor", 1.0, false);
  } else if (strcmp(type, "llama3") == 0) {
    c->rope_scaling = RILL_ROPE_LLAMA3;
    c->rope_factor = (float)rill_config_number(r, rs, "factor", 1.0, false);
    c->rope_low_freq_factor = (float)rill_config_number(r, rs, "low_freq_factor", 1.0, false);
    c->rope_high_freq_factor = (float)rill_config_number(r, rs, "high_freq_factor", 4.0, false);
    c->rope_original_max_positions =
        (int32_t)rill_config_number(r, rs, "original_max_position_embeddings", 8192, false);
    if (!r->failed && !(c->rope_high_freq_factor > c->rope_low_freq_factor)) {
      snprintf(r->err, r->err_cap, CFG ": rope_scaling high_freq_factor must exceed low_freq_factor");
      r->failed = true;
    }
  } else {
    snprintf(r->err, r->err_cap, CFG ": rope_scaling type %.32s is not supported for an EAGLE-3 head (default, "
                                     "linear, llama3)",
             type);
    r->failed = true;
  }
}

static int32_t clamp_layer(int32_t v, int32_t L) { return v < 0 ? 0 : v > L ? L : v; }

static void read_taps(reader *r, const rill_model_config *target, rill_eagle3_head *h) {
  const int32_t L = target->num_layers;
  const rill_json *ec = rill_json_get(r->root, "eagle_config");
  const rill_json *ids = ec != NULL && ec->kind == RILL_JSON_OBJECT
                             ? rill_json_get(ec, "eagle_aux_hidden_state_layer_ids")
                             : NULL;
  if (ids == NULL || ids->kind == RILL_JSON_NULL) {
    h->taps[0] = clamp_layer(2, L);
    h->taps[1] = clamp_layer(L / 2, L);
    h->taps[2] = clamp_layer(L - 3, L);
    return;
  }
  if (ids->kind != RILL_JSON_ARRAY || ids->length != 3) {
    snprintf(r->err, r->err_cap, CFG ": eagle_aux_hidden_state_layer_ids must list 3 target layers");
    r->failed = true;
    return;
  }
  for (size_t i = 0; i < 3; i++) {
    const rill_json *v = rill_json_at(ids, i);
    if (v == NULL || v->kind != RILL_JSON_NUMBER || !v->is_integer || v->integer < 0 || v->integer >= L) {
      snprintf(r->err, r->err_cap, CFG ": eagle_aux_hidden_state_layer_ids[%zu] must be a layer of the target (0..%d)",
               i, L - 1);
      r->failed = true;
      return;
    }
    h->taps[i] = (int32_t)v->integer + 1;
  }
}

static rill_status parse(const rill_json *root, const rill_model_config *t, rill_eagle3_head *h, char *err,
                         size_t err_cap) {
  if (root->kind != RILL_JSON_OBJECT) {
    return rill_fail(err, err_cap, RILL_ERR_MODEL, CFG ": not a JSON object");
  }
  if (!names_eagle3(root)) {
    return rill_fail(err, err_cap, RILL_ERR_MODEL,
                     CFG ": architectures names no EAGLE-3 head (e.g. LlamaForCausalLMEagle3)");
  }
  rill_model_config *c = &h->cfg;
  reader r = {.root = root, .err = err, .err_cap = err_cap, .failed = false};
  snprintf(c->architecture, sizeof c->architecture, "LlamaForCausalLMEagle3");
  c->vocab_size = rill_config_int(&r, root, "vocab_size", -1);
  c->hidden_size = rill_config_int(&r, root, "hidden_size", -1);
  c->intermediate_size = rill_config_int(&r, root, "intermediate_size", -1);
  c->num_layers = rill_config_int(&r, root, "num_hidden_layers", 1);
  c->num_heads = rill_config_int(&r, root, "num_attention_heads", -1);
  c->num_kv_heads = rill_config_int(&r, root, "num_key_value_heads", c->num_heads);
  h->draft_vocab = rill_config_int(&r, root, "draft_vocab_size", c->vocab_size);
  if (r.failed) return RILL_ERR_MODEL;
  if (c->hidden_size % c->num_heads != 0 && rill_json_get(root, "head_dim") == NULL) {
    return rill_fail(err, err_cap, RILL_ERR_MODEL,
                     CFG ": hidden_size %d is not a multiple of num_attention_heads %d and no head_dim is given",
                     c->hidden_size, c->num_heads);
  }
  c->head_dim = rill_config_int(&r, root, "head_dim", c->hidden_size / c->num_heads);
  c->rms_norm_eps = (float)rill_config_number(&r, root, "rms_norm_eps", 1e-6, false);
  c->rope_theta = (float)rill_config_number(&r, root, "rope_theta", 10000.0, false);
  c->max_positions = t->max_positions;
  read_rope(&r, c);
  read_taps(&r, t, h);
  if (r.failed) return RILL_ERR_MODEL;
  if (c->vocab_size != t->vocab_size) {
    snprintf(err, err_cap,
             CFG ": vocab_size %d, the target's has %d (an EAGLE-3 head needs the target's tokenizer)", c->vocab_size,
             t->vocab_size);
    return RILL_ERR_MODEL;
  }
  if (h->draft_vocab > c->vocab_size) {
    return rill_fail(err, err_cap, RILL_ERR_MODEL, CFG ": draft_vocab_size %d exceeds vocab_size %d", h->draft_vocab,
                     c->vocab_size);
  }
  if (c->num_layers != 1) {
    return rill_fail(err, err_cap, RILL_ERR_MODEL, CFG ": num_hidden_layers %d; an EAGLE-3 head has one decoder layer",
                     c->num_layers);
  }
  if (c->num_heads % c->num_kv_heads != 0) {
    return rill_fail(err, err_cap, RILL_ERR_MODEL,
                     CFG ": num_attention_heads %d is not a multiple of num_key_value_heads %d", c->num_heads,
                     c->num_kv_heads);
  }
  if (c->head_dim % 2 != 0 || c->head_dim > 1024) {
    return rill_fail(err, err_cap, RILL_ERR_MODEL, CFG ": head_dim %d must be even and at most 1024", c->head_dim);
  }
  const char *act = rill_config_string(root, "hidden_act");
  if (act != NULL && strcmp(act, "silu") != 0) {
    return rill_fail(err, err_cap, RILL_ERR_MODEL, CFG ": hidden_act %.32s is not supported (only silu)", act);
  }
  const rill_json *ec = rill_json_get(root, "eagle_config");
  if (true_field(root, "attention_bias") || true_field(root, "mlp_bias") || true_field(root, "norm_before_fc") ||
      (ec != NULL && true_field(ec, "norm_before_fc"))) {
    return rill_fail(err, err_cap, RILL_ERR_MODEL,
                     CFG ": attention_bias, mlp_bias and norm_before_fc are not supported in an EAGLE-3 head");
  }
  h->target_hidden = t->hidden_size;
  return RILL_OK;
}

typedef struct loader {
  const rill_checkpoint *ck;
  const char *ck_name;
  char *err;
  size_t err_cap;
} loader;

/* The tensor named name with shape [d0] (d1 < 0) or [d0, d1] and a float dtype (integer: I64 or I32), else one line
 * naming file and tensor. */
static const rill_tensor *need(loader *l, const char *name, int64_t d0, int64_t d1, bool integer, rill_status *s) {
  if (*s != RILL_OK) return NULL;
  const rill_tensor *t = rill_checkpoint_find(l->ck, name);
  if (t == NULL) {
    snprintf(l->err, l->err_cap, "%s: missing tensor %s", l->ck_name, name);
    *s = RILL_ERR_MODEL;
    return NULL;
  }
  bool ok_dtype = integer ? strcmp(t->dtype_name, "I64") == 0 || strcmp(t->dtype_name, "I32") == 0
                          : t->dtype != RILL_TENSOR_OTHER;
  if (!ok_dtype) {
    snprintf(l->err, l->err_cap, "%s: tensor %s has dtype %s; expected %s", t->file, name, t->dtype_name,
             integer ? "I64 or I32" : "F32, F16 or BF16");
    *s = RILL_ERR_MODEL;
    return NULL;
  }
  *s = rill_tensor_check_shape(t, name, d0, d1, l->err, l->err_cap);
  return *s == RILL_OK ? t : NULL;
}

static float *vector(loader *l, const rill_tensor *t, rill_status *s) {
  if (*s != RILL_OK) return NULL;
  float *v = malloc((size_t)t->numel * sizeof(float));
  if (v == NULL) {
    snprintf(l->err, l->err_cap, "out of memory");
    *s = RILL_ERR_OUT_OF_MEMORY;
    return NULL;
  }
  for (int64_t i = 0; i < t->numel; i++) v[i] = rill_tensor_get(t, i);
  return v;
}

static void matrix(loader *l, rill_matrix *m, rill_wtype type, const rill_tensor *const *parts, int nparts, int cols,
                   rill_pool *pool, rill_status *s) {
  if (*s != RILL_OK) return;
  *s = rill_matrix_load(m, type, parts, nparts, cols, pool);
  if (*s != RILL_OK) snprintf(l->err, l->err_cap, "out of memory loading %s", parts[0]->name);
}

static int64_t int_at(const rill_tensor *t, int64_t i) {
  const unsigned char *p = t->data;
  if (t->dtype_name[1] == '6') {
    int64_t v;
    memcpy(&v, p + (size_t)i * 8, 8);
    return v;
  }
  int32_t v;
  memcpy(&v, p + (size_t)i * 4, 4);
  return v;
}

static rill_status load_weights(const rill_checkpoint *ck, const char *ck_name, rill_pool *pool, rill_eagle3_head *h,
                                char *err, size_t err_cap) {
  const rill_model_config *c = &h->cfg;
  loader l = {.ck = ck, .ck_name = ck_name, .err = err, .err_cap = err_cap};
  rill_status s = RILL_OK;
  const int64_t H = c->hidden_size, I = c->intermediate_size, V = c->vocab_size, VD = h->draft_vocab;
  const int64_t QD = (int64_t)c->num_heads * c->head_dim, KD = (int64_t)c->num_kv_heads * c->head_dim;
  /* Every tensor is checked before any is converted. */
  const rill_tensor *fc = need(&l, "fc.weight", H, 3 * (int64_t)h->target_hidden, false, &s);
  const rill_tensor *in_n = need(&l, "midlayer.input_layernorm.weight", H, -1, false, &s);
  const rill_tensor *hid_n = need(&l, "midlayer.hidden_norm.weight", H, -1, false, &s);
  const rill_tensor *q = need(&l, "midlayer.self_attn.q_proj.weight", QD, 2 * H, false, &s);
  const rill_tensor *k = need(&l, "midlayer.self_attn.k_proj.weight", KD, 2 * H, false, &s);
  const rill_tensor *v = need(&l, "midlayer.self_attn.v_proj.weight", KD, 2 * H, false, &s);
  const rill_tensor *o = need(&l, "midlayer.self_attn.o_proj.weight", H, QD, false, &s);
  const rill_tensor *post_n = need(&l, "midlayer.post_attention_layernorm.weight", H, -1, false, &s);
  const rill_tensor *gate = need(&l, "midlayer.mlp.gate_proj.weight", I, H, false, &s);
  const rill_tensor *up = need(&l, "midlayer.mlp.up_proj.weight", I, H, false, &s);
  const rill_tensor *down = need(&l, "midlayer.mlp.down_proj.weight", H, I, false, &s);
  const rill_tensor *fin_n = need(&l, "norm.weight", H, -1, false, &s);
  const rill_tensor *head = need(&l, "lm_head.weight", VD, H, false, &s);
  const rill_tensor *emb = NULL;
  if (s == RILL_OK && rill_checkpoint_find(ck, "embed_tokens.weight") != NULL) {
    emb = need(&l, "embed_tokens.weight", V, H, false, &s);
  } else if (s == RILL_OK && H != h->target_hidden) {
    snprintf(err, err_cap,
             "%s: missing tensor embed_tokens.weight (hidden_size %lld differs from the target's %d, so the target's "
             "embeddings cannot serve)",
             ck_name, (long long)H, h->target_hidden);
    s = RILL_ERR_MODEL;
  }
  const rill_tensor *d2t = NULL;
  if (s == RILL_OK && (VD < V || rill_checkpoint_find(ck, "d2t") != NULL)) {
    if (VD < V && rill_checkpoint_find(ck, "d2t") == NULL) {
      snprintf(err, err_cap, "%s: missing tensor d2t (draft_vocab_size %lld is smaller than vocab_size %lld)",
               ck_name, (long long)VD, (long long)V);
      s = RILL_ERR_MODEL;
    }
    d2t = need(&l, "d2t", VD, -1, true, &s);
  }
  if (s != RILL_OK) return s;

  h->d2t = malloc((size_t)VD * sizeof(int32_t));
  if (h->d2t == NULL) {
    return rill_fail(err, err_cap, RILL_ERR_OUT_OF_MEMORY, "out of memory");
  }
  for (int64_t i = 0; i < VD; i++) {
    int64_t target = d2t != NULL ? i + int_at(d2t, i) : i;
    if (target < 0 || target >= V) {
      return rill_fail(err, err_cap, RILL_ERR_MODEL,
                       "%s: d2t[%lld] maps draft token %lld to %lld, outside the vocabulary of %lld", d2t->file,
                       (long long)i, (long long)i, (long long)target, (long long)V);
    }
    h->d2t[i] = (int32_t)target;
  }
  const rill_wtype wt = fc->dtype == RILL_TENSOR_BF16 ? RILL_W_BF16 : RILL_W_F32;
  h->own_embed = emb != NULL;
  if (emb != NULL) matrix(&l, &h->embed, wt, &emb, 1, (int)H, pool, &s);
  matrix(&l, &h->fc, wt, &fc, 1, 3 * h->target_hidden, pool, &s);
  const rill_tensor *qkv[3] = {q, k, v}, *gu[2] = {gate, up};
  matrix(&l, &h->qkv, wt, qkv, 3, (int)(2 * H), pool, &s);
  matrix(&l, &h->o, wt, &o, 1, (int)QD, pool, &s);
  matrix(&l, &h->gate_up, wt, gu, 2, (int)H, pool, &s);
  matrix(&l, &h->down, wt, &down, 1, (int)I, pool, &s);
  matrix(&l, &h->lm_head, wt, &head, 1, (int)H, pool, &s);
  h->input_norm = vector(&l, in_n, &s);
  h->hidden_norm = vector(&l, hid_n, &s);
  h->post_norm = vector(&l, post_n, &s);
  h->final_norm = vector(&l, fin_n, &s);
  if (s != RILL_OK) return s;
  h->bytes = rill_matrix_bytes(&h->fc) + rill_matrix_bytes(&h->qkv) + rill_matrix_bytes(&h->o) +
             rill_matrix_bytes(&h->gate_up) + rill_matrix_bytes(&h->down) + rill_matrix_bytes(&h->lm_head) +
             (h->own_embed ? rill_matrix_bytes(&h->embed) : 0);
  return RILL_OK;
}

rill_status rill_eagle3_head_load(const char *dir, const rill_model_config *target, rill_pool *pool,
                                  rill_eagle3_head *h, char *err, size_t err_cap) {
  memset(h, 0, sizeof *h);
  /* Every failure to read config.json counts as a bad head directory. */
  rill_json_doc *doc = NULL;
  if (rill_config_json_read(dir, &doc, err, err_cap) != RILL_OK) return RILL_ERR_MODEL;
  rill_status s = parse(rill_json_root(doc), target, h, err, err_cap);
  rill_json_free(doc);
  if (s != RILL_OK) return s;
  rill_checkpoint *ck = NULL;
  s = rill_checkpoint_open(dir, &ck, err, err_cap);
  if (s != RILL_OK) return s;
  s = load_weights(ck, rill_checkpoint_name(ck), pool, h, err, err_cap);
  rill_checkpoint_close(ck);
  if (s != RILL_OK) rill_eagle3_head_free(h);
  return s;
}

void rill_eagle3_head_free(rill_eagle3_head *h) {
  rill_matrix_free(&h->embed);
  rill_matrix_free(&h->fc);
  rill_matrix_free(&h->qkv);
  rill_matrix_free(&h->o);
  rill_matrix_free(&h->gate_up);
  rill_matrix_free(&h->down);
  rill_matrix_free(&h->lm_head);
  free(h->input_norm);
  free(h->hidden_norm);
  free(h->post_norm);
  free(h->final_norm);
  free(h->d2t);
  memset(h, 0, sizeof *h);
}
