#include "tensor_shape.h"

#include <stdio.h>

static void shape_text(const rill_tensor *t, char *out, size_t cap) {
  size_t n = (size_t)snprintf(out, cap, "[");
  for (int d = 0; d < t->ndim && n < cap; d++) {
    n += (size_t)snprintf(out + n, cap - n, d == 0 ? "%lld" : ", %lld", (long long)t->shape[d]);
  }
  if (n < cap) snprintf(out + n, cap - n, "]");
}

rill_status rill_tensor_check_shape(const rill_tensor *t, const char *name, int64_t d0, int64_t d1, char *err,
                                    size_t err_cap) {
  int ndim = d1 < 0 ? 1 : 2;
  if (t->ndim == ndim && t->shape[0] == d0 && (ndim == 1 || t->shape[1] == d1)) return RILL_OK;
  char got[96];
  shape_text(t, got, sizeof got);
  if (ndim == 1) {
    snprintf(err, err_cap, "%s: tensor %s has shape %s; expected [%lld]", t->file, name, got, (long long)d0);
  } else {
    snprintf(err, err_cap, "%s: tensor %s has shape %s; expected [%lld, %lld]", t->file, name, got, (long long)d0,
             (long long)d1);
  }
  return RILL_ERR_MODEL;
}
