#include "aligned_buffer.h"

#include <stdlib.h>

void *rill_alloc_aligned(size_t bytes) { return aligned_alloc(64, ((bytes == 0 ? 1 : bytes) + 63) & ~(size_t)63); }

void *rill_alloc_floats(size_t n) { return rill_alloc_aligned(n * sizeof(float)); }
