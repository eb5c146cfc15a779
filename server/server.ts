/**
 * rill's HTTP server on `Deno.serve`: routing, authentication, body limits, metrics and graceful shutdown around
 * the Responses and Chat Completions services. Every failure before a response body exists goes through
 * `errorResponse` (errors.ts); failures after SSE headers are the pipeline's `error` + `response.failed`.
 *
 * The pieces: server_context.ts builds what requests share (resources, policies, shutdown state),
 * request_handler.ts answers one request, route_handlers.ts maps each route to its resource, listener.ts owns the
 * sockets; this file assembles them and drains them at shutdown.
 */
import type { Metrics } from "../api/metrics.ts";
import { abortGenerations, activeGenerations } from "./api_services.ts";
import type { GateStats } from "./connection_gate.ts";
import { Listener } from "./listener.ts";
import { handleRequest } from "./request_handler.ts";
import { createServerContext, type ServerContext } from "./server_context.ts";
import type { ServerOptions } from "./server_options.ts";

export type { AccessLogEntry, ServerOptions } from "./server_options.ts";

export interface RillServer {
  readonly url: string;
  readonly port: number;
  readonly hostname: string;
  readonly metrics: Metrics;
  /** The connection front's counters (open connections, refusals, timeouts). */
  readonly connections: () => GateStats;
  /** Generations currently in flight. */
  readonly active: () => number;
  /**
   * Stops accepting connections, lets in-flight requests and background responses finish for up to `timeoutMs`,
   * then aborts what is left and resolves once the listener is closed.
   */
  shutdown(timeoutMs: number): Promise<void>;
  /** Resolves when the server has stopped. */
  readonly finished: Promise<void>;
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

export function createServer(options: ServerOptions): RillServer {
  // `/metrics` reads the gate's counters; requests arrive only once the listener below exists.
  const ctx = createServerContext(options, () => listener.gate.stats());
  const listener = new Listener(options, (request) => handleRequest(ctx, request));
  const addr = listener.gate.addr;
  const hostForUrl = addr.hostname.includes(":") ? `[${addr.hostname}]` : addr.hostname;
  return {
    url: `http://${hostForUrl}:${addr.port}`,
    port: addr.port,
    hostname: addr.hostname,
    metrics: ctx.metrics,
    connections: () => listener.gate.stats(),
    active: () => activeGenerations(ctx.services),
    finished: listener.finished,
    shutdown: (timeoutMs) => shutdown(ctx, listener, timeoutMs),
  };
}

/**
 * Drains: new requests get 503, generations in flight get `timeoutMs` to finish and are aborted after it, WebSocket
 * connections are closed once their responses ended, and only then does the listener close.
 */
async function shutdown(ctx: ServerContext, listener: Listener, timeoutMs: number): Promise<void> {
  ctx.draining = true;
  const deadline = performance.now() + Math.max(0, timeoutMs);
  const idle = () => activeGenerations(ctx.services) === 0;
  while (!idle() && performance.now() < deadline) await sleep(Math.min(20, deadline - performance.now()));
  // Whatever is still generating after the grace period is aborted; each ends within one step, with an ending
  // its client can tell from a finished one (ResponsesService.abortAll, ChatCompletionsService.abortAll).
  abortGenerations(ctx.services);
  while (!idle()) await sleep(10);
  // A client that never answers the close handshake holds no one up: the gate closes its connection later.
  for (const socket of ctx.sockets) socket.close(1001, "The server is shutting down");
  await Promise.race([Promise.all([...ctx.sockets].map((socket) => socket.finished)), sleep(1000)]);
  // Only now does the listener close (Deno's shutdown also waits for the responses being written, and closes
  // idle keep-alive connections).
  await listener.close();
}
