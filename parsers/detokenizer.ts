/**
 * Per-stream incremental detokenizer: token ids in, decoded text out, one token at a time.
 *
 * Invariants:
 * - The concatenation of every `push` result followed by `flush()` equals the WHATWG UTF-8 decoding (replacement
 *   mode) of the concatenated `tokenBytes` of all pushed tokens. In particular a valid character whose bytes are split
 *   across tokens is emitted whole, with the token that completes it, and never as U+FFFD.
 * - Genuinely invalid bytes become U+FFFD as soon as they are proven invalid (or at `flush` for a truncated tail).
 *
 * Byte-level BPE and SentencePiece-style vocabularies differ only in how a token maps to bytes ("▁" → space,
 * `<0xNN>` byte-fallback pieces); `Tokenizer.tokenBytes` hides that, so this class sees bytes only.
 *
 * Hot path: a token whose bytes decode from a clean state to a clean state (the vast majority) is decoded once per
 * tokenizer and cached, so `push` is a state check plus a map lookup and allocates nothing.
 *
 * A token id the tokenizer cannot map decodes as U+FFFD (its bytes are unknown), so model output never makes a
 * parser throw.
 */
import type { Tokenizer } from "../checkpoint/tokenizer.ts";

const REPLACEMENT = "\uFFFD";
const REPLACEMENT_BYTES = new Uint8Array([0xef, 0xbf, 0xbd]);

/** Decoded text of tokens that start and end on a character boundary; `null` marks tokens that do not. */
type CleanTextCache = Map<number, string | null>;

// Shared by every stream of the same tokenizer: the mapping id → clean text is a pure function of the vocabulary.
const cleanTextCaches = new WeakMap<Tokenizer, CleanTextCache>();

function cacheFor(tokenizer: Tokenizer): CleanTextCache {
  let cache = cleanTextCaches.get(tokenizer);
  if (cache === undefined) {
    cache = new Map();
    cleanTextCaches.set(tokenizer, cache);
  }
  return cache;
}

// Bounded so `apply` never exceeds the engine's argument limit on a long run of ASCII.
const ASCII_APPLY_LIMIT = 8192;

function asciiText(bytes: Uint8Array, start: number, end: number): string {
  let out = "";
  for (let s = start; s < end; s += ASCII_APPLY_LIMIT) {
    const e = Math.min(end, s + ASCII_APPLY_LIMIT);
    const view = s === 0 && e === bytes.length ? bytes : bytes.subarray(s, e);
    out += String.fromCharCode.apply(null, view as unknown as number[]);
  }
  return out;
}

/**
 * A streaming UTF-8 decoder following the WHATWG Encoding Standard's error handling (maximal subparts become one
 * U+FFFD each), so its output is identical to `TextDecoder` in replacement mode whatever the byte chunking.
 */
export class Utf8StreamDecoder {
  #needed = 0;
  #seen = 0;
  #codePoint = 0;
  #lower = 0x80;
  #upper = 0xbf;

  /** True when no partial character is pending. */
  get clean(): boolean {
    return this.#needed === 0;
  }

  /** Decodes `bytes`, keeping an incomplete trailing character pending. */
  decode(bytes: Uint8Array): string {
    let out = "";
    let i = 0;
    const n = bytes.length;
    // Fast run of ASCII when no character is pending.
    while (i < n) {
      const b = bytes[i]!;
      if (this.#needed === 0) {
        if (b < 0x80) {
          const start = i;
          while (i < n && bytes[i]! < 0x80) i++;
          out += asciiText(bytes, start, i);
          continue;
        }
        i++;
        if (b >= 0xc2 && b <= 0xdf) {
          this.#needed = 1;
          this.#codePoint = b & 0x1f;
        } else if (b >= 0xe0 && b <= 0xef) {
          if (b === 0xe0) this.#lower = 0xa0;
          if (b === 0xed) this.#upper = 0x9f;
          this.#needed = 2;
          this.#codePoint = b & 0x0f;
        } else if (b >= 0xf0 && b <= 0xf4) {
          if (b === 0xf0) this.#lower = 0x90;
          if (b === 0xf4) this.#upper = 0x8f;
          this.#needed = 3;
          this.#codePoint = b & 0x07;
        } else {
          out += REPLACEMENT;
        }
        continue;
      }
      if (b < this.#lower || b > this.#upper) {
        // The pending sequence is proven invalid; `b` is reprocessed from a clean state (not consumed).
        this.#reset();
        out += REPLACEMENT;
        continue;
      }
      i++;
      this.#lower = 0x80;
      this.#upper = 0xbf;
      this.#codePoint = (this.#codePoint << 6) | (b & 0x3f);
      if (++this.#seen === this.#needed) {
        out += String.fromCodePoint(this.#codePoint);
        this.#reset();
      }
    }
    return out;
  }

  /** Ends the byte stream: a truncated pending character becomes U+FFFD. */
  flush(): string {
    if (this.#needed === 0) return "";
    this.#reset();
    return REPLACEMENT;
  }

  #reset(): void {
    this.#needed = 0;
    this.#seen = 0;
    this.#codePoint = 0;
    this.#lower = 0x80;
    this.#upper = 0xbf;
  }
}

export class IncrementalDetokenizer {
  readonly #tokenizer: Tokenizer;
  readonly #cache: CleanTextCache;
  readonly #decoder = new Utf8StreamDecoder();

  constructor(tokenizer: Tokenizer) {
    this.#tokenizer = tokenizer;
    this.#cache = cacheFor(tokenizer);
  }

  /** True while the bytes of an unfinished character are held (they belong to the next text). */
  get pending(): boolean {
    return !this.#decoder.clean;
  }

  /** Decodes one token; returns the text it completes (possibly ""). */
  push(token: number): string {
    if (this.#decoder.clean) {
      const cached = this.#cache.get(token);
      if (typeof cached === "string") return cached;
      if (cached === undefined) {
        const bytes = this.#bytes(token);
        const text = this.#decoder.decode(bytes);
        if (bytes !== REPLACEMENT_BYTES) this.#cache.set(token, this.#decoder.clean ? text : null);
        return text;
      }
    }
    return this.#decoder.decode(this.#bytes(token));
  }

  #bytes(token: number): Uint8Array {
    try {
      return this.#tokenizer.tokenBytes(token);
    } catch {
      return REPLACEMENT_BYTES;
    }
  }

  /** Ends the stream: returns what is left (U+FFFD for a truncated character, else ""). Reusable afterwards. */
  flush(): string {
    return this.#decoder.flush();
  }
}
