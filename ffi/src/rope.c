#include "rope.h"

#include <math.h>

/* Dimension (of head_dim) that turns `rotations` times over the original context. */
static double yarn_dim(const rill_model_config *c, double rotations) {
  const double pi = 3.14159265358979323846;
  return (double)c->head_dim * log((double)c->rope_original_max_positions / (rotations * 2.0 * pi)) /
         (2.0 * log((double)c->rope_theta));
}

/* YaRN: pair j keeps its frequency f below the ramp, takes f / factor above it, and blends linearly across. */
static float yarn_blend(const rill_model_config *c, int j, float f) {
  double low = yarn_dim(c, c->rope_beta_fast), high = yarn_dim(c, c->rope_beta_slow);
  if (c->rope_truncate) {
    low = floor(low);
    high = ceil(high);
  }
  if (low < 0.0) low = 0.0;
  if (high > c->head_dim - 1) high = c->head_dim - 1;
  if (high == low) high += 0.001; /* as transformers: a zero-width ramp is a step */
  float ramp = (float)(((double)j - low) / (high - low));
  ramp = ramp < 0.0f ? 0.0f : ramp > 1.0f ? 1.0f : ramp;
  const float interp = f / c->rope_factor;
  return interp * ramp + f * (1.0f - ramp);
}

void rill_rope_inv_freq(const rill_model_config *c, float *inv) {
  const int D = c->head_dim, half = D / 2;
  const float pi = 3.14159265358979323846f;
  for (int j = 0; j < half; j++) {
    float e = (float)(2 * j) / (float)D;
    float f = 1.0f / powf(c->rope_theta, e);
    if (c->rope_scaling == RILL_ROPE_LINEAR) {
      f = f / c->rope_factor;
    } else if (c->rope_scaling == RILL_ROPE_LLAMA3) {
      float old_len = (float)c->rope_original_max_positions;
      float low_wavelen = old_len / c->rope_low_freq_factor;
      float high_wavelen = old_len / c->rope_high_freq_factor;
      float wavelen = 2.0f * pi / f;
      float scaled = wavelen > low_wavelen ? f / c->rope_factor : f;
      if (!(wavelen < high_wavelen) && !(wavelen > low_wavelen)) {
        float smooth = (old_len / wavelen - c->rope_low_freq_factor) /
                       (c->rope_high_freq_factor - c->rope_low_freq_factor);
        scaled = (1.0f - smooth) * scaled / c->rope_factor + smooth * scaled;
      }
      f = scaled;
    } else if (c->rope_scaling == RILL_ROPE_YARN) {
      f = yarn_blend(c, j, f);
    }
    inv[j] = f;
  }
}

void rill_rope_angles(const float *inv, int half, int32_t pos, float scale, float *cos_out, float *sin_out) {
  for (int j = 0; j < half; j++) {
    float a = (float)pos * inv[j];
    cos_out[j] = (float)cos((double)a) * scale;
    sin_out[j] = (float)sin((double)a) * scale;
  }
}

void rill_rope_apply(float *x, int half, const float *c, const float *s) {
  for (int j = 0; j < half; j++) {
    float a = x[j], b = x[j + half];
    float ac = a * c[j], bs = b * s[j], bc = b * c[j], as = a * s[j];
    x[j] = ac - bs;
    x[j + half] = bc + as;
  }
}
