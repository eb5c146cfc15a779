/**
 * CPU backend on onnxruntime-node for models in the Optimum decoder-with-past layout: a LogitsBackend, so the engine
 * reaches it through the host sampler (engine/backends/host_sampled_backend.ts).
 *
 * One ORT run per step for all running sequences, however different their lengths and however many tokens each
 * feeds (1 for decode, 1 + K when verifying drafts, a chunk of a long prompt). The packed batch is read per sequence:
 * `contextLens - fed` is what it keeps from before. Sequences live as rows of a batch-layout cache block
 * (`KvBlock`: per layer key/value [rows, kvHeads, slots, headDim] plus an int64 mask [rows, slots]), not in the
 * engine's blocks. With prefix sharing on, the block tables name where full blocks are kept: each block a step fills
 * is copied into a pool under its id, and a sequence that starts from cached blocks is loaded from there. The pool is
 * shared memory (block_pool.ts): sessions given the same pool (the shards of one engine) read each other's blocks.
 * The model's mask is per key slot, so:
 * - rows of different lengths are left-padded (mask 0 before their first token);
 * - a row feeding fewer tokens than the widest row is right-padded in that step (mask 0: its real queries never
 *   see those slots because they lie after them, and later steps never see them either);
 * - rollback is implicit: a sequence that keeps fewer tokens than its row holds (rejected drafts) has the surplus
 *   slots zeroed in the mask, no copy; one that restarts at 0 (recompute after preemption) is prefilled afresh.
 * While the set of running sequences is unchanged, each step's `present.*` outputs are fed back as the next
 * `past_key_values.*` as they are (zero copy). When sequences join or leave, or holes waste too many slots, the
 * block is rebuilt by gathering each live row's valid slots into a fresh, compact, left-padded block. Fresh
 * sequences are prefilled in their own run (left-padded) and merged at their first decode step: a step that admits
 * prompts is two runs, because the layout has no ragged token dimension, so one run would pad every decoding row to
 * the longest prompt and multiply its compute by that length. Only the sampled rows' logits are returned.
 */
import * as ort from "onnxruntime-node";
import type { LogitsBackend } from "./logits_backend.ts";
import { BlockPool, type BlockPoolBuffers } from "./block_pool.ts";
import type { StepBatch } from "../step_batch.ts";

export interface OnnxBackendOptions {
  /** Threads ORT uses inside one operator (default 1: on a small model, extra threads mostly add sync cost). */
  readonly intraOpNumThreads?: number;
  readonly interOpNumThreads?: number;
  /**
   * Share prefix blocks (off when absent): the KV of every full block a sequence computes is kept in this pool by
   * block id, and a sequence that starts with a context longer than what it feeds is loaded from the blocks its
   * table lists, whichever session sharing the pool computed them (createBlockPool; posting it to a worker shares it).
   */
  readonly prefixPool?: BlockPoolBuffers;
}

export interface ModelDims {
  readonly numLayers: number;
  readonly kvHeads: number;
  readonly headDim: number;
  readonly vocabSize: number;
  readonly maxPositions: number;
}

/** Rows of sequences sharing one set of batch tensors. */
class KvBlock {
  constructor(
    /** 2 × layers arrays, each [rows, kvHeads, slots, headDim], in past_key_values input order. */
    readonly data: Float32Array[],
    readonly rows: number,
    readonly slots: number,
    /** [rows, slots]: 1 where the slot holds a live token of that row. */
    readonly mask: BigInt64Array,
    /** Live tokens per row. */
    readonly valid: Int32Array,
    /** Row → seqId, -1 once released or moved. */
    readonly seqIds: Int32Array,
    /** Which reusable slab side holds `data` (0 or 1), or -1 for memory of its own. */
    readonly side: -1 | 0 | 1,
  ) {}
}

interface Location {
  block: KvBlock;
  row: number;
}

