/**
 * What each route of the table (routes.ts) does: the request is handed to its resource (api/) with its body read
 * under the server's limit. `switch`es over `RouteMatch` are exhaustive, so a new route fails to compile until it is
 * handled here.
 */
import { jsonResponse } from "../api/http_response.ts";
import type { RequestTrace } from "../api/request_trace.ts";
import { modelNotFound } from "../prompt/errors.ts";
import { connectionMetrics } from "./connection_metrics.ts";
import { readJsonBody } from "./http_body.ts";
import { openResponsesSocket } from "./responses_upgrade.ts";
import type { RouteMatch } from "./routes.ts";
import type { ServerContext } from "./server_context.ts";
import { VERSION } from "./version.ts";

/** One request as the route handlers see it, past authentication and the route lookup. */
export interface RoutedRequest {
  readonly request: Request;
  readonly url: URL;
  readonly startedAt: number;
  readonly trace: RequestTrace;
  readonly requestId: string;
}

type Route<R extends RouteMatch["route"]> = Extract<RouteMatch, { readonly route: R }>;
type ResponsesRoute = Route<
  | "/v1/responses"
  | "/v1/responses/input_tokens"
  | "/v1/responses/compact"
  | "/v1/responses/{id}"
  | "/v1/responses/{id}/input_items"
  | "/v1/responses/{id}/cancel"
>;
type ConversationsRoute = Route<
  | "/v1/conversations"
  | "/v1/conversations/{id}"
  | "/v1/conversations/{id}/items"
  | "/v1/conversations/{id}/items/{item_id}"
>;

export async function dispatch(ctx: ServerContext, match: RouteMatch, routed: RoutedRequest): Promise<Response> {
  const { request } = routed;
  const { options, services } = ctx;
  switch (match.route) {
    case "/health":
      return jsonResponse({ status: ctx.draining ? "draining" : "ok" }, ctx.draining ? 503 : 200);
    case "/metrics":
      return new Response(
        ctx.metrics.render(options.engine.stats(), options.modelId) + connectionMetrics(ctx.connections()),
        { headers: { "content-type": "text/plain; version=0.0.4; charset=utf-8" } },
      );
    case "/version":
      return jsonResponse({ version: VERSION });
    case "/v1/models":
      return jsonResponse({ object: "list", data: [ctx.model] });
    case "/v1/models/{id}":
      if (match.id !== options.modelId) throw modelNotFound(match.id, options.modelId);
      return jsonResponse(ctx.model);
    case "/v1/responses":
    case "/v1/responses/input_tokens":
    case "/v1/responses/compact":
    case "/v1/responses/{id}":
    case "/v1/responses/{id}/input_items":
    case "/v1/responses/{id}/cancel":
      return await responsesRoute(ctx, match, routed);
    case "/v1/conversations":
    case "/v1/conversations/{id}":
    case "/v1/conversations/{id}/items":
    case "/v1/conversations/{id}/items/{item_id}":
      return await conversationsRoute(ctx, match, routed);
    case "/v1/chat/completions":
      return await services.chat.create(
        await readJsonBody(request, ctx.maxBody),
        request,
        routed.startedAt,
        routed.trace,
      );
    case "/v1/completions":
      return await services.completions.create(await readJsonBody(request, ctx.maxBody), request, routed.startedAt);
    case "/tokenize":
      return services.tokenize.tokenize(await readJsonBody(request, ctx.maxBody));
    case "/detokenize":
      return services.tokenize.detokenize(await readJsonBody(request, ctx.maxBody));
    default: {
      const never: never = match;
      throw new TypeError(`Unhandled route ${JSON.stringify(never)}`);
    }
  }
}

async function responsesRoute(ctx: ServerContext, match: ResponsesRoute, routed: RoutedRequest): Promise<Response> {
  const { request, url, startedAt, trace } = routed;
  const responses = ctx.services.responses;
  switch (match.route) {
    case "/v1/responses":
      if (request.method !== "POST") return openResponsesSocket(ctx, request, routed.requestId);
      return await responses.create(await readJsonBody(request, ctx.maxBody), request, startedAt, trace);
    case "/v1/responses/input_tokens":
      return await responses.inputTokens(await readJsonBody(request, ctx.maxBody));
    case "/v1/responses/compact":
      return await responses.compact(await readJsonBody(request, ctx.maxBody), request, startedAt, trace);
    case "/v1/responses/{id}":
      return request.method === "DELETE"
        ? await responses.delete(match.id, url)
        : await responses.retrieve(match.id, url, trace);
    case "/v1/responses/{id}/input_items":
      return await responses.inputItems(match.id, url);
    case "/v1/responses/{id}/cancel":
      return await responses.cancel(match.id, url);
    default: {
      const never: never = match;
      throw new TypeError(`Unhandled route ${JSON.stringify(never)}`);
    }
  }
}

async function conversationsRoute(
  ctx: ServerContext,
  match: ConversationsRoute,
  routed: RoutedRequest,
): Promise<Response> {
  const { request, url } = routed;
  const conversations = ctx.services.conversations;
  switch (match.route) {
    case "/v1/conversations":
      // The SDK's `conversations.create()` sends no body at all: that is an empty conversation.
      return await conversations.create(request.body === null ? {} : await readJsonBody(request, ctx.maxBody), url);
    case "/v1/conversations/{id}":
      if (request.method === "DELETE") return await conversations.delete(match.id, url);
      if (request.method === "POST") {
        return await conversations.update(match.id, await readJsonBody(request, ctx.maxBody), url);
      }
      return await conversations.retrieve(match.id, url);
    case "/v1/conversations/{id}/items":
      return request.method === "POST"
        ? await conversations.createItems(match.id, await readJsonBody(request, ctx.maxBody), url)
        : await conversations.listItems(match.id, url);
    case "/v1/conversations/{id}/items/{item_id}":
      return request.method === "DELETE"
        ? await conversations.deleteItem(match.id, match.itemId, url)
        : await conversations.retrieveItem(match.id, match.itemId, url);
    default: {
      const never: never = match;
      throw new TypeError(`Unhandled route ${JSON.stringify(never)}`);
    }
  }
}
