/* RMSNorm of one row, as the CPU forward pass and the EAGLE-3 head both apply it. */
#ifndef RILL_RMS_NORM_H
#define RILL_RMS_NORM_H

/* out[i] = w[i] · x[i] / sqrt(mean(x²) + eps) over n values; the sum of squares is taken in double in a fixed order
 * (four interleaved partial sums), so a row's result does not depend on who calls it. out may be x. */
void rill_rms_norm(const float *x, const float *w, int n, float eps, float *out);

#endif /* RILL_RMS_NORM_H */
