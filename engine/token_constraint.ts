/**
 * The per-sequence grammar state the engine consults when it samples: which tokens may come next, and how the state
 * advances and rewinds as tokens are accepted or drafts rejected. The engine knows nothing of grammars; `grammar/`
 * implements this over xgrammar.
 *
 * Invariant: `fillMask` describes the position after every token accepted so far and not rolled back.
 */
export interface TokenConstraint {
  /** Writes the allowed-token bitmask of the next position: ceil(vocabSize / 32) words from `words[offset]`. */
  fillMask(words: Uint32Array, offset: number): void;
  /** Advances by one token; false (state unchanged) when the grammar does not allow it. */
  accept(token: number): boolean;
  /** Forgets the last `count` accepted tokens. */
  rollback(count: number): void;
  /** True once the constrained part is complete and only the turn's end may follow. */
  isTerminated(): boolean;
}

/** Words in one mask row. */
export function maskWords(vocabSize: number): number {
  return Math.ceil(vocabSize / 32);
}

/** Sets every logit whose bit is clear to -Infinity (the row covers token ids 0 .. row.length - 1). */
export function applyMask(row: Float32Array, words: Uint32Array, offset: number): void {
  for (let w = 0; w * 32 < row.length; w++) {
    const bits = words[offset + w]! >>> 0;
    if (bits === 0xffffffff) continue;
    const end = Math.min(row.length, w * 32 + 32);
    for (let t = w * 32; t < end; t++) if (((bits >>> (t & 31)) & 1) === 0) row[t] = -Infinity;
  }
}

/**
 * Mask rows for verifying `drafts`: row r (r = 0 .. drafts.length) is the mask after the first r drafts, written at
 * `words[(firstRow + r) * wordsPerRow ..]` (a StepBatch's `allowedMask` with `maskRowStart[i] = firstRow`). Drafts are
 * accepted one by one while the grammar allows them; past the first disallowed draft no row is needed, since its own
 * row forbids it and verification stops there. The constraint is left as it was. Returns the rows written.
 */
export function fillDraftMasks(
  constraint: TokenConstraint,
  drafts: readonly number[],
  words: Uint32Array,
  wordsPerRow: number,
  firstRow = 0,
): number {
  let accepted = 0;
  let rows = 0;
  for (let r = 0; r <= drafts.length; r++) {
    constraint.fillMask(words, (firstRow + r) * wordsPerRow);
    rows++;
    if (r === drafts.length || !constraint.accept(drafts[r]!)) break;
    accepted++;
    // A draft that ends the turn: later rows are never emitted (the stop cuts the output there), so none is needed.
    if (constraint.isTerminated()) break;
  }
  if (accepted > 0) constraint.rollback(accepted);
  return rows;
}

/**
 * After a step: advances the constraint by the tokens the sequence accepted (verified drafts, then the target's own
 * token). False when one of them is outside the grammar, which a backend that applied the mask never produces.
 */
export function advanceConstraint(constraint: TokenConstraint, accepted: readonly number[] | Int32Array): boolean {
  for (const token of accepted) {
    // Tokens after the turn's end token are cut from the output by the stop rule; the grammar ends with it.
    if (constraint.isTerminated()) break;
    if (!constraint.accept(token)) return false;
  }
  return true;
}

/**
 * The rows a constrained sequence samples from: copies of `rows` with disallowed tokens at -Infinity, row r masked
 * for the position after the first r drafts. The raw rows stay untouched (logprobs are reported from them). Rows
 * after the first draft the grammar rejects are left unmasked copies: verification stops at that draft, because its
 * own masked row forbids it, so they are never sampled.
 */
export function constrainRows(
  constraint: TokenConstraint,
  rows: readonly Float32Array[],
  drafts: readonly number[],
  vocabSize: number,
): Float32Array[] {
  const wordsPerRow = maskWords(vocabSize);
  const words = new Uint32Array(wordsPerRow * rows.length);
  const filled = fillDraftMasks(constraint, drafts, words, wordsPerRow);
  return rows.map((row, r) => {
    const copy = row.slice();
    if (r < filled) applyMask(copy, words, r * wordsPerRow);
    return copy;
  });
}
