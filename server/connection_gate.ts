/**
 * The TCP front of the HTTP server. `Deno.serve` owns its accept loop and offers no connection limit, no header,
 * body or idle timeouts, and exits on an accept error (EMFILE under a descriptor limit). So rill listens itself and
 * relays each accepted connection to its `Deno.serve` over a private Unix socket, watching the bytes with an HTTP/1.1
 * framing scanner on the way:
 * - at most `maxConnections` at once; the next one is answered 503 + Retry-After and closed;
 * - a request's head must arrive within `headerTimeoutMs` of its first byte (slowloris), its body within
 *   `bodyTimeoutMs` of the head, and a connection with no request in progress closes after `idleTimeoutMs`;
 * - broken framing is answered 400 here (counted as a client error, never reaching the 5xx count);
 * - an accept that fails (too many open files, …) is logged and retried after a pause: never fatal.
 * A connection whose client goes away is closed on the server side at once, so the request's signal aborts.
 * Once the server answers `101 Switching Protocols` (WebSocket mode) the connection is a plain tunnel: its bytes are
 * no longer HTTP, so neither direction is scanned and no timeout applies (the WebSocket's own pings keep it honest).
 */
import { FramingError, MessageScanner } from "./http_framing.ts";

export interface GateOptions {
  readonly hostname: string;
  readonly port: number;
  /** The Unix socket `Deno.serve` listens on (the gate's `target` may move it later). */
  readonly target: string;
  readonly maxConnections: number;
  readonly headerTimeoutMs: number;
  readonly bodyTimeoutMs: number;
  readonly idleTimeoutMs: number;
  /** Connection-level happenings worth a log line (accept errors, timeouts, refusals). */
  readonly onEvent?: (event: GateEvent) => void;
}

export type GateEvent =
  | { readonly type: "accept_error"; readonly error: string }
  | { readonly type: "refused"; readonly open: number }
  | { readonly type: "timeout"; readonly which: "header" | "body" | "idle" }
  | { readonly type: "bad_framing"; readonly reason: string };

export interface GateStats {
  /** Connections open now. */
  readonly open: number;
  readonly refused: number;
  readonly timedOut: number;
  readonly badFraming: number;
  readonly acceptErrors: number;
}

const utf8 = new TextEncoder();

function rawResponse(status: string, code: string, message: string, headers: string[] = []): Uint8Array {
  const body = JSON.stringify({ error: { message, type: "invalid_request_error", param: null, code } });
  return utf8.encode(
    `HTTP/1.1 ${status}\r\ncontent-type: application/json\r\ncontent-length: ${utf8.encode(body).length}\r\n` +
      `${headers.map((h) => `${h}\r\n`).join("")}connection: close\r\n\r\n${body}`,
  );
}

const OVERLOADED = rawResponse("503 Service Unavailable", "too_many_connections", "Too many open connections", [
  "retry-after: 1",
]);

async function writeAll(conn: Deno.Conn, bytes: Uint8Array): Promise<void> {
  for (let at = 0; at < bytes.length;) at += await conn.write(bytes.subarray(at));
}

/** One relayed connection: client ⇄ inner server, with the request/response scanners and its deadline. */
class Relay {
  readonly client: Deno.Conn;
  inner: Deno.Conn | null = null;
  readonly requests = new MessageScanner("request");
  readonly responses = new MessageScanner("response");
  /** Requests whose head arrived and whose response has not ended. */
  pending = 0;
  /** When the current head's first byte came (null between heads). */
  headSince: number | null = null;
  bodySince: number | null = null;
  lastActivity = performance.now();
  closed = false;
  /** After a 101: bytes pass unscanned and untimed. */
  tunnel = false;

  constructor(client: Deno.Conn) {
    this.client = client;
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    try {
      this.client.close();
    } catch { /* already closed */ }
    try {
      this.inner?.close();
    } catch { /* already closed */ }
  }
}

export class ConnectionGate {
  readonly #o: GateOptions;
  readonly #listener: Deno.TcpListener;
  readonly #relays = new Set<Relay>();
  readonly #sweeper: ReturnType<typeof setInterval>;
  #refused = 0;
  #timedOut = 0;
  #badFraming = 0;
  #acceptErrors = 0;
  #closing = false;
  readonly finished: Promise<void>;
  /** Where new connections are relayed to. */
  target: string;

