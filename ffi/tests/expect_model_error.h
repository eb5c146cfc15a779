/* Checking that a model directory is refused when an engine is created from it, with a one-line message. */
#ifndef RILL_TEST_EXPECT_MODEL_ERROR_H
#define RILL_TEST_EXPECT_MODEL_ERROR_H

#include <stdio.h>
#include <string.h>

#include "check.h"
#include "rill.h"

/* Creates an engine for dir; expects RILL_ERR_MODEL, no engine, and one line containing every needle (NULL: none). */
static inline void expect_model_error(const char *dir, const char *what, const char *needle1, const char *needle2) {
  rill_options o = {0};
  o.num_blocks = 16;
  o.max_batch_tokens = 64;
  o.threads = 1;
  rill_engine *e = (rill_engine *)1;
  rill_status s = rill_engine_create(dir, &o, &e);
  const char *msg = rill_global_error();
  printf("%s -> %s\n", what, msg);
  CHECK_MSG(s == RILL_ERR_MODEL, "%s: status %d (%s)", what, (int)s, msg);
  CHECK_MSG(e == NULL, "%s: engine not NULL", what);
  CHECK_MSG(strchr(msg, '\n') == NULL && strlen(msg) > 0, "%s: one line: %s", what, msg);
  CHECK_MSG(needle1 == NULL || strstr(msg, needle1) != NULL, "%s: '%s' lacks '%s'", what, msg, needle1);
  CHECK_MSG(needle2 == NULL || strstr(msg, needle2) != NULL, "%s: '%s' lacks '%s'", what, msg, needle2);
  if (s == RILL_OK) rill_engine_destroy(e);
}

#endif /* RILL_TEST_EXPECT_MODEL_ERROR_H */
