/** `GET /v1/responses` with `Upgrade: websocket`: the connection becomes a ResponsesSocket (WebSocket mode). */
import { ResponsesSocket } from "../api/responses/responses_socket.ts";
import { ApiError, unavailable } from "../prompt/errors.ts";
import type { ServerContext } from "./server_context.ts";

export function openResponsesSocket(ctx: ServerContext, request: Request, requestId: string): Response {
  if (request.headers.get("upgrade")?.toLowerCase() !== "websocket") {
    throw new ApiError({
      status: 426,
      type: "invalid_request_error",
      message: "GET /v1/responses is WebSocket mode: send 'Upgrade: websocket' (or POST to create a response)",
      code: "upgrade_required",
      headers: { upgrade: "websocket", connection: "Upgrade" },
    });
  }
  if (!ctx.cors.allowsUpgrade(request)) {
    throw new ApiError({
      status: 403,
      type: "invalid_request_error",
      message: `WebSocket connections from origin '${
        request.headers.get("origin")
      }' are not allowed (see --allowed-origins)`,
      code: "origin_not_allowed",
    });
  }
  const { options, services: { responses } } = ctx;
  const { socket, response } = Deno.upgradeWebSocket(request);
  const handler = new ResponsesSocket(socket, {
    start: (body, previous, startedAt, trace) => responses.stream(body, previous, startedAt, trace),
    maxMessageChars: ctx.maxBody,
    refuse: () => ctx.draining ? unavailable("The server is shutting down") : null,
    ...(options.onError === undefined ? {} : { onError: options.onError }),
    onResponse: (entry) =>
      options.onRequest?.({ method: "WEBSOCKET", route: "/v1/responses", streamed: true, requestId, ...entry }),
  });
  ctx.sockets.add(handler);
  handler.finished.then(() => ctx.sockets.delete(handler));
  return response;
}
