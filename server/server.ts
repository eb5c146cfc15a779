/**
 * rill's HTTP server on `Deno.serve`: routing, authentication, body limits, metrics and graceful shutdown around
 * the Responses and Chat Completions services. Every failure before a response body exists goes through
 * `errorResponse` (errors.ts); failures after SSE headers are the pipeline's `error` + `response.failed`.
 */
import { StructuredOutputs } from "../prompt/structured_output.ts";
import type { ChatFormat } from "../prompt/chat_format.ts";
import type { Engine } from "../engine/engine.ts";
import { type IdSource, randomIds } from "../events/ids.ts";
import { ApiKeyCheck } from "./auth.ts";
import { ChatCompletionsService } from "../api/chat/chat_completions.ts";
import { CompletionsService } from "../api/chat/completions.ts";
import { ConversationsService } from "../api/conversations/conversations_service.ts";
import { Cors } from "./cors.ts";
import { requestId } from "./request_id.ts";
import { VERSION } from "./version.ts";
import { TokenizeService } from "../api/tokenize.ts";
import {
  ApiError,
  errorResponse,
  methodNotAllowed,
  modelNotFound,
  notFound,
  toApiError,
  unavailable,
} from "../prompt/errors.ts";
import { DEFAULT_MAX_BODY_BYTES, readJsonBody } from "./http_body.ts";
import { jsonResponse } from "../api/http_response.ts";
import { RequestTrace } from "../api/request_trace.ts";
import { ConnectionGate, type GateEvent, type GateStats } from "./connection_gate.ts";
import { Metrics } from "../api/metrics.ts";
import type { ResponseStore } from "../api/store/response_store.ts";
import type { SamplingDefaults } from "../api/sampling_defaults.ts";
import { OPENAI_DEFAULTS } from "../api/sampling_defaults.ts";
import { ResponsesService } from "../api/responses/responses_service.ts";
import { ResponsesSocket } from "../api/responses/responses_socket.ts";
import { ReasoningSeal } from "../api/responses/reasoning_seal.ts";
import { matchRoute, type RouteMatch } from "./routes.ts";

export interface ServerOptions {
  readonly engine: Engine;
  readonly format: ChatFormat;
  /** The name clients use in `model` (--served-model-name). */
  readonly modelId: string;
  readonly store: ResponseStore;
  readonly apiKey?: string;
  /** 0 picks a free port. Default 8000. */
  readonly port?: number;
  /** Default 127.0.0.1. */
  readonly hostname?: string;
  readonly maxBodyBytes?: number;
  readonly defaults?: SamplingDefaults;
  /** Output item ids (tests: deterministic). */
  readonly ids?: IdSource;
  /** Called once per request after it was answered (structured access log). */
  readonly onRequest?: (entry: AccessLogEntry) => void;
  /** Called with internal errors that became a 500 (their details never reach the client). */
  readonly onError?: (error: unknown) => void;
  /** Unix seconds the model was loaded, for /v1/models. */
  readonly createdAt?: number;
  /** Connections open at once; more are answered 503. Default 512. */
  readonly maxConnections?: number;
  /** A request's head must arrive within this of its first byte (slowloris). Default 10 s. */
  readonly headerTimeoutMs?: number;
  /** A request's body must arrive within this of its head. Default 60 s. */
  readonly bodyTimeoutMs?: number;
  /** A connection with no request in progress is closed after this. Default 60 s. */
  readonly idleTimeoutMs?: number;
  /** Connection-level events (accept errors, refusals, timeouts, broken framing). */
  readonly onConnectionEvent?: (event: GateEvent) => void;
  /** Origins browsers may call from (cors.ts); `*` for any. Default none. */
  readonly allowedOrigins?: readonly string[];
  /** Serve /metrics without the API key. */
  readonly metricsPublic?: boolean;
  /** 32 bytes sealing `encrypted_content` (reasoning_key.ts). Default: random, valid for this server's life. */
  readonly reasoningKey?: Uint8Array;
}

export interface AccessLogEntry {
  readonly method: string;
  readonly route: string;
  readonly status: number;
  /** Until the response was complete: for a streamed body, until its last byte was produced. */
  readonly ms: number;
  /** The response (or chat completion) id, when the request has one. */
  readonly id?: string;
  readonly input_tokens?: number;
  readonly output_tokens?: number;
  /** Why a request failed (4xx/5xx): the error's code and message. */
  readonly reason?: string;
  readonly streamed?: boolean;
  /** The request's `x-request-id` (request_id.ts). */
  readonly requestId?: string;
}

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