/** Reusable int64 input buffer; hands out exact-length views so ORT sees the right element count. */
class Int64Scratch {
  #buf = new BigInt64Array(256);
  view(n: number): BigInt64Array {
    if (n > this.#buf.length) this.#buf = new BigInt64Array(Math.max(n, this.#buf.length * 2));
    return new BigInt64Array(this.#buf.buffer, 0, n);
  }
}

/**
 * Two growable float slabs per cache tensor. The running block lives on one side; the next step's outputs (ORT
 * writes them straight into these buffers via pre-allocated fetches) or a re-gathered block go to the other side,
 * then the sides flip. Steady-state decoding therefore allocates no cache memory at all.
 */
class SlabPair {
  readonly #slabs: Float32Array[][] = [[], []];
  readonly #count: number;

  constructor(count: number) {
    this.#count = count;
  }

  /** Views of `n` floats for each tensor on `side`; contents are stale but finite (zeros or earlier cache). */
  views(side: 0 | 1, n: number): Float32Array[] {
    const slabs = this.#slabs[side]!;
    const out: Float32Array[] = [];
    for (let k = 0; k < this.#count; k++) {
      if (slabs[k] === undefined || slabs[k]!.length < n) slabs[k] = new Float32Array(Math.ceil(n * 1.25) + 1024);
      out.push(slabs[k]!.subarray(0, n));
    }
    return out;
  }
}

/** A reusable float buffer for decode logits. */
class FloatScratch {
  #buf = new Float32Array(1024);
  view(n: number): Float32Array {
    if (n > this.#buf.length) this.#buf = new Float32Array(Math.max(n, this.#buf.length * 2));
    return this.#buf.subarray(0, n);
  }
}

/** One sequence's share of a step, read from the packed batch. */
interface Entry {
  readonly seqId: number;
  readonly tokens: Int32Array;
  /** Tokens the sequence keeps from before this step. */
  readonly cachedLength: number;
  /** Trailing fed positions whose logits are returned (0 for an intermediate prefill chunk). */
  readonly logitsCount: number;
  /** First output row of this sequence. */
  readonly rowStart: number;
  /** Its row in the batch. */
  readonly index: number;
  /** It starts with a context taken from shared prefix blocks. */
  readonly fromPool: boolean;
}

export class OnnxBackend implements LogitsBackend {
  readonly sharesPrefixBlocks: boolean;
  readonly vocabSize: number;
  readonly maxPositions: number;
  readonly dims: ModelDims;
  readonly #session: ort.InferenceSession;
  readonly #pastNames: string[];
  readonly #presentNames: string[];
  readonly #locations = new Map<number, Location>();
  #main: KvBlock | undefined;
  readonly #slabs: SlabPair;
  readonly #logits = new FloatScratch();
  readonly #rows = new FloatScratch();
  readonly #ids = new Int64Scratch();
  readonly #positions = new Int64Scratch();
  readonly #prefillIds = new Int64Scratch();
  readonly #prefillPositions = new Int64Scratch();
  /** Tokens per shared block; 0 when prefix sharing is off. */
  readonly #blockSize: number;
  /**
   * KV of full blocks by block id, per cache tensor [kvHeads, blockSize, headDim]. A block's entry is rewritten
   * whenever a sequence fills that block, so it always holds the last content computed there, which is the content
   * the engine registers when it shares the block (it registers only blocks whose tokens are all computed).
   */
  #pool: BlockPool | undefined;
  #closed = false;

  private constructor(session: ort.InferenceSession, dims: ModelDims, pool: BlockPool | undefined) {
    this.#session = session;
    this.#pool = pool;
    this.#blockSize = pool?.blockSize ?? 0;
    this.sharesPrefixBlocks = pool !== undefined;
    this.dims = dims;
    this.vocabSize = dims.vocabSize;
    this.maxPositions = dims.maxPositions;
    this.#pastNames = [];
    this.#presentNames = [];
    for (let i = 0; i < dims.numLayers; i++) {
      for (const kv of ["key", "value"]) {
        this.#pastNames.push(`past_key_values.${i}.${kv}`);
        this.#presentNames.push(`present.${i}.${kv}`);
      }
    }
    this.#slabs = new SlabPair(this.#pastNames.length);
    const inputs = new Set(session.inputNames);
    for (const name of ["input_ids", "attention_mask", "position_ids", ...this.#pastNames]) {
      if (!inputs.has(name)) throw new Error(`onnx model lacks input "${name}" (decoder-with-past layout expected)`);
    }
    const outputs = new Set(session.outputNames);
    for (const name of ["logits", ...this.#presentNames]) {
      if (!outputs.has(name)) throw new Error(`onnx model lacks output "${name}" (decoder-with-past layout expected)`);
    }
  }

  /**
   * Loads an ONNX model from a file path, or from the bytes of a self-contained model (one without external data:
   * onnxruntime resolves external data files relative to the model's path, which bytes do not have). `dims` normally comes from config.json; any field left out is read from the graph's
   * input/output metadata (layer count from the past inputs, heads and head size from their static dims).
   */
  static async create(
    model: string | Uint8Array,
    options: OnnxBackendOptions = {},
    dims: Partial<ModelDims> = {},
  ): Promise<OnnxBackend> {
    const sessionOptions: ort.InferenceSession.SessionOptions = {
      intraOpNumThreads: options.intraOpNumThreads ?? 1,
      interOpNumThreads: options.interOpNumThreads ?? 1,
      executionMode: "sequential",
      graphOptimizationLevel: "all",
    };
    // Two calls because ort's overloads take a path or a buffer, not their union.
    const session = typeof model === "string"
      ? await ort.InferenceSession.create(model, sessionOptions)
      : await ort.InferenceSession.create(model, sessionOptions);
    const resolved = resolveDims(session, dims);
    const pool = options.prefixPool;
    if (
      pool !== undefined &&
      pool.tensors * pool.blockFloats !== 2 * resolved.numLayers * resolved.kvHeads * pool.blockSize * resolved.headDim
    ) {
      throw new RangeError("prefixPool: its blocks do not have this model's cache shape");
    }
    return new OnnxBackend(session, resolved, pool === undefined ? undefined : new BlockPool(pool));
  }

  forward(batch: StepBatch): Promise<Float32Array> {
    if (this.#closed) return Promise.reject(new Error("onnx backend is closed"));
    try {
      return this.#forward(batch);
    } catch (e) {
      return Promise.reject(e);
    }
  }

  /**
   * Reads the packed batch as per-sequence entries. Rollback is implicit: a sequence whose cached length before this
   * step (`contextLens - fed`) is below what its row holds drops the tail by zeroing mask slots; one that restarts
   * at 0 (recompute after preemption) is dropped and prefilled afresh. A new one that starts with a longer context
   * is loaded from the shared blocks its table lists (when sharing is on; otherwise that is an error).
   */
  async #forward(batch: StepBatch): Promise<Float32Array> {
    const entries: Entry[] = [];
    const seen = new Set<number>();
    let rowCount = 0;
    for (let i = 0; i < batch.numSeqs; i++) {
      const q0 = batch.queryStart[i]!;
      const q1 = batch.queryStart[i + 1]!;
      const seqId = batch.seqIds[i]!;
      if (seen.has(seqId)) throw new Error(`step batch: seqIds: sequence ${seqId} appears twice in one step`);
      seen.add(seqId);
      const fed = q1 - q0;
      if (!(fed >= 1)) throw new Error(`step batch: queryStart: sequence ${seqId} feeds no tokens`);
      const before = batch.contextLens[i]! - fed;
      if (batch.contextLens[i]! > this.maxPositions) {
        throw new Error(
          `step batch: contextLens: sequence ${seqId} reaches ${batch.contextLens[i]}, beyond the model's context`,
        );
      }
      const held = this.cachedLength(seqId);
      const fromPool = before > held && held === 0 && this.sharesPrefixBlocks;
      if (before < 0 || (before > held && !fromPool)) {
        throw new Error(
          `step batch: contextLens: sequence ${seqId} continues from ${before} tokens but the backend holds ${held}`,
        );
      }
      if (fromPool) {
        for (let j = 0; j < Math.ceil(before / this.#blockSize); j++) {
          const block = batch.blockTables[i * batch.blockTableStride + j]!;
          if (!this.#pool!.has(block)) {
            throw new Error(
              `step batch: blockTables: sequence ${seqId} starts from block ${block}, which holds no KV computed here`,
            );
          }
        }
      }
      const logitsCount = batch.sampleFlags[i] === 1 ? batch.draftCounts[i]! + 1 : 0;
      if (logitsCount > fed) {
        throw new Error(`step batch: draftCounts: sequence ${seqId} has more drafts than fed tokens`);
      }
      entries.push({
        seqId,
        tokens: batch.tokens.subarray(q0, q1),
        cachedLength: before,
        logitsCount,
        rowStart: rowCount,
        index: i,
        fromPool,
      });
      rowCount += logitsCount;
    }
    for (const e of entries) {
      const held = this.cachedLength(e.seqId);
      if (e.cachedLength === 0 && held > 0) this.release(e.seqId);
      else if (e.cachedLength < held) this.#truncate(e.seqId, e.cachedLength);
      if (e.fromPool) this.#loadPrefix(batch, e);
    }
    const fresh: Entry[] = [];
    const cont: Entry[] = [];
    for (const e of entries) (e.cachedLength === 0 ? fresh : cont).push(e);
    const V = this.vocabSize;
    const out = this.#rows.view(rowCount * V);
    if (cont.length > 0) await this.#decode(cont, out);
    if (fresh.length > 0) await this.#prefill(fresh, out);
    if (this.sharesPrefixBlocks) this.#keepFullBlocks(batch, entries);
    return out;
  }

  /** A sequence's first `cachedLength` positions, copied from the shared blocks into a row of its own. */
  #loadPrefix(batch: StepBatch, e: Entry): void {
    const { kvHeads: H, headDim: D } = this.dims;
    const bs = this.#blockSize;
    const P = e.cachedLength;
    const data = this.#pastNames.map(() => new Float32Array(H * P * D));
    for (let j = 0; j * bs < P; j++) {
      const src = this.#pool!.read(batch.blockTables[e.index * batch.blockTableStride + j]!);
      const n = Math.min(bs, P - j * bs);
      for (let k = 0; k < data.length; k++) {
        for (let h = 0; h < H; h++) data[k]!.set(src[k]!.subarray(h * bs * D, (h * bs + n) * D), (h * P + j * bs) * D);
      }
    }
    const mask = new BigInt64Array(P).fill(1n);
    const block = new KvBlock(data, 1, P, mask, Int32Array.of(P), Int32Array.of(e.seqId), -1);
    this.#locations.set(e.seqId, { block, row: 0 });
  }

  /** Copies every block this step filled into the pool under its block id. */
  #keepFullBlocks(batch: StepBatch, entries: readonly Entry[]): void {
    const { kvHeads: H, headDim: D } = this.dims;
    const bs = this.#blockSize;
    for (const e of entries) {
      const full = Math.floor(batch.contextLens[e.index]! / bs);
      const first = Math.floor(e.cachedLength / bs);
      if (first >= full) continue;
      const loc = this.#locations.get(e.seqId)!;
      const src = loc.block;
      // Live slots of the row in position order: position p sits in slot live[p].
      const live: number[] = [];
      const rowMask = src.mask.subarray(loc.row * src.slots, (loc.row + 1) * src.slots);
      for (let s = 0; s < src.slots; s++) if (rowMask[s] === 1n) live.push(s);
      if (live.length < full * bs) {
        throw new Error(`onnx backend: sequence ${e.seqId} holds fewer tokens than its context`);
      }
      for (let j = first; j < full; j++) {
        const dst = this.#pool!.write(batch.blockTables[e.index * batch.blockTableStride + j]!);
        for (let k = 0; k < dst.length; k++) {
          const from = src.data[k]!;
          const to = dst[k]!;
          for (let h = 0; h < H; h++) {
            const base = (loc.row * H + h) * src.slots;
            for (let q = 0; q < bs; q++) {
              const at = (base + live[j * bs + q]!) * D;
              to.set(from.subarray(at, at + D), (h * bs + q) * D);
            }
          }
        }
      }
    }
  }

  async #decode(cont: readonly Entry[], out: Float32Array): Promise<void> {
    const seqIds = cont.map((e) => e.seqId);
    let block = this.#main;
    if (block === undefined || !sameRows(block, seqIds) || wasteful(block)) block = this.#gather(seqIds);
    const { kvHeads, headDim } = this.dims;
    const B = block.rows;
    const P = block.slots;
    let S = 1;
    for (const e of cont) S = Math.max(S, e.tokens.length);
    const T = P + S;
    const ids = this.#ids.view(B * S);
    const pos = this.#positions.view(B * S);
    const mask = new BigInt64Array(B * T); // becomes the next block's mask, so never reused
    for (let r = 0; r < B; r++) {
      const e = cont[r]!;
      const n = e.tokens.length;
      const padToken = BigInt(e.tokens[n - 1]!);
      for (let j = 0; j < S; j++) {
        ids[r * S + j] = j < n ? BigInt(e.tokens[j]!) : padToken;
        pos[r * S + j] = BigInt(e.cachedLength + j);
      }
      mask.set(block.mask.subarray(r * P, (r + 1) * P), r * T);
      mask.fill(1n, r * T + P, r * T + P + n);
    }
    const feeds: Record<string, ort.Tensor> = {
      input_ids: new ort.Tensor("int64", ids, [B, S]),
      position_ids: new ort.Tensor("int64", pos, [B, S]),
      attention_mask: new ort.Tensor("int64", mask, [B, T]),
    };
    this.#pastNames.forEach((name, k) => {
      feeds[name] = new ort.Tensor("float32", block.data[k]!, [B, kvHeads, P, headDim]);
    });
    const side = block.side === 0 ? 1 : 0;
    this.#evacuate(side, new Set(seqIds));
    const data = this.#slabs.views(side, B * kvHeads * T * headDim);
    const V = this.vocabSize;
    const logits = this.#logits.view(B * S * V);
    const fetches: Record<string, ort.Tensor> = { logits: new ort.Tensor("float32", logits, [B, S, V]) };
    this.#presentNames.forEach((name, k) => {
      fetches[name] = new ort.Tensor("float32", data[k]!, [B, kvHeads, T, headDim]);
    });
    await this.#session.run(feeds, fetches);
    const valid = new Int32Array(B);
    for (let r = 0; r < B; r++) valid[r] = block.valid[r]! + cont[r]!.tokens.length;
    const next = new KvBlock(data, B, T, mask, valid, Int32Array.from(seqIds), side);
    this.#main = next;
    seqIds.forEach((id, r) => this.#locations.set(id, { block: next, row: r }));
    for (let r = 0; r < B; r++) {
      const e = cont[r]!;
      const first = r * S + e.tokens.length - e.logitsCount;
      out.set(logits.subarray(first * V, (first + e.logitsCount) * V), e.rowStart * V);
    }
  }

