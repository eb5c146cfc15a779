/**
 * Backends that use more than one CPU core for one batch: `WorkerBackend` runs an OnnxBackend inside a Web Worker,
 * and `ShardedBackend` splits every step across several backends (e.g. the main-thread OnnxBackend plus one worker),
 * running their ORT calls at the same time. onnxruntime-node's `run` blocks the calling thread, so this is how a
 * 2-core machine decodes two halves of a large batch in parallel; each ORT session keeps intraOpNumThreads 1.
 *
 * A sequence lives in exactly one shard for its whole life (its cache is there). New sequences go to the first shard
 * (the main thread) while it holds fewer than `mainFirst` live sequences, then to the shard with the fewest, ties to
 * the first: small batches stay entirely on the main thread and pay no messaging cost, large ones end up balanced.
 * Prefix blocks are shared when every shard keeps them in one pool (shared memory, block_pool.ts): a sequence that
 * starts from cached blocks then runs wherever the balance puts it, whichever shard computed those blocks.
 */
import type { LogitsBackend } from "./logits_backend.ts";
import { subBatch } from "./sub_batch.ts";
import type { ModelDims, OnnxBackendOptions } from "./onnx_backend.ts";
import type { WorkerReply, WorkerRequest } from "./onnx_worker.ts";
import type { StepBatch } from "../step_batch.ts";

export class WorkerBackend implements LogitsBackend {
  readonly sharesPrefixBlocks: boolean;
  readonly vocabSize: number;
  readonly maxPositions: number;
  readonly #worker: Worker;
  #pending: { resolve: (r: WorkerReply) => void; reject: (e: Error) => void } | undefined;
  #closed = false;

  private constructor(worker: Worker, dims: ModelDims, sharesPrefixBlocks: boolean) {
    this.#worker = worker;
    this.sharesPrefixBlocks = sharesPrefixBlocks;
    this.vocabSize = dims.vocabSize;
    this.maxPositions = dims.maxPositions;
    worker.onmessage = (e: MessageEvent<WorkerReply>) => this.#settle(e.data);
    worker.onerror = (e) => {
      e.preventDefault();
      this.#fail(new Error(`onnx worker failed: ${e.message}`));
    };
  }

  static async create(
    model: string | Uint8Array,
    options: OnnxBackendOptions,
    dims: Partial<ModelDims>,
  ): Promise<WorkerBackend> {
    const worker = new Worker(new URL("./onnx_worker.ts", import.meta.url).href, { type: "module" });
    const ready = await new Promise<WorkerReply>((resolve, reject) => {
      worker.onmessage = (e: MessageEvent<WorkerReply>) => resolve(e.data);
      worker.onerror = (e) => {
        e.preventDefault();
        reject(new Error(`onnx worker failed to start: ${e.message}`));
      };
      worker.postMessage({ op: "init", model, options, dims } satisfies WorkerRequest);
    });
    if (ready.op !== "ready") {
      worker.terminate();
      throw new Error(ready.op === "error" ? ready.message : `onnx worker: unexpected ${ready.op}`);
    }
    return new WorkerBackend(worker, ready.dims, options.prefixPool !== undefined);
  }

  #request(msg: WorkerRequest): Promise<WorkerReply> {
    if (this.#closed) return Promise.reject(new Error("worker backend is closed"));
    if (this.#pending !== undefined) return Promise.reject(new Error("worker backend: one request at a time"));
    return new Promise((resolve, reject) => {
      this.#pending = { resolve, reject };
      this.#worker.postMessage(msg);
    });
  }

  #settle(reply: WorkerReply): void {
    const p = this.#pending;
    this.#pending = undefined;
    if (p === undefined) return;
    if (reply.op === "error") p.reject(new Error(reply.message));
    else p.resolve(reply);
  }

