/**
 * A small byte-level tokenizer for tests. Ids 0..255 are single bytes, so any UTF-8 text can be encoded and a
 * multi-byte character may be split across tokens. Above them sit the harmony and ChatML control tokens (special)
 * and a handful of multi-byte "word" tokens, some of which deliberately end or start in the middle of a UTF-8
 * character so detokenizers are exercised on splits inside a token as well as between tokens.
 */
import type { Tokenizer } from "../checkpoint/tokenizer.ts";
import { decodeTokens, encodeWithSpecials } from "./tokenizer_text.ts";

export const TOY_SPECIALS = [
  "<|start|>",
  "<|end|>",
  "<|message|>",
  "<|channel|>",
  "<|constrain|>",
  "<|return|>",
  "<|call|>",
  "<|endoftext|>",
  "<|im_start|>",
  "<|im_end|>",
  "<think>",
  "</think>",
  "<tool_call>",
  "</tool_call>",
] as const;

const encoder = new TextEncoder();

/** Words as raw bytes; the last entries are partial UTF-8 on purpose ("é" = C3 A9, "€" = E2 82 AC). */
const WORDS: readonly Uint8Array[] = [
  ...[
    "assistant",
    "analysis",
    "final",
    "commentary",
    " to=",
    "functions",
    ".get_weather",
    "json",
    "user",
    "system",
    " code",
    "browser",
    ".search",
    "python",
    "the",
    " the",
    "Hello",
    " world",
    "ing",
    " is",
    '{"',
    '":',
    '"}',
    '"name"',
    '"arguments"',
    "city",
    "Paris",
    "é",
    "€",
    "😀",
    "\n\n",
  ].map((w) => encoder.encode(w)),
  new Uint8Array([0xa9, 0x20]), // tail of "é" followed by a space
  new Uint8Array([0x82, 0xac, 0x21]), // tail of "€" followed by "!"
];

export class ToyTokenizer implements Tokenizer {
  readonly vocabSize: number;
  readonly #bytes: Uint8Array[] = [];
  readonly #specialByText = new Map<string, number>();
  readonly #firstSpecial: number;
  readonly #firstWord: number;
  /** Words sorted longest first, for greedy longest-match encoding. */
  readonly #wordsByLength: { id: number; bytes: Uint8Array }[];

  constructor() {
    for (let b = 0; b < 256; b++) this.#bytes.push(new Uint8Array([b]));
    this.#firstSpecial = this.#bytes.length;
    for (const s of TOY_SPECIALS) {
      this.#specialByText.set(s, this.#bytes.length);
      this.#bytes.push(encoder.encode(s));
    }
    this.#firstWord = this.#bytes.length;
    for (const w of WORDS) this.#bytes.push(w);
    this.vocabSize = this.#bytes.length;
    this.#wordsByLength = [];
    for (let id = this.#firstWord; id < this.vocabSize; id++) {
      this.#wordsByLength.push({ id, bytes: this.#bytes[id]! });
    }
    this.#wordsByLength.sort((a, b) => b.bytes.length - a.bytes.length);
  }

  encode(text: string): number[] {
    return encodeWithSpecials(text, this.#specialByText, (plain) => this.encodeOrdinary(plain));
  }

  encodeOrdinary(text: string): number[] {
    const bytes = encoder.encode(text);
    const out: number[] = [];
    let i = 0;
    outer: while (i < bytes.length) {
      for (const { id, bytes: w } of this.#wordsByLength) {
        if (w.length > 1 && startsWith(bytes, i, w)) {
          out.push(id);
          i += w.length;
          continue outer;
        }
      }
      out.push(bytes[i]!);
      i++;
    }
    return out;
  }

  decode(ids: readonly number[]): string {
    return decodeTokens(this, ids);
  }

  tokenBytes(id: number): Uint8Array {
    const bytes = this.#bytes[id];
    if (bytes === undefined) throw new RangeError(`token id ${id} is outside the toy vocabulary`);
    return bytes;
  }

  specialId(text: string): number | undefined {
    return this.#specialByText.get(text);
  }

  isSpecial(id: number): boolean {
    return id >= this.#firstSpecial && id < this.#firstWord;
  }
}

function startsWith(haystack: Uint8Array, at: number, needle: Uint8Array): boolean {
  if (at + needle.length > haystack.length) return false;
  for (let j = 0; j < needle.length; j++) if (haystack[at + j] !== needle[j]) return false;
  return true;
}
