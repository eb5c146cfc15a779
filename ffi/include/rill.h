/*
 * rill's native engine library: one C ABI for every device (CPU now, CUDA next).
 *
 * Contract (docs/backend-step.md): the caller (rill's engine, over Deno FFI) owns scheduling, block tables and the
 * token history; the library owns weights, the paged KV pool and sampling. One `rill_step` per engine step runs the
 * forward pass for a packed batch and writes accepted tokens, logprobs and top alternatives into caller-owned
 * buffers. Rollback is implicit: the next step's context lengths say what each sequence keeps.
 *
 * Every function returns a status; the library never exits, aborts or prints. On an error the message is available
 * from rill_last_error (per engine) or rill_global_error (for rill_engine_create, before an engine exists). All
 * inputs are validated before any index is used.
 */
#ifndef RILL_H
#define RILL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define RILL_ABI_VERSION 4

#if defined(_WIN32)
#define RILL_API __declspec(dllexport)
#else
#define RILL_API __attribute__((visibility("default")))
#endif

typedef enum rill_status {
  RILL_OK = 0,
  RILL_ERR_INVALID_ARGUMENT = 1, /* a bad batch, option or pointer */
  RILL_ERR_MODEL = 2,            /* the model directory cannot be loaded (file, tensor, shape, dtype) */
  RILL_ERR_OUT_OF_MEMORY = 3,
  RILL_ERR_DEVICE = 4,           /* the device is unavailable or failed */
  RILL_ERR_UNSUPPORTED = 5,      /* valid, but not supported by this build or device */
  RILL_ERR_INTERNAL = 6
} rill_status;

typedef struct rill_engine rill_engine;

/* Engine options. Zero-initialise and set what you need; 0 means "the default" for every field. */
typedef struct rill_options {
  const char *device;          /* "cpu" (default), "cuda", "auto" */
  const char *dtype;           /* weights: "fp32", "bf16", "int8"; NULL = bf16 for bf16 checkpoints, else fp32 */
  const char *kv_dtype;        /* "fp32" (default on cpu) or "bf16" */
  const char *draft_model_dir; /* a smaller checkpoint with the target's vocabulary that proposes drafts, or an EAGLE-3
                                  head (config.json architectures *Eagle3; CPU device); NULL = none */
  int32_t threads;             /* CPU threads; 0 = all cores */
  int32_t block_size;          /* tokens per KV block; 0 = 16 */
  int32_t num_blocks;          /* KV pool size in blocks; 0 = from kv_bytes */
  int64_t kv_bytes;            /* KV pool budget in bytes when num_blocks is 0; 0 = enough for max_seqs full contexts, capped at 1/4 of RAM */
  int32_t max_seqs;            /* most sequences per step; 0 = 256 */
  int32_t max_batch_tokens;    /* most fed tokens per step; 0 = 8192 */
  int32_t max_drafts;          /* most drafts per sequence per step; 0 = 8 */
  int32_t max_top_logprobs;    /* 0 = 20 */
  int32_t max_model_len;       /* 0 = the model's max_position_embeddings */
  float gpu_memory_fraction;   /* CUDA: fraction of free memory for weights + KV; 0 = 0.9 */
  /* Sliding-window layers (gpt-oss's even layers) keep their KV in a second pool of their own, addressed by
   * rill_step_batch.sliding_block_tables, so a sequence holds only the blocks its window reaches there (when the
   * model also has full-attention layers and its window is shorter than the context). Sizing: num_sliding_blocks, else
   * max_seqs × (ceil((sliding_window + max_drafts) / block_size) + 1) + ceil(max_batch_tokens / block_size) (every
   * sequence's window and a decode step's drafts, plus one step's prefill chunks), at most max_seqs full contexts;
   * with num_blocks 0 that pool comes out of the KV budget first (kv_bytes, or the default budget, or on CUDA
   * gpu_memory_fraction; on the CPU device at most half of kv_bytes) and the main pool takes the rest. A draft model
   * keeps all its layers in its main pool. */
  int32_t num_sliding_blocks; /* blocks of the sliding-layer pool; 0 = as above */
  int32_t sliding_kv_in_main; /* 1: no second pool; sliding layers hold a whole context in the main pool like full
                                 layers (what models without sliding layers always do) */
} rill_options;

