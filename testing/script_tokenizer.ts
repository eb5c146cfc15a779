/**
 * Test tokenizers for the parser tests.
 *
 * `ScriptTokenizer` is a byte-level vocabulary that grows on demand: ids 0–255 are single bytes, then the special
 * tokens, then any byte string a test registers as one token. Tests build token scripts by choosing exactly where
 * text is cut into tokens (including inside a UTF-8 character), which is what the parsers must be indifferent to.
 *
 * `SentencePieceTokenizer` mimics a SentencePiece vocabulary: pieces use "▁" for a space and `<0xNN>` byte-fallback
 * pieces carry single bytes; `tokenBytes` maps pieces to bytes the way a real SentencePiece tokenizer must.
 */
import type { Tokenizer } from "../checkpoint/tokenizer.ts";
import { decodeTokens, encodeWithSpecials } from "./tokenizer_text.ts";

const utf8 = new TextEncoder();

function keyOf(bytes: Uint8Array): string {
  return Array.prototype.join.call(bytes, ",");
}

export interface SpecialSpec {
  readonly text: string;
  /** Control tokens are never shown as text (ChatML `<|im_end|>`); Qwen's `<think>` is an added non-control token. */
  readonly control: boolean;
}

export class ScriptTokenizer implements Tokenizer {
  readonly #bytes: Uint8Array[] = [];
  readonly #byKey = new Map<string, number>();
  readonly #specials = new Map<string, number>();
  readonly #control = new Set<number>();

  constructor(specials: readonly SpecialSpec[]) {
    for (let b = 0; b < 256; b++) this.#bytes.push(Uint8Array.of(b));
    for (const s of specials) {
      const id = this.#bytes.length;
      this.#bytes.push(utf8.encode(s.text));
      this.#specials.set(s.text, id);
      if (s.control) this.#control.add(id);
    }
  }

  get vocabSize(): number {
    return this.#bytes.length;
  }

  /** The id of a plain token standing for exactly these bytes (registered on first use). */
  piece(bytes: Uint8Array | string): number {
    const b = typeof bytes === "string" ? utf8.encode(bytes) : bytes;
    if (b.length === 1) return b[0]!;
    const key = keyOf(b);
    let id = this.#byKey.get(key);
    if (id === undefined) {
      id = this.#bytes.length;
      this.#bytes.push(b.slice());
      this.#byKey.set(key, id);
    }
    return id;
  }

  /** Plain text cut into tokens at the given byte offsets (ascending, strictly inside the text). */
  split(text: string, cuts: readonly number[]): number[] {
    const b = utf8.encode(text);
    const ids: number[] = [];
    let start = 0;
    for (const c of [...cuts, b.length]) {
      if (c > start && c <= b.length) {
        ids.push(this.piece(b.subarray(start, c)));
        start = c;
      }
    }
    return ids;
  }

  /** Plain text as tokens of up to 3 bytes (so multi-byte characters often split). */
  encodeOrdinary(text: string): number[] {
    const b = utf8.encode(text);
    const cuts: number[] = [];
    for (let i = 3; i < b.length; i += 3) cuts.push(i);
    return this.split(text, cuts);
  }

  encode(text: string): number[] {
    return encodeWithSpecials(text, this.#specials, (plain) => this.encodeOrdinary(plain));
  }

  decode(ids: readonly number[]): string {
    return decodeTokens(this, ids);
  }

  tokenBytes(id: number): Uint8Array {
    const b = this.#bytes[id];
    if (b === undefined) throw new RangeError(`unknown token ${id}`);
    return b;
  }

  specialId(text: string): number | undefined {
    return this.#specials.get(text);
  }

  isSpecial(id: number): boolean {
    return this.#control.has(id);
  }
}

/** A SentencePiece-style vocabulary: "▁" pieces and `<0xNN>` byte-fallback pieces. */
export class SentencePieceTokenizer implements Tokenizer {
  readonly #pieces: string[];
  readonly #bytes: Uint8Array[];

  constructor(pieces: readonly string[]) {
    this.#pieces = [...pieces];
    this.#bytes = this.#pieces.map((p) => {
      const m = /^<0x([0-9A-F]{2})>$/.exec(p);
      if (m) return Uint8Array.of(parseInt(m[1]!, 16));
      return utf8.encode(p.replaceAll("\u2581", " "));
    });
  }

  get vocabSize(): number {
    return this.#pieces.length;
  }

  id(piece: string): number {
    const i = this.#pieces.indexOf(piece);
    if (i < 0) throw new RangeError(`no piece ${piece}`);
    return i;
  }

  encode(text: string): number[] {
    return this.encodeOrdinary(text);
  }

  /** Greedy longest-piece match on "▁"-escaped text, falling back to byte pieces. */
  encodeOrdinary(text: string): number[] {
    const s = text.replaceAll(" ", "\u2581");
    const ids: number[] = [];
    let i = 0;
    while (i < s.length) {
      let best = -1;
      let bestLen = 0;
      this.#pieces.forEach((p, id) => {
        if (!p.startsWith("<0x") && p.length > bestLen && s.startsWith(p, i)) {
          best = id;
          bestLen = p.length;
        }
      });
      if (best >= 0) {
        ids.push(best);
        i += bestLen;
        continue;
      }
      const ch = String.fromCodePoint(s.codePointAt(i)!);
      for (const b of utf8.encode(ch)) {
        ids.push(this.id(`<0x${b.toString(16).toUpperCase().padStart(2, "0")}>`));
      }
      i += ch.length;
    }
    return ids;
  }

  decode(ids: readonly number[]): string {
    return decodeTokens(this, ids);
  }

  tokenBytes(id: number): Uint8Array {
    const b = this.#bytes[id];
    if (b === undefined) throw new RangeError(`unknown token ${id}`);
    return b;
  }

  specialId(_text: string): number | undefined {
    return undefined;
  }

  isSpecial(_id: number): boolean {
    return false;
  }
}
