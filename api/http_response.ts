/**
 * Response constructors for JSON and SSE bodies.
 *
 * SSE must reach the client event by event: Deno compresses (and therefore buffers) a streamed body when the client
 * sends Accept-Encoding and the response has no Content-Encoding (denoland/deno#19889). `content-encoding:
 * identity` opts out of that, and `no-transform` asks proxies not to re-encode either.
 */
const SSE_HEADERS: Readonly<Record<string, string>> = {
  "content-type": "text/event-stream",
  "cache-control": "no-cache, no-transform",
  "content-encoding": "identity",
  "x-accel-buffering": "no",
};

export function jsonResponse(body: unknown, status = 200, headers: Record<string, string> = {}): Response {
  return new Response(JSON.stringify(body), {
    status,
    headers: { "content-type": "application/json", ...headers },
  });
}

export function sseResponse(body: ReadableStream<Uint8Array>): Response {
  return new Response(body, { status: 200, headers: SSE_HEADERS });
}
