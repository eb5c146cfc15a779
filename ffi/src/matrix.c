#define _DEFAULT_SOURCE

#include "matrix.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "cpu/kernels.h"

float rill_tensor_get(const rill_tensor *t, int64_t i) {
  const unsigned char *p = t->data;
  switch (t->dtype) {
  case RILL_TENSOR_F32: {
    float f;
    memcpy(&f, p + (size_t)i * 4, 4);
    return f;
  }
  case RILL_TENSOR_F16: {
    uint16_t h;
    memcpy(&h, p + (size_t)i * 2, 2);
    return rill_f16_to_f32(h);
  }
  case RILL_TENSOR_BF16: {
    uint16_t h;
    memcpy(&h, p + (size_t)i * 2, 2);
    return rill_bf16_to_f32(h);
  }
  case RILL_TENSOR_OTHER: break;
  }
  return 0.0f;
}

/* One row of a tensor as fp32. */
static void tensor_row(const rill_tensor *t, int64_t row, int cols, float *out) {
  const unsigned char *p = t->data;
  size_t off = (size_t)row * (size_t)cols;
  if (t->dtype == RILL_TENSOR_F32) {
    memcpy(out, p + off * 4, (size_t)cols * 4);
  } else if (t->dtype == RILL_TENSOR_BF16) {
    for (int c = 0; c < cols; c++) {
      uint16_t h;
      memcpy(&h, p + (off + (size_t)c) * 2, 2);
      out[c] = rill_bf16_to_f32(h);
    }
  } else {
    for (int c = 0; c < cols; c++) out[c] = rill_tensor_get(t, (int64_t)off + c);
  }
}

/* Rows per conversion task. */
#define LOAD_ROWS 64

typedef struct load_job {
  rill_matrix *m;
  const rill_tensor *const *parts;
  int nparts;
  float *scratch; /* per thread: cols + one block */
  size_t scratch_stride;
} load_job;

static void load_row(const load_job *j, int64_t r, float *row) {
  rill_matrix *m = j->m;
  const int cols = m->cols;
  /* Which part holds stacked row r. */
  int64_t pr = r;
  const rill_tensor *t = j->parts[0];
  for (int i = 0; i < j->nparts; i++) {
    t = j->parts[i];
    if (pr < t->shape[0]) break;
    pr -= t->shape[0];
  }
  switch (m->type) {
  case RILL_W_F32: tensor_row(t, pr, cols, (float *)m->data + (size_t)r * m->ld); break;
  case RILL_W_BF16:
    if (t->dtype == RILL_TENSOR_BF16) {
      memcpy((uint16_t *)m->data + (size_t)r * m->ld, (const unsigned char *)t->data + (size_t)pr * (size_t)cols * 2,
             (size_t)cols * 2);
    } else {
      tensor_row(t, pr, cols, row);
      uint16_t *dst = (uint16_t *)m->data + (size_t)r * m->ld;
      for (int c = 0; c < cols; c++) dst[c] = rill_f32_to_bf16(row[c]);
    }
    break;
  case RILL_W_INT8:
    tensor_row(t, pr, cols, row);
    rill_quantize_q8_row(row, cols, m->nblocks, (int8_t *)m->data + (size_t)r * m->ld);
    break;
  }
}

static void load_task(void *ctx, int64_t task, int thread) {
  const load_job *j = ctx;
  float *row = j->scratch + (size_t)thread * j->scratch_stride;
  int64_t r0 = task * LOAD_ROWS, r1 = r0 + LOAD_ROWS < j->m->rows ? r0 + LOAD_ROWS : j->m->rows;
  for (int64_t r = r0; r < r1; r++) load_row(j, r, row);
}

/* Transparent huge pages are 2 MB on x86-64 and arm64 (4 KB base pages). */
#define HUGE_PAGE ((size_t)2 << 20)
#define BASE_PAGE ((size_t)4096)

/* Anonymous memory for weights, starting on a huge-page boundary and advised as huge pages: decode streams every
 * weight once per token, and with 4 KB pages each 2 MB of weights costs 512 TLB misses and page walks that the
 * hardware prefetchers stop at; with THP in `madvise` mode (a common default) memory from malloc never gets them.
 * The length is rounded only to base pages, so the tail under 2 MB stays in small pages and nothing is wasted;
 * *mapped is what rill_matrix_free unmaps. Never NULL unless out of memory. */
