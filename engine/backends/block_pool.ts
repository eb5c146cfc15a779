/**
 * Where ONNX sessions keep the KV of full prefix blocks, by the engine's block id: for each block, per cache tensor
 * (2 × layers, in past_key_values order) [kvHeads, blockSize, headDim] floats. The memory is shared
 * (SharedArrayBuffer), so every session given the same pool — the main thread's and its workers' — reads the blocks
 * any of them wrote: a sequence that starts from cached blocks may run on any shard, whoever computed them.
 *
 * The data buffer is growable, reserved for `numBlocks` blocks and committed as block ids are first written, so an
 * idle pool costs address space, not memory.
 *
 * Ordering: a session writes a block while it runs a step (the block was just filled by one of its sequences), and
 * the engine lists that block in another sequence's table only once it is computed, that is from a later step on;
 * steps are separated by the messages that start and answer each shard's run, which order the writes before the
 * reads. A block that is being written is never one a sequence reads in the same step (a block is written only by
 * the sequence that owns it while filling it, and one that is read is full, computed and shared).
 */
/** What crosses to a worker: the pool's shape and its shared memory (posting shares it, it is not copied). */
export interface BlockPoolBuffers {
  readonly blockSize: number;
  readonly numBlocks: number;
  /** Cache tensors per block (2 × layers). */
  readonly tensors: number;
  /** Floats per block per tensor (kvHeads × blockSize × headDim). */
  readonly blockFloats: number;
  /** Growable: `numBlocks × tensors × blockFloats` floats at most. */
  readonly data: SharedArrayBuffer;
  /** One byte per block: 1 once some session wrote it. */
  readonly written: SharedArrayBuffer;
}

/** Shared memory for a pool of `numBlocks` blocks of `blockSize` tokens of a model of these dimensions. */
export function createBlockPool(
  options: {
    readonly blockSize: number;
    readonly numBlocks: number;
    readonly numLayers: number;
    readonly kvHeads: number;
    readonly headDim: number;
  },
): BlockPoolBuffers {
  const { blockSize, numBlocks } = options;
  if (!(Number.isInteger(blockSize) && blockSize >= 1)) throw new RangeError("blockSize must be a positive integer");
  if (!(Number.isInteger(numBlocks) && numBlocks >= 1)) throw new RangeError("numBlocks must be a positive integer");
  const tensors = 2 * options.numLayers;
  const blockFloats = options.kvHeads * blockSize * options.headDim;
  const maxByteLength = numBlocks * tensors * blockFloats * Float32Array.BYTES_PER_ELEMENT;
  return {
    blockSize,
    numBlocks,
    tensors,
    blockFloats,
    data: new SharedArrayBuffer(0, { maxByteLength }),
    written: new SharedArrayBuffer(numBlocks),
  };
}

/** Blocks committed at a time as the pool grows. */
const GROW_BLOCKS = 16;

/** One session's handle on a pool's shared memory. */
export class BlockPool {
  readonly blockSize: number;
  readonly #b: BlockPoolBuffers;
  /** Tracks the buffer's length as any session grows it. */
  readonly #floats: Float32Array;
  readonly #written: Uint8Array;

  constructor(buffers: BlockPoolBuffers) {
    this.#b = buffers;
    this.blockSize = buffers.blockSize;
    this.#floats = new Float32Array(buffers.data);
    this.#written = new Uint8Array(buffers.written);
  }

  /** Whether some session has written block `id`. */
  has(id: number): boolean {
    return id >= 0 && id < this.#b.numBlocks && Atomics.load(this.#written, id) === 1;
  }

  /** Block `id`'s tensors, to read; it must have been written. */
  read(id: number): Float32Array[] {
    if (!this.has(id)) throw new Error(`block pool: block ${id} holds no KV`);
    return this.#views(id);
  }

  /** Block `id`'s tensors, to overwrite with its new content; the block counts as written from now on. */
  write(id: number): Float32Array[] {
    if (!(Number.isInteger(id) && id >= 0 && id < this.#b.numBlocks)) {
      throw new RangeError(`block pool: block ${id} is outside the pool of ${this.#b.numBlocks}`);
    }
    const perBlock = this.#b.tensors * this.#b.blockFloats * Float32Array.BYTES_PER_ELEMENT;
    const need = Math.min(this.#b.numBlocks, Math.ceil((id + 1) / GROW_BLOCKS) * GROW_BLOCKS) * perBlock;
    const data = this.#b.data;
    while (data.byteLength < need) {
      try {
        data.grow(need);
      } catch (e) {
        // Another session grew it past `need` meanwhile (growing never shrinks).
        if (data.byteLength < need) throw e;
      }
    }
    Atomics.store(this.#written, id, 1);
    return this.#views(id);
  }

  #views(id: number): Float32Array[] {
    const n = this.#b.blockFloats;
    const base = id * this.#b.tensors * n;
    return Array.from({ length: this.#b.tensors }, (_, k) => this.#floats.subarray(base + k * n, base + (k + 1) * n));
  }
}
