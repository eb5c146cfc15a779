/*
 * Rotary position embedding as Hugging Face computes it (rotate-half layout): inverse frequencies in fp32 from
 * rope_theta, optionally rescaled (linear, Llama 3's smooth low/high-frequency blend, or YaRN's ramp); angle =
 * position × inv_freq rounded to fp32, cos and sin of that angle, each times the config's rope_attn_factor.
 */
#ifndef RILL_ROPE_H
#define RILL_ROPE_H

#include "model_config.h"

/* inv_freq[j] for j < head_dim / 2. */
void rill_rope_inv_freq(const rill_model_config *cfg, float *inv_freq);
/* cos/sin[j] of position pos for j < half, each multiplied by scale (rope_attn_factor; 1 leaves them exact). */
void rill_rope_angles(const float *inv_freq, int half, int32_t pos, float scale, float *cos_out, float *sin_out);
/* Rotates one head of head_dim = 2 × half values in place. */
void rill_rope_apply(float *x, int half, const float *cos_v, const float *sin_v);

#endif /* RILL_ROPE_H */
