/*
 * Hugging Face safetensors checkpoints: one model.safetensors, or shards listed by model.safetensors.index.json.
 * Files are memory-mapped read-only; every header is checked against its file (offsets inside the data area, sizes
 * matching dtype × shape, no overlap past the end) before any tensor is handed out, so a truncated or corrupt file is
 * an error naming the file and tensor instead of a read past the mapping.
 */
#ifndef RILL_SAFETENSORS_H
#define RILL_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "rill.h"

#define RILL_TENSOR_MAX_DIMS 8

typedef enum rill_tensor_dtype {
  RILL_TENSOR_F32,
  RILL_TENSOR_F16,
  RILL_TENSOR_BF16,
  RILL_TENSOR_OTHER /* valid in the format but not a weight dtype rill reads; dtype_name says which */
} rill_tensor_dtype;

typedef struct rill_tensor {
  const char *name;
  const char *file; /* the file's name inside the model directory */
  rill_tensor_dtype dtype;
  const char *dtype_name; /* as written in the header, e.g. "BF16" */
  int ndim;
  int64_t shape[RILL_TENSOR_MAX_DIMS];
  int64_t numel;
  const void *data; /* inside the mapping; no alignment guarantee */
  size_t nbytes;
} rill_tensor;

typedef struct rill_checkpoint rill_checkpoint;

/* Opens dir/model.safetensors.index.json with its shards, else dir/model.safetensors. */
rill_status rill_checkpoint_open(const char *dir, rill_checkpoint **out, char *err, size_t err_cap);
void rill_checkpoint_close(rill_checkpoint *ck);
/* The tensor named name, or NULL. */
const rill_tensor *rill_checkpoint_find(const rill_checkpoint *ck, const char *name);
/* "model.safetensors" or "model.safetensors.index.json": the file an error about a missing tensor names. */
const char *rill_checkpoint_name(const rill_checkpoint *ck);
/* Total bytes of tensor data over all files. */
size_t rill_checkpoint_bytes(const rill_checkpoint *ck);
/* Lets go of the pages of the files this process has resident through its mappings (the page cache keeps them; a
 * later read of a tensor maps them in again), so a loader that copies tensors out does not hold the checkpoint and
 * its copy at once. Tensors stay valid. */
void rill_checkpoint_drop_resident(const rill_checkpoint *ck);

#endif /* RILL_SAFETENSORS_H */