/* What the engine serves; filled by rill_engine_info. */
typedef struct rill_info {
  int32_t abi_version;
  int32_t vocab_size;
  int32_t max_positions;
  int32_t block_size;
  int32_t num_blocks;
  int32_t max_batch_tokens;
  int32_t max_seqs;
  int32_t max_drafts;
  int32_t max_top_logprobs;
  int32_t shares_prefix_blocks; /* 1: two sequences may list the same block */
  int32_t num_layers;
  int32_t hidden_size;
  int32_t num_heads;
  int32_t num_kv_heads;
  int32_t head_dim;
  int32_t threads;
  int64_t weight_bytes; /* bytes of weights as held on the device */
  int64_t kv_bytes;     /* bytes of the KV pool */
  char device[32];      /* e.g. "cpu", "cuda:0" */
  char isa[32];         /* CPU: "avx512vnni", "avx512", "avx2vnni", "avx2", "portable"; CUDA: "sm_90 cublasLt g10" / "sm_90 tiled: <why> g10" (g: CUDA graphs) */
  char dtype[16];       /* weights as held: "fp32", "bf16", "int8" */
  char kv_dtype[16];
  char architecture[64];
  int64_t draft_weight_bytes; /* 0 without a draft model */
  int32_t sliding_window;     /* > 0: the sliding layers' window, and steps must carry sliding_block_tables for a
                                 second pool of num_sliding_blocks blocks; 0: one pool, no second table */
  int32_t num_sliding_blocks;
  int64_t sliding_kv_bytes; /* bytes of the sliding-layer pool (part of kv_bytes) */
} rill_info;

/*
 * One engine step (docs/backend-step.md). All arrays are caller-owned; sizes in brackets.
 * B = num_seqs, T = num_tokens, V = vocab size, W = ceil(V / 32), K1 = max_drafts + 1, L = max_top_logprobs.
 */
typedef struct rill_step_batch {
  int32_t num_seqs;
  int32_t num_tokens;
  int32_t block_table_stride;
  int32_t num_mask_rows;           /* rows in allowed_mask */
  int32_t history_len;             /* entries in history */
  int32_t bias_len;                /* entries in bias_ids and bias_values */
  const int32_t *seq_ids;          /* [B] */
  const int32_t *tokens;           /* [T] */
  const int32_t *positions;        /* [T] */
  const int32_t *query_start;      /* [B + 1] */
  const int32_t *context_lens;     /* [B] */
  const int32_t *draft_counts;     /* [B] */
  const uint8_t *sample_flags;     /* [B] */
  const int32_t *block_tables;     /* [B * block_table_stride] */
  const float *temperature;        /* [B] */
  const float *top_p;              /* [B] */
  const int32_t *top_k;            /* [B] */
  const float *min_p;              /* [B] */
  const float *presence_penalty;   /* [B] */
  const float *frequency_penalty;  /* [B] */
  const float *repetition_penalty; /* [B] */
  const uint64_t *seeds;           /* [B] */
  const int32_t *logprobs;         /* [B] */
  const int32_t *mask_row_start;   /* [B] */
  const uint32_t *allowed_mask;    /* [num_mask_rows * W]; may be NULL when num_mask_rows is 0 */
  const int32_t *history_start;    /* [B + 1] */
  const int32_t *history;          /* [history_len]; may be NULL when history_len is 0 */
  const int32_t *history_prompt_lens; /* [B] */
  const int32_t *bias_start;       /* [B + 1]: sequence i's logit bias is entries bias_start[i] .. bias_start[i + 1] */
  const int32_t *bias_ids;         /* [bias_len]; may be NULL when bias_len is 0 */
  const float *bias_values;        /* [bias_len]; added to the logits of bias_ids, after the penalties */
  const int32_t *propose_counts;   /* [B]; may be NULL (no proposals). Draft tokens the draft model proposes after
                                      this step's accepted tokens (0..max_drafts; only on sampled sequences; needs a
                                      draft model and block tables covering context_lens[i] + propose_counts[i]) */
  const int32_t *sliding_block_tables; /* [B * block_table_stride]; required when rill_info.sliding_window = W > 0,
                                          else ignored (may be NULL). Row i maps block j of the sequence to a block of
                                          the sliding-layer pool for the blocks its fed tokens' windows reach: j from
                                          max(0, p0 − W + 1) / block_size (p0 = its first fed position) through
                                          (context_lens[i] − 1) / block_size. Other entries are not read: -1 there
                                          (a block fallen out of the window, freed by the caller) is the convention */
} rill_step_batch;

