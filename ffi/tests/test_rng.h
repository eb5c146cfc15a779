/*
 * The small generators C tests draw their random inputs from, each a pure step of its caller's state, so a test's
 * inputs are the same on every run and a changed seed changes only that test.
 */
#ifndef RILL_TEST_RNG_H
#define RILL_TEST_RNG_H

#include <stdint.h>

/* Marsaglia's xorshift32 (13, 17, 5); state must not be 0. */
static inline uint32_t xorshift32(uint32_t *state) {
  uint32_t x = *state;
  x ^= x << 13;
  x ^= x >> 17;
  x ^= x << 5;
  *state = x;
  return x;
}

/* The Numerical Recipes LCG (1664525, 1013904223); its low bits are weak, so callers take the high ones. */
static inline uint32_t lcg32(uint32_t *state) {
  *state = *state * 1664525u + 1013904223u;
  return *state;
}

#endif /* RILL_TEST_RNG_H */
