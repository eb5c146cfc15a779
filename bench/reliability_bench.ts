/**
 * Reliability scenarios against a rill server process (testing/scripted_serve.ts via bench/scripted_server.ts: the real CLI, server, gate,
 * pipeline and store over a paced engine), all on 127.0.0.1 with bounded numbers:
 * - stall: while one heavy request is handled (truncation "auto" over 2,000 messages, a 16 MB input, three 16 MB
 *   inputs at once, a tool schema 3,000 deep), the largest gap between two steps of a concurrent stream whose
 *   engine steps every 5 ms, next to the largest gap over an idle stretch of the same length (the machine's noise);
 * - flood: 2,000 idle connections against --max-connections 512 (how many are held, how many refused, whether
 *   /health still answers and how fast), then 50 slowloris clients (1 byte/s) against a 2 s header timeout;
 * - shutdown: 40 Responses streams, 20 Chat streams, 10 non-streamed and 10 background responses cut by SIGTERM
 *   with a 1 s grace period: how many ended with a terminal event (must be all) and what new requests got.
 * Heavy bodies are sent by curl from files, so this process's own JSON work never sits in the measured stream's way.
 * The server runs with the V8 flags of `deno task serve` (RILL_BENCH_V8_FLAGS overrides them).
 */
import { startScriptedServer } from "./scripted_server.ts";

const MODEL = "rill-test";
const utf8 = new TextEncoder();

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function curlPost(url: string, file: string): Promise<number> {
  const out = await new Deno.Command("curl", {
    args: [
      "-s",
      "-o",
      "/dev/null",
      "-w",
      "%{http_code}",
      "-H",
      "content-type: application/json",
      "--data-binary",
      `@${file}`,
      url,
    ],
    stdout: "piped",
  }).output();
  return Number(new TextDecoder().decode(out.stdout));
}

