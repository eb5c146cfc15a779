/**
 * Decides, token by token, what a sequence may emit given its stop tokens and stop strings.
 *
 * Stop strings are matched on the UTF-8 bytes of the generated tokens (`Tokenizer.tokenBytes`). UTF-8 is
 * self-synchronizing, so a byte match is exactly a text match, and a character split across tokens needs no decoding.
 *
 * Partial tokens: output is released at token granularity. Tokens are held back while the text they end with could
 * still grow into a stop string (its tail is a proper prefix of one). When a stop string completes, the tokens that
 * end at or before the start of the match are released; the stop string is never emitted, and neither is any text
 * after it. The token T in which the match starts may also carry text before the match ("prefix"). So that the
 * visible text ends exactly where the stop string begins (as OpenAI and vLLM do), T is replaced by the ordinary
 * encoding of that prefix (`synthesized` tokens at the end of the stop verdict) when all of these hold:
 *   - an `encodeOrdinary` function was given;
 *   - the byte stream is at a UTF-8 character boundary where T starts (nothing earlier is left incomplete), and the
 *     prefix bytes are valid UTF-8 on their own, so the prefix is exactly representable as text;
 *   - the re-encoded tokens' bytes equal the prefix bytes (a tokenizer that normalizes, e.g. prepends a space,
 *     would otherwise change the text).
 * Otherwise T is dropped with its prefix (we cannot split a token into bytes no token stands for). A stop token, by
 * contrast, is reported in the step that produced it.
 *
 * Invariant: a stop string can only start inside the held bytes, because every released byte was, when released,
 * not part of any possible stop-string prefix.
 */

export type StopPush =
  /** Tokens safe to emit now (possibly none while a stop-string prefix is pending). */
  | { readonly kind: "emit"; readonly tokens: number[] }
  /**
   * The sequence ends: emit these tokens, then finish with reason "stop". When present (and > 0), the last
   * `synthesized` tokens were not generated: they re-encode the text of the matching token before the stop string.
   */
  | { readonly kind: "stop"; readonly tokens: number[]; readonly synthesized?: number };

export class StopMatcher {
  readonly #stopTokens: ReadonlySet<number>;
  readonly #patterns: readonly Uint8Array[];
  readonly #tokenBytes: (id: number) => Uint8Array;
  readonly #encodeOrdinary: ((text: string) => number[]) | undefined;
  /** Continuation bytes still owed by the last character of the released bytes (0 at a character boundary). */
  #utf8Owed = 0;
  #held: number[] = [];
  /** Byte offset just past each held token within #bytes. */
  #ends: number[] = [];
  #bytes = new Uint8Array(64);
  #length = 0;

  /** Without `encodeOrdinary`, the token in which a stop string starts is always dropped whole. */
  constructor(
    stopTokens: Iterable<number>,
    stopStrings: readonly string[],
    tokenBytes: (id: number) => Uint8Array,
    encodeOrdinary?: (text: string) => number[],
  ) {
    this.#stopTokens = new Set(stopTokens);
    const encoder = new TextEncoder();
    this.#patterns = stopStrings.filter((s) => s.length > 0).map((s) => encoder.encode(s));
    this.#tokenBytes = tokenBytes;
    this.#encodeOrdinary = encodeOrdinary;
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
      const prefix = this.#prefixTokens(match);
      const tokens = this.#takeUpTo(match);
      this.#reset();
      if (prefix.length === 0) return { kind: "stop", tokens };
      tokens.push(...prefix);
      return { kind: "stop", tokens, synthesized: prefix.length };
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
    this.#utf8Owed = 0;
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
    this.#utf8Owed = utf8Owed(this.#utf8Owed, this.#bytes, 0, cut);
    this.#ends.splice(0, n);
    for (let i = 0; i < this.#ends.length; i++) this.#ends[i] = this.#ends[i]! - cut;
    this.#bytes.copyWithin(0, cut, this.#length);
    this.#length -= cut;
    return out;
  }

  /**
   * The ordinary encoding of the text between the start of the held token in which the match at `match` starts and
   * `match`, or [] when there is no such text or it cannot be reproduced byte for byte (see the class comment).
   */
  #prefixTokens(match: number): number[] {
    if (this.#encodeOrdinary === undefined) return [];
    let n = 0;
    while (n < this.#held.length && this.#ends[n]! <= match) n++;
    const start = n === 0 ? 0 : this.#ends[n - 1]!;
    if (start === match) return [];
    if (utf8Owed(this.#utf8Owed, this.#bytes, 0, start) !== 0) return [];
    const prefix = this.#bytes.slice(start, match);
    let text: string;
    try {
      text = fatalDecoder.decode(prefix);
    } catch {
      return [];
    }
    const ids = this.#encodeOrdinary(text);
    const parts = ids.map((id) => this.#tokenBytes(id));
    if (parts.reduce((sum, p) => sum + p.length, 0) !== prefix.length) return [];
    let at = 0;
    for (const part of parts) {
      for (let j = 0; j < part.length; j++) if (part[j] !== prefix[at + j]) return [];
      at += part.length;
    }
    return ids;
  }
}

const fatalDecoder = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });

/**
 * Continuation bytes still owed after `bytes[from..to)`, starting with `owed` owed. Only the position of character
 * boundaries matters here, so malformed input simply resets the count (the fatal decode rejects it later).
 */
function utf8Owed(owed: number, bytes: Uint8Array, from: number, to: number): number {
  for (let i = from; i < to; i++) {
    const b = bytes[i]!;
    if ((b & 0xc0) === 0x80) owed = owed > 0 ? owed - 1 : 0;
    else if (b < 0x80) owed = 0;
    else if ((b & 0xe0) === 0xc0) owed = 1;
    else if ((b & 0xf0) === 0xe0) owed = 2;
    else if ((b & 0xf8) === 0xf0) owed = 3;
    else owed = 0;
  }
  return owed;
}
