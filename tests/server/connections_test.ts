/**
 * The connection front (connection_gate.ts), on 127.0.0.1 with small bounded numbers: a connection limit answered
 * 503 + Retry-After, header/body/idle timeouts (slowloris clients dropped), broken framing answered 400 and not
 * counted as a server error, a client that disconnects mid-upload counted as a client abort (499, not a logged 500).
 */
import assert from "node:assert/strict";
import type { AccessLogEntry } from "../../server/server.ts";
import { MODEL, startTestServer, type TestServerOptions } from "../../testing/test_server.ts";

const utf8 = new TextEncoder();

async function connect(url: string): Promise<Deno.TcpConn> {
  const { hostname, port } = new URL(url);
  return await Deno.connect({ hostname, port: Number(port) });
}

/** Everything the server sends until it closes the connection (or `ms` pass: then null). */
async function readUntilClosed(conn: Deno.Conn, ms: number): Promise<string | null> {
  const buffer = new Uint8Array(4096);
  let text = "";
  const deadline = setTimeout(() => conn.close(), ms);
  try {
    for (;;) {
      const n = await conn.read(buffer).catch(() => undefined);
      if (n === undefined) return null; // closed by the deadline
      if (n === null) return text;
      text += new TextDecoder().decode(buffer.subarray(0, n));
    }
  } finally {
    clearTimeout(deadline);
    try {
      conn.close();
    } catch { /* closed */ }
  }
}

function server(options: Partial<NonNullable<TestServerOptions["server"]>> = {}) {
  const log: AccessLogEntry[] = [];
  const errors: unknown[] = [];
  const t = startTestServer({
    server: { onRequest: (e) => log.push(e), onError: (e) => errors.push(e), ...options },
  });
  return { t, log, errors };
}

function fiveHundreds(t: ReturnType<typeof startTestServer>): number {
  let n = 0;
  for (const route of ["/v1/responses", "/v1/chat/completions", "unmatched"]) {
    for (let status = 500; status < 600; status++) n += t.server.metrics.requestCount(route, status);
  }
  return n;
}

Deno.test("connections: past the limit a connection is answered 503 with Retry-After; freed, it is served", async () => {
  const { t } = server({ maxConnections: 4 });
  try {
    const held = await Promise.all(Array.from({ length: 4 }, () => connect(t.url)));
    await new Promise((r) => setTimeout(r, 50));
    assert.equal(t.server.connections().open, 4);
    const extra = await connect(t.url);
    const answer = await readUntilClosed(extra, 2000);
    assert.match(answer!, /^HTTP\/1\.1 503 /);
    assert.match(answer!, /retry-after: 1/i);
    assert.match(answer!, /"code":"too_many_connections"/);
    held.pop()!.close();
    await new Promise((r) => setTimeout(r, 50));
    assert.equal((await fetch(`${t.url}/health`)).status, 200);
    for (const conn of held) conn.close();
  } finally {
    await t.close();
  }
});

Deno.test("connections: a slowloris head, a stalled body and an idle connection are closed on time", async () => {
  const { t } = server({ headerTimeoutMs: 300, bodyTimeoutMs: 300, idleTimeoutMs: 300 });
  try {
    // 1 byte every 50 ms: the head never completes within 300 ms.
    const slow = await connect(t.url);
    const dribble = (async () => {
      for (const byte of utf8.encode("POST /v1/responses HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n")) {
        if (await slow.write(Uint8Array.of(byte)).catch(() => null) === null) return;
        await new Promise((r) => setTimeout(r, 50));
      }
    })();
    const started = performance.now();
    const slowAnswer = await readUntilClosed(slow, 3000);
    assert.notEqual(slowAnswer, null, "the slowloris connection was never closed");
    assert.match(slowAnswer!, /^HTTP\/1\.1 408 /);
    assert.ok(performance.now() - started < 1500);
    await dribble;

    const stalled = await connect(t.url);
    await stalled.write(utf8.encode(
      "POST /v1/responses HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{",
    ));
    assert.notEqual(await readUntilClosed(stalled, 3000), null, "a stalled body was held open");

    const idle = await connect(t.url);
    assert.notEqual(await readUntilClosed(idle, 3000), null, "an idle connection was held open");
    assert.ok(t.server.connections().timedOut >= 3);
    // A keep-alive connection between requests is idle too; a long request is not.
    const r = await fetch(`${t.url}/health`);
    assert.equal(r.status, 200);
  } finally {
    await t.close();
  }
});

