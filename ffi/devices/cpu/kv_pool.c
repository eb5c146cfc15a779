#define _DEFAULT_SOURCE

#include "kv_pool.h"

#include <string.h>
#include <sys/mman.h>

#include "matrix.h"

size_t rill_kv_block_bytes(int32_t num_layers, int32_t block_size, int32_t kv_heads, int32_t head_dim, bool bf16) {
  return (size_t)2 * (size_t)num_layers * (size_t)block_size * (size_t)kv_heads * (size_t)head_dim * (bf16 ? 2u : 4u);
}

rill_status rill_kv_pool_create(rill_kv_pool *kv, int32_t num_layers, int32_t num_blocks, int32_t block_size,
                                int32_t kv_heads, int32_t head_dim, bool bf16) {
  memset(kv, 0, sizeof *kv);
  kv->num_layers = num_layers;
  kv->num_blocks = num_blocks;
  kv->block_size = block_size;
  kv->kv_heads = kv_heads;
  kv->head_dim = head_dim;
  kv->bf16 = bf16;
  size_t half = rill_kv_block_bytes(num_layers, block_size, kv_heads, head_dim, bf16) / 2 * (size_t)num_blocks;
  void *k = mmap(NULL, half, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (k == MAP_FAILED) return RILL_ERR_OUT_OF_MEMORY;
  void *v = mmap(NULL, half, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (v == MAP_FAILED) {
    munmap(k, half);
    return RILL_ERR_OUT_OF_MEMORY;
  }
  kv->k = k;
  kv->v = v;
  kv->bytes = half * 2;
  return RILL_OK;
}

void rill_kv_pool_destroy(rill_kv_pool *kv) {
  if (kv->k != NULL) munmap(kv->k, kv->bytes / 2);
  if (kv->v != NULL) munmap(kv->v, kv->bytes / 2);
  kv->k = kv->v = NULL;
}

void rill_kv_store(const rill_kv_pool *kv, size_t tile, int32_t slot, const float *k, const float *v) {
  const int D = kv->head_dim, bs = kv->block_size;
  if (kv->bf16) {
    uint16_t *kt = (uint16_t *)kv->k + tile, *vt = (uint16_t *)kv->v + tile + (size_t)slot * D;
    for (int d = 0; d < D; d++) kt[(size_t)d * bs + slot] = rill_f32_to_bf16(k[d]);
    for (int d = 0; d < D; d++) vt[d] = rill_f32_to_bf16(v[d]);
  } else {
    float *kt = (float *)kv->k + tile, *vt = (float *)kv->v + tile + (size_t)slot * D;
    for (int d = 0; d < D; d++) kt[(size_t)d * bs + slot] = k[d];
    memcpy(vt, v, (size_t)D * sizeof(float));
  }
}