/** A long chat stream whose largest gap between chunks is read (and reset) on demand. */
async function watchedStream(url: string): Promise<{ reset(): number; stop(): Promise<void> }> {
  const controller = new AbortController();
  const r = await fetch(`${url}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model: MODEL, messages: [{ role: "user", content: "hi" }], stream: true }),
    signal: controller.signal,
  });
  const reader = r.body!.getReader();
  let largest = 0;
  let last = performance.now();
  const reading = (async () => {
    for (let i = 0;; i++) {
      const { done } = await reader.read();
      if (done) return;
      const now = performance.now();
      if (i > 3) largest = Math.max(largest, now - last);
      last = now;
    }
  })().catch(() => {});
  await sleep(100);
  return {
    reset() {
      const seen = largest;
      largest = 0;
      return seen;
    },
    async stop() {
      await reader.cancel().catch(() => {});
      controller.abort();
      await reading;
    },
  };
}

/** Writes a JSON body of about `mb` MB to `path` piecewise (never holding it in memory). */
function writeBigInput(path: string, mb: number): void {
  const file = Deno.openSync(path, { write: true, create: true, truncate: true });
  const piece = utf8.encode("lorem ipsum dolor sit amet ".repeat(40_000));
  file.writeSync(utf8.encode(`{"model":"${MODEL}","input":"`));
  for (let size = 0; size + piece.length < mb * 1024 * 1024 - 64; size += piece.length) file.writeSync(piece);
  file.writeSync(utf8.encode('","store":false}'));
  file.close();
}

async function stall(): Promise<number> {
  const dir = await Deno.makeTempDir({ prefix: "rill-bench-" });
  const files = {
    truncation: `${dir}/truncation.json`,
    big: `${dir}/big.json`,
    schema: `${dir}/schema.json`,
  };
  const messages = Array.from({ length: 2000 }, (_, i) => ({
    role: i % 2 === 0 ? "user" : "assistant",
    content: `${i} ` + "lorem ipsum dolor sit amet ".repeat(11),
  }));
  Deno.writeTextFileSync(
    files.truncation,
    JSON.stringify({ model: MODEL, input: messages, truncation: "auto", store: false, max_output_tokens: 1 }),
  );
  writeBigInput(files.big, 15.9);
  let schema: unknown = { type: "string" };
  for (let i = 0; i < 3000; i++) schema = { type: "object", properties: { a: schema } };
  Deno.writeTextFileSync(
    files.schema,
    JSON.stringify({ model: MODEL, input: "hi", tools: [{ type: "function", name: "f", parameters: schema }] }),
  );
  const server = await startScriptedServer(["--max-model-len", "131072"], {
    RILL_TEST_STEPS: "100000",
    RILL_TEST_STEP_DELAY_MS: "5",
  });
  let worst = 0;
  try {
    const watch = await watchedStream(server.url);
    const cases: [string, () => Promise<string>][] = [
      [
        "truncation auto, 2,000 messages (666 KB)",
        async () => `${await curlPost(`${server.url}/v1/responses`, files.truncation)}`,
      ],
      ["16 MB input", async () => `${await curlPost(`${server.url}/v1/responses`, files.big)}`],
      [
        "three 16 MB inputs at once",
        async () =>
          (await Promise.all([1, 2, 3].map(() => curlPost(`${server.url}/v1/responses`, files.big)))).join("/"),
      ],
      ["tool schema 3,000 deep", async () => `${await curlPost(`${server.url}/v1/responses`, files.schema)}`],
    ];
    for (const [name, send] of cases) {
      watch.reset();
      const started = performance.now();
      const status = await send();
      const took = performance.now() - started;
      const gap = watch.reset();
      await sleep(took);
      const idle = watch.reset();
      worst = Math.max(worst, gap);
      console.log(
        `stall: ${name}: answered ${status} in ${took.toFixed(0)} ms; largest gap of a concurrent 5 ms stream ` +
          `${gap.toFixed(1)} ms (idle ${idle.toFixed(1)} ms)`,
      );
    }
    await watch.stop();
  } finally {
    await server.stop();
    await Deno.remove(dir, { recursive: true });
  }
  return worst;
}

async function metric(url: string, name: string): Promise<number> {
  const text = await (await fetch(`${url}/metrics`)).text();
  return Number(new RegExp(`^${name} (\\S+)$`, "m").exec(text)?.[1] ?? NaN);
}

async function flood(): Promise<void> {
  const server = await startScriptedServer(["--max-connections", "512"], {});
  const { hostname, port } = new URL(server.url);
  const conns: Deno.TcpConn[] = [];
  try {
    let failed = 0;
    for (let i = 0; i < 2000; i++) {
      try {
        conns.push(await Deno.connect({ hostname, port: Number(port) }));
      } catch {
        failed++;
      }
    }
    await sleep(300);
    // While the flood holds every slot, a new connection is answered 503 at once instead of hanging.
    let started = performance.now();
    const during = await fetch(`${server.url}/health`).then(async (r) => (await r.body?.cancel(), r.status))
      .catch(() => 0);
    const duringMs = performance.now() - started;
    for (const c of conns) {
      try {
        c.close();
      } catch { /* closed by the server */ }
    }
    conns.length = 0;
    await sleep(300);
    started = performance.now();
    const after = await fetch(`${server.url}/health`).then(async (r) => (await r.body?.cancel(), r.status))
      .catch(() => 0);
    const afterMs = performance.now() - started;
    const refused = await metric(server.url, "rill_connections_refused_total");
    const alive = await Promise.race([server.child.status.then(() => false), sleep(50).then(() => true)]);
    console.log(
      `flood: 2,000 idle connections against --max-connections 512: ${2000 - refused - failed} held, ` +
        `${refused} answered 503 (${failed} connects failed); a new request during the flood got ${during} in ` +
        `${duringMs.toFixed(0)} ms; after it /health ${after} in ${afterMs.toFixed(0)} ms; process alive: ${alive}`,
    );
  } finally {
    for (const c of conns) {
      try {
        c.close();
      } catch { /* closed by the server */ }
    }
    await server.stop();
  }

  // Slowloris: 50 clients sending one header byte a second, against a 2 s header timeout.
  const slow = await startScriptedServer(["--header-timeout", "2"], {});
  const target = new URL(slow.url);
  try {
    const started = performance.now();
    const held = await Promise.all(Array.from({ length: 50 }, async () => {
      const conn = await Deno.connect({ hostname: target.hostname, port: Number(target.port) });
      // Held until the server closes it: the read ends (EOF, or the 408 then EOF).
      const closed = (async () => {
        const buffer = new Uint8Array(1024);
        while (await conn.read(buffer).catch(() => null) !== null) { /* the 408 answer */ }
        return performance.now() - started;
      })();
      let open = true;
      closed.then(() => open = false);
      for (const byte of utf8.encode("POST /v1/responses HTTP/1.1\r\nhost: x\r\n")) {
        if (!open || performance.now() - started > 15_000) break;
        await conn.write(Uint8Array.of(byte)).catch(() => {});
        await sleep(1000);
      }
      const ms = await Promise.race([closed, sleep(1).then(() => Infinity)]);
      try {
        conn.close();
      } catch { /* closed */ }
      return ms;
    }));
    console.log(
      `flood: 50 slowloris clients (1 byte/s), header timeout 2 s: longest held ${
        (Math.max(...held) / 1000).toFixed(1)
      } s`,
    );
  } finally {
    await slow.stop();
  }
}

interface Ending {
  readonly kind: string;
  readonly terminal: boolean;
}

async function shutdown(): Promise<{ ended: number; total: number }> {
  const dir = await Deno.makeTempDir({ prefix: "rill-bench-" });
  const server = await startScriptedServer(["--shutdown-timeout", "1", "--data-dir", dir], {
    RILL_TEST_STEPS: "100000",
    RILL_TEST_STEP_DELAY_MS: "10",
  });
  try {
    const post = (path: string, body: unknown) =>
      fetch(`${server.url}${path}`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify(body),
      });
    const endings: Promise<Ending>[] = [];
    for (let i = 0; i < 40; i++) {
      endings.push(
        post("/v1/responses", { model: MODEL, input: "hi", stream: true }).then(async (r) => {
          const text = await r.text().catch(() => "");
          const last = text.trimEnd().split("\n").filter((l) => l.startsWith("event: ")).at(-1);
          return {
            kind: "responses stream",
            terminal: /response\.(completed|incomplete|failed)$/.test(last ?? ""),
          };
        }),
      );
    }
    for (let i = 0; i < 20; i++) {
      endings.push(
        post("/v1/chat/completions", { model: MODEL, messages: [{ role: "user", content: "hi" }], stream: true })
          .then(async (r) => {
            const text = await r.text().catch(() => "");
            const ended = /("finish_reason":"\w+"|"error":\{)[^\n]*\n\ndata: \[DONE\]\n\n$/.test(text);
            return { kind: "chat stream", terminal: ended };
          }),
      );
    }
    for (let i = 0; i < 10; i++) {
      endings.push(
        post("/v1/responses", { model: MODEL, input: "hi" }).then(async (r) => {
          await r.body?.cancel();
          return { kind: "non-streamed (503 server_shutting_down)", terminal: r.status === 503 };
        }),
      );
    }
    const background = await Promise.all(
      Array.from(
        { length: 10 },
        async () =>
          (await (await post("/v1/responses", { model: MODEL, input: "hi", background: true })).json()).id as string,
      ),
    );
    await sleep(500);
    server.child.kill("SIGTERM");
    await sleep(200);
    const during = await post("/v1/responses", { model: MODEL, input: "hi" }).then(async (r) => {
      await r.body?.cancel();
      return `${r.status} retry-after ${r.headers.get("retry-after")}`;
    }).catch((e) => `refused (${e.message})`);
    const results = await Promise.all(endings);
    const code = (await server.child.status).code;
    // The background responses, from the store the server left behind.
    const again = await startScriptedServer(["--data-dir", dir], {});
    let backgroundFailed = 0;
    for (const id of background) {
      const replay = await (await fetch(`${again.url}/v1/responses/${id}?stream=true`)).text();
      const stored = await (await fetch(`${again.url}/v1/responses/${id}`)).json();
      if (stored.status === "failed" && /event: response\.failed\n[^\n]*\n\n$/.test(replay)) backgroundFailed++;
    }
    await again.stop();
    const byKind = new Map<string, { ended: number; total: number }>();
    for (const r of results) {
      const k = byKind.get(r.kind) ?? { ended: 0, total: 0 };
      k.total++;
      if (r.terminal) k.ended++;
      byKind.set(r.kind, k);
    }
    byKind.set("background (stored failed, replay ends response.failed)", { ended: backgroundFailed, total: 10 });
    let ended = 0;
    let total = 0;
    for (const [kind, k] of byKind) {
      ended += k.ended;
      total += k.total;
      console.log(`shutdown: ${kind}: ${k.ended}/${k.total} ended with a terminal event`);
    }
    console.log(`shutdown: a new request while draining got ${during}; exit code ${code}`);
    return { ended, total };
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

/** `RILL_BENCH_RELIABILITY=stall,flood,shutdown` (default all) picks the scenarios. */
export async function run(): Promise<void> {
  const only = (Deno.env.get("RILL_BENCH_RELIABILITY") ?? "stall,flood,shutdown").split(",");
  const worst = only.includes("stall") ? await stall() : NaN;
  if (only.includes("flood")) await flood();
  const { ended, total } = only.includes("shutdown") ? await shutdown() : { ended: NaN, total: NaN };
  console.log(
    `reliability: largest stall seen by a concurrent stream ${worst.toFixed(1)} ms; ` +
      `${ended}/${total} streams ended with a terminal event at shutdown`,
  );
}

if (import.meta.main) await run();
