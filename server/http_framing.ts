/**
 * An HTTP/1.1 message-boundary scanner for one direction of a connection: it reads bytes as they pass and reports
 * where each message's head ends and where the message ends, without buffering or copying the body. The connection
 * gate uses it to time requests (header, body and idle timeouts) and to know when a connection has no request in
 * progress. It understands exactly what framing needs (RFC 9112 §6): Content-Length, chunked transfer coding,
 * bodiless responses (1xx, 204, 304, HEAD), responses delimited by the connection's close, and the end of HTTP at a
 * `101 Switching Protocols` (a WebSocket upgrade).
 */

export type Direction = "request" | "response";

export interface MessageHead {
  /** Request method, or the response's status code as text. */
  readonly startLine: string;
  readonly method: string | null;
  readonly status: number | null;
}

export type FramingEvent =
  | { readonly type: "head"; readonly head: MessageHead }
  | { readonly type: "end" }
  /** A `101 Switching Protocols` response: what follows on the connection (both ways) is no longer HTTP. */
  | { readonly type: "upgrade" };

/** Thrown for framing the scanner cannot follow (the peer is answered 400 and the connection closed). */
export class FramingError extends Error {
  override readonly name = "FramingError";
}

type State =
  | { kind: "head" }
  | { kind: "body"; remaining: number }
  | { kind: "chunk-size"; size: number; digits: number; extension: boolean }
  | { kind: "chunk-data"; remaining: number }
  | { kind: "chunk-crlf"; remaining: number }
  | { kind: "trailers" }
  | { kind: "until-close" };

const CR = 13;
const LF = 10;
const latin1 = new TextDecoder("latin1");

const chunkSize = (): State => ({ kind: "chunk-size", size: 0, digits: 0, extension: false });

/** 0–15 for an ASCII hex digit, else -1. */
function hexValue(b: number): number {
  if (b >= 0x30 && b <= 0x39) return b - 0x30;
  if (b >= 0x61 && b <= 0x66) return b - 0x57;
  if (b >= 0x41 && b <= 0x46) return b - 0x37;
  return -1;
}

export class MessageScanner {
  readonly #direction: Direction;
  readonly #maxHeadBytes: number;
  #state: State = { kind: "head" };
  /** Bytes of the head (or chunk-size line, or trailer line) read so far. */
  #line: number[] = [];
  #headBytes = 0;
  /** For responses: the methods of the requests they answer, oldest first. */
  readonly #methods: string[] = [];

  constructor(direction: Direction, maxHeadBytes = 64 * 1024) {
    this.#direction = direction;
    this.#maxHeadBytes = maxHeadBytes;
  }

  /** Bytes of a head read so far (0 between messages). */
  get headBytes(): number {
    return this.#state.kind === "head" ? this.#headBytes : 0;
  }

  /** Whether a message's head is complete and its body still arriving. */
  get inBody(): boolean {
    return this.#state.kind !== "head";
  }

  /** A request the responses answer, in order (HEAD responses carry no body). */
  expect(method: string): void {
    this.#methods.push(method);
  }

