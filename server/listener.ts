/**
 * The server's sockets: the connection gate owns the public TCP port (connection_gate.ts) and relays each admitted
 * connection to `Deno.serve` on a private Unix socket. Deno.serve's accept loop ends for good on an accept error
 * (descriptors exhausted): that is reported and a new one takes over on a fresh socket, so no such error ever stops
 * the process.
 */
import { errorResponse } from "../prompt/errors.ts";
import { ConnectionGate } from "./connection_gate.ts";
import type { ServerOptions } from "./server_options.ts";

/**
 * Connections the front admits by default: each costs three descriptors (client socket, and both ends of the relay
 * socket), and the process keeps 128 for itself (store, model files, workers, logs). Linux reports the soft limit
 * in /proc; elsewhere 512.
 */
function defaultMaxConnections(): number {
  try {
    const limits = Deno.readTextFileSync("/proc/self/limits");
    const soft = /^Max open files\s+(\d+|unlimited)/m.exec(limits)?.[1];
    if (soft === undefined || soft === "unlimited") return 512;
    return Math.max(4, Math.min(4096, Math.floor((Number(soft) - 128) / 3)));
  } catch {
    return 512;
  }
}

export class Listener {
  readonly gate: ConnectionGate;
  /** Resolves once the listener has closed and its socket directory is gone. */
  readonly finished: Promise<void>;
  readonly #options: ServerOptions;
  readonly #handler: (request: Request) => Promise<Response>;
  readonly #socketDir: string;
  readonly #onFinished: () => void;
  #generation = 0;
  #stopping = false;
  #server: Deno.HttpServer<Deno.UnixAddr>;

  constructor(options: ServerOptions, handler: (request: Request) => Promise<Response>) {
    this.#options = options;
    this.#handler = handler;
    this.#socketDir = Deno.makeTempDirSync({ prefix: "rill-" });
    try {
      this.gate = new ConnectionGate({
        hostname: options.hostname ?? "127.0.0.1",
        port: options.port ?? 8000,
        target: this.#socketPath(),
        maxConnections: options.maxConnections ?? defaultMaxConnections(),
        headerTimeoutMs: options.headerTimeoutMs ?? 10_000,
        bodyTimeoutMs: options.bodyTimeoutMs ?? 60_000,
        idleTimeoutMs: options.idleTimeoutMs ?? 60_000,
        ...(options.onConnectionEvent === undefined ? {} : { onEvent: options.onConnectionEvent }),
      });
    } catch (error) {
      Deno.removeSync(this.#socketDir, { recursive: true });
      throw error;
    }
    const { promise, resolve } = Promise.withResolvers<void>();
    this.finished = promise;
    this.#onFinished = resolve;
    this.#server = this.#startInner();
  }

  /** Closes the public port, then lets Deno.serve finish the responses being written and close idle connections. */
  async close(): Promise<void> {
    this.#stopping = true;
    this.gate.closeListener();
    await this.#server.shutdown();
    await this.finished;
  }

  #socketPath(): string {
    return `${this.#socketDir}/http-${this.#generation}.sock`;
  }

  /** Starts Deno.serve on a fresh socket; an accept error starts the next one. */
  #startInner(): Deno.HttpServer<Deno.UnixAddr> {
    const path = this.#socketPath();
    const inner = Deno.serve({
      transport: "unix",
      path,
      onListen: () => {},
      onError: (error) => {
        this.#options.onError?.(error);
        return errorResponse(error);
      },
    }, this.#handler);
    this.gate.target = path;
    inner.finished.then(
      async () => {
        await this.gate.drain(2000);
        try {
          Deno.removeSync(this.#socketDir, { recursive: true });
        } catch { /* already gone */ }
        this.#onFinished();
      },
      (error) => {
        this.#options.onConnectionEvent?.({
          type: "accept_error",
          error: error instanceof Error ? error.message : String(error),
        });
        if (this.#stopping) return this.#onFinished();
        this.#generation++;
        this.#server = this.#startInner();
      },
    );
    return inner;
  }
}
