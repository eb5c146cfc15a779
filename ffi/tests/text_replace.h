/* Editing a text (a config.json) for the tests that write defective model directories. */
#ifndef RILL_TEST_TEXT_REPLACE_H
#define RILL_TEST_TEXT_REPLACE_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A malloc'd copy of text with the first occurrence of from replaced by to, or NULL when from does not occur. */
static inline char *replace(const char *text, const char *from, const char *to) {
  const char *at = strstr(text, from);
  if (at == NULL) return NULL;
  size_t n = strlen(text) - strlen(from) + strlen(to) + 1;
  char *out = malloc(n);
  snprintf(out, n, "%.*s%s%s", (int)(at - text), text, to, at + strlen(from));
  return out;
}

#endif /* RILL_TEST_TEXT_REPLACE_H */