void *rill_weights_alloc(size_t bytes, size_t *mapped) {
  const size_t len = (bytes + BASE_PAGE - 1) & ~(BASE_PAGE - 1);
  unsigned char *p = mmap(NULL, len + HUGE_PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return NULL;
  unsigned char *a = (unsigned char *)(((uintptr_t)p + HUGE_PAGE - 1) & ~(uintptr_t)(HUGE_PAGE - 1));
  if (a > p) munmap(p, (size_t)(a - p));
  if (p + len + HUGE_PAGE > a + len) munmap(a + len, (size_t)(p + len + HUGE_PAGE - (a + len)));
#if defined(MADV_HUGEPAGE)
  (void)madvise(a, len, MADV_HUGEPAGE); /* advice only: without THP the memory works the same */
#endif
  *mapped = len;
  return a;
}

rill_status rill_matrix_load(rill_matrix *m, rill_wtype type, const rill_tensor *const *parts, int nparts, int cols,
                             rill_pool *pool) {
  memset(m, 0, sizeof *m);
  int64_t rows = 0;
  for (int i = 0; i < nparts; i++) rows += parts[i]->shape[0];
  m->type = type;
  m->rows = (int32_t)rows;
  m->cols = cols;
  size_t elem = type == RILL_W_F32 ? 4 : type == RILL_W_BF16 ? 2 : 1;
  if (type == RILL_W_INT8) {
    m->nblocks = (cols + RILL_Q8_BLOCK - 1) / RILL_Q8_BLOCK;
    m->ld = rill_q8_row_bytes(m->nblocks);
  } else {
    m->ld = (size_t)cols;
  }
  size_t bytes = (size_t)rows * m->ld * elem;
  m->data = rill_weights_alloc(bytes > 0 ? bytes : 1, &m->mapped);
  load_job j = {.m = m, .parts = parts, .nparts = nparts, .scratch_stride = (size_t)cols + RILL_Q8_BLOCK};
  j.scratch = malloc(j.scratch_stride * (size_t)rill_pool_threads(pool) * sizeof(float));
  if (m->data == NULL || j.scratch == NULL) {
    free(j.scratch);
    rill_matrix_free(m);
    return RILL_ERR_OUT_OF_MEMORY;
  }
  rill_pool_run(pool, load_task, &j, (rows + LOAD_ROWS - 1) / LOAD_ROWS);
  free(j.scratch);
  return RILL_OK;
}

static void group_task(void *ctx, int64_t task, int thread) {
  (void)thread;
  rill_matrix *m = ctx;
  const int64_t r0 = task * LOAD_ROWS, r1 = r0 + LOAD_ROWS < m->rows ? r0 + LOAD_ROWS : m->rows;
  for (int64_t r = r0; r < r1; r++) rill_q8_group16((int8_t *)m->data + (size_t)r * m->ld, m->nblocks);
}

void rill_matrix_group16(rill_matrix *m, rill_pool *pool) {
  if (m->type != RILL_W_INT8 || m->group16 || m->data == NULL || m->nblocks > RILL_Q8_G16_MAX_BLOCKS) return;
  rill_pool_run(pool, group_task, m, (m->rows + LOAD_ROWS - 1) / LOAD_ROWS);
  m->group16 = 1;
}

void rill_weights_free(void *p, size_t mapped) {
  if (p != NULL) munmap(p, mapped);
}

void rill_matrix_free(rill_matrix *m) {
  if (m->data != NULL) munmap(m->data, m->mapped);
  m->data = NULL;
  m->mapped = 0;
}

size_t rill_matrix_bytes(const rill_matrix *m) {
  size_t elem = m->type == RILL_W_F32 ? 4 : m->type == RILL_W_BF16 ? 2 : 1;
  return (size_t)m->rows * m->ld * elem;
}

void rill_matrix_row(const rill_matrix *m, int32_t r, float *out) {
  switch (m->type) {
  case RILL_W_F32: memcpy(out, (const float *)m->data + (size_t)r * m->ld, (size_t)m->cols * sizeof(float)); break;
  case RILL_W_BF16: {
    const uint16_t *src = (const uint16_t *)m->data + (size_t)r * m->ld;
    for (int c = 0; c < m->cols; c++) out[c] = rill_bf16_to_f32(src[c]);
    break;
  }
  case RILL_W_INT8: {
    const int8_t *src = (const int8_t *)m->data + (size_t)r * m->ld;
    for (int b = 0; b < m->nblocks; b++) {
      const float s = rill_q8_row_scale(src, m->nblocks, b);
      const int c1 = (b + 1) * RILL_Q8_BLOCK < m->cols ? (b + 1) * RILL_Q8_BLOCK : m->cols;
      for (int c = b * RILL_Q8_BLOCK; c < c1; c++) {
        out[c] = (float)(m->group16 ? rill_q8_g16_quant(src, m->nblocks, c) : src[c]) * s;
      }
    }
    break;
  }
  }
}
