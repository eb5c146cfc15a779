/**
 * The per-sequence sampling fields of a step batch, described once. Everything that lists them is derived from this
 * table: the `SamplingArrays` of a StepBatch and its row type, the step-batch builder's buffers and packing, the
 * sub-batch splitter, the host sampler's reader, the batch validator's limits, the engine's defaults for a request
 * that leaves a field out, and the FFI layout of `rill_step_batch` (whose `c` names and element types
 * tests/native/layout_test.ts checks against ffi/include/rill.h).
 *
 * Adding a field: one entry here (in rill.h's struct order); in ffi/include/rill.h the struct field and its
 * RILL_SAMPLING_FIELDS entry (which the C validator, samplers, CUDA packing, C test fixtures and the layout signature
 * the binding checks at load iterate); its rule in ffi/src/sample_rules.h (both devices) and engine/sampler.ts (the
 * host sampler). An optional field becomes a Chat Completions / Completions request field under its snake_case name
 * (api/sampling_fields.ts derives it), bounded by `invalid`.
 *
 * Invariants:
 * - Entries are in the order of their pointers in `rill_step_batch`; the binding lays the struct out in this order.
 * - `neutral` is the value meaning "off" (for a request that leaves the field out, and for hand-built test batches).
 * - `penalty` fields need the sequence's token history in the batch whenever they differ from `neutral`.
 */

/** The backend limits a field's bounds depend on (a BackendInfo satisfies it). */
export interface SamplingLimits {
  readonly maxTopLogprobs: number;
}

/** The element type of a field's array: its typed array here and its pointee in rill.h. */
export type ElementType = "f32" | "i32" | "u64";

interface FieldSpec {
  readonly type: ElementType;
  /** The field's name in `rill_step_batch`. */
  readonly c: string;
  /** A bigint exactly for "u64" fields. */
  readonly neutral: number | bigint;
  /** Whether a non-neutral value makes the sampler read the sequence's history. */
  readonly penalty?: true;
  /** What the validator rejects (number fields only): a reason, or undefined for a valid value. */
  readonly invalid?: (v: number, info: SamplingLimits) => string | undefined;
  /** The value stored for a request's value (float32 rounding, caps from the backend's limits); identity if absent. */
  readonly pack?: (v: number, info: SamplingLimits) => number;
}

const MIN_POSITIVE_F32 = 1.401298464324817e-45;

const inUnit = (v: number) => v >= 0 && v <= 1 ? undefined : `${v} is outside 0..1`;
const finite = (v: number) => Number.isFinite(v) ? undefined : `${v} is not finite`;

export const SAMPLING_FIELDS = {
  /** 0 = greedy. */
  temperature: {
    type: "f32",
    c: "temperature",
    neutral: 0,
    invalid: (v: number) => v >= 0 && Number.isFinite(v) ? undefined : `${v}`,
  },
  /** 1 = off. */
  topP: {
    type: "f32",
    c: "top_p",
    neutral: 1,
    invalid: inUnit,
    // A positive top-p below float32's range (the API's "top_p 0" is the smallest positive double) must stay a cut,
    // not become 0, which means off.
    pack: (v: number) => v > 0 && Math.fround(v) === 0 ? MIN_POSITIVE_F32 : v,
  },
  /** 0 = off. */
  topK: { type: "i32", c: "top_k", neutral: 0, invalid: (v: number) => v >= 0 ? undefined : `${v} is negative` },
  /** Drops tokens below minP × the most likely one's probability; 0 = off. */
  minP: { type: "f32", c: "min_p", neutral: 0, invalid: inUnit },
  /** Subtracted once from the logit of every token already generated; 0 = off. */
  presencePenalty: { type: "f32", c: "presence_penalty", neutral: 0, penalty: true, invalid: finite },
  /** Subtracted from a generated token's logit per occurrence; 0 = off. */
  frequencyPenalty: { type: "f32", c: "frequency_penalty", neutral: 0, penalty: true, invalid: finite },
  /** Divides positive / multiplies negative logits of every token in the history (prompt included); 1 = off. */
  repetitionPenalty: {
    type: "f32",
    c: "repetition_penalty",
    neutral: 1,
    penalty: true,
    invalid: (v: number) => v > 0 && Number.isFinite(v) ? undefined : `${v} must be positive`,
  },
  /** Philox key of each sequence (docs/random.md); always set, random when the request gave no seed. */
  seeds: { type: "u64", c: "seeds", neutral: 7n },
  /** -1 none, 0 the sampled token's only, n alternatives (n ≤ maxTopLogprobs). */
  logprobs: {
    type: "i32",
    c: "logprobs",
    neutral: -1,
    invalid: (v: number, info: SamplingLimits) =>
      v >= -1 && v <= info.maxTopLogprobs ? undefined : `${v} is outside -1..${info.maxTopLogprobs}`,
    pack: (v: number, info: SamplingLimits) => Math.min(v, info.maxTopLogprobs),
  },
} as const satisfies Record<string, FieldSpec>;

export type SamplingField = keyof typeof SAMPLING_FIELDS;

type ArrayOf<E extends ElementType> = E extends "f32" ? Float32Array
  : E extends "i32" ? Int32Array
  : BigUint64Array;
type ValueOf<E extends ElementType> = E extends "u64" ? bigint : number;

