/*
 * Philox4x32-10, the counter-based generator every rill device draws from (docs/random.md). A draw is a pure
 * function of (seed, position, draw), so results do not depend on batching, step boundaries or speculation.
 */
#ifndef RILL_PHILOX_H
#define RILL_PHILOX_H

#include <stdint.h>

/* Ten Philox rounds of counter ctr under key key; out may alias ctr. */
void rill_philox4x32_10(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4]);

/* A double in [0, 1) with 53 random bits: key = (seed low, seed high), counter = (position, draw, 0, 0). */
double rill_uniform(uint64_t seed, uint32_t position, uint32_t draw);

#endif /* RILL_PHILOX_H */
