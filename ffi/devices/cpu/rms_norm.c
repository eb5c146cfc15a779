#include "rms_norm.h"

#include <math.h>

void rill_rms_norm(const float *x, const float *w, int n, float eps, float *out) {
  /* Four interleaved partial sums (i mod 4), added pairwise: a single chain would wait on the add latency at every
   * element. The order depends only on n. */
  double part[4] = {0.0, 0.0, 0.0, 0.0};
  int i = 0;
  for (; i + 4 <= n; i += 4) {
    for (int k = 0; k < 4; k++) part[k] += (double)x[i + k] * (double)x[i + k];
  }
  for (; i < n; i++) part[0] += (double)x[i] * (double)x[i];
  const double ss = (part[0] + part[1]) + (part[2] + part[3]);
  float inv = (float)(1.0 / sqrt(ss / n + (double)eps));
  for (i = 0; i < n; i++) out[i] = w[i] * (x[i] * inv);
}
