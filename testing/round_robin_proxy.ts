/**
 * Test support: an HTTP load balancer with no affinity, as simple as they come: each request goes to the next
 * backend in turn, its response (streamed bodies too) passed back as it arrives.
 */
export interface RoundRobinProxy {
  readonly url: string;
  close(): Promise<void>;
}

export function startRoundRobinProxy(backends: readonly string[]): RoundRobinProxy {
  let next = 0;
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, async (request) => {
    const target = new URL(request.url);
    const backend = new URL(backends[next++ % backends.length]!);
    target.protocol = backend.protocol;
    target.host = backend.host;
    const body = request.body === null ? null : await request.arrayBuffer();
    try {
      return await fetch(target, { method: request.method, headers: request.headers, body, signal: request.signal });
    } catch (error) {
      return new Response(JSON.stringify({ error: { message: String(error), type: "proxy_error" } }), { status: 502 });
    }
  });
  return {
    url: `http://127.0.0.1:${server.addr.port}`,
    close: () => server.shutdown(),
  };
}