Deno.test("connections: broken framing is a 400 from the front and never a 5xx", async () => {
  const { t } = server();
  try {
    for (const raw of ["GARBAGE\r\n\r\n", "POST /v1/responses HTTP/1.1\r\ncontent-length: x\r\n\r\n"]) {
      const conn = await connect(t.url);
      await conn.write(utf8.encode(raw));
      const answer = await readUntilClosed(conn, 2000);
      assert.match(answer!, /^HTTP\/1\.1 400 /, raw);
    }
    assert.equal(t.server.connections().badFraming, 2);
    assert.equal(fiveHundreds(t), 0);
  } finally {
    await t.close();
  }
});

Deno.test("connections: a client that disconnects mid-upload is a client abort, not a logged 500", async () => {
  const { t, log, errors } = server();
  try {
    const conn = await connect(t.url);
    await conn.write(utf8.encode(
      "POST /v1/responses HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: 100000\r\n\r\n" +
        `{"model":"${MODEL}","input":"` + "x".repeat(5000),
    ));
    await new Promise((r) => setTimeout(r, 50));
    conn.close();
    for (let i = 0; i < 100 && log.length === 0; i++) await new Promise((r) => setTimeout(r, 10));
    assert.equal(log.length, 1);
    assert.equal(log[0]!.status, 499);
    assert.deepEqual(errors, []);
    assert.equal(fiveHundreds(t), 0);
  } finally {
    await t.close();
  }
});

Deno.test("connections: running out of file descriptors does not stop the server", async () => {
  // A child server under a small descriptor limit, flooded past it; it must keep running and serve afterwards.
  const child = new Deno.Command("bash", {
    args: [
      "-c",
      `ulimit -n 96 && exec "${Deno.execPath()}" run -A testing/scripted_serve.ts serve --port 0 --data-dir :memory: --max-connections 1000`,
    ],
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const decoder = new TextDecoder();
  let out = "";
  const reading = (async () => {
    for await (const chunk of child.stdout) out += decoder.decode(chunk);
  })();
  let err = "";
  const errReading = (async () => {
    for await (const chunk of child.stderr) err += decoder.decode(chunk);
  })();
  try {
    let url: string | undefined;
    for (let i = 0; i < 400 && url === undefined; i++) {
      url = /at (http:\/\/\S+)/.exec(out)?.[1];
      if (url === undefined) await new Promise((r) => setTimeout(r, 25));
    }
    assert.ok(url !== undefined, "server did not start");
    const flood: Deno.TcpConn[] = [];
    for (let i = 0; i < 120; i++) flood.push(await connect(url));
    await new Promise((r) => setTimeout(r, 200));
    for (const conn of flood) conn.close();
    await new Promise((r) => setTimeout(r, 300));
    const health = await fetch(`${url}/health`);
    assert.equal(health.status, 200);
    await health.body?.cancel();
    const status = await Promise.race([child.status, new Promise((r) => setTimeout(() => r("running"), 100))]);
    assert.equal(status, "running", err);
    assert.match(err, /accept failed; retrying/);
  } catch (e) {
    // Say what the child did: a failure here must be diagnosable from one CI log.
    const state = await Promise.race([
      child.status.then((s) => `exited with code ${s.code}, signal ${s.signal}`),
      new Promise((r) => setTimeout(() => r("still running"), 500)),
    ]);
    const message = e instanceof Error ? e.message : String(e);
    throw new Error(`${message}\nchild server: ${state}\nits stderr (last 3,000 characters):\n${err.slice(-3000)}`);
  } finally {
    child.kill("SIGKILL");
    await child.status;
    await reading;
    await errReading;
  }
});

Deno.test("connections: /metrics reports open connections and the front's counters", async () => {
  const { t } = server({ maxConnections: 2 });
  try {
    const held = await connect(t.url);
    await new Promise((r) => setTimeout(r, 30));
    const text = await (await fetch(`${t.url}/metrics`)).text();
    assert.match(text, /^rill_connections_open 2$/m);
    assert.match(text, /^rill_connections_refused_total 0$/m);
    held.close();
  } finally {
    await t.close();
  }
});
