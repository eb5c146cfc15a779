#include "mxfp4.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fail.h"
#include "matrix.h"
#include "tensor_shape.h"

/* The tensor prefix + suffix with the given shape; u8: dtype U8, else F32/F16/BF16. */
static const rill_tensor *need(const rill_checkpoint *ck, const char *ck_name, const char *prefix, const char *suffix,
                               const int64_t *shape, int ndim, int u8, char *err, size_t err_cap) {
  char name[192];
  snprintf(name, sizeof name, "%s%s", prefix, suffix);
  const rill_tensor *t = rill_checkpoint_find(ck, name);
  if (t == NULL) {
    snprintf(err, err_cap, "%s: missing tensor %s", ck_name, name);
    return NULL;
  }
  if (u8 ? strcmp(t->dtype_name, "U8") != 0 : t->dtype == RILL_TENSOR_OTHER) {
    snprintf(err, err_cap, "%s: tensor %s has dtype %s; expected %s", t->file, name, t->dtype_name,
             u8 ? "U8" : "F32, F16 or BF16");
    return NULL;
  }
  return rill_tensor_check_dims(t, name, shape, ndim, err, err_cap) == RILL_OK ? t : NULL;
}

rill_status rill_mxfp4_experts_check(const rill_checkpoint *ck, const char *ck_name, const char *prefix, int32_t E,
                                     int32_t rows, int32_t cols, char *err, size_t err_cap) {
  if (cols % 32 != 0) {
    return rill_fail(err, err_cap, RILL_ERR_MODEL, "%s: %sblocks: %d columns are not whole MXFP4 blocks of 32", ck_name,
                     prefix, cols);
  }
  const int64_t nb = cols / 32;
  const int64_t bshape[4] = {E, rows, nb, 16}, sshape[3] = {E, rows, nb}, biashape[2] = {E, rows};
  /* A dequantised export names the whole matrix prefix without its trailing underscore (…gate_up_proj). */
  char plain[192];
  snprintf(plain, sizeof plain, "%.*s", (int)(strlen(prefix) > 0 ? strlen(prefix) - 1 : 0), prefix);
  char blocks_name[192];
  snprintf(blocks_name, sizeof blocks_name, "%sblocks", prefix);
  const rill_tensor *dense = rill_checkpoint_find(ck, plain);
  if (dense != NULL && rill_checkpoint_find(ck, blocks_name) == NULL) {
    return rill_fail(err, err_cap, RILL_ERR_MODEL,
                     "%s: tensor %s holds the experts unquantized (%s); only the MXFP4 release layout is supported",
                     dense->file, plain, dense->dtype_name);
  }
  if (need(ck, ck_name, prefix, "blocks", bshape, 4, 1, err, err_cap) == NULL ||
      need(ck, ck_name, prefix, "scales", sshape, 3, 1, err, err_cap) == NULL ||
      need(ck, ck_name, prefix, "bias", biashape, 2, 0, err, err_cap) == NULL) {
    return RILL_ERR_MODEL;
  }
  return RILL_OK;
}

/* Bytes per copy task: large sequential copies, enough of them to spread over the threads. */
#define COPY_CHUNK ((size_t)4 << 20)

typedef struct copy_job {
  unsigned char *dst;
  const unsigned char *src;
  size_t n;
} copy_job;

static void copy_task(void *ctx, int64_t task, int thread) {
  (void)thread;
  const copy_job *j = ctx;
  size_t off = (size_t)task * COPY_CHUNK, len = j->n - off < COPY_CHUNK ? j->n - off : COPY_CHUNK;
  memcpy(j->dst + off, j->src + off, len);
}

static void copy(rill_pool *pool, void *dst, const void *src, size_t n) {
  copy_job j = {.dst = dst, .src = src, .n = n};
  rill_pool_run(pool, copy_task, &j, (int64_t)((n + COPY_CHUNK - 1) / COPY_CHUNK));
}

rill_status rill_mxfp4_experts_load(const rill_checkpoint *ck, const char *prefix, int32_t E, int32_t rows,
                                    int32_t cols, rill_pool *pool, rill_mxfp4_experts *m, char *err, size_t err_cap) {
  memset(m, 0, sizeof *m);
  char name[192];
  snprintf(name, sizeof name, "%sblocks", prefix);
  const rill_tensor *tb = rill_checkpoint_find(ck, name);
  snprintf(name, sizeof name, "%sscales", prefix);
  const rill_tensor *ts = rill_checkpoint_find(ck, name);
  snprintf(name, sizeof name, "%sbias", prefix);
  const rill_tensor *tbias = rill_checkpoint_find(ck, name);
  m->experts = E;
  m->rows = rows;
  m->cols = cols;
  m->nblocks = cols / 32;
  const size_t nsc = (size_t)E * (size_t)rows * (size_t)m->nblocks, nbias = (size_t)E * (size_t)rows;
  m->blocks = rill_weights_alloc(nsc * 16, &m->blocks_mapped);
  m->scales = rill_weights_alloc(nsc, &m->scales_mapped);
  m->bias = malloc(nbias * sizeof(float));
  if (m->blocks == NULL || m->scales == NULL || m->bias == NULL) {
    rill_mxfp4_experts_free(m);
    return rill_fail(err, err_cap, RILL_ERR_OUT_OF_MEMORY, "out of memory loading %sblocks", prefix);
  }
  copy(pool, m->blocks, tb->data, nsc * 16);
  copy(pool, m->scales, ts->data, nsc);
  const unsigned char *nan = memchr(m->scales, 0xFF, nsc);
  if (nan != NULL) {
    size_t i = (size_t)(nan - m->scales);
    snprintf(err, err_cap, "%s: tensor %s: scale byte 255 (NaN in E8M0) at expert %zu, row %zu, block %zu", ts->file,
             ts->name, i / ((size_t)rows * (size_t)m->nblocks), i / (size_t)m->nblocks % (size_t)rows,
             i % (size_t)m->nblocks);
    rill_mxfp4_experts_free(m);
    return RILL_ERR_MODEL;
  }
  for (size_t i = 0; i < nbias; i++) m->bias[i] = rill_tensor_get(tbias, (int64_t)i);
  return RILL_OK;
}

void rill_mxfp4_experts_free(rill_mxfp4_experts *m) {
  rill_weights_free(m->blocks, m->blocks_mapped);
  rill_weights_free(m->scales, m->scales_mapped);
  free(m->bias);
  memset(m, 0, sizeof *m);
}

size_t rill_mxfp4_experts_bytes(const rill_mxfp4_experts *m) {
  const size_t nsc = (size_t)m->experts * (size_t)m->rows * (size_t)m->nblocks;
  return nsc * 17 + (size_t)m->experts * (size_t)m->rows * sizeof(float);
}
