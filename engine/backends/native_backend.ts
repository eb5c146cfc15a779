/**
 * The native engine library (ffi/, `build/ffi/librill.so`, opened by ffi/binding/library.ts) as a step backend.
 *
 * Invariants:
 * - One FFI call per engine step: `rill_step` is `nonblocking`, so it runs on a worker thread and the event loop keeps
 *   serving other streams while the library computes.
 * - The C structs (`rill_step_batch`, `rill_step_result`) are built once per set of typed arrays and reused: the
 *   engine allocates its batch buffers once and refills them, so a step normally rewrites only the six counts.
 *   Typed arrays are pinned off the V8 heap (`.buffer` externalises an on-heap backing store) before their address
 *   is taken, and the cached struct keeps them alive.
 * - The library is not thread-safe: one call at a time per engine. `release` during a step is deferred until the step
 *   returns; a second concurrent `step` is a programming error and throws.
 * - Offsets below are x86-64/aarch64 LP64 layouts of ffi/include/rill.h (`rill_step_batch`'s derived from
 *   step_batch_layout.ts); tests/native/layout_test.ts compiles the header and checks every one, the field lists
 *   and the batch arrays' element types.
 */
import { address, cString, nulTerminated } from "../../ffi/binding/c_values.ts";
import { type Library, openLibrary, statusName } from "../../ffi/binding/library.ts";
import { STRUCT_LAYOUTS } from "../../ffi/binding/struct_layouts.ts";
import type { Backend, BackendInfo, StepBatch, StepResult } from "../step_batch.ts";
import {
  batchLengths,
  STEP_BATCH_ARRAYS,
  STEP_BATCH_LAYOUT,
  STEP_BATCH_POINTERS_AT,
  stepBatchSignature,
} from "./step_batch_layout.ts";

/** Field offsets and sizes of the ABI structs, in bytes (`rill_step_batch`'s derived from step_batch_layout.ts). */
export const LAYOUT = { stepBatch: STEP_BATCH_LAYOUT, ...STRUCT_LAYOUTS } as const;

/** What `rill_engine_info` reports beyond the step contract: for logs, benchmarks and tests. */
export interface NativeInfo extends BackendInfo {
  readonly numLayers: number;
  readonly hiddenSize: number;
  readonly numHeads: number;
  readonly numKvHeads: number;
  readonly headDim: number;
  readonly threads: number;
  readonly weightBytes: number;
  /** Bytes of both KV pools (and the draft model's). */
  readonly kvBytes: number;
  /** Of those, the sliding-layer pool's (0 without one). */
  readonly slidingKvBytes: number;
  readonly device: string;
  readonly isa: string;
  readonly dtype: string;
  readonly kvDtype: string;
  readonly architecture: string;
  /** Bytes of the draft model's weights; 0 without one. */
  readonly draftWeightBytes: number;
}

export interface NativeOptions {
  /** "cpu" (default), "cuda", "auto". */
  readonly device?: string;
  /** Weights as held: "fp32", "bf16", "int8"; default the checkpoint's. */
  readonly dtype?: string;
  readonly kvDtype?: string;
  /** A smaller checkpoint with the same vocabulary that proposes drafts inside each step (`proposeCounts`). */
  readonly draftModelDir?: string;
  /** CPU threads; 0 or absent = all cores. */
  readonly threads?: number;
  readonly blockSize?: number;
  readonly numBlocks?: number;
  readonly kvBytes?: number;
  readonly maxSeqs?: number;
  readonly maxBatchTokens?: number;
  readonly maxDrafts?: number;
  readonly maxTopLogprobs?: number;
  readonly maxModelLen?: number;
  readonly gpuMemoryFraction?: number;
  /** Blocks of the sliding-layer pool (models with sliding-window layers); 0 or absent = sized by the library. */
  readonly numSlidingBlocks?: number;
  /** Keep sliding layers' whole context in the main pool (no second pool; for comparisons). */
  readonly slidingKvInMain?: boolean;
  /** The library file (default: the build folder's). */
  readonly libraryPath?: string;
}