  constructor(options: GateOptions) {
    this.#o = options;
    this.target = options.target;
    this.#listener = Deno.listen({ hostname: options.hostname, port: options.port, transport: "tcp" });
    this.finished = this.#acceptLoop();
    this.#sweeper = setInterval(() => this.#sweep(), 250);
    Deno.unrefTimer(this.#sweeper);
  }

  get addr(): Deno.NetAddr {
    return this.#listener.addr;
  }

  stats(): GateStats {
    return {
      open: this.#relays.size,
      refused: this.#refused,
      timedOut: this.#timedOut,
      badFraming: this.#badFraming,
      acceptErrors: this.#acceptErrors,
    };
  }

  /** Stops accepting; open connections are left to end (the inner server's shutdown closes idle ones). */
  closeListener(): void {
    if (this.#closing) return;
    this.#closing = true;
    try {
      this.#listener.close();
    } catch { /* already closed */ }
  }

  /**
   * After the inner server stopped: lets each connection relay what the server wrote last (each closes when its
   * server side did), then closes what is left after `ms`.
   */
  async drain(ms: number): Promise<void> {
    const deadline = performance.now() + ms;
    while (this.#relays.size > 0 && performance.now() < deadline) await new Promise((r) => setTimeout(r, 5));
    this.closeAll();
  }

  /** Closes every connection still open and the sweeper. */
  closeAll(): void {
    this.closeListener();
    clearInterval(this.#sweeper);
    for (const relay of this.#relays) relay.close();
    this.#relays.clear();
  }

  async #acceptLoop(): Promise<void> {
    let pause = 10;
    while (!this.#closing) {
      let conn: Deno.Conn;
      try {
        conn = await this.#listener.accept();
        pause = 10;
      } catch (error) {
        if (this.#closing || error instanceof Deno.errors.BadResource || error instanceof Deno.errors.Interrupted) {
          return;
        }
        // Out of descriptors (EMFILE/ENFILE) or a transient network error: wait and accept again. Connections
        // ending meanwhile free descriptors; the listen backlog holds the others.
        this.#acceptErrors++;
        this.#o.onEvent?.({ type: "accept_error", error: error instanceof Error ? error.message : String(error) });
        await new Promise((r) => setTimeout(r, pause));
        pause = Math.min(pause * 2, 1000);
        continue;
      }
      if (this.#relays.size >= this.#o.maxConnections) {
        this.#refused++;
        this.#o.onEvent?.({ type: "refused", open: this.#relays.size });
        writeAll(conn, OVERLOADED).catch(() => {}).finally(() => {
          try {
            conn.close();
          } catch { /* gone */ }
        });
        continue;
      }
      this.#serve(conn);
    }
  }

  #serve(client: Deno.Conn): void {
    const relay = new Relay(client);
    this.#relays.add(relay);
    (async () => {
      try {
        relay.inner = await Deno.connect({ transport: "unix", path: this.target });
        if (relay.closed) return relay.inner.close();
        await Promise.all([this.#upstream(relay), this.#downstream(relay)]);
      } catch {
        // A failed connect (descriptors exhausted) or a reset: the connection just closes.
      } finally {
        relay.close();
        this.#relays.delete(relay);
      }
    })();
  }

  /** Client → server: scanned for request boundaries; broken framing is answered 400 here. */
  async #upstream(relay: Relay): Promise<void> {
    const buffer = new Uint8Array(64 * 1024);
    const inner = relay.inner!;
    for (;;) {
      const n = await relay.client.read(buffer).catch(() => null);
      // The client went away (or half-closed): the server side closes too, so a running request is aborted.
      if (n === null) return relay.close();
      const bytes = buffer.subarray(0, n);
      relay.lastActivity = performance.now();
      if (relay.tunnel) {
        await writeAll(inner, bytes).catch(() => relay.close());
        if (relay.closed) return;
        continue;
      }
      let events;
      try {
        events = relay.requests.push(bytes);
      } catch (error) {
        if (!(error instanceof FramingError)) throw error;
        this.#badFraming++;
        this.#o.onEvent?.({ type: "bad_framing", reason: error.message });
        // Only when no response is being written can a 400 be sent without corrupting one.
        if (relay.pending === 0) {
          await writeAll(
            relay.client,
            rawResponse("400 Bad Request", "bad_request", `Malformed HTTP: ${error.message}`),
          )
            .catch(() => {});
        }
        return relay.close();
      }
      for (const event of events) {
        if (event.type === "head") {
          relay.pending++;
          relay.responses.expect(event.head.method ?? "GET");
          relay.headSince = null;
          relay.bodySince = performance.now();
        } else {
          relay.bodySince = null;
        }
      }
      if (relay.requests.headBytes > 0) relay.headSince ??= performance.now();
      if (!relay.requests.inBody) relay.bodySince = null;
      await writeAll(inner, bytes).catch(() => relay.close());
      if (relay.closed) return;
    }
  }

  /** Server → client: scanned for response ends (a connection with none pending may idle out). */
  async #downstream(relay: Relay): Promise<void> {
    const buffer = new Uint8Array(64 * 1024);
    const inner = relay.inner!;
    for (;;) {
      const n = await inner.read(buffer).catch(() => null);
      if (n === null) return relay.close();
      const bytes = buffer.subarray(0, n);
      try {
        if (!relay.tunnel) {
          for (const event of relay.responses.push(bytes)) {
            if (event.type === "end") relay.pending--;
            // Set before the 101 reaches the client, so its first frame already passes as tunnel bytes.
            else if (event.type === "upgrade") relay.tunnel = true;
          }
        }
      } catch {
        // The inner server is Deno's own HTTP; should its framing ever surprise the scanner, stop timing idleness.
        relay.pending = Number.POSITIVE_INFINITY;
      }
      await writeAll(relay.client, bytes).catch(() => relay.close());
      relay.lastActivity = performance.now();
      if (relay.closed) return;
    }
  }

  #sweep(): void {
    const now = performance.now();
    for (const relay of this.#relays) {
      if (relay.tunnel) continue;
      let which: "header" | "body" | "idle" | null = null;
      if (relay.headSince !== null && now - relay.headSince > this.#o.headerTimeoutMs) which = "header";
      else if (relay.bodySince !== null && now - relay.bodySince > this.#o.bodyTimeoutMs) which = "body";
      else if (
        relay.pending === 0 && relay.headSince === null && relay.bodySince === null &&
        now - relay.lastActivity > this.#o.idleTimeoutMs
      ) which = "idle";
      if (which === null) continue;
      this.#timedOut++;
      if (which !== "idle") this.#o.onEvent?.({ type: "timeout", which });
      if (which === "header" && relay.pending === 0) {
        writeAll(relay.client, rawResponse("408 Request Timeout", "request_timeout", "The request head took too long"))
          .catch(() => {}).finally(() => relay.close());
      } else {
        relay.close();
      }
      this.#relays.delete(relay);
    }
  }
}
