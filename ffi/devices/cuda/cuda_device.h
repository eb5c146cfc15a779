/*
 * The CUDA device as the engine (engine.c) sees it. engine.c validates every batch on the host and parses config and
 * checkpoint there; the device receives the loaded bf16 weights once, uploads them, owns the KV pool and every device
 * buffer (all allocated at create), and runs the forward pass: the layers through the device operations of
 * device_ops.h, as on the CPU device. Built without nvcc, the same functions come from no_cuda.c and refuse with
 * RILL_ERR_UNSUPPORTED.
 */
#ifndef RILL_DEVICE_CUDA_H
#define RILL_DEVICE_CUDA_H

#include <stddef.h>
#include <stdint.h>

#include "device_ops.h"
#include "model_config.h"
#include "model_weights.h"
#include "rill.h"
#include "validate.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct rill_cuda rill_cuda;
struct rill_eagle3_head;

/* RILL_OK when a CUDA GPU is usable; RILL_ERR_UNSUPPORTED (no CUDA in this build) or RILL_ERR_DEVICE (no driver, no
 * GPU) with a one-line reason in err. */
rill_status rill_cuda_probe(char *err, size_t err_cap);

typedef struct rill_cuda_setup {
  const rill_model_config *cfg;
  const rill_model_weights *w; /* bf16 matrices; copied to the device, the caller may free them afterwards */
  const float *inv_freq;       /* [head_dim / 2] */
  rill_limits *lim;            /* in: everything but the pools; out: num_blocks, sliding_window, num_sliding_blocks */
  int32_t num_blocks;          /* 0: from kv_bytes, else from gpu_memory_fraction */
  int64_t kv_bytes;
  float gpu_memory_fraction; /* of the free memory at create, for weights + buffers + KV; 0 = 0.9 */
  int32_t max_rows;          /* most logits rows one step computes */
  int32_t num_sliding_blocks; /* rill_options' (sliding layers' pool; 0 = rill.h's default) */
  int32_t sliding_kv_in_main; /* 1: no second pool */
  /* An EAGLE-3 head loaded on the host (eagle3_head.h) and its RoPE inverse frequencies, or NULL: copied to the
   * device (as bf16) with its own KV pool of the target's blocks; the caller may free it afterwards. */
  const struct rill_eagle3_head *eagle3;
  const float *eagle3_inv_freq;
} rill_cuda_setup;

typedef struct rill_cuda_info {
  char device[32]; /* "cuda:0" */
  char isa[32];    /* "sm_90 cublasLt g10" or "sm_90 tiled: <short reason> g10": the GEMM path, then the graphs */
  int64_t weight_bytes, kv_bytes; /* kv_bytes: with the sliding layers' pool and the head's KV and features */
  int64_t sliding_kv_bytes;        /* part of kv_bytes */
  int64_t draft_weight_bytes;      /* the head's weights on the device */
  int32_t graphs;   /* CUDA graphs captured (decode/verify buckets); 0 with RILL_CUDA_GRAPHS=0 */
  double capture_s; /* their warm-up, capture and first replay, in seconds */
  char gemm[192]; /* "cublasLt", or why the tiled kernel serves large batches */
} rill_cuda_info;

rill_status rill_cuda_create(const rill_cuda_setup *setup, rill_cuda **out, rill_cuda_info *info, char *err,
                             size_t err_cap);
void rill_cuda_destroy(rill_cuda *d);

/* Runs a validated batch. all_rows: the logits of every fed token go to out ([T × V], host memory, any kind);
 * otherwise the sampled rows (the last draft_counts + 1 tokens of each sequence with sample_flags, batch order) go
 * to *logits (host memory the device owns, valid until the next call), their count in *num_rows. */
rill_status rill_cuda_forward(rill_cuda *d, const rill_step_batch *b, int all_rows, float *out, const float **logits,
                              int32_t *num_rows, char *err, size_t err_cap);

/* Whether rill_cuda_step samples this validated batch on the device: its history and logit bias fit the buffers sized
 * at create, and the host-sampler switch (RILL_CUDA_HOST_SAMPLER=1 at create) is off. Otherwise the engine samples
 * rill_cuda_forward's rows on the host. */
int rill_cuda_samples_on_device(const rill_cuda *d, const rill_step_batch *b);

/* A validated batch's forward pass and sampling on the device (docs/backend-step.md): only each sampled row's token,
 * logprob and top alternatives come back, and the drafts are verified from them. */
rill_status rill_cuda_step(rill_cuda *d, const rill_step_batch *b, rill_step_result *r, char *err, size_t err_cap);

/* Whether the device holds an EAGLE-3 head. Its forward passes then keep the head's features and KV in step. */
int rill_cuda_has_head(const rill_cuda *d);

/* After a step of the validated batch b (r->counts and r->tokens filled): the head's chained greedy proposals for
 * b->propose_counts, on the device, into r->proposed and r->proposed_counts (rill_step's contract). */
rill_status rill_cuda_propose(rill_cuda *d, const rill_step_batch *b, rill_step_result *r, char *err, size_t err_cap);

/* Tests: the last proposal round's draft-vocabulary logits ([rows × draft_vocab]) and the head's pre-norm hidden
 * states ([rows × head hidden]), in batch order, at most cap rows copied (either pointer may be NULL). */
rill_status rill_cuda_head_rows(rill_cuda *d, float *logits, float *hidden, int32_t cap, int32_t *rows, char *err,
                                size_t err_cap);

/* The device as the engine drives it (device_ops.h): forward, device sampling, the head's proposals, destroy. */
rill_device rill_cuda_device(rill_cuda *d);

/* Tests: the operations the device's forward pass runs (device_ops.h; its own unless replaced) and, by
 * rill_cuda_set_ops, others in their place (wrappers that check each against the CPU device's; NULL restores the
 * device's own). Graphs captured at create keep the operations they captured, so such a check creates the device with
 * RILL_CUDA_GRAPHS=0. */
const rill_device_ops *rill_cuda_ops(const rill_cuda *d);
void rill_cuda_set_ops(rill_cuda *d, const rill_device_ops *ops);

/* Tests: the step buffers the operations read and write, in device memory, [max_batch_tokens × width]: x [hidden],
 * qkv [(heads + 2 kv heads) × head_dim], attn [heads × head_dim], gu [2 × intermediate] (dense), moe_xn [hidden] and
 * moe_logits [experts] (mixture of experts; NULL for dense models). */
typedef struct rill_cuda_buffers {
  float *x, *qkv, *attn, *gu, *moe_xn, *moe_logits;
} rill_cuda_buffers;
rill_cuda_buffers rill_cuda_step_buffers(rill_cuda *d);

#ifdef __cplusplus
}
#endif
#endif /* RILL_DEVICE_CUDA_H */