/** The connection front's counters in the Prometheus text format. */
function connectionMetrics(s: GateStats): string {
  return [
    "# HELP rill_connections_open Client connections open now.",
    "# TYPE rill_connections_open gauge",
    `rill_connections_open ${s.open}`,
    "# HELP rill_connections_refused_total Connections answered 503 because the connection limit was reached.",
    "# TYPE rill_connections_refused_total counter",
    `rill_connections_refused_total ${s.refused}`,
    "# HELP rill_connections_timed_out_total Connections closed by a header, body or idle timeout.",
    "# TYPE rill_connections_timed_out_total counter",
    `rill_connections_timed_out_total ${s.timedOut}`,
    "# HELP rill_connections_bad_framing_total Connections closed with a 400 for malformed HTTP framing.",
    "# TYPE rill_connections_bad_framing_total counter",
    `rill_connections_bad_framing_total ${s.badFraming}`,
    "# HELP rill_accept_errors_total Failed accepts (e.g. out of file descriptors), each retried.",
    "# TYPE rill_accept_errors_total counter",
    `rill_accept_errors_total ${s.acceptErrors}`,
    "",
  ].join("\n");
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

export function createServer(options: ServerOptions): RillServer {
  const metrics = new Metrics();
  const defaults = options.defaults ?? OPENAI_DEFAULTS;
  const maxBody = options.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES;
  const auth = options.apiKey === undefined || options.apiKey === "" ? null : new ApiKeyCheck(options.apiKey);
  const createdAt = options.createdAt ?? Math.floor(Date.now() / 1000);
  const cors = new Cors(options.allowedOrigins ?? []);
  const publicRoutes: ReadonlySet<string> = new Set(
    options.metricsPublic === true ? ["/health", "/metrics"] : ["/health"],
  );
  const structuredOutputs = StructuredOutputs.for(options.engine.tokenizer, options.format);
  const structured = structuredOutputs === undefined ? {} : { structuredOutputs };
  const responses = new ResponsesService({
    ...structured,
    engine: options.engine,
    format: options.format,
    modelId: options.modelId,
    store: options.store,
    metrics,
    defaults,
    seal: new ReasoningSeal(options.reasoningKey ?? crypto.getRandomValues(new Uint8Array(32)), options.modelId),
    ...(options.ids === undefined ? {} : { ids: options.ids }),
    ...(options.onError === undefined ? {} : { onError: options.onError }),
  });
  const conversations = new ConversationsService({
    store: options.store,
    newId: (prefix) => randomIds.next(prefix),
    now: () => Math.floor(Date.now() / 1000),
  });
  const chat = new ChatCompletionsService({
    ...structured,
    engine: options.engine,
    format: options.format,
    modelId: options.modelId,
    metrics,
    defaults,
  });
  const completions = new CompletionsService({
    engine: options.engine,
    format: options.format,
    modelId: options.modelId,
    metrics,
    defaults,
  });
  const tokenize = new TokenizeService({
    tokenizer: options.engine.tokenizer,
    format: options.format,
    modelId: options.modelId,
    maxModelLen: options.engine.maxModelLen,
  });
  let draining = false;
  /** Open WebSocket-mode connections, closed at shutdown once their responses ended. */
  const sockets = new Set<ResponsesSocket>();
  /** `GET /v1/responses` with `Upgrade: websocket`: the connection becomes a ResponsesSocket. */
  const openSocket = (request: Request, requestId: string): Response => {
    if (request.headers.get("upgrade")?.toLowerCase() !== "websocket") {
      throw new ApiError({
        status: 426,
        type: "invalid_request_error",
        message: "GET /v1/responses is WebSocket mode: send 'Upgrade: websocket' (or POST to create a response)",
        code: "upgrade_required",
        headers: { upgrade: "websocket", connection: "Upgrade" },
      });
    }
    if (!cors.allowsUpgrade(request)) {
      throw new ApiError({
        status: 403,
        type: "invalid_request_error",
        message: `WebSocket connections from origin '${
          request.headers.get("origin")
        }' are not allowed (see --allowed-origins)`,
        code: "origin_not_allowed",
      });
    }
    const { socket, response } = Deno.upgradeWebSocket(request);
    const handler = new ResponsesSocket(socket, {
      start: (body, previous, startedAt, trace) => responses.stream(body, previous, startedAt, trace),
      maxMessageChars: maxBody,
      refuse: () => draining ? unavailable("The server is shutting down") : null,
      ...(options.onError === undefined ? {} : { onError: options.onError }),
      onResponse: (entry) =>
        options.onRequest?.({ method: "WEBSOCKET", route: "/v1/responses", streamed: true, requestId, ...entry }),
    });
    sockets.add(handler);
    handler.finished.then(() => sockets.delete(handler));
    return response;
  };
  const model = {
    id: options.modelId,
    object: "model",
    created: createdAt,
    owned_by: "rill",
    max_model_len: options.engine.maxModelLen,
  };

  async function dispatch(
    match: RouteMatch,
    request: Request,
    url: URL,
    startedAt: number,
    trace: RequestTrace,
    requestId: string,
  ): Promise<Response> {
    switch (match.route) {
      case "/health":
        return jsonResponse({ status: draining ? "draining" : "ok" }, draining ? 503 : 200);
      case "/metrics":
        return new Response(metrics.render(options.engine.stats(), options.modelId) + connectionMetrics(gate.stats()), {
          headers: { "content-type": "text/plain; version=0.0.4; charset=utf-8" },
        });
      case "/version":
        return jsonResponse({ version: VERSION });
      case "/v1/models":
        return jsonResponse({ object: "list", data: [model] });
      case "/v1/models/{id}":
        if (match.id !== options.modelId) throw modelNotFound(match.id, options.modelId);
        return jsonResponse(model);
      case "/v1/responses":
        if (request.method !== "POST") return openSocket(request, requestId);
        return await responses.create(await readJsonBody(request, maxBody), request, startedAt, trace);
      case "/v1/responses/input_tokens":
        return await responses.inputTokens(await readJsonBody(request, maxBody));
      case "/v1/responses/compact":
        return await responses.compact(await readJsonBody(request, maxBody), request, startedAt, trace);
      case "/v1/responses/{id}":
        return request.method === "DELETE"
          ? await responses.delete(match.id, url)
          : await responses.retrieve(match.id, url, trace);
      case "/v1/responses/{id}/input_items":
        return await responses.inputItems(match.id, url);
      case "/v1/responses/{id}/cancel":
        return await responses.cancel(match.id, url);
      case "/v1/conversations":
        // The SDK's `conversations.create()` sends no body at all: that is an empty conversation.
        return await conversations.create(request.body === null ? {} : await readJsonBody(request, maxBody), url);
      case "/v1/conversations/{id}":
        if (request.method === "DELETE") return await conversations.delete(match.id, url);
        if (request.method === "POST") {
          return await conversations.update(match.id, await readJsonBody(request, maxBody), url);
        }
        return await conversations.retrieve(match.id, url);
      case "/v1/conversations/{id}/items":
        return request.method === "POST"
          ? await conversations.createItems(match.id, await readJsonBody(request, maxBody), url)
          : await conversations.listItems(match.id, url);
      case "/v1/conversations/{id}/items/{item_id}":
        return request.method === "DELETE"
          ? await conversations.deleteItem(match.id, match.itemId, url)
          : await conversations.retrieveItem(match.id, match.itemId, url);
      case "/v1/chat/completions":
        return await chat.create(await readJsonBody(request, maxBody), request, startedAt, trace);
      case "/v1/completions":
        return await completions.create(await readJsonBody(request, maxBody), request, startedAt);
      case "/tokenize":
        return tokenize.tokenize(await readJsonBody(request, maxBody));
      case "/detokenize":
        return tokenize.detokenize(await readJsonBody(request, maxBody));
      default: {
        const never: never = match;
        throw new TypeError(`Unhandled route ${JSON.stringify(never)}`);
      }
    }
  }

  async function handle(request: Request): Promise<Response> {
    const startedAt = performance.now();
    const url = new URL(request.url);
    const method = request.method;
    const found = matchRoute(method, url.pathname);
    const route = found.kind === "match" ? found.match.route : found.kind === "method" ? found.route : "unmatched";
    const id = requestId(request);
    const trace = new RequestTrace();
    let reason: string | null = null;
    let response: Response | null = cors.preflight(request);
    if (response === null) {
      try {
        // With a key, everything but the public routes is authenticated first: a 404 or 405 would tell a caller
        // without the key which routes exist.
        if (auth !== null && !(found.kind === "match" && publicRoutes.has(found.match.route))) {
          await auth.verify(request);
        }
        if (found.kind === "none") throw notFound(`Unknown path '${url.pathname}'`);
        if (found.kind === "method") throw methodNotAllowed(request.method, found.allow);
        // Draining: the listener stays open until the running requests are done, and a new request is told to go
        // elsewhere (503 + Retry-After) instead of being refused at the socket.
        if (draining && found.match.route !== "/health") throw unavailable("The server is shutting down");
        response = await dispatch(found.match, request, url, startedAt, trace, id);
      } catch (error) {
        // Only what became the generic 500 is unexpected, and logged.
        const api = toApiError(error);
        if (!(error instanceof ApiError) && api.status === 500) options.onError?.(error);
        reason = api.code === null ? api.message : `${api.code}: ${api.message}`;
        response = errorResponse(api);
        if (draining) response.headers.set("connection", "close");
      }
    }
    response.headers.set("x-request-id", id);
    // An upgraded request can no longer be read (Deno closes it), and CORS does not govern WebSockets.
    if (response.status !== 101) cors.decorate(request, response);
    metrics.countRequest(route, response.status);
    const status = response.status;
    const log = () =>
      options.onRequest?.({
        method,
        route,
        status,
        ms: performance.now() - startedAt,
        ...(trace.responseId === null ? {} : { id: trace.responseId }),
        ...(trace.inputTokens === null ? {} : { input_tokens: trace.inputTokens }),
        ...(trace.outputTokens === null ? {} : { output_tokens: trace.outputTokens }),
        ...(reason === null ? {} : { reason }),
        ...(trace.streaming ? { streamed: true } : {}),
        requestId: id,
      });
    // A streamed body is logged when it ends, with the request's real duration and its token counts.
    if (trace.streaming) trace.bodyEnd.then(log);
    else log();
    return response;
  }

  // Deno.serve listens on a private Unix socket; the gate owns the public TCP port (connection_gate.ts).
  const socketDir = Deno.makeTempDirSync({ prefix: "rill-" });
  let generation = 0;
  const socketPath = () => `${socketDir}/http-${generation}.sock`;
  let gate: ConnectionGate;
  try {
    gate = new ConnectionGate({
      hostname: options.hostname ?? "127.0.0.1",
      port: options.port ?? 8000,
      target: socketPath(),
      maxConnections: options.maxConnections ?? defaultMaxConnections(),
      headerTimeoutMs: options.headerTimeoutMs ?? 10_000,
      bodyTimeoutMs: options.bodyTimeoutMs ?? 60_000,
      idleTimeoutMs: options.idleTimeoutMs ?? 60_000,
      ...(options.onConnectionEvent === undefined ? {} : { onEvent: options.onConnectionEvent }),
    });
  } catch (error) {
    Deno.removeSync(socketDir, { recursive: true });
    throw error;
  }
  let stopping = false;
  const { promise: finished, resolve: onFinished } = Promise.withResolvers<void>();
  /**
   * Starts Deno.serve on a fresh socket. Its accept loop ends for good on an accept error (descriptors exhausted):
   * that is logged and a new one takes over, so no such error ever stops the process.
   */
  const startInner = (): Deno.HttpServer<Deno.UnixAddr> => {
    const path = socketPath();
    const inner = Deno.serve({
      transport: "unix",
      path,
      onListen: () => {},
      onError: (error) => {
        options.onError?.(error);
        return errorResponse(error);
      },
    }, handle);
    gate.target = path;
    inner.finished.then(
      async () => {
        await gate.drain(2000);
        try {
          Deno.removeSync(socketDir, { recursive: true });
        } catch { /* already gone */ }
        onFinished();
      },
      (error) => {
        options.onConnectionEvent?.({
          type: "accept_error",
          error: error instanceof Error ? error.message : String(error),
        });
        if (stopping) return onFinished();
        generation++;
        server = startInner();
      },
    );
    return inner;
  };
  let server = startInner();
  const addr = gate.addr;
  const hostForUrl = addr.hostname.includes(":") ? `[${addr.hostname}]` : addr.hostname;

  return {
    url: `http://${hostForUrl}:${addr.port}`,
    port: addr.port,
    hostname: addr.hostname,
    metrics,
    connections: () => gate.stats(),
    active: () => responses.active + chat.active + completions.active,
    finished,
    async shutdown(timeoutMs: number) {
      draining = true;
      const deadline = performance.now() + Math.max(0, timeoutMs);
      const idle = () => responses.active + chat.active + completions.active === 0;
      while (!idle() && performance.now() < deadline) await sleep(Math.min(20, deadline - performance.now()));
      // Whatever is still generating after the grace period is aborted; each ends within one step, with an ending
      // its client can tell from a finished one (ResponsesService.abortAll, ChatCompletionsService.abortAll).
      responses.abortAll();
      chat.abortAll();
      completions.abortAll();
      while (!idle()) await sleep(10);
      // A client that never answers the close handshake holds no one up: the gate closes its connection later.
      for (const socket of sockets) socket.close(1001, "The server is shutting down");
      await Promise.race([Promise.all([...sockets].map((socket) => socket.finished)), sleep(1000)]);
      // Only now does the listener close (Deno's shutdown also waits for the responses being written, and closes
      // idle keep-alive connections).
      stopping = true;
      gate.closeListener();
      await server.shutdown();
      await finished;
    },
  };
}
