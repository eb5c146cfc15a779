/**
 * `TokenConstraint` over an xgrammar GrammarMatcher. The matcher runs the request's structural tag (free text until
 * a trigger, then the constrained JSON); its stop tokens are the chat format's turn-end tokens, so a turn can end only
 * where the grammar may end. A required constraint also forbids those end tokens until a trigger has been written,
 * so the turn cannot end before its constrained part.
 */
import type { TokenConstraint } from "../engine/token_constraint.ts";
import type { XgMatcher } from "./xgrammar.ts";

export class GrammarConstraint implements TokenConstraint {
  readonly #matcher: XgMatcher;
  readonly #vocabSize: number;
  readonly #endTokens: readonly number[];
  readonly #required: boolean;
  readonly #triggers: readonly string[];
  readonly #tokenText: (id: number) => string;
  readonly #begins: readonly string[];
  readonly #tagStops: readonly (number | undefined)[];
  readonly #ends: readonly string[];
  /** Added (control) tokens other than the end tokens. */
  readonly #added: readonly { readonly id: number; readonly text: string }[];
  /** Where in `#text` the trigger that began the constrained part starts. */
  #triggerStart = 0;
  /** Text of the accepted tokens, and its length after each one (for rollback). */
  #text = "";
  #lengths: number[] = [];
  /** Index (in accepted tokens) after which a trigger had appeared, or -1. */
  #triggeredAt = -1;
  #disposed = false;

  constructor(options: {
    readonly matcher: XgMatcher;
    readonly vocabSize: number;
    readonly endTokens: readonly number[];
    readonly required: boolean;
    readonly triggers: readonly string[];
    readonly tokenText: (id: number) => string;
    readonly begins: readonly string[];
    /** Per begin: the end token that must close that tag, when the format has one per kind. */
    readonly tagStops?: readonly (number | undefined)[];
    readonly ends: readonly string[];
    readonly addedTokens: readonly { readonly id: number; readonly text: string }[];
  }) {
    this.#begins = options.begins;
    this.#tagStops = options.tagStops ?? [];
    this.#ends = options.ends;
    this.#added = options.addedTokens.filter((t) => !options.endTokens.includes(t.id));
    this.#matcher = options.matcher;
    this.#vocabSize = options.vocabSize;
    this.#endTokens = options.endTokens;
    this.#required = options.required;
    this.#triggers = options.triggers;
    this.#tokenText = options.tokenText;
    // An empty trigger: the constrained part starts the output.
    if (options.triggers.includes("")) this.#triggeredAt = 0;
  }

  fillMask(words: Uint32Array, offset: number): void {
    if (this.#disposed) {
      words.fill(0xffffffff, offset, offset + Math.ceil(this.#vocabSize / 32));
      return;
    }
    const vec = this.#matcher.handle.GetNextTokenBitmask(this.#vocabSize);
    try {
      const n = vec.size();
      for (let i = 0; i < n; i++) words[offset + i] = vec.get(i) >>> 0;
    } finally {
      vec.delete();
    }
    if (this.#triggeredAt < 0) {
      if (this.#required) { for (const t of this.#endTokens) clearBit(words, offset, t); }
      return;
    }
    // Inside the constrained part, control tokens would count as their text (xgrammar matches text): a JSON string
    // could then hold `<|end|>`. They are allowed only where the tag's own begin or end text has them. Conversely,
    // where a begin continues with a control token's text, only that token may write it (spelled out in ordinary
    // characters the parser would not see a control token).
    const opened = this.#text.slice(this.#triggerStart);
    const forced = new Set<number>();
    let ordinary = false;
    for (const begin of this.#begins) {
      if (begin.length <= opened.length) {
        // This begin is written out: the content (ordinary tokens) may be under way.
        if (opened.startsWith(begin)) ordinary = true;
        continue;
      }
      if (!begin.startsWith(opened)) continue;
      const rest = begin.slice(opened.length);
      const special = this.#added.find((t) => rest.startsWith(t.text));
      if (special !== undefined) forced.add(special.id);
      else ordinary = true;
    }
    for (const { id, text } of this.#added) {
      if (forced.has(id) || !isSet(words, offset, id)) continue;
      // A control token of a tag's end text (ChatML's `</tool_call>`) is allowed only where it completes that end,
      // not inside a JSON string where the grammar would take it as characters.
      if (this.#ends.some((e) => e.includes(text)) && this.#matcher.acceptToken(id)) {
        this.#matcher.rollBack(1);
        const after = opened + text;
        if (this.#ends.some((e) => e !== "" && after.endsWith(e))) continue;
      }
      clearBit(words, offset, id);
    }
    // Once a tag is open, only its own kind's end token may close the turn (harmony: a call ends <|call|>).
    const open = this.#begins.findIndex((b, i) => this.#tagStops[i] !== undefined && opened.startsWith(b));
    const stop = open >= 0 ? this.#tagStops[open] : undefined;
    if (stop !== undefined) { for (const t of this.#endTokens) if (t !== stop) clearBit(words, offset, t); }
    if (forced.size > 0 && !ordinary) {
      const end = offset + Math.ceil(this.#vocabSize / 32);
      for (let w = offset; w < end; w++) {
        let keep = 0;
        for (const id of forced) if (offset + (id >>> 5) === w) keep |= 1 << (id & 31);
        words[w] = words[w]! & keep;
      }
    }
  }

  accept(token: number): boolean {
    if (this.#disposed) return true;
    if (this.#required && this.#triggeredAt < 0 && this.#endTokens.includes(token)) return false;
    if (!this.#matcher.acceptToken(token)) return false;
    const before = this.#text.length;
    this.#text += this.#tokenText(token);
    this.#lengths.push(this.#text.length);
    if (this.#triggeredAt < 0) {
      // A new trigger must end inside this token's text, so only the tail that could hold it is searched.
      const longest = this.#triggers.reduce((m, t) => Math.max(m, t.length), 0);
      const tail = this.#text.slice(Math.max(0, before - longest));
      for (const trigger of this.#triggers) {
        const at = tail.indexOf(trigger);
        if (at >= 0) {
          this.#triggeredAt = this.#lengths.length;
          this.#triggerStart = Math.max(0, before - longest) + at;
          break;
        }
      }
    }
    return true;
  }

  rollback(count: number): void {
    if (count <= 0 || this.#disposed) return;
    this.#matcher.rollBack(count);
    this.#lengths.length -= count;
    this.#text = this.#text.slice(0, this.#lengths[this.#lengths.length - 1] ?? 0);
    if (this.#triggeredAt > this.#lengths.length) this.#triggeredAt = -1;
  }

  isTerminated(): boolean {
    return !this.#disposed && this.#matcher.isTerminated();
  }

  /** Frees the matcher. Afterwards every token is allowed, so a step still in flight for a cancelled sequence is safe. */
  dispose(): void {
    if (this.#disposed) return;
    this.#disposed = true;
    this.#matcher.dispose();
  }
}

function clearBit(words: Uint32Array, offset: number, token: number): void {
  words[offset + (token >>> 5)]! &= ~(1 << (token & 31));
}

function isSet(words: Uint32Array, offset: number, token: number): boolean {
  return ((words[offset + (token >>> 5)]! >>> (token & 31)) & 1) === 1;
}
