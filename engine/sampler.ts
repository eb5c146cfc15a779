/**
 * The host sampling rule (docs/backend-step.md, "Sampling, specified once"): penalties, logit bias, allowed-token mask, greedy
 * with ties to the lowest id, temperature, top-k, top-p, min-p, and an inverse-CDF draw in ascending id order from
 * Philox (docs/random.md). This is the CPU reference every other backend's sampler is compared with.
 *
 * Invariants:
 * - A token depends only on the row's logits, the sequence's parameters, its history and the position the token
 *   will occupy: never on the batch, the step or earlier draws, so a seed reproduces alone, batched and with drafts.
 * - Greedy (temperature 0) never draws and breaks ties towards the lowest id.
 * - Logprobs are the log-softmax of the raw logits at temperature 1 over the full vocabulary (what OpenAI reports),
 *   independent of penalties, masks and the sampling transform.
 */
import type { TokenLogprob } from "./engine.ts";
import { philoxUniform } from "./philox.ts";
import type { SamplingRow } from "./sampling_fields.ts";

/** One sequence's sampling parameters as the step batch carries them (engine/sampling_fields.ts), keyed by `seed`. */
export type RowSampling = Omit<SamplingRow, "seeds" | "logprobs"> & { readonly seed: bigint };

/** What the penalties see of a sequence's history: counts of generated tokens, and every token seen at all. */
export interface PenaltyHistory {
  /** Generated (non-prompt) token → occurrences. */
  readonly generated: ReadonlyMap<number, number>;
  /** Every distinct token of prompt and generated text. */
  readonly seen: ReadonlySet<number>;
}

/** A sequence's logit bias: `values[j]` is added to the logit of token `ids[j]`. */
export interface LogitBiasRow {
  readonly ids: Int32Array;
  readonly values: Float32Array;
}

/** Index of the largest value; ties go to the lowest index. */
export function argmax(row: Float32Array | Float64Array): number {
  let best = 0;
  let bestValue = -Infinity;
  for (let i = 0; i < row.length; i++) {
    const v = row[i]!;
    if (v > bestValue) {
      bestValue = v;
      best = i;
    }
  }
  return best;
}

/** Ids of the `k` largest values, sorted descending (ties: lower id first). O(n·k) worst case, O(n) typical. */
export function topIds(values: Float32Array | Float64Array, k: number): number[] {
  const ids: number[] = [];
  if (k <= 0) return ids;
  for (let i = 0; i < values.length; i++) {
    const v = values[i]!;
    if (ids.length === k && v <= values[ids[k - 1]!]!) continue;
    let j = ids.length < k ? ids.length : k - 1;
    if (ids.length < k) ids.push(i);
    while (j > 0 && values[ids[j - 1]!]! < v) {
      ids[j] = ids[j - 1]!;
      j--;
    }
    ids[j] = i;
  }
  return ids;
}

/** log Σ exp(row): the normaliser of the temperature-1 log-softmax. */
export function logSumExp(row: Float32Array): number {
  let max = -Infinity;
  for (let i = 0; i < row.length; i++) if (row[i]! > max) max = row[i]!;
  let sum = 0;
  for (let i = 0; i < row.length; i++) sum += Math.exp(row[i]! - max);
  return max + Math.log(sum);
}

/** Log-softmax at temperature 1 of the raw logits: the sampled token's logprob plus the `top` best alternatives. */
export function tokenLogprob(row: Float32Array, token: number, top: number): TokenLogprob {
  const logZ = logSumExp(row);
  const alternatives: { id: number; logprob: number }[] = [];
  if (top > 0) {
    for (const id of topIds(row, top)) alternatives.push({ id, logprob: row[id]! - logZ });
  }
  return { logprob: row[token]! - logZ, top: alternatives };
}

/** Whether token t is allowed by a mask row (bit t % 32 of word t / 32). */
function allowed(mask: Uint32Array, t: number): boolean {
  return ((mask[t >>> 5]! >>> (t & 31)) & 1) === 1;
}

/**
 * Applies the sampling rule to logits rows. Holds scratch vectors sized to the vocabulary, reused across calls, so
 * the hot path allocates nothing; one instance serves every sequence of a backend.
 */
export class Sampler {
  #work = new Float64Array(0);
  #probs = new Float64Array(0);
  #candidates = new Int32Array(0);

