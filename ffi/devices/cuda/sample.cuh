/*
 * Sampling on the CUDA device (docs/backend-step.md, "Sampling, specified once"): one job per sampled logits row,
 * packed by the host (cuda_device.cu) in batch order. Each row's token, logprob and top alternatives come out; the
 * host then applies the verification rule (accept drafts while the row's token equals the draft) to these few
 * numbers, so no logits cross to the host.
 *
 * Every decision the CPU sampler (ffi/src/sample.c) takes in double is taken here in double. The host's top-p and draw
 * compare serial sums; the device sums in parallel and takes a decision only when it is clear of the threshold by
 * more than the two orders' rounding can differ, and otherwise repeats the host's serial loop (sample.cu). So tokens
 * agree unless CUDA's exp and the host's differ by an ulp exactly at a boundary (u · total within rounding of a
 * cumulative sum). The log-partition for logprobs is a parallel double sum (tolerance, not a decision).
 */
#ifndef RILL_CUDA_SAMPLE_CUH
#define RILL_CUDA_SAMPLE_CUH

#include <cuda_runtime.h>
#include <stdint.h>

#include "sample_rules.h"

struct rill_sample_job {
  int32_t r;     /* row within its sequence: the number of drafts before it */
  int32_t plain; /* greedy with no penalty, bias or mask: argmax of the raw row */
  rill_sample_row p;             /* the sequence's sampling parameters (logprobs: -1 none, else the alternatives) */
  int32_t position;             /* where the sampled token sits: the Philox counter */
  int32_t mask_row;             /* row of the packed mask, -1 for none */
  int32_t hist_off, hist_len;   /* the sequence's history in the packed history */
  int32_t hist_prompt;          /* its leading prompt tokens */
  int32_t bias_off, bias_len;   /* its logit bias in the packed bias arrays */
  int32_t drafts_off;           /* its drafts in the packed drafts (the row sees the first r) */
};

/* Per-slot scratch, slot s at s × rill_sample_slot_bytes(V): work[V] double, order[V] and counts[V] int32, seen[V]. */
size_t rill_sample_slot_bytes(int V);
constexpr int kSampleSlots = 64;

#ifdef RILL_CUDA_EMU
/* The emulation counts the general (non-greedy-plain, sampled) rows whose token the parallel path decided and those
 * the serial path decided, so its tests can show which path they exercised. */
extern long rill_sample_parallel_rows, rill_sample_serial_rows;
#endif

/* Samples rows [0, R) of logits ([R × V]); out_tok[r] = the token, or -1 when the row's mask allows nothing. L: the
 * stride of the top arrays. */
cudaError_t rill_k_sample(cudaStream_t s, const float *logits, int R, int V, const rill_sample_job *jobs,
                          const int32_t *history, const int32_t *bias_ids, const float *bias_values,
                          const int32_t *drafts, const uint32_t *mask, void *scratch, int L, int32_t *out_tok,
                          float *out_lp, int32_t *out_top_ids, float *out_top_lp);

#endif /* RILL_CUDA_SAMPLE_CUH */
