/**
 * Prompt-lookup speculative drafting: find the most recent earlier occurrence of the sequence's last n tokens
 * (n from `maxN` down to `minN`) and propose the tokens that followed it.
 *
 * The copy may run past the end of the known history into the draft itself (x[L + j] = x[i + n + j]), which is what
 * lets a periodic text with a period shorter than K still yield a full K-token draft. Drafts are only proposals:
 * the target model verifies every one, so a bad draft costs compute, never correctness.
 */
export interface NgramProposerOptions {
  readonly minN?: number;
  readonly maxN?: number;
  /** Only the last `window` tokens are searched, bounding the per-step cost on long sequences. */
  readonly window?: number;
}

export class NgramProposer {
  readonly minN: number;
  readonly maxN: number;
  readonly window: number;

  constructor(options: NgramProposerOptions = {}) {
    // minN 1 measured best on the bundled harmony model's repeat task (1.95 vs 1.53 tokens/step at K=4): a wrong
    // 1-gram draft costs only verify compute, which at small batch is nearly free.
    this.minN = options.minN ?? 1;
    this.maxN = options.maxN ?? 4;
    this.window = options.window ?? 2048;
    if (this.minN < 1 || this.maxN < this.minN) throw new RangeError("ngram proposer: need 1 <= minN <= maxN");
  }

  /** Up to `k` draft tokens continuing `history[0..length)`; empty when no n-gram recurs. */
  propose(history: Int32Array | readonly number[], length: number, k: number): number[] {
    if (k <= 0) return [];
    const lo = Math.max(0, length - this.window);
    for (let n = Math.min(this.maxN, length - 1); n >= this.minN; n--) {
      const tail = length - n;
      // Candidate starts i < tail, most recent first, so the continuation is the freshest context.
      outer: for (let i = tail - 1; i >= lo; i--) {
        for (let j = 0; j < n; j++) if (history[i + j] !== history[tail + j]) continue outer;
        const draft: number[] = [];
        for (let j = 0; j < k; j++) {
          const src = i + n + j;
          draft.push(src < length ? history[src]! : draft[src - length]!);
        }
        return draft;
      }
    }
    return [];
  }
}
