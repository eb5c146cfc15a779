/* Checking a checkpoint tensor's shape against the one a loader expects. */
#ifndef RILL_TENSOR_SHAPE_H
#define RILL_TENSOR_SHAPE_H

#include <stddef.h>
#include <stdint.h>

#include "rill.h"
#include "safetensors.h"

/* RILL_OK when t (named name) has shape [d0] (d1 < 0) or [d0, d1]; else RILL_ERR_MODEL with one line in err naming
 * t's file, the tensor, its shape and the expected one. */
rill_status rill_tensor_check_shape(const rill_tensor *t, const char *name, int64_t d0, int64_t d1, char *err,
                                    size_t err_cap);
/* The same for any rank: RILL_OK when t has exactly the ndim dimensions of shape. */
rill_status rill_tensor_check_dims(const rill_tensor *t, const char *name, const int64_t *shape, int ndim, char *err,
                                   size_t err_cap);

#endif /* RILL_TENSOR_SHAPE_H */
