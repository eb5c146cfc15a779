/**
 * Incremental UTF-8 decoding of one harmony message's token bytes.
 *
 * Invariant: the held `#tail` is always a proper prefix of a UTF-8 sequence that starts at a lead byte, so every byte
 * before it has already been decoded and the WHATWG decoder would hold nothing at the cut. Decoding "prefix now, tail
 * later" therefore yields exactly the text a single streaming decode of the whole message would, and a character
 * split across tokens never produces U+FFFD. Invalid bytes become U+FFFD (maximal subparts, as WHATWG and Rust do).
 */

const lossy = new TextDecoder("utf-8");
const strict = new TextDecoder("utf-8", { fatal: true });
const EMPTY = new Uint8Array(0);

/** How many bytes a sequence starting with `lead` has; 0 for a byte that cannot start a multi-byte sequence. */
function sequenceLength(lead: number): number {
  if (lead >= 0xc2 && lead <= 0xdf) return 2;
  if (lead >= 0xe0 && lead <= 0xef) return 3;
  if (lead >= 0xf0 && lead <= 0xf4) return 4;
  return 0;
}

/** Index where an incomplete trailing sequence starts, or `bytes.length` when the bytes end on a boundary. */
function incompleteTailStart(bytes: Uint8Array): number {
  const n = bytes.length;
  for (let back = 1; back <= 3 && back <= n; back++) {
    const b = bytes[n - back]!;
    if ((b & 0xc0) === 0x80) continue; // continuation byte: keep looking for its lead
    const len = sequenceLength(b);
    return len > back ? n - back : n;
  }
  return n;
}

/**
 * Whole-token text for tokens whose bytes are complete, valid UTF-8 on their own (`null` otherwise), cached per
 * token-bytes array so the hot path of a content token is one lookup instead of a decode.
 */
const completeText = new WeakMap<Uint8Array, string | null>();

function wholeTokenText(bytes: Uint8Array): string | null {
  let text = completeText.get(bytes);
  if (text === undefined) {
    try {
      text = strict.decode(bytes);
    } catch {
      text = null;
    }
    completeText.set(bytes, text);
  }
  return text;
}

export class HarmonyUtf8Decoder {
  #tail: Uint8Array = EMPTY;

  /** True when bytes of an unfinished character are held back. */
  get pending(): boolean {
    return this.#tail.length > 0;
  }

  /** Text completed by these bytes (possibly ""). */
  push(bytes: Uint8Array): string {
    if (this.#tail.length === 0) {
      const whole = wholeTokenText(bytes);
      if (whole !== null) return whole;
    }
    let all: Uint8Array;
    if (this.#tail.length === 0) {
      all = bytes;
    } else {
      all = new Uint8Array(this.#tail.length + bytes.length);
      all.set(this.#tail, 0);
      all.set(bytes, this.#tail.length);
    }
    const cut = incompleteTailStart(all);
    this.#tail = cut === all.length ? EMPTY : all.slice(cut);
    return cut === 0 ? "" : lossy.decode(all.subarray(0, cut));
  }

  /** Ends the message: held bytes of an unfinished character become U+FFFD. */
  finish(): string {
    if (this.#tail.length === 0) return "";
    const text = lossy.decode(this.#tail);
    this.#tail = EMPTY;
    return text;
  }
}
