/* The CUDA device of a build without nvcc (and of the sanitized C tests): every entry refuses. */
#include <stdio.h>
#include <string.h>

#include "cuda_device.h"
#include "fail.h"

rill_status rill_cuda_probe(char *err, size_t err_cap) {
  return rill_fail(err, err_cap, RILL_ERR_UNSUPPORTED,
                   "device cuda: this library was built without CUDA (nvcc not found at build time)");
}

rill_status rill_cuda_create(const rill_cuda_setup *setup, rill_cuda **out, rill_cuda_info *info, char *err,
                             size_t err_cap) {
  (void)setup;
  (void)info;
  *out = NULL;
  return rill_cuda_probe(err, err_cap);
}

void rill_cuda_destroy(rill_cuda *d) { (void)d; }

rill_status rill_cuda_forward(rill_cuda *d, const rill_step_batch *b, int all_rows, float *out, const float **logits,
                              int32_t *num_rows, char *err, size_t err_cap) {
  (void)d;
  (void)b;
  (void)all_rows;
  (void)out;
  (void)logits;
  (void)num_rows;
  return rill_cuda_probe(err, err_cap);
}

int rill_cuda_samples_on_device(const rill_cuda *d, const rill_step_batch *b) {
  (void)d;
  (void)b;
  return 0;
}

rill_status rill_cuda_step(rill_cuda *d, const rill_step_batch *b, rill_step_result *r, char *err, size_t err_cap) {
  (void)d;
  (void)b;
  (void)r;
  return rill_cuda_probe(err, err_cap);
}

int rill_cuda_has_head(const rill_cuda *d) {
  (void)d;
  return 0;
}

rill_status rill_cuda_propose(rill_cuda *d, const rill_step_batch *b, rill_step_result *r, char *err, size_t err_cap) {
  (void)d;
  (void)b;
  (void)r;
  return rill_cuda_probe(err, err_cap);
}

rill_status rill_cuda_head_rows(rill_cuda *d, float *logits, float *hidden, int32_t cap, int32_t *rows, char *err,
                                size_t err_cap) {
  (void)d;
  (void)logits;
  (void)hidden;
  (void)cap;
  *rows = 0;
  return rill_cuda_probe(err, err_cap);
}

const rill_device_ops *rill_cuda_ops(const rill_cuda *d) {
  (void)d;
  return NULL;
}

void rill_cuda_set_ops(rill_cuda *d, const rill_device_ops *ops) {
  (void)d;
  (void)ops;
}

rill_cuda_buffers rill_cuda_step_buffers(rill_cuda *d) {
  (void)d;
  rill_cuda_buffers none = {NULL, NULL, NULL, NULL, NULL, NULL};
  return none;
}

/* Never reached: rill_cuda_create refuses, so no engine holds this device. */
rill_device rill_cuda_device(rill_cuda *d) {
  rill_device none;
  memset(&none, 0, sizeof none);
  none.state = d;
  return none;
}
