#include "rope.h"

#include <math.h>

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
    }
    inv[j] = f;
  }
}

void rill_rope_angles(const float *inv, int half, int32_t pos, float *cos_out, float *sin_out) {
  for (int j = 0; j < half; j++) {
    float a = (float)pos * inv[j];
    cos_out[j] = (float)cos((double)a);
    sin_out[j] = (float)sin((double)a);
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
