/*
 * How the library reports a failure: a status for the caller to branch on and one line of text for a person, written
 * into the caller's err buffer. Every failing path formats its line through rill_fail; a parser with its own state
 * (json.c, model_config.c) wraps it to add its prefix and mark itself failed.
 */
#ifndef RILL_FAIL_H
#define RILL_FAIL_H

#include <stddef.h>

#include "rill.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Formats fmt (printf-style) into err, truncated to err_cap bytes and terminated, when err is not NULL and err_cap is
 * not 0; returns s. */
rill_status rill_fail(char *err, size_t err_cap, rill_status s, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#ifdef __cplusplus
}
#endif

#endif /* RILL_FAIL_H */