  async #prefill(fresh: readonly Entry[], out: Float32Array): Promise<void> {
    const { kvHeads, headDim } = this.dims;
    const B = fresh.length;
    let S = 1;
    for (const e of fresh) S = Math.max(S, e.tokens.length);
    const ids = this.#prefillIds.view(B * S);
    const pos = this.#prefillPositions.view(B * S);
    const mask = new BigInt64Array(B * S);
    ids.fill(0n);
    pos.fill(0n);
    const valid = new Int32Array(B);
    for (let r = 0; r < B; r++) {
      const e = fresh[r]!;
      const n = e.tokens.length;
      const pad = S - n; // left padding: the prompt ends at the last column for every row
      for (let j = 0; j < n; j++) {
        ids[r * S + pad + j] = BigInt(e.tokens[j]!);
        pos[r * S + pad + j] = BigInt(j);
      }
      mask.fill(1n, r * S + pad, (r + 1) * S);
      valid[r] = n;
    }
    const empty = new Float32Array(0);
    const feeds: Record<string, ort.Tensor> = {
      input_ids: new ort.Tensor("int64", ids, [B, S]),
      position_ids: new ort.Tensor("int64", pos, [B, S]),
      attention_mask: new ort.Tensor("int64", mask, [B, S]),
    };
    for (const name of this.#pastNames) feeds[name] = new ort.Tensor("float32", empty, [B, kvHeads, 0, headDim]);
    const result = await this.#session.run(feeds);
    const data = this.#presentNames.map((name) => result[name]!.data as Float32Array);
    const seqIds = Int32Array.from(fresh, (e) => e.seqId);
    const block = new KvBlock(data, B, S, mask, valid, seqIds, -1);
    seqIds.forEach((id, r) => this.#locations.set(id, { block, row: r }));
    const logits = result["logits"]!.data as Float32Array;
    const V = this.vocabSize;
    for (let r = 0; r < B; r++) {
      const e = fresh[r]!;
      const first = r * S + S - e.logitsCount;
      out.set(logits.subarray(first * V, (first + e.logitsCount) * V), e.rowStart * V);
    }
  }

  /** Builds a compact left-padded block holding exactly `seqIds`, in that order, from wherever their rows live. */
  #gather(seqIds: readonly number[]): KvBlock {
    const { kvHeads: H, headDim: D } = this.dims;
    const B = seqIds.length;
    const locs = seqIds.map((id) => this.#locations.get(id)!);
    let P = 1;
    for (const l of locs) P = Math.max(P, l.block.valid[l.row]!);
    const side = this.#main?.side === 0 ? 1 : 0;
    this.#evacuate(side, new Set(seqIds));
    const data = this.#slabs.views(side, B * H * P * D);
    const mask = new BigInt64Array(B * P);
    const valid = new Int32Array(B);
    locs.forEach((loc, r) => {
      const src = loc.block;
      const c = src.valid[loc.row]!;
      const d0 = P - c;
      valid[r] = c;
      mask.fill(1n, r * P + d0, (r + 1) * P);
      // Runs of consecutive live slots in the source row, so each (tensor, head) copies a few contiguous spans.
      const runs: number[] = [];
      const rowMask = src.mask.subarray(loc.row * src.slots, (loc.row + 1) * src.slots);
      for (let s = 0; s < src.slots;) {
        if (rowMask[s] !== 1n) {
          s++;
          continue;
        }
        let e = s;
        while (e < src.slots && rowMask[e] === 1n) e++;
        runs.push(s, e - s);
        s = e;
      }
      for (let k = 0; k < data.length; k++) {
        const from = src.data[k]!;
        const to = data[k]!;
        for (let h = 0; h < H; h++) {
          const srcBase = (loc.row * H + h) * src.slots * D;
          let dst = ((r * H + h) * P + d0) * D;
          for (let q = 0; q < runs.length; q += 2) {
            const start = srcBase + runs[q]! * D;
            const len = runs[q + 1]! * D;
            to.set(from.subarray(start, start + len), dst);
            dst += len;
          }
        }
      }
    });
    const block = new KvBlock(data, B, P, mask, valid, Int32Array.from(seqIds), side);
    seqIds.forEach((id, r) => this.#locations.set(id, { block, row: r }));
    this.#main = block;
    return block;
  }

  /**
   * Before slab `side` is overwritten: any live sequence still stored there that is not part of the block being
   * built (a caller that skipped it this step) is copied to memory of its own, so reuse never corrupts a cache.
   */
  #evacuate(side: 0 | 1, keep: ReadonlySet<number>): void {
    const { kvHeads: H, headDim: D } = this.dims;
    for (const [id, loc] of this.#locations) {
      if (loc.block.side !== side || keep.has(id)) continue;
      const src = loc.block;
      const P = src.slots;
      const data = src.data.map((t) => t.slice(loc.row * H * P * D, (loc.row + 1) * H * P * D));
      const mask = src.mask.slice(loc.row * P, (loc.row + 1) * P);
      const own = new KvBlock(data, 1, P, mask, Int32Array.of(src.valid[loc.row]!), Int32Array.of(id), -1);
      src.seqIds[loc.row] = -1;
      this.#locations.set(id, { block: own, row: 0 });
    }
  }

  /** Keeps the first `length` cached tokens of a sequence: rejected drafts are its row's most recent live slots. */
  #truncate(seqId: number, length: number): void {
    const loc = this.#locations.get(seqId);
    if (loc === undefined) throw new Error(`sequence ${seqId} has no cache`);
    const { block, row } = loc;
    let drop = block.valid[row]! - length;
    if (drop < 0 || length < 1) throw new Error(`sequence ${seqId}: cannot truncate to ${length}`);
    for (let s = (row + 1) * block.slots - 1; drop > 0; s--) {
      if (block.mask[s] === 1n) {
        block.mask[s] = 0n;
        drop--;
      }
    }
    block.valid[row] = length;
  }

