#include "fail.h"

#include <stdarg.h>
#include <stdio.h>

rill_status rill_fail(char *err, size_t err_cap, rill_status s, const char *fmt, ...) {
  if (err != NULL && err_cap > 0) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, err_cap, fmt, ap);
    va_end(ap);
  }
  return s;
}
