#include "argmax.h"

int32_t rill_argmax(const float *x, int32_t n) {
  int32_t best = 0;
  for (int32_t i = 1; i < n; i++) {
    if (x[i] > x[best]) best = i;
  }
  return best;
}
