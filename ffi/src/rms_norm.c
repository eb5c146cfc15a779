#include "rms_norm.h"

#include <math.h>

void rill_rms_norm(const float *x, const float *w, int n, float eps, float *out) {
  double ss = 0.0;
  for (int i = 0; i < n; i++) ss += (double)x[i] * (double)x[i];
  float inv = (float)(1.0 / sqrt(ss / n + (double)eps));
  for (int i = 0; i < n; i++) out[i] = w[i] * (x[i] * inv);
}
