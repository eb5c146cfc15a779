/*
 * A weight matrix as the CPU device holds it: rows × cols (out × in, the checkpoint's layout), in fp32, bf16, or int8
 * with one fp16 scale per 32-element block of a row (rows padded with zeros to whole blocks; each row's quants and
 * scales are one contiguous q8 row, cpu/kernels.h rill_q8_row_bytes). Several checkpoint
 * tensors with the same cols may be stacked into one matrix (q/k/v, gate/up), so one pass over the activations feeds
 * them all.
 */
#ifndef RILL_MATRIX_H
#define RILL_MATRIX_H

#include <stddef.h>
#include <stdint.h>

#include "bf16.h"
#include "rill.h"
#include "safetensors.h"
#include "thread_pool.h"

typedef enum rill_wtype { RILL_W_F32, RILL_W_BF16, RILL_W_INT8 } rill_wtype;

typedef struct rill_matrix {
  rill_wtype type;
  int32_t rows, cols;
  int32_t nblocks; /* INT8: blocks of 32 per row */
  size_t ld;       /* row stride as stored: elements (cols) for F32/BF16, bytes (rill_q8_row_bytes) for INT8 */
  void *data;    /* huge-page aligned (so every row start keeps the 64-byte alignment of its stride) */
  int group16;   /* INT8: every row's quants regrouped by cpu/kernels.h rill_q8_group16 (for gemm_q8_g16) */
  size_t mapped; /* bytes mapped at data */
} rill_matrix;

/* Converts and stacks parts (each [rows_i, cols], F32/F16/BF16) into m, rows spread over the pool's threads. Shapes
 * and dtypes must have been checked. */
rill_status rill_matrix_load(rill_matrix *m, rill_wtype type, const rill_tensor *const *parts, int nparts, int cols,
                             rill_pool *pool);
void rill_matrix_free(rill_matrix *m);
/* Memory for weights: huge-page aligned and advised, *mapped bytes to hand back to rill_weights_free; NULL when out of
 * memory. */
void *rill_weights_alloc(size_t bytes, size_t *mapped);
void rill_weights_free(void *p, size_t mapped);
size_t rill_matrix_bytes(const rill_matrix *m);
/* Regroups an INT8 matrix's rows in place for gemm_q8_g16 (sets group16); rows wider than RILL_Q8_G16_MAX_BLOCKS,
 * other types and a matrix already regrouped are left as they are. */
void rill_matrix_group16(rill_matrix *m, rill_pool *pool);
/* Row r as fp32 (dequantised for INT8, in either order). */
void rill_matrix_row(const rill_matrix *m, int32_t r, float *out);
/* A tensor (F32/F16/BF16) element as fp32. */
float rill_tensor_get(const rill_tensor *t, int64_t i);

#endif /* RILL_MATRIX_H */
