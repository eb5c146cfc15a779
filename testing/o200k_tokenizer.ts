/**
 * Test-only Tokenizer over the real o200k_harmony vocabulary (npm gpt-tokenizer), so harmony tests can use the token
 * ids of harmony.md §1/§5 verbatim.
 *
 * gpt-tokenizer's `allowedSpecial` matching is broken (it only finds a special at the start of the text or right after
 * another special; docs/harmony.md §4), so `encode` never relies on it: the text is split on the special-token texts
 * first, each special maps to its id from our own table, and each plain piece is BPE-encoded as ordinary text.
 */
import { encode as encodeO200k } from "gpt-tokenizer/encoding/o200k_harmony";
import bpeRanks from "gpt-tokenizer/bpeRanks/o200k_base";
import type { Tokenizer } from "../checkpoint/tokenizer.ts";
import { decodeTokens } from "./tokenizer_text.ts";

/** Ids 0..199997 are BPE ranks; 199998.. are specials (harmony.md §1.1). */
const FIRST_SPECIAL = 199998;
const VOCAB_SIZE = 201088;

const NAMED_SPECIALS: readonly (readonly [string, number])[] = [
  ["<|startoftext|>", 199998],
  ["<|endoftext|>", 199999],
  ["<|return|>", 200002],
  ["<|constrain|>", 200003],
  ["<|channel|>", 200005],
  ["<|start|>", 200006],
  ["<|end|>", 200007],
  ["<|message|>", 200008],
  ["<|call|>", 200012],
];

/** Every id ≥ FIRST_SPECIAL that has no name above is `<|reserved_N|>`. */
function buildSpecialTables(): { byText: Map<string, number>; byId: Map<number, string> } {
  const byId = new Map<number, string>();
  for (let id = FIRST_SPECIAL; id < VOCAB_SIZE; id++) byId.set(id, `<|reserved_${id}|>`);
  for (const [text, id] of NAMED_SPECIALS) byId.set(id, text);
  const byText = new Map<string, number>();
  for (const [id, text] of byId) byText.set(text, id);
  // o200k_base's `<|endofprompt|>` shares id 200018 with `<|reserved_200018|>`; decoding keeps the reserved name.
  byText.set("<|endofprompt|>", 200018);
  return { byText, byId };
}

const SPECIAL_PATTERN = /<\|[a-z_0-9]+\|>/g;
const ORDINARY = { disallowedSpecial: new Set<string>() };

export class O200kTokenizer implements Tokenizer {
  readonly vocabSize = VOCAB_SIZE;
  readonly #byText: Map<string, number>;
  readonly #byId: Map<number, string>;
  readonly #ranks = bpeRanks as readonly (string | readonly number[])[];
  readonly #bytes: (Uint8Array | undefined)[] = [];
  readonly #utf8 = new TextEncoder();

  constructor() {
    const tables = buildSpecialTables();
    this.#byText = tables.byText;
    this.#byId = tables.byId;
  }

  encode(text: string): number[] {
    const out: number[] = [];
    let last = 0;
    for (const match of text.matchAll(SPECIAL_PATTERN)) {
      const id = this.#byText.get(match[0]);
      // A `<|word|>` that is not in the table is ordinary text and stays in the next plain piece.
      if (id === undefined) continue;
      if (match.index > last) out.push(...this.encodeOrdinary(text.slice(last, match.index)));
      out.push(id);
      last = match.index + match[0].length;
    }
    if (last < text.length) out.push(...this.encodeOrdinary(text.slice(last)));
    return out;
  }

  encodeOrdinary(text: string): number[] {
    return text.length === 0 ? [] : encodeO200k(text, ORDINARY);
  }

  decode(ids: readonly number[]): string {
    return decodeTokens(this, ids);
  }

  tokenBytes(id: number): Uint8Array {
    const cached = this.#bytes[id];
    if (cached !== undefined) return cached;
    let bytes: Uint8Array;
    const special = this.#byId.get(id);
    if (special !== undefined) {
      bytes = this.#utf8.encode(special);
    } else {
      const rank = id >= 0 && id < FIRST_SPECIAL ? this.#ranks[id] : undefined;
      if (rank === undefined) throw new RangeError(`Token id out of range: ${id}`);
      bytes = typeof rank === "string" ? this.#utf8.encode(rank) : Uint8Array.from(rank);
    }
    this.#bytes[id] = bytes;
    return bytes;
  }

  specialId(text: string): number | undefined {
    return this.#byText.get(text);
  }

  isSpecial(id: number): boolean {
    return id >= FIRST_SPECIAL && id < VOCAB_SIZE;
  }
}

let shared: O200kTokenizer | undefined;

/** One instance per test process: the special tables hold ~1,100 entries and the rank table is module-level anyway. */
export function o200kTokenizer(): O200kTokenizer {
  shared ??= new O200kTokenizer();
  return shared;
}
