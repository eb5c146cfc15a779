/**
 * A `fetch` for SDK clients that keeps a copy of every `text/event-stream` body it returns, so a test can run the
 * stream validator over exactly the bytes the SDK consumed.
 */
export interface SseTap {
  readonly fetch: typeof fetch;
  /** One promise per SSE response, resolving to its whole body text. */
  readonly bodies: Promise<string>[];
}

export function sseTap(): SseTap {
  const bodies: Promise<string>[] = [];
  const tapped: typeof fetch = async (input, init) => {
    const response = await fetch(input, init);
    if (response.headers.get("content-type") !== "text/event-stream" || response.body === null) return response;
    const [mine, theirs] = response.body.tee();
    bodies.push(new Response(mine).text());
    return new Response(theirs, { status: response.status, headers: response.headers });
  };
  return { fetch: tapped, bodies };
}
