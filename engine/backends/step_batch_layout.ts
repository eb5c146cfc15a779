/**
 * The arrays of a StepBatch as `rill_step_batch` (ffi/include/rill.h) holds them: their C names, element types and
 * the entries a batch of B sequences and T tokens needs in each. The FFI layout (offsets), the binding's pointer
 * list and the buffer-length checks of both batch validators are derived from this one list; the per-sequence
 * sampling arrays come from engine/sampling_fields.ts. tests/native/layout_test.ts compiles rill.h and checks the
 * names, order, offsets and element types.
 *
 * Invariants:
 * - The struct is the six int32 counts, then one pointer per entry of STEP_BATCH_ARRAYS in this order (LP64: 8 bytes
 *   each, no padding after the counts' 24 bytes).
 * - An optional array (`optional`) that is absent is passed as NULL.
 */
import { type ElementType, SAMPLING_FIELDS, SAMPLING_KEYS } from "../sampling_fields.ts";
import type { StepBatch } from "../step_batch.ts";

/** The int32 counts at the head of `rill_step_batch`, in order. */
export const STEP_BATCH_COUNTS = [
  "num_seqs",
  "num_tokens",
  "block_table_stride",
  "num_mask_rows",
  "history_len",
  "bias_len",
] as const;

/** Element types of the batch arrays: the sampling fields' and the byte and mask words. */
export type ArrayElement = ElementType | "u8" | "u32";

export interface BatchArray {
  /** The pointer's name in `rill_step_batch`. */
  readonly c: string;
  /** The array's name in errors: StepBatch's field (`sampling.topP` for a sampling field). */
  readonly name: string;
  readonly type: ArrayElement;
  readonly get: (b: StepBatch) => ArrayBufferView & { readonly length: number } | undefined;
  /**
   * Entries the batch needs (B sequences, T tokens, block-table stride S); undefined for arrays sized by a count of
   * their own (the mask rows, history and bias lists, checked against their ranges instead).
   */
  readonly need?: (B: number, T: number, S: number) => number;
  /** May be absent from the batch (NULL in C). */
  readonly optional?: true;
}

const perSeq = (B: number) => B;
const perSeqPlusOne = (B: number) => B + 1;
const perToken = (_B: number, T: number) => T;
const perBlockRow = (B: number, _T: number, S: number) => B * S;

/** The pointer fields of `rill_step_batch`, in the struct's order. */
export const STEP_BATCH_ARRAYS: readonly BatchArray[] = [
  { c: "seq_ids", name: "seqIds", type: "i32", get: (b) => b.seqIds, need: perSeq },
  { c: "tokens", name: "tokens", type: "i32", get: (b) => b.tokens, need: perToken },
  { c: "positions", name: "positions", type: "i32", get: (b) => b.positions, need: perToken },
  { c: "query_start", name: "queryStart", type: "i32", get: (b) => b.queryStart, need: perSeqPlusOne },
  { c: "context_lens", name: "contextLens", type: "i32", get: (b) => b.contextLens, need: perSeq },
  { c: "draft_counts", name: "draftCounts", type: "i32", get: (b) => b.draftCounts, need: perSeq },
  { c: "sample_flags", name: "sampleFlags", type: "u8", get: (b) => b.sampleFlags, need: perSeq },
  { c: "block_tables", name: "blockTables", type: "i32", get: (b) => b.blockTables, need: perBlockRow },
  ...SAMPLING_KEYS.map((key): BatchArray => ({
    c: SAMPLING_FIELDS[key].c,
    name: `sampling.${key}`,
    type: SAMPLING_FIELDS[key].type,
    get: (b) => b.sampling[key],
    need: perSeq,
  })),
  { c: "mask_row_start", name: "maskRowStart", type: "i32", get: (b) => b.maskRowStart, need: perSeq },
  { c: "allowed_mask", name: "allowedMask", type: "u32", get: (b) => b.allowedMask },
  { c: "history_start", name: "historyStart", type: "i32", get: (b) => b.historyStart, need: perSeqPlusOne },
  { c: "history", name: "history", type: "i32", get: (b) => b.history },
  { c: "history_prompt_lens", name: "historyPromptLens", type: "i32", get: (b) => b.historyPromptLens, need: perSeq },
  { c: "bias_start", name: "biasStart", type: "i32", get: (b) => b.biasStart, need: perSeqPlusOne },
  { c: "bias_ids", name: "biasIds", type: "i32", get: (b) => b.biasIds },
  { c: "bias_values", name: "biasValues", type: "f32", get: (b) => b.biasValues },
  {
    c: "propose_counts",
    name: "proposeCounts",
    type: "i32",
    get: (b) => b.proposeCounts,
    need: perSeq,
    optional: true,
  },
  {
    c: "sliding_block_tables",
    name: "slidingBlockTables",
    type: "i32",
    get: (b) => b.slidingBlockTables,
    need: perBlockRow,
    optional: true,
  },
];

const POINTERS_AT = 4 * STEP_BATCH_COUNTS.length;

/** Byte offsets of `rill_step_batch`'s fields, and its size (LP64). */
export const STEP_BATCH_LAYOUT: Readonly<Record<"size" | (typeof STEP_BATCH_COUNTS)[number], number>> & {
  readonly [field: string]: number;
} = {
  size: POINTERS_AT + 8 * STEP_BATCH_ARRAYS.length,
  num_seqs: 0,
  num_tokens: 4,
  block_table_stride: 8,
  num_mask_rows: 12,
  history_len: 16,
  bias_len: 20,
  ...Object.fromEntries(STEP_BATCH_ARRAYS.map((a, k) => [a.c, POINTERS_AT + 8 * k])),
};

const C_TYPES: Readonly<Record<ArrayElement, string>> = {
  i32: "int32_t",
  u8: "uint8_t",
  u32: "uint32_t",
  u64: "uint64_t",
  f32: "float",
};

/**
 * The layout as `rill_step_batch_signature()` (rill.h) writes it: the counts, ';', then "name:pointee type" per
 * pointer, every entry followed by a comma. The binding refuses a library whose text differs.
 */
export function stepBatchSignature(): string {
  const counts = STEP_BATCH_COUNTS.map((c) => `${c},`).join("");
  const arrays = STEP_BATCH_ARRAYS.map((a) => `${a.c}:${C_TYPES[a.type]},`).join("");
  return `${counts};${arrays}`;
}

/** Byte offset of the first pointer field; pointer k lies 8·k bytes after it. */
export const STEP_BATCH_POINTERS_AT = POINTERS_AT;

/**
 * Each present array with the entries the batch's counts need of it: [name, array, entries]. An optional array that
 * is absent is left out; a required one that is absent is listed with length 0 wanted > 0, so it fails the check.
 */
export function batchLengths(
  batch: StepBatch,
): [string, { readonly length: number }, number][] {
  const B = batch.numSeqs;
  const T = batch.numTokens;
  const S = batch.blockTableStride;
  const out: [string, { readonly length: number }, number][] = [];
  for (const a of STEP_BATCH_ARRAYS) {
    if (a.need === undefined) continue;
    const array = a.get(batch);
    if (array === undefined && a.optional) continue;
    out.push([a.name, array ?? { length: 0 }, a.need(B, T, S)]);
  }
  return out;
}
