/**
 * Per-request token sampling: greedy, temperature, top-k, top-p, a seeded PRNG, OpenAI-style logprobs, and the
 * rejection-sampling rule that verifies speculative drafts.
 *
 * Invariants:
 * - Each request owns its PRNG, seeded from `SamplingParams.seed` (or from the OS when absent), and draws from it
 *   only for its own tokens, so the same seed gives the same output whether the request runs alone or in a batch.
 * - Greedy (temperature 0) never touches the PRNG and breaks argmax ties towards the lowest id, so it is
 *   deterministic by construction.
 * - Logprobs are always the log-softmax of the raw logits at temperature 1 over the full vocabulary (what OpenAI
 *   reports), independent of the sampling transform.
 */
import type { SamplingParams, TokenLogprob } from "./engine.ts";

/** sfc32 seeded through splitmix32: tiny, fast, and good enough for sampling. Yields floats in [0, 1). */
export class Prng {
  #a: number;
  #b: number;
  #c: number;
  #d: number;

  constructor(seed: number) {
    let s = (Math.floor(seed) ^ Math.floor(seed / 0x100000000)) >>> 0;
    const next = (): number => {
      s = (s + 0x9e3779b9) >>> 0;
      let z = s;
      z = Math.imul(z ^ (z >>> 16), 0x85ebca6b) >>> 0;
      z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35) >>> 0;
      return (z ^ (z >>> 16)) >>> 0;
    };
    this.#a = next();
    this.#b = next();
    this.#c = next();
    this.#d = next();
    for (let i = 0; i < 12; i++) this.nextUint32();
  }

  nextUint32(): number {
    const t = (((this.#a + this.#b) >>> 0) + this.#d) >>> 0;
    this.#d = (this.#d + 1) >>> 0;
    this.#a = this.#b ^ (this.#b >>> 9);
    this.#b = (this.#c + (this.#c << 3)) >>> 0;
    this.#c = ((this.#c << 21) | (this.#c >>> 11)) >>> 0;
    this.#c = (this.#c + t) >>> 0;
    return t;
  }

  /** Uniform in [0, 1) with 53 random bits. */
  next(): number {
    const hi = this.nextUint32() >>> 5;
    const lo = this.nextUint32() >>> 6;
    return (hi * 67108864 + lo) / 9007199254740992;
  }
}

function randomSeed(): number {
  const buf = new Uint32Array(2);
  crypto.getRandomValues(buf);
  return (buf[0] ?? 0) * 0x100000000 + (buf[1] ?? 0);
}

/** Index of the largest value; ties go to the lowest index. */
export function argmax(row: Float32Array): number {
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

/** Log-softmax at temperature 1 of the raw logits: the sampled token's logprob plus the `top` best alternatives. */
export function tokenLogprob(row: Float32Array, token: number, top: number): TokenLogprob {
  let max = -Infinity;
  for (let i = 0; i < row.length; i++) if (row[i]! > max) max = row[i]!;
  let sum = 0;
  for (let i = 0; i < row.length; i++) sum += Math.exp(row[i]! - max);
  const logZ = max + Math.log(sum);
  const alternatives: { id: number; logprob: number }[] = [];
  if (top > 0) {
    for (const id of topIds(row, top)) alternatives.push({ id, logprob: row[id]! - logZ });
  }
  return { logprob: row[token]! - logZ, top: alternatives };
}

/** The outcome of verifying drafts against target logits: the tokens to emit and how many drafts were accepted. */
export interface VerifyResult {
  /** Accepted drafts followed by one token sampled by the target (correction or bonus): 1..drafts+1 tokens. */
  readonly tokens: number[];
  readonly acceptedDrafts: number;
}

export class Sampler {
  readonly params: SamplingParams;
  readonly #rng: Prng | undefined;
  /**
   * Scratch vectors, reused across calls (allocation-free hot path). Sized by the first `distribution` call, so a
   * greedy request, which never needs them, allocates nothing.
   */
  #probs = new Float64Array(0);
  #candidates = new Int32Array(0);

  constructor(params: SamplingParams) {
    this.params = params;
    this.#rng = params.temperature > 0 ? new Prng(params.seed ?? randomSeed()) : undefined;
  }

  get greedy(): boolean {
    return this.#rng === undefined;
  }

  /**
   * Fills the scratch vector with the target distribution p after temperature, top-k and top-p (zeros outside the
   * kept set, normalized to sum 1) and returns it. Valid until the next call.
   */
  distribution(row: Float32Array): Float64Array {
    const probs = this.#probs.length === row.length ? this.#probs : (this.#probs = new Float64Array(row.length));
    if (this.#candidates.length !== row.length) this.#candidates = new Int32Array(row.length);
    const { temperature, topK, topP } = this.params;
    if (temperature <= 0) {
      probs.fill(0);
      probs[argmax(row)] = 1;
      return probs;
    }
    let max = -Infinity;
    for (let i = 0; i < row.length; i++) if (row[i]! > max) max = row[i]!;
    let sum = 0;
    for (let i = 0; i < row.length; i++) {
      const e = Math.exp((row[i]! - max) / temperature);
      probs[i] = e;
      sum += e;
    }
    for (let i = 0; i < row.length; i++) probs[i] = probs[i]! / sum;
    if (topK > 0 && topK < row.length) this.#keepTopK(probs, topK);
    if (topP > 0 && topP < 1) this.#keepTopP(probs, topP);
    return probs;
  }

  /** Samples one token from the processed distribution (argmax when greedy). */
  sample(row: Float32Array): number {
    if (this.#rng === undefined) return argmax(row);
    return this.#draw(this.distribution(row));
  }

  /**
   * Verifies `drafts` against `rows` (rows[i] = target logits for the position after drafts[i-1]; rows.length ==
   * drafts.length + 1). Standard speculative rejection sampling with a deterministic draft (q = one-hot at the
   * draft): accept draft d with probability p(d); on rejection sample from normalize(max(p - q, 0)), which is p with
   * d removed. If every draft is accepted, a bonus token is sampled from the last row. The emitted tokens are then
   * distributed exactly as sampling the target token by token. Greedy reduces to "accept iff d is the argmax".
   */
  verify(rows: readonly Float32Array[], drafts: readonly number[]): VerifyResult {
    const tokens: number[] = [];
    for (let i = 0; i < drafts.length; i++) {
      const row = rows[i]!;
      const draft = drafts[i]!;
      if (this.#rng === undefined) {
        const best = argmax(row);
        tokens.push(best);
        if (best !== draft) return { tokens, acceptedDrafts: i };
        continue;
      }
      const p = this.distribution(row);
      const pd = p[draft]!;
      if (pd > 0 && this.#rng.next() < pd) {
        tokens.push(draft);
        continue;
      }
      p[draft] = 0;
      tokens.push(this.#draw(p));
      return { tokens, acceptedDrafts: i };
    }
    tokens.push(this.sample(rows[drafts.length]!));
    return { tokens, acceptedDrafts: drafts.length };
  }

  /** Draws from an unnormalized non-negative vector (the residual after rejection need not sum to 1). */
  #draw(p: Float64Array): number {
    let total = 0;
    let last = -1;
    for (let i = 0; i < p.length; i++) {
      if (p[i]! > 0) {
        total += p[i]!;
        last = i;
      }
    }
    if (last < 0) throw new Error("sampler: empty distribution");
    let u = this.#rng!.next() * total;
    for (let i = 0; i < p.length; i++) {
      const v = p[i]!;
      if (v <= 0) continue;
      if (u < v) return i;
      u -= v;
    }
    return last; // float rounding left u just above the total
  }

  /** Keeps the k most likely tokens (ties at the threshold keep the lowest ids) and renormalizes. */
  #keepTopK(probs: Float64Array, k: number): void {
    const keep = topIds(probs, k);
    let kept = 0;
    for (const id of keep) kept += probs[id]!;
    const values = keep.map((id) => probs[id]! / kept);
    probs.fill(0);
    keep.forEach((id, r) => probs[id] = values[r]!);
  }

  /**
   * Nucleus: keeps the smallest most-likely set whose mass reaches `topP`. Only tokens with p >= (1 - topP) / V can
   * belong to it (all smaller ones together weigh less than 1 - topP), so only those are sorted: cheap on big vocabs.
   */
  #keepTopP(probs: Float64Array, topP: number): void {
    const n = probs.length;
    const threshold = (1 - topP) / n;
    const idx = this.#candidates;
    let m = 0;
    for (let i = 0; i < n; i++) if (probs[i]! >= threshold) idx[m++] = i;
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
}
