/* Reading typed members of a parsed config.json, with one-line errors that name the member. */
#ifndef RILL_CONFIG_FIELDS_H
#define RILL_CONFIG_FIELDS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "json.h"

/* The parse in progress: once failed is set, err holds the first error and every later read returns 0 untouched. */
typedef struct rill_config_reader {
  const rill_json *root;
  char *err;
  size_t err_cap;
  bool failed;
} rill_config_reader;

/* A positive integer member of obj; missing or null → def (def < 0: required). */
int32_t rill_config_int(rill_config_reader *r, const rill_json *obj, const char *key, int32_t def);
/* A positive number member of obj; missing or null → def, unless required. */
double rill_config_number(rill_config_reader *r, const rill_json *obj, const char *key, double def, bool required);
/* A string member of obj, or NULL when it is missing or not a string. */
const char *rill_config_string(const rill_json *obj, const char *key);

#endif /* RILL_CONFIG_FIELDS_H */
