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
  /** Text of the accepted tokens, and its length after each one (for rollback). */
  #text = "";
  #lengths: number[] = [];
  /** Index (in accepted tokens) after which a trigger had appeared, or -1. */
  #triggeredAt = -1;

  constructor(options: {
    readonly matcher: XgMatcher;
    readonly vocabSize: number;
    readonly endTokens: readonly number[];
    readonly required: boolean;
    readonly triggers: readonly string[];
    readonly tokenText: (id: number) => string;
  }) {
    this.#matcher = options.matcher;
    this.#vocabSize = options.vocabSize;
    this.#endTokens = options.endTokens;
    this.#required = options.required;
    this.#triggers = options.triggers;
    this.#tokenText = options.tokenText;
  }

  fillMask(words: Uint32Array, offset: number): void {
    const vec = this.#matcher.handle.GetNextTokenBitmask(this.#vocabSize);
    try {
      const n = vec.size();
      for (let i = 0; i < n; i++) words[offset + i] = vec.get(i) >>> 0;
    } finally {
      vec.delete();
    }
    if (this.#required && this.#triggeredAt < 0) {
      for (const t of this.#endTokens) words[offset + (t >>> 5)]! &= ~(1 << (t & 31));
    }
  }

  accept(token: number): boolean {
    if (this.#required && this.#triggeredAt < 0 && this.#endTokens.includes(token)) return false;
    if (!this.#matcher.acceptToken(token)) return false;
    const before = this.#text.length;
    this.#text += this.#tokenText(token);
    this.#lengths.push(this.#text.length);
    if (this.#triggeredAt < 0) {
      // A new trigger must end inside this token's text, so only the tail that could hold it is searched.
      const longest = this.#triggers.reduce((m, t) => Math.max(m, t.length), 0);
      const tail = this.#text.slice(Math.max(0, before - longest));
      if (this.#triggers.some((t) => tail.includes(t))) this.#triggeredAt = this.#lengths.length;
    }
    return true;
  }

  rollback(count: number): void {
    if (count <= 0) return;
    this.#matcher.rollBack(count);
    this.#lengths.length -= count;
    this.#text = this.#text.slice(0, this.#lengths[this.#lengths.length - 1] ?? 0);
    if (this.#triggeredAt > this.#lengths.length) this.#triggeredAt = -1;
  }

  isTerminated(): boolean {
    return this.#matcher.isTerminated();
  }

  dispose(): void {
    this.#matcher.dispose();
  }
}
