#include "model_config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config_fields.h"
#include "config_json.h"
#include "fail.h"
#include "json.h"

#define CFG "config.json"

typedef rill_config_reader reader;

static bool bool_field(reader *r, const char *key, bool def) {
  if (r->failed) return def;
  const rill_json *v = rill_json_get(r->root, key);
  if (v == NULL || v->kind == RILL_JSON_NULL) return def;
  if (v->kind != RILL_JSON_TRUE && v->kind != RILL_JSON_FALSE) {
    snprintf(r->err, r->err_cap, CFG ": %s must be true or false", key);
    r->failed = true;
    return def;
  }
  return v->kind == RILL_JSON_TRUE;
}

/* The reader's failure: marks it failed, so the fields read after it are not reported over it. */
static rill_status fail(reader *r, const char *msg) {
  r->failed = true;
  return rill_fail(r->err, r->err_cap, RILL_ERR_MODEL, CFG ": %s", msg);
}

/* YaRN as transformers' _compute_yarn_parameters and the gpt-oss reference compute it: the ramp between the
 * dimensions that turn beta_fast and beta_slow times over original_max_position_embeddings, unrounded when truncate
 * is false; cos and sin scaled by attention_factor, else 0.1 · ln(factor) + 1. */
static rill_status parse_yarn(reader *r, const rill_json *rs, rill_model_config *c) {
  c->rope_scaling = RILL_ROPE_YARN;
  c->rope_factor = (float)rill_config_number(r, rs, "factor", 1.0, true);
  c->rope_original_max_positions = (int32_t)rill_config_number(r, rs, "original_max_position_embeddings", 4096, true);
  c->rope_beta_fast = (float)rill_config_number(r, rs, "beta_fast", 32.0, false);
  c->rope_beta_slow = (float)rill_config_number(r, rs, "beta_slow", 1.0, false);
  if (r->failed) return RILL_ERR_MODEL;
  if (rill_json_get(rs, "mscale") != NULL || rill_json_get(rs, "mscale_all_dim") != NULL) {
    return fail(r, "rope_scaling yarn with mscale / mscale_all_dim is not supported");
  }
  const rill_json *tr = rill_json_get(rs, "truncate");
  if (tr != NULL && tr->kind != RILL_JSON_TRUE && tr->kind != RILL_JSON_FALSE && tr->kind != RILL_JSON_NULL) {
    return fail(r, "rope_scaling truncate must be true or false");
  }
  c->rope_truncate = tr == NULL || tr->kind != RILL_JSON_FALSE;
  if (!(c->rope_beta_fast > c->rope_beta_slow)) return fail(r, "rope_scaling beta_fast must exceed beta_slow");
  if (!(c->rope_factor >= 1.0f)) return fail(r, "rope_scaling yarn factor must be at least 1");
  const double factor = c->rope_factor;
  double attn = rill_config_number(r, rs, "attention_factor", factor > 1.0 ? 0.1 * log(factor) + 1.0 : 1.0, false);
  if (r->failed) return RILL_ERR_MODEL;
  c->rope_attn_factor = (float)attn;
  return RILL_OK;
}

/* gpt-oss: experts, the clamped SwiGLU's limit, sinks, which layers slide and over how many positions, MXFP4 experts.
 * Widths must be whole MXFP4 blocks (32 values). */
