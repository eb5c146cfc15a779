/* Heap buffers for the SIMD kernels: 64-byte aligned (a cache line, one AVX-512 vector), free with free(). */
#ifndef RILL_ALIGNED_BUFFER_H
#define RILL_ALIGNED_BUFFER_H

#include <stddef.h>

/* bytes rounded up to a whole 64 (0 counts as 1, so the result is never a zero-size allocation); NULL when out of
 * memory. */
void *rill_alloc_aligned(size_t bytes);
/* n floats, as rill_alloc_aligned(n · sizeof(float)). */
void *rill_alloc_floats(size_t n);

#endif /* RILL_ALIGNED_BUFFER_H */
