/**
 * SSE framing: `event: <type>\ndata: <json>\n\n` per event (event name == JSON type, one single-line data field,
 * no `id:` and no `[DONE]`), one byte chunk per input array so a whole engine step is one network write.
 *
 * Delta events are most of a stream and differ only in `delta` (and `sequence_number`, and logprobs when asked), so
 * their frame up to `"delta":` is rendered once per item and reused. The result is byte-identical to
 * `JSON.stringify` of the event (same keys, same order — the builders' order with `sequence_number` last); the tests
 * pin that equality.
 */
import type { ResponseStreamEvent } from "./types.ts";

type DeltaEvent = Extract<ResponseStreamEvent, { delta: string }>;

const utf8 = new TextEncoder();
const ascii = (text: string): Uint8Array => utf8.encode(text);
const SEQ_TAIL = ascii(',"sequence_number":');
const EMPTY_LOGPROBS_SEQ_TAIL = ascii(',"logprobs":[],"sequence_number":');
const HEX = ascii("0123456789abcdef");

/**
 * Bytes of `JSON.stringify(s)` (quotes included) as UTF-8, or -1 where JSON.stringify would escape a lone
 * surrogate (left to it: rare, and the one case that is not a plain transcoding).
 */
function jsonStringLength(s: string): number {
  let n = 2;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x80) {
      n += c >= 0x20
        ? (c === 0x22 || c === 0x5c ? 2 : 1)
        : c === 8 || c === 9 || c === 10 || c === 12 || c === 13
        ? 2
        : 6;
    } else if (c < 0x800) n += 2;
    else if (c < 0xd800 || c > 0xdfff) n += 3;
    else if (c <= 0xdbff && i + 1 < s.length && (s.charCodeAt(i + 1) & 0xfc00) === 0xdc00) {
      n += 4;
      i++;
    } else return -1;
  }
  return n;
}

/** Writes `JSON.stringify(s)` as UTF-8 at `pos` (s has no lone surrogate); returns the end. */
function writeJsonString(out: Uint8Array, pos: number, s: string): number {
  out[pos++] = 0x22;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x80) {
      if (c >= 0x20 && c !== 0x22 && c !== 0x5c) out[pos++] = c;
      else {
        out[pos++] = 0x5c;
        switch (c) {
          case 0x22:
          case 0x5c:
            out[pos++] = c;
            break;
          case 8:
            out[pos++] = 0x62; // b
            break;
          case 9:
            out[pos++] = 0x74; // t
            break;
          case 10:
            out[pos++] = 0x6e; // n
            break;
          case 12:
            out[pos++] = 0x66; // f
            break;
          case 13:
            out[pos++] = 0x72; // r
            break;
          default:
            out[pos++] = 0x75; // u00XX, lower-case hex as JSON.stringify writes it
            out[pos++] = 0x30;
            out[pos++] = 0x30;
            out[pos++] = HEX[c >> 4]!;
            out[pos++] = HEX[c & 15]!;
        }
      }
    } else if (c < 0x800) {
      out[pos++] = 0xc0 | (c >> 6);
      out[pos++] = 0x80 | (c & 0x3f);
    } else if (c < 0xd800 || c > 0xdfff) {
      out[pos++] = 0xe0 | (c >> 12);
      out[pos++] = 0x80 | ((c >> 6) & 0x3f);
      out[pos++] = 0x80 | (c & 0x3f);
    } else {
      const cp = 0x10000 + ((c - 0xd800) << 10) + (s.charCodeAt(++i) - 0xdc00);
      out[pos++] = 0xf0 | (cp >> 18);
      out[pos++] = 0x80 | ((cp >> 12) & 0x3f);
      out[pos++] = 0x80 | ((cp >> 6) & 0x3f);
      out[pos++] = 0x80 | (cp & 0x3f);
    }
  }
  out[pos++] = 0x22;
  return pos;
}

function digitCount(n: number): number {
  let d = 1;
  while (n >= 10) {
    n = Math.floor(n / 10);
    d++;
  }
  return d;
}

/** Writes a non-negative integer's decimal digits at `pos`; returns the end. */
function writeUint(out: Uint8Array, pos: number, n: number): number {
  const end = pos + digitCount(n);
  for (let i = end - 1; i >= pos; i--) {
    out[i] = 0x30 + (n % 10);
    n = Math.floor(n / 10);
  }
  return end;
}

/** Bytes per slab: a 4-token step's frame is about 200 bytes, so one slab holds a few dozen steps. */
const SLAB_BYTES = 8192;

