/**
 * One HTTP request from arrival to answer: CORS preflight, authentication, route lookup, draining, the route's
 * handler, then every failure turned into an OpenAI-shaped error (errors.ts), the request id and CORS headers set,
 * the request counted and its access-log entry reported (for a streamed body, when the body ends).
 */
import { RequestTrace } from "../api/request_trace.ts";
import { ApiError, errorResponse, methodNotAllowed, notFound, toApiError, unavailable } from "../prompt/errors.ts";
import { requestId } from "./request_id.ts";
import { dispatch } from "./route_handlers.ts";
import { matchRoute } from "./routes.ts";
import type { ServerContext } from "./server_context.ts";

export async function handleRequest(ctx: ServerContext, request: Request): Promise<Response> {
  const startedAt = performance.now();
  const url = new URL(request.url);
  const found = matchRoute(request.method, url.pathname);
  const route = found.kind === "match" ? found.match.route : found.kind === "method" ? found.route : "unmatched";
  const id = requestId(request);
  const trace = new RequestTrace();
  let reason: string | null = null;
  let response: Response | null = ctx.cors.preflight(request);
  if (response === null) {
    try {
      // With a key, everything but the public routes is authenticated first: a 404 or 405 would tell a caller
      // without the key which routes exist.
      if (ctx.auth !== null && !(found.kind === "match" && ctx.publicRoutes.has(found.match.route))) {
        await ctx.auth.verify(request);
      }
      if (found.kind === "none") throw notFound(`Unknown path '${url.pathname}'`);
      if (found.kind === "method") throw methodNotAllowed(request.method, found.allow);
      // Draining: the listener stays open until the running requests are done, and a new request is told to go
      // elsewhere (503 + Retry-After) instead of being refused at the socket.
      if (ctx.draining && found.match.route !== "/health") throw unavailable("The server is shutting down");
      response = await dispatch(ctx, found.match, { request, url, startedAt, trace, requestId: id });
    } catch (error) {
      // Only what became the generic 500 is unexpected, and logged.
      const api = toApiError(error);
      if (!(error instanceof ApiError) && api.status === 500) ctx.options.onError?.(error);
      reason = api.code === null ? api.message : `${api.code}: ${api.message}`;
      response = errorResponse(api);
      if (ctx.draining) response.headers.set("connection", "close");
    }
  }
  response.headers.set("x-request-id", id);
  // An upgraded request can no longer be read (Deno closes it), and CORS does not govern WebSockets.
  if (response.status !== 101) ctx.cors.decorate(request, response);
  ctx.metrics.countRequest(route, response.status);
  logAccess(ctx, { method: request.method, route, status: response.status, startedAt, trace, reason, requestId: id });
  return response;
}

interface Answered {
  readonly method: string;
  readonly route: string;
  readonly status: number;
  readonly startedAt: number;
  readonly trace: RequestTrace;
  readonly reason: string | null;
  readonly requestId: string;
}

/** Reports the access-log entry; a streamed body is logged when it ends, with its real duration and token counts. */
function logAccess(ctx: ServerContext, answered: Answered): void {
  const { trace, reason } = answered;
  const log = () =>
    ctx.options.onRequest?.({
      method: answered.method,
      route: answered.route,
      status: answered.status,
      ms: performance.now() - answered.startedAt,
      ...(trace.responseId === null ? {} : { id: trace.responseId }),
      ...(trace.inputTokens === null ? {} : { input_tokens: trace.inputTokens }),
      ...(trace.outputTokens === null ? {} : { output_tokens: trace.outputTokens }),
      ...(reason === null ? {} : { reason }),
      ...(trace.streaming ? { streamed: true } : {}),
      requestId: answered.requestId,
    });
  if (trace.streaming) trace.bodyEnd.then(log);
  else log();
}