  #fail(error: Error): void {
    const p = this.#pending;
    this.#pending = undefined;
    p?.reject(error);
  }

  async forward(batch: StepBatch): Promise<Float32Array> {
    const compact = subBatch(batch, Array.from({ length: batch.numSeqs }, (_, i) => i), this.vocabSize);
    const reply = await this.#request({ op: "step", batch: compact });
    if (reply.op !== "logits") throw new Error(`onnx worker: unexpected ${reply.op}`);
    return reply.rows;
  }

  release(seqId: number): void {
    if (!this.#closed) this.#worker.postMessage({ op: "release", seqId } satisfies WorkerRequest);
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    try {
      await this.#request({ op: "close" });
    } finally {
      this.#closed = true;
      this.#worker.terminate();
    }
  }
}

export class ShardedBackend implements LogitsBackend {
  /** True when every shard shares prefix blocks, which must then be through one pool (see the module comment). */
  readonly sharesPrefixBlocks: boolean;
  readonly vocabSize: number;
  readonly maxPositions: number;
  readonly #shards: readonly LogitsBackend[];
  readonly #owner = new Map<number, number>();
  readonly #live: number[];

  readonly #mainFirst: number;
  #rows = new Float32Array(0);

  /**
   * `mainFirst` (default 8): on the bundled model on a 2-core machine, 8 streams decode faster as one batch of 8 on
   * the main thread than as two parallel batches of 4 (2,457 vs 2,258 tokens/s), while 32 streams gain from two
   * (2,041 → 2,522).
   */
  constructor(shards: readonly LogitsBackend[], options: { readonly mainFirst?: number } = {}) {
    if (shards.length === 0) throw new RangeError("sharded backend needs at least one shard");
    this.#shards = shards;
    this.#mainFirst = options.mainFirst ?? 8;
    this.#live = shards.map(() => 0);
    this.vocabSize = shards[0]!.vocabSize;
    this.sharesPrefixBlocks = shards.every((s) => s.sharesPrefixBlocks);
    this.maxPositions = Math.min(...shards.map((s) => s.maxPositions));
    if (shards.some((s) => s.vocabSize !== this.vocabSize)) throw new Error("shards disagree on the vocabulary");
  }

  async forward(batch: StepBatch): Promise<Float32Array> {
    const parts: number[][] = this.#shards.map(() => []);
    for (let i = 0; i < batch.numSeqs; i++) {
      const seqId = batch.seqIds[i]!;
      let shard = this.#owner.get(seqId);
      if (shard === undefined) {
        shard = this.#live[0]! < this.#mainFirst ? 0 : this.#live.indexOf(Math.min(...this.#live));
        this.#owner.set(seqId, shard);
        this.#live[shard]!++;
      }
      parts[shard]!.push(i);
    }
    // Workers are posted to first, then the main-thread shard blocks in its own ORT run while they compute.
    const order = this.#shards.map((_, s) => s).reverse();
    const outs: (Float32Array | undefined)[] = new Array(this.#shards.length);
    await Promise.all(order.map(async (s) => {
      const idx = parts[s]!;
      if (idx.length > 0) outs[s] = await this.#shards[s]!.forward(subBatch(batch, idx, this.vocabSize));
    }));
    // Rows back in batch order: each sampled sequence's draftCounts + 1 rows, wherever they were computed.
    const V = this.vocabSize;
    const rowsOf = (i: number) => batch.sampleFlags[i] === 1 ? batch.draftCounts[i]! + 1 : 0;
    let total = 0;
    for (let i = 0; i < batch.numSeqs; i++) total += rowsOf(i);
    const out = this.#rows.length >= total * V ? this.#rows : (this.#rows = new Float32Array(total * V));
    const startOf = new Int32Array(batch.numSeqs);
    for (let i = 0, r = 0; i < batch.numSeqs; i++) {
      startOf[i] = r;
      r += rowsOf(i);
    }
    parts.forEach((idx, s) => {
      let src = 0;
      for (const i of idx) {
        const n = rowsOf(i) * V;
        out.set(outs[s]!.subarray(src, src + n), startOf[i]! * V);
        src += n;
      }
    });
    return out.subarray(0, total * V);
  }

  release(seqId: number): void {
    const shard = this.#owner.get(seqId);
    if (shard === undefined) return;
    this.#owner.delete(seqId);
    this.#live[shard]!--;
    this.#shards[shard]!.release(seqId);
  }

  async close(): Promise<void> {
    await Promise.all(this.#shards.map((s) => s.close()));
  }
}
