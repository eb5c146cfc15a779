/**
 * Finds textual markers (`<think>`, `</tool_call>`, …) in streamed text that may cut a marker anywhere.
 *
 * Invariant: text before the earliest complete marker is safe to emit; after the last complete marker, only the
 * longest suffix that is a proper prefix of some marker is ambiguous and must be held back — nothing more. Whatever
 * the chunking, the sequence (text, marker, text, …) that a caller derives with `find` + `holdStart` is the same.
 */
export class MarkerScanner {
  readonly markers: readonly string[];
  /** Index into `markers` of the last `find` hit. */
  matched = -1;
  readonly #maxLength: number;

  constructor(markers: readonly string[]) {
    this.markers = markers.filter((m) => m.length > 0);
    this.#maxLength = this.markers.reduce((n, m) => Math.max(n, m.length), 0);
  }

  /** Index of the earliest complete marker in `text` at or after `from`, or -1. At equal positions the longer wins. */
  find(text: string, from: number): number {
    let best = -1;
    let bestLength = 0;
    const markers = this.markers;
    for (let m = 0; m < markers.length; m++) {
      const marker = markers[m]!;
      const at = text.indexOf(marker, from);
      if (at < 0) continue;
      if (best < 0 || at < best || (at === best && marker.length > bestLength)) {
        best = at;
        bestLength = marker.length;
        this.matched = m;
      }
    }
    return best;
  }

  /** Start of the held-back suffix of `text` (≥ `from`): the longest suffix that a marker could still complete. */
  holdStart(text: string, from: number): number {
    const n = text.length;
    const first = Math.max(from, n - this.#maxLength + 1);
    for (let k = first; k < n; k++) {
      if (this.#isMarkerPrefix(text, k, n - k)) return k;
    }
    return n;
  }

  #isMarkerPrefix(text: string, at: number, length: number): boolean {
    const markers = this.markers;
    outer: for (let m = 0; m < markers.length; m++) {
      const marker = markers[m]!;
      if (marker.length <= length) continue;
      for (let t = 0; t < length; t++) {
        if (text.charCodeAt(at + t) !== marker.charCodeAt(t)) continue outer;
      }
      return true;
    }
    return false;
  }
}