static rill_status parse_gpt_oss(reader *r, rill_model_config *c) {
  const rill_json *root = r->root;
  c->num_experts = rill_config_int(r, r->root, "num_local_experts", -1);
  const bool has_tok = rill_json_get(root, "num_experts_per_tok") != NULL;
  const bool has_token = rill_json_get(root, "experts_per_token") != NULL;
  int32_t per_tok = has_tok ? rill_config_int(r, r->root, "num_experts_per_tok", -1) : 0;
  int32_t per_token = has_token ? rill_config_int(r, r->root, "experts_per_token", -1) : 0;
  if (r->failed) return RILL_ERR_MODEL;
  if (!has_tok && !has_token) return fail(r, "missing num_experts_per_tok");
  if (has_tok && has_token && per_tok != per_token) {
    return fail(r, "num_experts_per_tok and experts_per_token disagree");
  }
  c->experts_per_tok = has_tok ? per_tok : per_token;
  if (c->experts_per_tok > c->num_experts) return fail(r, "num_experts_per_tok exceeds num_local_experts");
  if (c->num_experts > 4096) return fail(r, "num_local_experts over 4096 is not supported");
  c->swiglu_limit = (float)rill_config_number(r, root, "swiglu_limit", 7.0, false);
  if (r->failed) return RILL_ERR_MODEL;
  if (c->hidden_size % 32 != 0 || c->intermediate_size % 32 != 0) {
    return fail(r, "gpt-oss hidden_size and intermediate_size must be multiples of 32 (whole MXFP4 blocks)");
  }
  c->attn_sinks = true;
  const rill_json *q = rill_json_get(root, "quantization_config");
  if (q != NULL && q->kind != RILL_JSON_NULL) {
    const char *method = rill_config_string(q, "quant_method");
    if (q->kind != RILL_JSON_OBJECT || method == NULL || strcmp(method, "mxfp4") != 0) {
      return fail(r, "gpt-oss quantization_config.quant_method must be mxfp4 (the release layout)");
    }
  }
  if (c->num_layers > RILL_MAX_TYPED_LAYERS) return fail(r, "num_hidden_layers over 1024 is not supported for gpt-oss");
  const rill_json *sw = rill_json_get(root, "sliding_window");
  if (sw != NULL && sw->kind != RILL_JSON_NULL) c->sliding_window = rill_config_int(r, r->root, "sliding_window", -1);
  if (r->failed) return RILL_ERR_MODEL;
  const rill_json *types = rill_json_get(root, "layer_types");
  if (types != NULL && types->kind != RILL_JSON_NULL) {
    if (types->kind != RILL_JSON_ARRAY || types->length != (size_t)c->num_layers) {
      return fail(r, "layer_types must be an array of num_hidden_layers entries");
    }
    int i = 0;
    for (const rill_json *t = types->first; t != NULL; t = t->next, i++) {
      const bool sliding = t->kind == RILL_JSON_STRING && strcmp(t->string, "sliding_attention") == 0;
      if (!sliding && !(t->kind == RILL_JSON_STRING && strcmp(t->string, "full_attention") == 0)) {
        return fail(r, "layer_types entries must be sliding_attention or full_attention");
      }
      c->layer_sliding[i] = sliding;
    }
  } else {
    /* The released default: even layers slide. */
    for (int i = 0; i < c->num_layers; i++) c->layer_sliding[i] = i % 2 == 0;
  }
  bool any = false;
  for (int i = 0; i < c->num_layers; i++) any = any || c->layer_sliding[i];
  if (any && c->sliding_window == 0) return fail(r, "layer_types has sliding_attention layers but no sliding_window");
  if (!any) c->sliding_window = 0;
  return RILL_OK;
}

