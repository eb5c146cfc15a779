#include "config_json.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fail.h"
#include "read_file.h"

#define CFG "config.json"

rill_status rill_config_json_read(const char *dir, rill_json_doc **out, char *err, size_t err_cap) {
  *out = NULL;
  size_t plen = strlen(dir) + 16;
  char *path = malloc(plen);
  if (path == NULL) {
    return rill_fail(err, err_cap, RILL_ERR_OUT_OF_MEMORY, "out of memory");
  }
  snprintf(path, plen, "%s/" CFG, dir);
  char *text = NULL;
  size_t len = 0;
  rill_status s = rill_read_file(path, path, (size_t)16 << 20, &text, &len, err, err_cap);
  free(path);
  if (s != RILL_OK) return s;
  char jerr[192];
  rill_json_doc *doc = rill_json_parse(text, len, jerr, sizeof jerr);
  free(text);
  if (doc == NULL) {
    return rill_fail(err, err_cap, RILL_ERR_MODEL, CFG ": %s", jerr);
  }
  *out = doc;
  return RILL_OK;
}
