/*
 * The paged KV pool: num_blocks blocks of block_size token slots for every layer, K and V, in fp32 or bf16. Each
 * (layer, block, kv_head) owns one tile of block_size × head_dim elements: values by slot ([slot][head_dim]) and keys
 * transposed ([head_dim][slot]), so attention's vectors run along positions for scores and along head dimensions
 * for the weighted sum, with no horizontal sums. The pool is mapped lazily: memory is committed only for blocks that
 * are written.
 */
#ifndef RILL_KV_POOL_H
#define RILL_KV_POOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "rill.h"

typedef struct rill_kv_pool {
  int32_t num_layers, num_blocks, block_size, kv_heads, head_dim;
  bool bf16;
  void *k, *v;
  size_t bytes; /* K and V together */
} rill_kv_pool;

/* Bytes one block takes over all layers, K and V. */
size_t rill_kv_block_bytes(int32_t num_layers, int32_t block_size, int32_t kv_heads, int32_t head_dim, bool bf16);
rill_status rill_kv_pool_create(rill_kv_pool *kv, int32_t num_layers, int32_t num_blocks, int32_t block_size,
                                int32_t kv_heads, int32_t head_dim, bool bf16);
void rill_kv_pool_destroy(rill_kv_pool *kv);

/* Element offset of the tile of (layer, block, head): key (slot, d) is at + d × block_size + slot, value (slot, d) at
 * + slot × head_dim + d. */
static inline size_t rill_kv_tile(const rill_kv_pool *kv, int32_t layer, int32_t block, int32_t head) {
  return (((size_t)layer * (size_t)kv->num_blocks + (size_t)block) * (size_t)kv->kv_heads + (size_t)head) *
         (size_t)kv->block_size * (size_t)kv->head_dim;
}

/* Writes one token's key k (transposed into the tile at element offset tile) and value v (a row of that tile) at
 * slot, each head_dim floats, converted to bf16 when the pool holds bf16. */
void rill_kv_store(const rill_kv_pool *kv, size_t tile, int32_t slot, const float *k, const float *v);

#endif /* RILL_KV_POOL_H */
