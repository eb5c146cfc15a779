/*
 * xorshift64*: the emulation checks' random parameters and inputs, one sequence per seed. Each check derives the values
 * it draws (unit floats, signed values away from zero) from next().
 */
#ifndef RILL_TESTS_CUDA_XORSHIFT_H
#define RILL_TESTS_CUDA_XORSHIFT_H

#include <stdint.h>

struct xorshift64s {
  uint64_t s;
  uint32_t next() {
    s ^= s >> 12;
    s ^= s << 25;
    s ^= s >> 27;
    return (uint32_t)((s * 2685821657736338717ull) >> 32);
  }
  /* [0, n) */
  int32_t below(int32_t n) { return (int32_t)(next() % (uint32_t)n); }
};

#endif /* RILL_TESTS_CUDA_XORSHIFT_H */
