#include "tensor_shape.h"

#include <stdio.h>

#include "fail.h"

static void shape_text(const int64_t *shape, int ndim, char *out, size_t cap) {
  size_t n = (size_t)snprintf(out, cap, "[");
  for (int d = 0; d < ndim && n < cap; d++) {
    n += (size_t)snprintf(out + n, cap - n, d == 0 ? "%lld" : ", %lld", (long long)shape[d]);
  }
  if (n < cap) snprintf(out + n, cap - n, "]");
}

rill_status rill_tensor_check_dims(const rill_tensor *t, const char *name, const int64_t *shape, int ndim, char *err,
                                   size_t err_cap) {
  int same = t->ndim == ndim;
  for (int d = 0; same && d < ndim; d++) same = t->shape[d] == shape[d];
  if (same) return RILL_OK;
  char got[128], want[128];
  shape_text(t->shape, t->ndim, got, sizeof got);
  shape_text(shape, ndim, want, sizeof want);
  return rill_fail(err, err_cap, RILL_ERR_MODEL, "%s: tensor %s has shape %s; expected %s", t->file, name, got, want);
}

rill_status rill_tensor_check_shape(const rill_tensor *t, const char *name, int64_t d0, int64_t d1, char *err,
                                    size_t err_cap) {
  const int64_t shape[2] = {d0, d1};
  return rill_tensor_check_dims(t, name, shape, d1 < 0 ? 1 : 2, err, err_cap);
}
