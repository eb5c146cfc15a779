#include <stdio.h>

#include "validate.h"

rill_status rill_validate_sliding_tables(const rill_step_batch *b, const rill_limits *lim, char *err, size_t err_cap) {
  if (lim->sliding_window <= 0) return RILL_OK;
  if (b->sliding_block_tables == NULL) {
    if (err_cap > 0) snprintf(err, err_cap, "sliding_block_tables: NULL (this model's sliding layers have a pool of their own)");
    return RILL_ERR_INVALID_ARGUMENT;
  }
  const int64_t stride = b->block_table_stride, bs = lim->block_size;
  for (int32_t i = 0; i < b->num_seqs; i++) {
    const int32_t fed = b->query_start[i + 1] - b->query_start[i];
    const int64_t ctx = b->context_lens[i], p0 = ctx - fed;
    /* The first fed token at p0 attends to p0 − window + 1 ..; later ones to less far back. */
    const int64_t from = p0 - lim->sliding_window + 1 > 0 ? p0 - lim->sliding_window + 1 : 0;
    for (int64_t j = from / bs; j * bs < ctx; j++) {
      const int32_t blk = b->sliding_block_tables[(int64_t)i * stride + j];
      if (blk < 0 || blk >= lim->num_sliding_blocks) {
        if (err_cap > 0)
          snprintf(err, err_cap,
                   "sliding_block_tables[%d][%lld] = %d is outside the sliding pool 0..%d (positions %lld.. are in "
                   "the window of position %lld)",
                   i, (long long)j, blk, lim->num_sliding_blocks - 1, (long long)(j * bs), (long long)p0);
        return RILL_ERR_INVALID_ARGUMENT;
      }
    }
  }
  return RILL_OK;
}
