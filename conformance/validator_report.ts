/** The violation record of the stream validator and the log every check writes into. */

/**
 * One broken invariant. `invariant` is the number of the invariant in §5 of `responses-streaming.md`; `index` is
 * the index of the offending event in the stream, or -1 when the violation belongs to the stream as a whole.
 */
export interface Violation {
  invariant: number;
  index: number;
  message: string;
}

/** Append-only collector shared by the validator's checks. */
export class ViolationLog {
  readonly violations: Violation[] = [];

  add(invariant: number, index: number, message: string): void {
    this.violations.push({ invariant, index, message });
  }
}