function decodeInfo(bytes: Uint8Array): NativeInfo {
  const v = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const L = LAYOUT.info;
  const i32 = (off: number) => v.getInt32(off, true);
  const text = (off: number, len: number) => {
    const raw = bytes.subarray(off, off + len);
    const end = raw.indexOf(0);
    return new TextDecoder().decode(end < 0 ? raw : raw.subarray(0, end));
  };
  return {
    vocabSize: i32(L.vocab_size),
    maxPositions: i32(L.max_positions),
    blockSize: i32(L.block_size),
    numBlocks: i32(L.num_blocks),
    maxBatchTokens: i32(L.max_batch_tokens),
    maxSeqs: i32(L.max_seqs),
    maxDrafts: i32(L.max_drafts),
    maxTopLogprobs: i32(L.max_top_logprobs),
    sharesPrefixBlocks: i32(L.shares_prefix_blocks) !== 0,
    numLayers: i32(L.num_layers),
    hiddenSize: i32(L.hidden_size),
    numHeads: i32(L.num_heads),
    numKvHeads: i32(L.num_kv_heads),
    headDim: i32(L.head_dim),
    threads: i32(L.threads),
    weightBytes: Number(v.getBigInt64(L.weight_bytes, true)),
    kvBytes: Number(v.getBigInt64(L.kv_bytes, true)),
    slidingWindow: i32(L.sliding_window),
    numSlidingBlocks: i32(L.num_sliding_blocks),
    slidingKvBytes: Number(v.getBigInt64(L.sliding_kv_bytes, true)),
    device: text(L.device, 32),
    isa: text(L.isa, 32),
    dtype: text(L.dtype, 16),
    kvDtype: text(L.kv_dtype, 16),
    architecture: text(L.architecture, 64),
    draftWeightBytes: Number(v.getBigInt64(L.draft_weight_bytes, true)),
    proposesDrafts: v.getBigInt64(L.draft_weight_bytes, true) > 0n,
  };
}

/** The batch arrays in the order of the struct's pointer fields (after the counts). */
function batchArrays(b: StepBatch): readonly ArrayBufferView[] {
  return STEP_BATCH_ARRAYS.map((a) => a.get(b) ?? NO_PROPOSALS);
}

/** Stands for an absent optional array: its address is 0, which the library reads as NULL. */
const NO_PROPOSALS = new Int32Array(0);

const sameArrays = (a: readonly ArrayBufferView[], b: readonly ArrayBufferView[]) =>
  a.length === b.length && a.every((x, i) => x === b[i]);

/**
 * A `rill_step_batch` laid out over one set of typed arrays. Rebuilt only when the engine hands over different
 * arrays; otherwise only the counts change.
 */
class BatchStruct {
  readonly bytes = new Uint8Array(LAYOUT.stepBatch.size);
  #arrays: readonly ArrayBufferView[] = [];
  readonly #view = new DataView(this.bytes.buffer);

