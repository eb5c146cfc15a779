#include "read_file.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fail.h"

rill_status rill_read_file(const char *path, const char *display_name, size_t max_bytes, char **out, size_t *len,
                           char *err, size_t err_cap) {
  *out = NULL;
  *len = 0;
  FILE *f = fopen(path, "rb");
  if (f == NULL) {
    return rill_fail(err, err_cap, RILL_ERR_MODEL, "%s: cannot open: %s", display_name, strerror(errno));
  }
  size_t cap = 4096, n = 0;
  char *buf = malloc(cap + 1);
  if (buf == NULL) {
    fclose(f);
    return rill_fail(err, err_cap, RILL_ERR_OUT_OF_MEMORY, "%s: out of memory", display_name);
  }
  for (;;) {
    if (n == cap) {
      if (cap >= max_bytes) {
        free(buf);
        fclose(f);
        return rill_fail(err, err_cap, RILL_ERR_MODEL, "%s: larger than %zu bytes", display_name, max_bytes);
      }
      cap *= 2;
      char *nb = realloc(buf, cap + 1);
      if (nb == NULL) {
        free(buf);
        fclose(f);
        return rill_fail(err, err_cap, RILL_ERR_OUT_OF_MEMORY, "%s: out of memory", display_name);
      }
      buf = nb;
    }
    size_t got = fread(buf + n, 1, cap - n, f);
    n += got;
    if (got == 0) break;
  }
  int bad = ferror(f);
  fclose(f);
  if (bad || n > max_bytes) {
    free(buf);
    if (bad) {
      snprintf(err, err_cap, "%s: read error", display_name);
    } else {
      snprintf(err, err_cap, "%s: larger than %zu bytes", display_name, max_bytes);
    }
    return RILL_ERR_MODEL;
  }
  buf[n] = '\0';
  *out = buf;
  *len = n;
  return RILL_OK;
}
