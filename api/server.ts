/**
 * rill's HTTP server on `Deno.serve`: routing, authentication, body limits, metrics and graceful shutdown around
 * the Responses and Chat Completions services. Every failure before a response body exists goes through
 * `errorResponse` (errors.ts); failures after SSE headers are the pipeline's `error` + `response.failed`.
 */
import { StructuredOutputs } from "./structured_output.ts";
import type { ChatFormat } from "../formats/chat_format.ts";
import type { Engine } from "../engine/engine.ts";
import type { IdSource } from "../stream/ids.ts";
import { ApiKeyCheck } from "./auth.ts";
import { ChatCompletionsService } from "./chat_completions.ts";
import {
  ApiError,
  errorResponse,
  methodNotAllowed,
  modelNotFound,
  notFound,
  toApiError,
  unavailable,
} from "./errors.ts";
import { DEFAULT_MAX_BODY_BYTES, readJsonBody } from "./http_body.ts";
import { jsonResponse } from "./http_response.ts";
import { Metrics } from "./metrics.ts";
import type { ResponseStore } from "./response_store.ts";
import type { SamplingDefaults } from "./sampling_defaults.ts";
import { OPENAI_DEFAULTS } from "./sampling_defaults.ts";
import { ResponsesService } from "./responses_service.ts";
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
}

export interface AccessLogEntry {
  readonly method: string;
  readonly route: string;
  readonly status: number;
  readonly ms: number;
}

export interface RillServer {
  readonly url: string;
  readonly port: number;
  readonly hostname: string;
  readonly metrics: Metrics;
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

export function createServer(options: ServerOptions): RillServer {
  const metrics = new Metrics();
  const defaults = options.defaults ?? OPENAI_DEFAULTS;
  const maxBody = options.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES;
  const auth = options.apiKey === undefined || options.apiKey === "" ? null : new ApiKeyCheck(options.apiKey);
  const createdAt = options.createdAt ?? Math.floor(Date.now() / 1000);
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
    ...(options.ids === undefined ? {} : { ids: options.ids }),
    ...(options.onError === undefined ? {} : { onError: options.onError }),
  });
  const chat = new ChatCompletionsService({
    ...structured,
    engine: options.engine,
    format: options.format,
    modelId: options.modelId,
    metrics,
    defaults,
  });
  let draining = false;
  const model = {
    id: options.modelId,
    object: "model",
    created: createdAt,
    owned_by: "rill",
    max_model_len: options.engine.maxModelLen,
  };

  async function dispatch(match: RouteMatch, request: Request, url: URL, startedAt: number): Promise<Response> {
    switch (match.route) {
      case "/health":
        return jsonResponse({ status: draining ? "draining" : "ok" }, draining ? 503 : 200);
      case "/metrics":
        return new Response(metrics.render(options.engine.stats(), options.modelId), {
          headers: { "content-type": "text/plain; version=0.0.4; charset=utf-8" },
        });
      case "/v1/models":
        return jsonResponse({ object: "list", data: [model] });
      case "/v1/models/{id}":
        if (match.id !== options.modelId) throw modelNotFound(match.id, options.modelId);
        return jsonResponse(model);
      case "/v1/responses":
        if (draining) throw unavailable("The server is shutting down");
        return await responses.create(await readJsonBody(request, maxBody), request, startedAt);
      case "/v1/responses/input_tokens":
        return responses.inputTokens(await readJsonBody(request, maxBody));
      case "/v1/responses/{id}":
        return request.method === "DELETE" ? await responses.delete(match.id, url) : responses.retrieve(match.id, url);
      case "/v1/responses/{id}/input_items":
        return responses.inputItems(match.id, url);
      case "/v1/responses/{id}/cancel":
        return await responses.cancel(match.id, url);
      case "/v1/chat/completions":
        if (draining) throw unavailable("The server is shutting down");
        return await chat.create(await readJsonBody(request, maxBody), request, startedAt);
      default: {
        const never: never = match;
        throw new TypeError(`Unhandled route ${JSON.stringify(never)}`);
      }
    }
  }

  async function handle(request: Request): Promise<Response> {
    const startedAt = performance.now();
    const url = new URL(request.url);
    const found = matchRoute(request.method, url.pathname);
    const route = found.kind === "match" ? found.match.route : found.kind === "method" ? found.route : "unmatched";
    let response: Response;
    try {
      if (found.kind === "none") throw notFound(`Unknown path '${url.pathname}'`);
      if (found.kind === "method") throw methodNotAllowed(request.method, found.allow);
      if (auth !== null && found.match.route !== "/health") await auth.verify(request);
      response = await dispatch(found.match, request, url, startedAt);
    } catch (error) {
      // Only what became the generic 500 is unexpected, and logged.
      if (!(error instanceof ApiError) && toApiError(error).status === 500) options.onError?.(error);
      response = errorResponse(error);
    }
    metrics.countRequest(route, response.status);
    options.onRequest?.({ method: request.method, route, status: response.status, ms: performance.now() - startedAt });
    return response;
  }

  const server = Deno.serve({
    port: options.port ?? 8000,
    hostname: options.hostname ?? "127.0.0.1",
    onListen: () => {},
    onError: (error) => {
      options.onError?.(error);
      return errorResponse(error);
    },
  }, handle);
  const addr = server.addr as Deno.NetAddr;
  const hostForUrl = addr.hostname.includes(":") ? `[${addr.hostname}]` : addr.hostname;

  return {
    url: `http://${hostForUrl}:${addr.port}`,
    port: addr.port,
    hostname: addr.hostname,
    metrics,
    active: () => responses.active + chat.active,
    finished: server.finished,
    async shutdown(timeoutMs: number) {
      draining = true;
      let timer: ReturnType<typeof setTimeout> | undefined;
      const grace = new Promise<void>((resolve) => timer = setTimeout(resolve, Math.max(0, timeoutMs)));
      const stopped = Promise.all([server.shutdown(), responses.drainBackground()]);
      await Promise.race([stopped, grace]);
      clearTimeout(timer);
      // Whatever is still generating after the grace period is aborted; its streams then end within one step.
      responses.abortAll();
      chat.abortAll();
      await stopped;
    },
  };
}
