/* Philox4x32-10 against the published Random123 known answers, and uniform() against docs/random.md's examples. */
#include <stdint.h>

#include "check.h"
#include "philox.h"

typedef struct kat {
  uint32_t ctr[4], key[2], want[4];
} kat;

/* Random123's kat_vectors, the three philox4x32 10 lines: counter, key, expected output. */
static const kat KATS[] = {
    {{0x00000000u, 0x00000000u, 0x00000000u, 0x00000000u},
     {0x00000000u, 0x00000000u},
     {0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}},
    {{0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu},
     {0xffffffffu, 0xffffffffu},
     {0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}},
    {{0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u},
     {0xa4093822u, 0x299f31d0u},
     {0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}},
};

typedef struct uniform_example {
  uint64_t seed;
  uint32_t position, draw;
  double want;
} uniform_example;

/* docs/random.md, "Uniform examples": uniform · 2^53, an exact integer. */
static const uniform_example UNIFORMS[] = {
    {0ull, 0u, 0u, 3594291088041750.0},
    {0ull, 1u, 0u, 8757170240931843.0},
    {42ull, 1u, 0u, 8896578702993843.0},
    {42ull, 2u, 0u, 7438747102748023.0},
    {42ull, 1u, 1u, 1196751660909566.0},
    {7ull, 100u, 0u, 6635000419477831.0},
    {1234567890123ull, 4096u, 0u, 6290151558410656.0},
    {0x0123456789abcdefull, 31u, 0u, 6219914016620782.0},
    {0xffffffffffffffffull, 0xffffffffu, 0u, 6837649573678781.0},
};

int main(void) {
  for (size_t i = 0; i < sizeof KATS / sizeof KATS[0]; i++) {
    uint32_t out[4];
    rill_philox4x32_10(KATS[i].ctr, KATS[i].key, out);
    for (int j = 0; j < 4; j++) CHECK_MSG(out[j] == KATS[i].want[j], "kat %zu word %d: %08x vs %08x", i, j, out[j], KATS[i].want[j]);
  }
  /* out may alias ctr */
  uint32_t inplace[4] = {0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u};
  rill_philox4x32_10(inplace, KATS[2].key, inplace);
  CHECK(inplace[0] == KATS[2].want[0] && inplace[3] == KATS[2].want[3]);

  /* uniform is built from the words of the counter (position, draw, 0, 0) under key (seed lo, seed hi) */
  {
    uint64_t seed = 0x299f31d0a4093822ull;
    const uint32_t key[2] = {0xa4093822u, 0x299f31d0u};
    const uint32_t ctr[4] = {17, 3, 0, 0};
    uint32_t x[4];
    rill_philox4x32_10(ctr, key, x);
    double want = ((double)(x[0] >> 5) * 67108864.0 + (double)(x[1] >> 6)) / 9007199254740992.0;
    CHECK(rill_uniform(seed, 17, 3) == want);
  }

  for (size_t i = 0; i < sizeof UNIFORMS / sizeof UNIFORMS[0]; i++) {
    double u = rill_uniform(UNIFORMS[i].seed, UNIFORMS[i].position, UNIFORMS[i].draw);
    CHECK_MSG(u * 9007199254740992.0 == UNIFORMS[i].want, "uniform(%llu, %u, %u) = %.17g, want %.17g / 2^53", (unsigned long long)UNIFORMS[i].seed,
              UNIFORMS[i].position, UNIFORMS[i].draw, u, UNIFORMS[i].want);
  }

  /* range and a coarse uniformity check: 10 bins of 100000 draws over consecutive positions */
  int bins[10] = {0};
  int in_range = 1;
  for (uint32_t p = 0; p < 100000; p++) {
    double u = rill_uniform(42, p, 0);
    if (!(u >= 0.0 && u < 1.0)) in_range = 0;
    else bins[(int)(u * 10)]++;
  }
  CHECK(in_range);
  double chi2 = 0;
  for (int b = 0; b < 10; b++) chi2 += (bins[b] - 10000.0) * (bins[b] - 10000.0) / 10000.0;
  /* 9 degrees of freedom: P(chi2 > 27.88) = 0.001 */
  CHECK_MSG(chi2 < 27.88, "chi2 %g", chi2);
  return check_summary();
}
