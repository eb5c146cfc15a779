/*
 * A stack of experts' weight matrices in MXFP4, kept packed as the gpt-oss release stores them (4.25 bits a weight):
 * for expert e and output row r, cols / 32 blocks of 16 bytes (32 E2M1 codes, element 2j in the low nibble of byte
 * j, 2j + 1 in the high one) and one E8M0 scale byte per block (value = E2M1 · 2^(scale − 127)), plus an fp32 bias
 * per row. Read from the checkpoint tensors `P_blocks` (U8 [E, rows, cols / 32, 16]), `P_scales` (U8
 * [E, rows, cols / 32]) and `P_bias` ([E, rows]); every shape and dtype is checked before anything is copied.
 */
#ifndef RILL_MXFP4_H
#define RILL_MXFP4_H

#include <stddef.h>
#include <stdint.h>

#include "rill.h"
#include "safetensors.h"
#include "thread_pool.h"

typedef struct rill_mxfp4_experts {
  int32_t experts, rows, cols, nblocks;
  uint8_t *blocks; /* [experts][rows][nblocks][16] */
  uint8_t *scales; /* [experts][rows][nblocks] */
  float *bias;     /* [experts][rows] */
  size_t blocks_mapped, scales_mapped;
  /* 1 once the CPU device has regrouped the blocks and scales for its kernels' gemm_mxfp4_q8_g16 (cpu/moe.h
   * rill_moe_regroup_experts); else as released. */
  int32_t group16;
} rill_mxfp4_experts;

/* Checks that prefix's three tensors are present with the shapes and dtypes above (cols a multiple of 32); else a
 * one-line RILL_ERR_MODEL naming the file and tensor. */
rill_status rill_mxfp4_experts_check(const rill_checkpoint *ck, const char *ck_name, const char *prefix, int32_t experts,
                                     int32_t rows, int32_t cols, char *err, size_t err_cap);
/* Copies checked tensors into m (copies spread over the pool); a scale byte of 255 (NaN in E8M0) is RILL_ERR_MODEL. */
rill_status rill_mxfp4_experts_load(const rill_checkpoint *ck, const char *prefix, int32_t experts, int32_t rows,
                                    int32_t cols, rill_pool *pool, rill_mxfp4_experts *m, char *err, size_t err_cap);
void rill_mxfp4_experts_free(rill_mxfp4_experts *m);
size_t rill_mxfp4_experts_bytes(const rill_mxfp4_experts *m);

static inline const uint8_t *rill_mxfp4_blocks_of(const rill_mxfp4_experts *m, int32_t expert) {
  return m->blocks + (size_t)expert * (size_t)m->rows * (size_t)m->nblocks * 16;
}
static inline const uint8_t *rill_mxfp4_scales_of(const rill_mxfp4_experts *m, int32_t expert) {
  return m->scales + (size_t)expert * (size_t)m->rows * (size_t)m->nblocks;
}

#endif /* RILL_MXFP4_H */