static rill_status parse(const rill_json *root, rill_model_config *c, char *err, size_t err_cap) {
  if (root->kind != RILL_JSON_OBJECT) {
    return rill_fail(err, err_cap, RILL_ERR_MODEL, CFG ": not a JSON object");
  }
  reader r = {.root = root, .err = err, .err_cap = err_cap, .failed = false};
  const rill_json *archs = rill_json_get(root, "architectures");
  const rill_json *a0 = rill_json_at(archs, 0);
  const char *arch = a0 != NULL && a0->kind == RILL_JSON_STRING ? a0->string : NULL;
  const char *model_type = rill_config_string(root, "model_type");
  if (arch == NULL) {
    /* Older configs name only the model type. */
    static const char *const by_type[][2] = {{"llama", "LlamaForCausalLM"},
                                            {"mistral", "MistralForCausalLM"},
                                            {"qwen2", "Qwen2ForCausalLM"},
                                            {"qwen3", "Qwen3ForCausalLM"},
                                            {"gpt_oss", "GptOssForCausalLM"}};
    for (size_t i = 0; model_type != NULL && i < sizeof by_type / sizeof by_type[0]; i++) {
      if (strcmp(model_type, by_type[i][0]) == 0) arch = by_type[i][1];
    }
  }
  if (arch == NULL) {
    return rill_fail(err, err_cap, RILL_ERR_MODEL, CFG ": no architectures entry or known model_type");
  }
  bool llama = strcmp(arch, "LlamaForCausalLM") == 0, mistral = strcmp(arch, "MistralForCausalLM") == 0;
  bool qwen2 = strcmp(arch, "Qwen2ForCausalLM") == 0, qwen3 = strcmp(arch, "Qwen3ForCausalLM") == 0;
  bool gpt_oss = strcmp(arch, "GptOssForCausalLM") == 0;
  if (!llama && !mistral && !qwen2 && !qwen3 && !gpt_oss) {
    snprintf(err, err_cap,
             CFG ": unsupported architecture %.64s (supported: LlamaForCausalLM, MistralForCausalLM, "
                 "Qwen2ForCausalLM, Qwen3ForCausalLM, GptOssForCausalLM)",
             arch);
    return RILL_ERR_MODEL;
  }
  snprintf(c->architecture, sizeof c->architecture, "%s", arch);
  c->vocab_size = rill_config_int(&r, root, "vocab_size", -1);
  c->hidden_size = rill_config_int(&r, root, "hidden_size", -1);
  c->intermediate_size = rill_config_int(&r, root, "intermediate_size", -1);
  c->num_layers = rill_config_int(&r, root, "num_hidden_layers", -1);
  c->num_heads = rill_config_int(&r, root, "num_attention_heads", -1);
  c->num_kv_heads = rill_config_int(&r, root, "num_key_value_heads", c->num_heads);
  c->max_positions = rill_config_int(&r, root, "max_position_embeddings", 2048);
  if (r.failed) return RILL_ERR_MODEL;
  if (c->hidden_size % c->num_heads != 0 && rill_json_get(root, "head_dim") == NULL) {
    return rill_fail(err, err_cap, RILL_ERR_MODEL,
                     CFG ": hidden_size %d is not a multiple of num_attention_heads %d and no head_dim is given",
                     c->hidden_size, c->num_heads);
  }
  c->head_dim = rill_config_int(&r, root, "head_dim", c->hidden_size / c->num_heads);
  c->rms_norm_eps = (float)rill_config_number(&r, root, "rms_norm_eps", 1e-6, false);
  c->rope_theta = (float)rill_config_number(&r, root, "rope_theta", 10000.0, false);
  c->tie_word_embeddings = bool_field(&r, "tie_word_embeddings", false);
  bool attention_bias = bool_field(&r, "attention_bias", false);
  bool mlp_bias = bool_field(&r, "mlp_bias", false);
  if (r.failed) return RILL_ERR_MODEL;
  if (c->num_heads % c->num_kv_heads != 0) {
    return rill_fail(err, err_cap, RILL_ERR_MODEL,
                     CFG ": num_attention_heads %d is not a multiple of num_key_value_heads %d", c->num_heads,
                     c->num_kv_heads);
  }
  if (c->head_dim % 2 != 0 || c->head_dim > 1024) {
    return rill_fail(err, err_cap, RILL_ERR_MODEL, CFG ": head_dim %d must be even and at most 1024", c->head_dim);
  }
  if (mlp_bias) {
    return rill_fail(err, err_cap, RILL_ERR_MODEL, CFG ": mlp_bias true is not supported");
  }
  const char *act = rill_config_string(root, "hidden_act");
  if (act != NULL && strcmp(act, "silu") != 0) {
    return rill_fail(err, err_cap, RILL_ERR_MODEL, CFG ": hidden_act %.32s is not supported (only silu)", act);
  }
  c->qkv_bias = qwen2 || attention_bias;
  c->o_bias = !qwen2 && attention_bias;
  c->qk_norm = qwen3;
  if (gpt_oss) {
    rill_status gs = parse_gpt_oss(&r, c);
    if (gs != RILL_OK) return gs;
  }
  /* A sliding window narrower than the context changes attention; serve only the window so results stay exact. */
  const rill_json *sw = rill_json_get(root, "sliding_window");
  bool window_on = mistral || bool_field(&r, "use_sliding_window", false);
  if (window_on && sw != NULL && sw->kind == RILL_JSON_NUMBER && sw->is_integer && sw->integer > 0 &&
      sw->integer < c->max_positions) {
    c->max_positions = (int32_t)sw->integer;
  }
  c->rope_scaling = RILL_ROPE_NONE;
  c->rope_attn_factor = 1.0f;
  const rill_json *rs = rill_json_get(root, "rope_scaling");
  if (rs == NULL || rs->kind == RILL_JSON_NULL) {
    /* Newer transformers write the same settings, rope_theta included, as rope_parameters. */
    rs = rill_json_get(root, "rope_parameters");
    if (rs != NULL && rs->kind == RILL_JSON_OBJECT && rill_json_get(rs, "rope_theta") != NULL) {
      c->rope_theta = (float)rill_config_number(&r, rs, "rope_theta", 10000.0, true);
    }
  }
  if (rs != NULL && rs->kind != RILL_JSON_NULL) {
    const char *type = rill_config_string(rs, "rope_type");
    if (type == NULL) type = rill_config_string(rs, "type");
    if (rs->kind != RILL_JSON_OBJECT || type == NULL) {
      return rill_fail(err, err_cap, RILL_ERR_MODEL, CFG ": rope_scaling must be an object with rope_type");
    }
    if (strcmp(type, "default") == 0) {
      c->rope_scaling = RILL_ROPE_NONE;
    } else if (strcmp(type, "linear") == 0) {
      c->rope_scaling = RILL_ROPE_LINEAR;
      c->rope_factor = (float)rill_config_number(&r, rs, "factor", 1.0, true);
    } else if (strcmp(type, "llama3") == 0) {
      c->rope_scaling = RILL_ROPE_LLAMA3;
      c->rope_factor = (float)rill_config_number(&r, rs, "factor", 1.0, true);
      c->rope_low_freq_factor = (float)rill_config_number(&r, rs, "low_freq_factor", 1.0, true);
      c->rope_high_freq_factor = (float)rill_config_number(&r, rs, "high_freq_factor", 4.0, true);
      double orig = rill_config_number(&r, rs, "original_max_position_embeddings", 8192, true);
      c->rope_original_max_positions = (int32_t)orig;
      if (!r.failed && !(c->rope_high_freq_factor > c->rope_low_freq_factor)) {
        return rill_fail(err, err_cap, RILL_ERR_MODEL,
                         CFG ": rope_scaling high_freq_factor must exceed low_freq_factor");
      }
    } else if (strcmp(type, "yarn") == 0) {
      rill_status ys = parse_yarn(&r, rs, c);
      if (ys != RILL_OK) return ys;
    } else {
      return rill_fail(err, err_cap, RILL_ERR_MODEL,
                       CFG ": rope_scaling type %.32s is not supported (default, linear, llama3, yarn)", type);
    }
    if (r.failed) return RILL_ERR_MODEL;
  }
  return RILL_OK;
}

rill_status rill_model_config_read(const char *dir, rill_model_config *cfg, char *err, size_t err_cap) {
  memset(cfg, 0, sizeof *cfg);
  rill_json_doc *doc = NULL;
  rill_status s = rill_config_json_read(dir, &doc, err, err_cap);
  if (s != RILL_OK) return s;
  s = parse(rill_json_root(doc), cfg, err, err_cap);
  rill_json_free(doc);
  return s;
}
