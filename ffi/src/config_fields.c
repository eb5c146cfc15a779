#include "config_fields.h"

#include <stdio.h>

#define CFG "config.json"

int32_t rill_config_int(rill_config_reader *r, const rill_json *obj, const char *key, int32_t def) {
  if (r->failed) return 0;
  const rill_json *v = rill_json_get(obj, key);
  if (v == NULL || v->kind == RILL_JSON_NULL) {
    if (def >= 0) return def;
    snprintf(r->err, r->err_cap, CFG ": missing %s", key);
    r->failed = true;
    return 0;
  }
  if (v->kind != RILL_JSON_NUMBER || !v->is_integer || v->integer < 1 || v->integer > INT32_MAX) {
    snprintf(r->err, r->err_cap, CFG ": %s must be a positive integer", key);
    r->failed = true;
    return 0;
  }
  return (int32_t)v->integer;
}

double rill_config_number(rill_config_reader *r, const rill_json *obj, const char *key, double def, bool required) {
  if (r->failed) return 0;
  const rill_json *v = rill_json_get(obj, key);
  if (v == NULL || v->kind == RILL_JSON_NULL) {
    if (!required) return def;
    snprintf(r->err, r->err_cap, CFG ": missing %s", key);
    r->failed = true;
    return 0;
  }
  if (v->kind != RILL_JSON_NUMBER || !(v->number > 0)) {
    snprintf(r->err, r->err_cap, CFG ": %s must be a positive number", key);
    r->failed = true;
    return 0;
  }
  return v->number;
}

const char *rill_config_string(const rill_json *obj, const char *key) {
  const rill_json *v = rill_json_get(obj, key);
  return v != NULL && v->kind == RILL_JSON_STRING ? v->string : NULL;
}