/*
 * The per-sequence sampling arrays of rill_step_batch (temperature .. logprobs: consecutive there, in this order),
 * listed once for the library: X(name, element type, limit kind, neutral value). The library declares its per-row
 * sampling parameters, validates, packs for the device and builds its test batches from this list, and checks at
 * compile time that the list and the struct agree (same names, types and order, nothing left out between them).
 * Limit kinds (what validation accepts): NONNEG finite and >= 0; UNIT in 0..1; COUNT an integer >= 0; FINITE finite;
 * POSITIVE finite and > 0; ANY every value; TOP_LOGPROBS -1..max_top_logprobs. The neutral value turns the field off.
 */
#define RILL_SAMPLING_FIELDS(X)                 \
  X(temperature, float, NONNEG, 0)              \
  X(top_p, float, UNIT, 1)                      \
  X(top_k, int32_t, COUNT, 0)                   \
  X(min_p, float, UNIT, 0)                      \
  X(presence_penalty, float, FINITE, 0)         \
  X(frequency_penalty, float, FINITE, 0)        \
  X(repetition_penalty, float, POSITIVE, 1)     \
  X(seeds, uint64_t, ANY, 7)                    \
  X(logprobs, int32_t, TOP_LOGPROBS, -1)

typedef struct rill_step_result {
  int32_t *counts;       /* [B] */
  int32_t *tokens;       /* [B * K1] */
  float *logprobs;       /* [B * K1] */
  int32_t *top_ids;      /* [B * K1 * L] */
  float *top_logprobs;   /* [B * K1 * L] */
  int32_t *proposed_counts; /* [B]; may be NULL when the batch proposes nothing: draft tokens written per sequence */
  int32_t *proposed;        /* [B * max_drafts]: the draft model's greedy continuation of the accepted tokens */
} rill_step_result;

RILL_API int32_t rill_abi_version(void);

/* rill_step_batch's layout as text: the counts' names comma-separated, ';', then each pointer field as
 * "name:pointee type" (int32_t, uint8_t, uint32_t, uint64_t, float), comma-separated, in struct order; every list
 * entry ends in a comma. A binding compares it with its own layout when it loads the library, so RILL_ABI_VERSION
 * covers everything but rill_step_batch's fields, which this text covers. Static storage; never NULL. */
RILL_API const char *rill_step_batch_signature(void);

/* Loads a Hugging Face checkpoint directory (config.json + *.safetensors). On failure *out is NULL and
 * rill_global_error() names the file and tensor. `options` may be NULL. */
RILL_API rill_status rill_engine_create(const char *model_dir, const rill_options *options, rill_engine **out);
RILL_API void rill_engine_destroy(rill_engine *engine);
RILL_API rill_status rill_engine_info(const rill_engine *engine, rill_info *out);

/*
 * Runs one step. Thread-compatible, not thread-safe: one step at a time per engine.
 * With a draft model, the draft model first processes the same fed tokens into its own KV pool (same block ids, same
 * block size), so it has seen everything the target has; then, for each sequence with propose_counts[i] = k > 0, it
 * feeds the last accepted token at position P = context_lens[i] - draft_counts[i] + counts[i] - 1 and proposes k
 * greedy tokens autoregressively (all such sequences batched), writing draft KV at positions P .. P + k - 1, which
 * the block table must cover (the caller allocates k lookahead slots). Rollback stays implicit.
 * With an EAGLE-3 head instead, the target's forward pass keeps its residual stream at the head's tapped layers; the
 * head stores their projection and its own KV per position in pools addressed by the same block tables, and proposes
 * the same way (k greedy tokens from the last accepted token at P, head KV slots P .. P + k - 1).
 */
RILL_API rill_status rill_step(rill_engine *engine, const rill_step_batch *batch, rill_step_result *result);

/* Forgets per-sequence state the device keeps beyond the KV blocks (none on the CPU device); unknown ids are fine. */
RILL_API rill_status rill_release(rill_engine *engine, int32_t seq_id);

/* Raw logits for testing and golden comparisons: like rill_step, but writes the logits of every fed position
 * ([T * V] floats) instead of sampling. The KV cache (and the draft model's, if any) is written as in a step. */
RILL_API rill_status rill_forward_logits(rill_engine *engine, const rill_step_batch *batch, float *logits_out);

/* The last error of this engine (or "" if none); valid until the next call on the engine. */
RILL_API const char *rill_last_error(const rill_engine *engine);
/* The last error of rill_engine_create on this thread. */
RILL_API const char *rill_global_error(void);

#ifdef __cplusplus
}
#endif
#endif /* RILL_H */