export class SseEncoder {
  /**
   * Chunks are views into a slab owned by this encoder (one response's stream), carved one after another and never
   * written again once handed out, so a step costs a view instead of a fresh ArrayBuffer (its allocation, and its
   * sweeping at every scavenge). A consumer that transfers a chunk detaches the slab: the next chunk then starts a
   * new one (a detached slab's length reads 0).
   */
  #slab: Uint8Array = new Uint8Array(0);
  #used = 0;
  /** Cache of the last delta frame prefix, keyed by event type and item id (fixed output/content index per item). */
  #prefixType = "";
  #prefixItem = "";
  #prefix = "";
  #prefixBytes: Uint8Array = new Uint8Array(0);

  /** The SSE text of events; JSON.stringify never emits raw newlines, so each data field is one line. */
  text(events: readonly ResponseStreamEvent[]): string {
    let s = "";
    for (let i = 0; i < events.length; i++) {
      const e = events[i]!;
      s += "delta" in e ? this.#delta(e) : "event: " + e.type + "\ndata: " + JSON.stringify(e) + "\n\n";
    }
    return s;
  }

  /**
   * The UTF-8 of `text(events)`, as one exactly sized array. A delta event without logprobs (most of a stream) is
   * written straight into it from the cached prefix bytes, the delta's JSON and the number, with no intermediate
   * string; other events are rendered as text and transcoded.
   */
  encode(events: readonly ResponseStreamEvent[]): Uint8Array {
    let total = 0;
    /** Bytes of the events rendered as text, by index (null until one is). */
    let slow: (Uint8Array | null)[] | null = null;
    for (let i = 0; i < events.length; i++) {
      const e = events[i]!;
      let n = -1;
      if ("delta" in e && (!("logprobs" in e) || e.logprobs.length === 0)) {
        n = jsonStringLength(e.delta);
        if (n >= 0) {
          this.#prefixFor(e);
          total += this.#prefixBytes.length + n + this.#tail(e).length + digitCount(e.sequence_number) + 3;
        }
      }
      if (n < 0) {
        const bytes = utf8.encode(this.text([e]));
        (slow ??= new Array(events.length).fill(null))[i] = bytes;
        total += bytes.length;
      }
    }
    const out = this.#alloc(total);
    let pos = 0;
    for (let i = 0; i < events.length; i++) {
      const e = events[i]!;
      const bytes = slow?.[i];
      if (bytes != null) {
        out.set(bytes, pos);
        pos += bytes.length;
        continue;
      }
      if (!("delta" in e)) throw new Error("unreachable: a non-delta event was not rendered as text");
      this.#prefixFor(e);
      out.set(this.#prefixBytes, pos);
      pos = writeJsonString(out, pos + this.#prefixBytes.length, e.delta);
      const tail = this.#tail(e);
      out.set(tail, pos);
      pos = writeUint(out, pos + tail.length, e.sequence_number);
      out[pos++] = 0x7d; // }
      out[pos++] = 0x0a;
      out[pos++] = 0x0a;
    }
    return out;
  }

  #alloc(n: number): Uint8Array {
    if (this.#slab.length - this.#used < n) {
      this.#slab = new Uint8Array(Math.max(SLAB_BYTES, n));
      this.#used = 0;
    }
    const start = this.#used;
    this.#used += n;
    return this.#slab.subarray(start, start + n);
  }

  #tail(e: DeltaEvent): Uint8Array {
    return "logprobs" in e ? EMPTY_LOGPROBS_SEQ_TAIL : SEQ_TAIL;
  }

  #prefixFor(e: DeltaEvent): void {
    if (e.type !== this.#prefixType || e.item_id !== this.#prefixItem) {
      this.#prefixType = e.type;
      this.#prefixItem = e.item_id;
      this.#prefix = "event: " + e.type + '\ndata: {"type":"' + e.type + '","item_id":' + JSON.stringify(e.item_id) +
        ',"output_index":' + e.output_index +
        ("content_index" in e ? ',"content_index":' + e.content_index : "") + ',"delta":';
      this.#prefixBytes = utf8.encode(this.#prefix);
    }
  }

  #delta(e: DeltaEvent): string {
    this.#prefixFor(e);
    const tail = "logprobs" in e
      ? ',"logprobs":' + (e.logprobs.length === 0 ? "[]" : JSON.stringify(e.logprobs)) + ',"sequence_number":'
      : ',"sequence_number":';
    return this.#prefix + JSON.stringify(e.delta) + tail + e.sequence_number + "}\n\n";
  }
}

export function sseEncoder(): TransformStream<ResponseStreamEvent[], Uint8Array> {
  const core = new SseEncoder();
  return new TransformStream({
    transform(events, controller) {
      if (events.length > 0) controller.enqueue(core.encode(events));
    },
  });
}
