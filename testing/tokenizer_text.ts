/**
 * The text side shared by the test tokenizers: whole-text encoding around special tokens and whole-id decoding.
 * Each tokenizer keeps its own vocabulary and its own `encodeOrdinary`; these only cut and join around them.
 */
import type { Tokenizer } from "../checkpoint/tokenizer.ts";

/**
 * Encodes `text`, turning every occurrence of a special's text into its id and the plain text between them into
 * `encodeOrdinary` tokens. The earliest occurrence wins; at one position the longest special text does, so a
 * special whose text starts another's is never cut short.
 */
export function encodeWithSpecials(
  text: string,
  specials: ReadonlyMap<string, number>,
  encodeOrdinary: (plain: string) => number[],
): number[] {
  const names = [...specials.keys()].sort((a, b) => b.length - a.length);
  const ids: number[] = [];
  let rest = text;
  while (rest.length > 0) {
    let at = -1;
    let which = "";
    for (const n of names) {
      const i = rest.indexOf(n);
      if (i >= 0 && (at < 0 || i < at)) {
        at = i;
        which = n;
      }
    }
    if (at < 0) {
      ids.push(...encodeOrdinary(rest));
      break;
    }
    ids.push(...encodeOrdinary(rest.slice(0, at)), specials.get(which)!);
    rest = rest.slice(at + which.length);
  }
  return ids;
}

/** The tokens' bytes joined and decoded at once, so a character split across tokens decodes whole. */
export function decodeTokens(tokenizer: Pick<Tokenizer, "tokenBytes">, ids: readonly number[]): string {
  const parts = ids.map((id) => tokenizer.tokenBytes(id));
  const all = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    all.set(p, at);
    at += p.length;
  }
  return new TextDecoder().decode(all);
}
