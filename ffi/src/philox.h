/*
 * Philox4x32-10, the counter-based generator every rill device draws from (docs/random.md). A draw is a pure
 * function of (seed, position, draw), so results do not depend on batching, step boundaries or speculation. Defined
 * here, static inline and RILL_HD, so the CPU sampler and the CUDA sampler run one text.
 */
#ifndef RILL_PHILOX_H
#define RILL_PHILOX_H

#include <stdint.h>

#include "host_device.h"

/* Ten Philox rounds of counter ctr under key key; out may alias ctr. */
static inline RILL_HD void rill_philox4x32_10(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4]) {
  uint32_t c0 = ctr[0], c1 = ctr[1], c2 = ctr[2], c3 = ctr[3];
  uint32_t k0 = key[0], k1 = key[1];
  for (int round = 0; round < 10; round++) {
    const uint64_t p0 = (uint64_t)0xD2511F53u * c0;
    const uint64_t p1 = (uint64_t)0xCD9E8D57u * c2;
    const uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0;
    const uint32_t n1 = (uint32_t)p1;
    const uint32_t n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1;
    const uint32_t n3 = (uint32_t)p0;
    c0 = n0;
    c1 = n1;
    c2 = n2;
    c3 = n3;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  out[0] = c0;
  out[1] = c1;
  out[2] = c2;
  out[3] = c3;
}

/* A double in [0, 1) with 53 random bits: key = (seed low, seed high), counter = (position, draw, 0, 0). */
static inline RILL_HD double rill_uniform(uint64_t seed, uint32_t position, uint32_t draw) {
  const uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
  const uint32_t ctr[4] = {position, draw, 0, 0};
  uint32_t x[4];
  rill_philox4x32_10(ctr, key, x);
  /* 27 + 26 = 53 bits: every double in [0, 1) on the 2^-53 grid is equally likely, and 1.0 is unreachable. */
  return ((double)(x[0] >> 5) * 67108864.0 + (double)(x[1] >> 6)) / 9007199254740992.0;
}

#endif /* RILL_PHILOX_H */
