/* Greedy choice over a row of logits. */
#ifndef RILL_ARGMAX_H
#define RILL_ARGMAX_H

#include <stdint.h>

/* The index of the largest of x[0..n) (n ≥ 1), ties to the lowest index (the sampling rule at temperature 0). */
int32_t rill_argmax(const float *x, int32_t n);

#endif /* RILL_ARGMAX_H */