/** Per-sequence sampling parameters, one entry per sequence of the batch. */
export type SamplingArrays = {
  readonly [K in SamplingField]: ArrayOf<(typeof SAMPLING_FIELDS)[K]["type"]>;
};

/** One sequence's entries of the SamplingArrays. */
export type SamplingRow = { readonly [K in SamplingField]: ValueOf<(typeof SAMPLING_FIELDS)[K]["type"]> };

/** Field names in rill.h's order. */
export const SAMPLING_KEYS = Object.keys(SAMPLING_FIELDS) as readonly SamplingField[];

const CONSTRUCTORS = { f32: Float32Array, i32: Int32Array, u64: BigUint64Array } as const;

/** Typed arrays of each field's type: the bytes per element the C side reads through the field's pointer. */
export function elementBytes(type: ElementType): number {
  return CONSTRUCTORS[type].BYTES_PER_ELEMENT;
}

/** Arrays for `n` sequences, filled with each field's neutral value. */
export function allocSampling(n: number): SamplingArrays {
  const out: Record<string, Float32Array | Int32Array | BigUint64Array> = {};
  for (const key of SAMPLING_KEYS) {
    const f: FieldSpec = SAMPLING_FIELDS[key];
    if (f.type === "u64") out[key] = new BigUint64Array(n).fill(f.neutral as bigint);
    else out[key] = new CONSTRUCTORS[f.type](n).fill(f.neutral as number);
  }
  return out as SamplingArrays;
}

/** Row `i` of the arrays. */
export function readRow(s: SamplingArrays, i: number): SamplingRow {
  const out: Record<string, number | bigint> = {};
  for (const key of SAMPLING_KEYS) out[key] = s[key][i]!;
  return out as SamplingRow;
}

/** Writes `row` (packed for the backend's limits) as row `i`. */
export function writeRow(s: SamplingArrays, i: number, row: SamplingRow, info: SamplingLimits): void {
  for (const key of SAMPLING_KEYS) {
    const f: FieldSpec = SAMPLING_FIELDS[key];
    const v = row[key];
    (s[key] as { [j: number]: number | bigint })[i] = typeof v === "number" && f.pack !== undefined
      ? f.pack(v, info)
      : v;
  }
}

/** Copies row `from` of `src` to row `to` of `dst`, unchanged. */
export function copyRow(dst: SamplingArrays, to: number, src: SamplingArrays, from: number): void {
  for (const key of SAMPLING_KEYS) (dst[key] as { [j: number]: number | bigint })[to] = src[key][from]!;
}

/** Whether the row's sampler reads the sequence's history (some penalty is on). */
export function penalised(row: SamplingRow): boolean {
  return SAMPLING_KEYS.some((key) => {
    const f: FieldSpec = SAMPLING_FIELDS[key];
    return f.penalty === true && row[key] !== f.neutral;
  });
}

/** The first field of row `i` outside its limits, as [field, reason]; undefined when every field is valid. */
export function invalidField(s: SamplingArrays, i: number, info: SamplingLimits): [SamplingField, string] | undefined {
  for (const key of SAMPLING_KEYS) {
    const f: FieldSpec = SAMPLING_FIELDS[key];
    const v = s[key][i]!;
    const reason = typeof v === "number" ? f.invalid?.(v, info) : undefined;
    if (reason !== undefined) return [key, reason];
  }
  return undefined;
}

/**
 * The request-facing optional fields (`SamplingParams`): those a request may leave out, taking the neutral value.
 * Temperature, top-p, top-k, the seed and logprobs are always given.
 */
const ALWAYS_GIVEN = ["temperature", "topP", "topK", "seeds", "logprobs"] as const satisfies readonly SamplingField[];

export type OptionalSamplingField = Exclude<SamplingField, (typeof ALWAYS_GIVEN)[number]>;

/** The optional fields at run time, in rill.h's order. */
export const OPTIONAL_SAMPLING_KEYS: readonly OptionalSamplingField[] = SAMPLING_KEYS.filter(
  (key): key is OptionalSamplingField => !(ALWAYS_GIVEN as readonly SamplingField[]).includes(key),
);

/** The reason an optional field's request value is outside the engine's limits; undefined when it is within. */
export function invalidRequestValue(key: OptionalSamplingField, value: number): string | undefined {
  const f: FieldSpec = SAMPLING_FIELDS[key];
  return f.invalid?.(value, { maxTopLogprobs: 0 });
}

/** The optional fields as a request carries them (engine.ts's SamplingParams extends it). */
export type OptionalSamplingParams = { readonly [K in OptionalSamplingField]?: number };

/** A request's sampling parameters as a row: the fields it left out take their neutral values. */
export function rowFromRequest(
  params: Pick<SamplingRow, "temperature" | "topP" | "topK" | "logprobs"> & OptionalSamplingParams,
  seed: bigint,
): SamplingRow {
  const out: Record<string, number | bigint> = { seeds: seed };
  for (const key of SAMPLING_KEYS) {
    if (key === "seeds") continue;
    out[key] = params[key] ?? SAMPLING_FIELDS[key].neutral;
  }
  return out as SamplingRow;
}

/** Every field at its neutral value (greedy, no filter, no penalty, seed 7, no logprobs). */
export function neutralRow(): SamplingRow {
  return readRow(allocSampling(1), 0);
}