  #scratch(n: number): void {
    if (this.#work.length !== n) {
      this.#work = new Float64Array(n);
      this.#probs = new Float64Array(n);
      this.#candidates = new Int32Array(n);
    }
  }

  /** Raw logits with penalties, logit bias and the mask applied (steps 1–3 of the rule), in the scratch vector. */
  adjusted(
    row: Float32Array,
    params: RowSampling,
    history?: PenaltyHistory,
    mask?: Uint32Array,
    bias?: LogitBiasRow,
  ): Float64Array {
    this.#scratch(row.length);
    const work = this.#work;
    work.set(row);
    if (history !== undefined) {
      const { presencePenalty, frequencyPenalty, repetitionPenalty } = params;
      if (presencePenalty !== 0 || frequencyPenalty !== 0) {
        for (const [t, c] of history.generated) work[t] = work[t]! - (frequencyPenalty * c + presencePenalty);
      }
      if (repetitionPenalty !== 1) {
        for (const t of history.seen) {
          const v = work[t]!;
          work[t] = v > 0 ? v / repetitionPenalty : v * repetitionPenalty;
        }
      }
    }
    if (bias !== undefined) {
      for (let j = 0; j < bias.ids.length; j++) work[bias.ids[j]!] = work[bias.ids[j]!]! + bias.values[j]!;
    }
    if (mask !== undefined) {
      let any = false;
      for (let t = 0; t < work.length; t++) {
        if (allowed(mask, t)) any = true;
        else work[t] = -Infinity;
      }
      if (!any) throw new Error("allowedMask: a sampled row allows no token");
    }
    return work;
  }

  /**
   * The kept, renormalised distribution of step 5 (temperature, top-k, top-p, min-p) for already adjusted logits;
   * a one-hot vector when greedy. Valid until the next call.
   */
  distribution(adjusted: Float64Array, params: RowSampling): Float64Array {
    this.#scratch(adjusted.length);
    const probs = this.#probs;
    const n = adjusted.length;
    if (params.temperature <= 0) {
      probs.fill(0);
      probs[argmax(adjusted)] = 1;
      return probs;
    }
    let max = -Infinity;
    for (let i = 0; i < n; i++) if (adjusted[i]! > max) max = adjusted[i]!;
    let sum = 0;
    for (let i = 0; i < n; i++) {
      const e = Math.exp((adjusted[i]! - max) / params.temperature);
      probs[i] = e;
      sum += e;
    }
    for (let i = 0; i < n; i++) probs[i] = probs[i]! / sum;
    if (params.topK > 0 && params.topK < n) this.#keepTopK(probs, params.topK);
    if (params.topP > 0 && params.topP < 1) this.#keepTopP(probs, params.topP);
    if (params.minP > 0) this.#keepMinP(probs, params.minP);
    return probs;
  }

  /**
   * Samples the token that will sit at `position` (the row follows fed position `position - 1`). Greedy takes the
   * largest adjusted logit; otherwise draws u = uniform(seed, position, 0) and walks the kept distribution in
   * ascending id order.
   */
  sample(
    row: Float32Array,
    params: RowSampling,
    position: number,
    history?: PenaltyHistory,
    mask?: Uint32Array,
    bias?: LogitBiasRow,
  ): number {
    const plain = history === undefined && mask === undefined && bias === undefined;
    if (params.temperature <= 0 && plain) return argmax(row);
    const adjusted = this.adjusted(row, params, history, mask, bias);
    if (params.temperature <= 0) return argmax(adjusted);
    const p = this.distribution(adjusted, params);
    return inverseCdf(p, philoxUniform(params.seed, position, 0));
  }

  /** Keeps the k most likely tokens (ties at the threshold keep the lowest ids) and renormalises. */
  #keepTopK(probs: Float64Array, k: number): void {
    const keep = topIds(probs, k);
    let kept = 0;
    for (const id of keep) kept += probs[id]!;
    const values = keep.map((id) => probs[id]! / kept);
    probs.fill(0);
    keep.forEach((id, r) => probs[id] = values[r]!);
  }

  /**
   * Nucleus: keeps the shortest most-likely-first set whose mass reaches `topP` (ties to the lower id). Only tokens
   * with p >= (1 - topP) / V can belong to it (all smaller ones together weigh less than 1 - topP), so only those
   * are sorted: cheap on big vocabularies.
   */
  #keepTopP(probs: Float64Array, topP: number): void {
    const n = probs.length;
    const threshold = (1 - topP) / n;
    const idx = this.#candidates;
    let m = 0;
    for (let i = 0; i < n; i++) if (probs[i]! > 0 && probs[i]! >= threshold) idx[m++] = i;
    const order = Array.from(idx.subarray(0, m)).sort((a, b) => probs[b]! - probs[a]! || a - b);
    let cum = 0;
    let cut = order.length;
    for (let r = 0; r < order.length; r++) {
      cum += probs[order[r]!]!;
      if (cum >= topP) {
        cut = r + 1;
        break;
      }
    }
    const keep = new Set(order.slice(0, cut));
    let kept = 0;
    for (let i = 0; i < n; i++) {
      if (keep.has(i)) kept += probs[i]!;
      else probs[i] = 0;
    }
    for (let i = 0; i < n; i++) probs[i] = probs[i]! / kept;
  }

  /** Drops tokens below minP × the largest kept probability and renormalises. */
  #keepMinP(probs: Float64Array, minP: number): void {
    let max = 0;
    for (let i = 0; i < probs.length; i++) if (probs[i]! > max) max = probs[i]!;
    const floor = minP * max;
    let kept = 0;
    for (let i = 0; i < probs.length; i++) {
      if (probs[i]! < floor) probs[i] = 0;
      else kept += probs[i]!;
    }
    for (let i = 0; i < probs.length; i++) probs[i] = probs[i]! / kept;
  }
}

/** The first id, in ascending order, at which the running sum of `p` exceeds u · total. */
export function inverseCdf(p: Float64Array, u: number): number {
  let total = 0;
  let last = -1;
  for (let i = 0; i < p.length; i++) {
    if (p[i]! > 0) {
      total += p[i]!;
      last = i;
    }
  }
  if (last < 0) throw new Error("sampler: empty distribution");
  const target = u * total;
  let cum = 0;
  for (let i = 0; i < p.length; i++) {
    const v = p[i]!;
    if (v <= 0) continue;
    cum += v;
    if (cum > target) return i;
  }
  return last; // float rounding left the running sum just below u · total
}

/** Builds what the penalties see from `history` (prompt tokens first) plus tokens accepted since. */
export function penaltyHistory(
  history: Int32Array,
  promptLen: number,
  extra: readonly number[] = [],
): PenaltyHistory {
  const generated = new Map<number, number>();
  const seen = new Set<number>();
  for (let i = 0; i < history.length; i++) {
    const t = history[i]!;
    seen.add(t);
    if (i >= promptLen) generated.set(t, (generated.get(t) ?? 0) + 1);
  }
  for (const t of extra) {
    seen.add(t);
    generated.set(t, (generated.get(t) ?? 0) + 1);
  }
  return { generated, seen };
}
