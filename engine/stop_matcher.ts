/**
 * Decides, token by token, what a sequence may emit given its stop tokens and stop strings.
 *
 * Stop strings are matched on the UTF-8 bytes of the generated tokens (`Tokenizer.tokenBytes`). UTF-8 is
 * self-synchronizing, so a byte match is exactly a text match, and a character split across tokens needs no decoding.
 *
 * Partial tokens: output is released at token granularity. Tokens are held back while the text they end with could
 * still grow into a stop string (its tail is a proper prefix of one). When a stop string completes, only the tokens
 * that end at or before the start of the match are released; the stop string is never emitted, and neither is any
 * text after it. If the token that contains the start of the match also carries text before the match, that text
 * is dropped with it (we cannot split a token). A stop token, by contrast, is reported in the step that produced it.
 *
 * Invariant: a stop string can only start inside the held bytes, because every released byte was, when released,
 * not part of any possible stop-string prefix.
 */

export type StopPush =
  /** Tokens safe to emit now (possibly none while a stop-string prefix is pending). */
  | { readonly kind: "emit"; readonly tokens: number[] }
  /** The sequence ends: emit these tokens, then finish with reason "stop". */
  | { readonly kind: "stop"; readonly tokens: number[] };

export class StopMatcher {
  readonly #stopTokens: ReadonlySet<number>;
  readonly #patterns: readonly Uint8Array[];
  readonly #tokenBytes: (id: number) => Uint8Array;
  #held: number[] = [];
  /** Byte offset just past each held token within #bytes. */
  #ends: number[] = [];
  #bytes = new Uint8Array(64);
  #length = 0;

  constructor(stopTokens: Iterable<number>, stopStrings: readonly string[], tokenBytes: (id: number) => Uint8Array) {
    this.#stopTokens = new Set(stopTokens);
    const encoder = new TextEncoder();
    this.#patterns = stopStrings.filter((s) => s.length > 0).map((s) => encoder.encode(s));
    this.#tokenBytes = tokenBytes;
  }

  push(token: number): StopPush {
    if (this.#stopTokens.has(token)) {
      const tokens = this.#held;
      tokens.push(token);
      this.#reset();
      return { kind: "stop", tokens };
    }
    if (this.#patterns.length === 0) return { kind: "emit", tokens: [token] };
    this.#append(this.#tokenBytes(token));
    this.#held.push(token);
    this.#ends.push(this.#length);

    const match = this.#earliestMatch();
    if (match >= 0) {
      const tokens = this.#takeUpTo(match);
      this.#reset();
      return { kind: "stop", tokens };
    }
    return { kind: "emit", tokens: this.#takeUpTo(this.#length - this.#pendingPrefix()) };
  }

  /** Releases everything held (the sequence ended for another reason, so no stop string can complete). */
  flush(): number[] {
    const tokens = this.#held;
    this.#reset();
    return tokens;
  }

  #reset(): void {
    this.#held = [];
    this.#ends = [];
    this.#length = 0;
  }

  #append(bytes: Uint8Array): void {
    if (this.#length + bytes.length > this.#bytes.length) {
      const grown = new Uint8Array(Math.max(this.#bytes.length * 2, this.#length + bytes.length));
      grown.set(this.#bytes.subarray(0, this.#length));
      this.#bytes = grown;
    }
    this.#bytes.set(bytes, this.#length);
    this.#length += bytes.length;
  }

  /** Byte offset of the earliest complete stop-string match in the held bytes, or -1. */
  #earliestMatch(): number {
    let best = -1;
    const b = this.#bytes;
    for (const pat of this.#patterns) {
      const last = best < 0 ? this.#length - pat.length : Math.min(best - 1, this.#length - pat.length);
      outer: for (let s = 0; s <= last; s++) {
        for (let j = 0; j < pat.length; j++) if (b[s + j] !== pat[j]) continue outer;
        if (best < 0 || s < best) best = s;
        break;
      }
    }
    return best;
  }

  /** Length of the longest tail of the held bytes that is a proper prefix of some stop string. */
  #pendingPrefix(): number {
    let longest = 0;
    const b = this.#bytes;
    for (const pat of this.#patterns) {
      for (let len = Math.min(pat.length - 1, this.#length); len > longest; len--) {
        const start = this.#length - len;
        let ok = true;
        for (let j = 0; j < len; j++) {
          if (b[start + j] !== pat[j]) {
            ok = false;
            break;
          }
        }
        if (ok) {
          longest = len;
          break;
        }
      }
    }
    return longest;
  }

  /** Removes and returns the held tokens that end at or before byte offset `limit`, shifting the rest down. */
  #takeUpTo(limit: number): number[] {
    let n = 0;
    while (n < this.#held.length && this.#ends[n]! <= limit) n++;
    if (n === 0) return [];
    const out = this.#held.splice(0, n);
    const cut = this.#ends[n - 1]!;
    this.#ends.splice(0, n);
    for (let i = 0; i < this.#ends.length; i++) this.#ends[i] = this.#ends[i]! - cut;
    this.#bytes.copyWithin(0, cut, this.#length);
    this.#length -= cut;
    return out;
  }
}