  fill(batch: StepBatch, vocabSize: number): Uint8Array<ArrayBuffer> {
    const arrays = batchArrays(batch);
    const L = LAYOUT.stepBatch;
    if (!sameArrays(arrays, this.#arrays)) {
      this.#arrays = arrays;
      arrays.forEach((array, k) => this.#view.setBigUint64(STEP_BATCH_POINTERS_AT + 8 * k, address(array), true));
    }
    const words = Math.ceil(vocabSize / 32);
    this.#view.setInt32(L.num_seqs, batch.numSeqs, true);
    this.#view.setInt32(L.num_tokens, batch.numTokens, true);
    this.#view.setInt32(L.block_table_stride, batch.blockTableStride, true);
    // The capacities of the mask and history buffers: the library validates every index against them.
    this.#view.setInt32(L.num_mask_rows, Math.floor(batch.allowedMask.length / words), true);
    this.#view.setInt32(L.history_len, batch.history.length, true);
    this.#view.setInt32(L.bias_len, Math.min(batch.biasIds.length, batch.biasValues.length), true);
    return this.bytes as Uint8Array<ArrayBuffer>;
  }
}

class ResultStruct {
  readonly bytes = new Uint8Array(LAYOUT.stepResult.size);
  #arrays: readonly ArrayBufferView[] = [];
  readonly #view = new DataView(this.bytes.buffer);

  fill(result: StepResult): Uint8Array<ArrayBuffer> {
    const arrays = [
      result.counts,
      result.tokens,
      result.logprobs,
      result.topIds,
      result.topLogprobs,
      result.proposedCounts ?? NO_PROPOSALS,
      result.proposed ?? NO_PROPOSALS,
    ];
    if (!sameArrays(arrays, this.#arrays)) {
      this.#arrays = arrays;
      arrays.forEach((array, k) => this.#view.setBigUint64(8 * k, address(array), true));
    }
    return this.bytes as Uint8Array<ArrayBuffer>;
  }
}

/** Checks the buffers are at least as long as the C side will read or write for this batch and these limits. */
function checkSizes(batch: StepBatch, result: StepResult | undefined, info: BackendInfo): void {
  const B = batch.numSeqs;
  const T = batch.numTokens;
  if (!Number.isInteger(B) || B < 1 || !Number.isInteger(T) || T < 1 || !Number.isInteger(batch.blockTableStride)) {
    throw new Error(`invalid batch: numSeqs ${B}, numTokens ${T}, blockTableStride ${batch.blockTableStride}`);
  }
  // Counts over the limits are the batch's fault, not its buffers': name them before any buffer check.
  if (B > info.maxSeqs) throw new Error(`invalid batch: numSeqs ${B} is over the limit ${info.maxSeqs}`);
  if (T > info.maxBatchTokens) {
    throw new Error(`invalid batch: numTokens ${T} is over the limit ${info.maxBatchTokens}`);
  }
  const need = batchLengths(batch);
  if (result !== undefined) {
    const K1 = info.maxDrafts + 1;
    need.push(
      ["result.counts", result.counts, B],
      ["result.tokens", result.tokens, B * K1],
      ["result.logprobs", result.logprobs, B * K1],
      ["result.topIds", result.topIds, B * K1 * info.maxTopLogprobs],
      ["result.topLogprobs", result.topLogprobs, B * K1 * info.maxTopLogprobs],
    );
    if (batch.proposeCounts !== undefined) {
      if (result.proposedCounts === undefined || result.proposed === undefined) {
        throw new Error("invalid batch: proposeCounts needs result.proposedCounts and result.proposed");
      }
      need.push(
        ["result.proposedCounts", result.proposedCounts, B],
        ["result.proposed", result.proposed, B * info.maxDrafts],
      );
    }
  }
  for (const [name, array, length] of need) {
    if (array.length < length) throw new Error(`invalid batch: ${name} has ${array.length} entries, needs ${length}`);
  }
}

export class NativeBackend implements Backend {
  readonly info: NativeInfo;
  readonly #lib: Library;
  #engine: Deno.PointerValue;
  readonly #batch = new BatchStruct();
  readonly #result = new ResultStruct();
  #running: Promise<unknown> | undefined;
  #pendingReleases: number[] = [];

  private constructor(lib: Library, engine: Deno.PointerObject, info: NativeInfo) {
    this.#lib = lib;
    this.#engine = engine;
    this.info = info;
  }

  /** Loads a Hugging Face checkpoint directory; errors name the file and tensor. */
  static async create(modelDir: string, options: NativeOptions = {}): Promise<NativeBackend> {
    const lib = await openLibrary(stepBatchSignature(), options.libraryPath);
    const L = LAYOUT.options;
    const opts = new Uint8Array(L.size);
    const v = new DataView(opts.buffer);
    const keep: Uint8Array[] = [];
    const str = (off: number, s: string | undefined) => {
      if (s === undefined) return;
      const bytes = nulTerminated(s);
      keep.push(bytes);
      v.setBigUint64(off, address(bytes), true);
    };
    const int = (off: number, n: number | undefined, name: string) => {
      if (n === undefined) return;
      if (!Number.isInteger(n) || n < 0 || n > 0x7fffffff) throw new Error(`native backend: invalid ${name} ${n}`);
      v.setInt32(off, n, true);
    };
    str(L.device, options.device);
    str(L.dtype, options.dtype);
    str(L.kv_dtype, options.kvDtype);
    str(L.draft_model_dir, options.draftModelDir);
    int(L.threads, options.threads, "threads");
    int(L.block_size, options.blockSize, "blockSize");
    int(L.num_blocks, options.numBlocks, "numBlocks");
    if (options.kvBytes !== undefined) v.setBigInt64(L.kv_bytes, BigInt(Math.floor(options.kvBytes)), true);
    int(L.max_seqs, options.maxSeqs, "maxSeqs");
    int(L.max_batch_tokens, options.maxBatchTokens, "maxBatchTokens");
    int(L.max_drafts, options.maxDrafts, "maxDrafts");
    int(L.max_top_logprobs, options.maxTopLogprobs, "maxTopLogprobs");
    int(L.max_model_len, options.maxModelLen, "maxModelLen");
    if (options.gpuMemoryFraction !== undefined) v.setFloat32(L.gpu_memory_fraction, options.gpuMemoryFraction, true);
    int(L.num_sliding_blocks, options.numSlidingBlocks, "numSlidingBlocks");
    if (options.slidingKvInMain === true) v.setInt32(L.sliding_kv_in_main, 1, true);

    const out = new BigUint64Array(1);
    const status = lib.symbols.rill_engine_create(nulTerminated(modelDir), opts, out);
    keep.length = 0;
    const engine = Deno.UnsafePointer.create(out[0]!);
    if (status !== 0 || engine === null) {
      const message = cString(lib.symbols.rill_global_error());
      throw new Error(`native backend: ${message || statusName(status)}`);
    }
    const infoBytes = new Uint8Array(LAYOUT.info.size);
    const infoStatus = lib.symbols.rill_engine_info(engine, infoBytes);
    if (infoStatus !== 0) {
      const message = cString(lib.symbols.rill_last_error(engine));
      lib.symbols.rill_engine_destroy(engine);
      throw new Error(`native backend: ${message || statusName(infoStatus)}`);
    }
    return new NativeBackend(lib, engine, decodeInfo(infoBytes));
  }

  #error(status: number): Error {
    const message = cString(this.#lib.symbols.rill_last_error(this.#engine));
    return new Error(message || `native engine: ${statusName(status)}`);
  }

  #enter(): Deno.PointerObject {
    if (this.#engine === null) throw new Error("native backend is closed");
    if (this.#running !== undefined) throw new Error("native backend: a step is already running");
    return this.#engine;
  }

  async #call(call: Promise<number>): Promise<void> {
    this.#running = call;
    let status: number;
    try {
      status = await call;
    } finally {
      this.#running = undefined;
      this.#flushReleases();
    }
    if (status !== 0) throw this.#error(status);
  }

  async step(batch: StepBatch, result: StepResult): Promise<void> {
    const engine = this.#enter();
    checkSizes(batch, result, this.info);
    const b = this.#batch.fill(batch, this.info.vocabSize);
    const r = this.#result.fill(result);
    await this.#call(this.#lib.symbols.rill_step(engine, b, r));
  }

  /** The logits of every fed position ([numTokens × vocabSize]), for tests and golden comparisons. Writes the KV. */
  async forwardLogits(batch: StepBatch): Promise<Float32Array> {
    const engine = this.#enter();
    checkSizes(batch, undefined, this.info);
    const logits = new Float32Array(batch.numTokens * this.info.vocabSize);
    const b = this.#batch.fill(batch, this.info.vocabSize);
    await this.#call(this.#lib.symbols.rill_forward_logits(engine, b, logits));
    return logits;
  }

  release(seqId: number): void {
    if (this.#engine === null) return;
    this.#pendingReleases.push(seqId);
    if (this.#running === undefined) this.#flushReleases();
  }

  #flushReleases(): void {
    if (this.#engine === null) return;
    for (const id of this.#pendingReleases) this.#lib.symbols.rill_release(this.#engine, id);
    this.#pendingReleases = [];
  }

  async close(): Promise<void> {
    if (this.#running !== undefined) await this.#running.catch(() => {});
    if (this.#engine === null) return;
    this.#flushReleases();
    this.#lib.symbols.rill_engine_destroy(this.#engine);
    this.#engine = null;
  }
}