  release(seqId: number): void {
    const loc = this.#locations.get(seqId);
    if (loc === undefined) return;
    this.#locations.delete(seqId);
    loc.block.seqIds[loc.row] = -1;
  }

  /** Tokens cached for a sequence (tests and accounting checks). */
  cachedLength(seqId: number): number {
    const loc = this.#locations.get(seqId);
    return loc === undefined ? 0 : loc.block.valid[loc.row]!;
  }

  /** Number of sequences holding a cache. */
  get liveSequences(): number {
    return this.#locations.size;
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.#locations.clear();
    this.#pool = undefined;
    this.#main = undefined;
    await this.#session.release();
  }
}

function sameRows(block: KvBlock, seqIds: readonly number[]): boolean {
  if (block.rows !== seqIds.length) return false;
  for (let r = 0; r < seqIds.length; r++) if (block.seqIds[r] !== seqIds[r]) return false;
  return true;
}

/** Holes (left padding, rolled-back drafts, short-row padding) cost attention work every step; compact past this. */
function wasteful(block: KvBlock): boolean {
  let maxValid = 0;
  for (let r = 0; r < block.rows; r++) maxValid = Math.max(maxValid, block.valid[r]!);
  return block.slots - maxValid > Math.max(64, maxValid);
}

function resolveDims(session: ort.InferenceSession, given: Partial<ModelDims>): ModelDims {
  const meta = new Map<string, readonly (number | string)[]>();
  for (const m of [...session.inputMetadata, ...session.outputMetadata]) {
    if (m.isTensor) meta.set(m.name, m.shape);
  }
  let layers = 0;
  while (session.inputNames.includes(`past_key_values.${layers}.key`)) layers++;
  const past = meta.get("past_key_values.0.key");
  const logits = meta.get("logits");
  const staticDim = (shape: readonly (number | string)[] | undefined, i: number): number | undefined => {
    const d = shape?.[i];
    return typeof d === "number" && d > 0 ? d : undefined;
  };
  const dims = {
    numLayers: given.numLayers ?? layers,
    kvHeads: given.kvHeads ?? staticDim(past, 1),
    headDim: given.headDim ?? staticDim(past, 3),
    vocabSize: given.vocabSize ?? staticDim(logits, 2),
    maxPositions: given.maxPositions ?? 2048,
  };
  for (const [k, v] of Object.entries(dims)) {
    if (v === undefined || !(v > 0)) throw new Error(`onnx model: cannot determine ${k}; give it in config.json`);
  }
  return dims as ModelDims;
}