  /** Scans `bytes`, returning the events they complete, in order. */
  push(bytes: Uint8Array): FramingEvent[] {
    const events: FramingEvent[] = [];
    let i = 0;
    while (i < bytes.length) {
      const state = this.#state;
      switch (state.kind) {
        case "chunk-size": {
          // Parsed in place (no allocation): this runs once per SSE write on the response side.
          const b = bytes[i++]!;
          if (b === LF) {
            if (state.digits === 0) throw new FramingError("malformed chunk size");
            this.#state = state.size === 0 ? { kind: "trailers" } : { kind: "chunk-data", remaining: state.size };
          } else if (b === CR || state.extension) {
            // The CR before LF, or a chunk extension (ignored).
          } else if (b === 0x3b /* ; */) {
            state.extension = true;
          } else {
            const digit = hexValue(b);
            if (digit < 0 || ++state.digits > 12) throw new FramingError("malformed chunk size");
            state.size = state.size * 16 + digit;
          }
          break;
        }
        case "head":
        case "trailers": {
          const b = bytes[i++]!;
          if (state.kind === "head") {
            // Empty lines before a request line are allowed (RFC 9112 §2.2).
            if (this.#line.length === 0 && this.#headBytes === 0 && (b === CR || b === LF)) continue;
            if (++this.#headBytes > this.#maxHeadBytes) throw new FramingError("request head too large");
          } else if (this.#line.length > 8192) {
            throw new FramingError("trailer line too long");
          }
          this.#line.push(b);
          this.#lineByte(state, events);
          break;
        }
        case "body":
        case "chunk-data": {
          const take = Math.min(state.remaining, bytes.length - i);
          state.remaining -= take;
          i += take;
          if (state.remaining === 0) {
            if (state.kind === "body") this.#end(events);
            else this.#state = { kind: "chunk-crlf", remaining: 2 };
          }
          break;
        }
        case "chunk-crlf": {
          i++;
          if (--state.remaining === 0) this.#state = chunkSize();
          break;
        }
        case "until-close":
          return events;
        default: {
          const never: never = state;
          throw new Error(`unreachable state ${JSON.stringify(never)}`);
        }
      }
    }
    return events;
  }

  #lineByte(state: State, events: FramingEvent[]): void {
    const line = this.#line;
    const n = line.length;
    if (state.kind === "head") {
      if (
        n >= 2 && line[n - 1] === LF && (line[n - 2] === LF || (n >= 4 && line[n - 2] === CR && line[n - 3] === LF))
      ) {
        this.#head(latin1.decode(Uint8Array.from(line)), events);
      }
      return;
    }
    if (line[n - 1] !== LF) return;
    // A trailer line; the empty one ends the message.
    const empty = n === 1 || (n === 2 && line[0] === CR);
    this.#line = [];
    if (empty) this.#end(events);
  }

  #head(text: string, events: FramingEvent[]): void {
    this.#line = [];
    this.#headBytes = 0;
    const lines = text.split(/\r?\n/);
    const startLine = lines[0] ?? "";
    let contentLength: number | null = null;
    let chunked = false;
    for (const line of lines.slice(1)) {
      const colon = line.indexOf(":");
      if (colon <= 0) continue;
      const name = line.slice(0, colon).trim().toLowerCase();
      const value = line.slice(colon + 1).trim();
      if (name === "content-length") {
        if (!/^\d{1,15}$/.test(value) || (contentLength !== null && contentLength !== Number(value))) {
          throw new FramingError("malformed content-length");
        }
        contentLength = Number(value);
      } else if (name === "transfer-encoding") {
        chunked = value.toLowerCase().split(",").map((v) => v.trim()).at(-1) === "chunked";
        if (!chunked && this.#direction === "request") throw new FramingError("unsupported transfer-encoding");
      }
    }
    if (this.#direction === "request") {
      const method = /^([A-Z]+) \S+ HTTP\/1\.[01]$/.exec(startLine)?.[1];
      if (method === undefined) throw new FramingError("malformed request line");
      events.push({ type: "head", head: { startLine, method, status: null } });
      if (chunked) this.#state = chunkSize();
      else if (contentLength !== null && contentLength > 0) this.#state = { kind: "body", remaining: contentLength };
      else this.#end(events);
      return;
    }
    const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(startLine)?.[1] ?? NaN);
    if (!Number.isInteger(status)) throw new FramingError("malformed status line");
    events.push({ type: "head", head: { startLine, method: null, status } });
    if (status === 101) {
      // The upgrade answers its request; the connection now carries the new protocol until it closes.
      this.#methods.shift();
      events.push({ type: "upgrade" });
      this.#state = { kind: "until-close" };
      return;
    }
    // An interim response precedes the real one and answers nothing by itself.
    if (status >= 100 && status < 200) return;
    const method = this.#methods.shift() ?? "GET";
    if (method === "HEAD" || status === 204 || status === 304) this.#end(events);
    else if (chunked) this.#state = chunkSize();
    else if (contentLength !== null) {
      if (contentLength === 0) this.#end(events);
      else this.#state = { kind: "body", remaining: contentLength };
    } else this.#state = { kind: "until-close" };
  }

  #end(events: FramingEvent[]): void {
    this.#state = { kind: "head" };
    this.#line = [];
    this.#headBytes = 0;
    events.push({ type: "end" });
  }
}
