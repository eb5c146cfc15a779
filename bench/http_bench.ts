/**
 * HTTP load: N concurrent streaming clients (N = 1, 64, 256) against a rill server process serving a paced
 * scripted engine at 1 and 4 tokens per step. The server runs in its own process (the test entry
 * tests/e2e/scripted_serve.ts, i.e. the real CLI, server, pipeline and SSE path) so server and clients each get a
 * core of the 2-core machine.
 *
 * Reported per run:
 * - streamed tokens/s: output tokens of all streams ÷ wall time from the first request to the last stream's end;
 * - TTFB: request start → first body bytes, p50/p99;
 * - inter-event latency: per text-delta event, the time since the previous delta of its stream arrived (events that
 *   arrive in the same socket read count 0; unpaced runs coalesce most events, so their max shows the stalls),
 *   p50/p99/max;
 * - added latency (paced runs: all sequences step together every D ms, like a batching engine): inter-event gap − D,
 *   p50/p99, i.e. what the server adds per step on top of the engine's pace; over all events, and in steady state
 *   (events after the last stream started, so no request setup competes with streaming).
 * Target (issue 3): ≥ 100,000 streamed tokens/s over 256 streams at 4 tokens/step, p99 added latency ≤ 10 ms.
 */

const MODEL = "rill-test";
const DELTA = new TextEncoder().encode("event: response.output_text.delta");
const COMPLETED = new TextEncoder().encode("event: response.completed");

interface ServerProc {
  readonly url: string;
  stop(): Promise<void>;
}

async function startServer(env: Record<string, string>): Promise<ServerProc> {
  const entry = new URL("../tests/e2e/scripted_serve.ts", import.meta.url).pathname;
  const child = new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "-A",
      ...(Deno.env.get("RILL_BENCH_PROFILE") ? ["--cpu-prof", "--cpu-prof-dir=/tmp/rill-prof"] : []),
      entry,
      "serve",
      "--port",
      "0",
      "--data-dir",
      ":memory:",
      "--log-format",
      "json",
    ],
    env: { ...env, RUST_BACKTRACE: "0" },
    stdout: "piped",
    stderr: "null",
  }).spawn();
  const reader = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
  let out = "";
  let url: string | undefined;
  while (url === undefined) {
    const { done, value } = await reader.read();
    if (done) throw new Error(`bench server did not start: ${out}`);
    out += value;
    url = /at (http:\/\/\S+)/.exec(out)?.[1];
  }
  reader.releaseLock();
  child.stdout.cancel().catch(() => {});
  return {
    url,
    async stop() {
      child.kill("SIGTERM");
      await child.status;
    },
  };
}

/** Occurrences of `needle` in `hay`. */
function count(hay: Uint8Array, needle: Uint8Array): number {
  let n = 0;
  const first = needle[0]!;
  outer: for (let i = hay.indexOf(first); i >= 0 && i <= hay.length - needle.length; i = hay.indexOf(first, i + 1)) {
    for (let j = 1; j < needle.length; j++) if (hay[i + j] !== needle[j]) continue outer;
    n++;
  }
  return n;
}

interface StreamResult {
  readonly ttfb: number;
  /** performance.now() of the first body bytes. */
  readonly firstByteAt: number;
  readonly gaps: number[];
  /** Arrival time of each gap's event (same order as `gaps`). */
  readonly gapAt: number[];
  readonly completed: boolean;
}

/**
 * One streaming request over a raw TCP connection (HTTP/1.1, `Connection: close`): the client does no header or
 * chunk parsing beyond finding event names in the bytes, so 256 of them cost the client process little and the
 * measurement reflects the server. Each engine step is one SSE write, hence one HTTP chunk.
 */
async function oneStream(url: string, store: boolean): Promise<StreamResult> {
  const { hostname, port } = new URL(url);
  const body = JSON.stringify({ model: MODEL, input: "go", stream: true, store });
  const request = new TextEncoder().encode(
    `POST /v1/responses HTTP/1.1\r\nhost: ${hostname}:${port}\r\ncontent-type: application/json\r\n` +
      `content-length: ${body.length}\r\nconnection: close\r\n\r\n${body}`,
  );
  const start = performance.now();
  const conn = await Deno.connect({ hostname, port: Number(port) });
  await conn.write(request);
  const buffer = new Uint8Array(64 * 1024);
  let ttfb = -1;
  let last = -1;
  const gaps: number[] = [];
  const gapAt: number[] = [];
  let firstByteAt = -1;
  let completed = false;
  for (;;) {
    const n = await conn.read(buffer);
    if (n === null) break;
    const now = performance.now();
    if (ttfb < 0) {
      ttfb = now - start;
      firstByteAt = now;
    }
    const value = buffer.subarray(0, n);
    const deltas = count(value, DELTA);
    if (deltas > 0) {
      // Events that arrive in the same read waited for the first of them: their own gap is 0.
      if (last >= 0) {
        gaps.push(now - last);
        gapAt.push(now);
      }
      for (let i = 1; i < deltas; i++) {
        gaps.push(0);
        gapAt.push(now);
      }
      last = now;
    }
    if (!completed && count(value, COMPLETED) > 0) completed = true;
  }
  conn.close();
  return { ttfb, firstByteAt, gaps, gapAt, completed };
}

function percentile(values: number[], p: number): number {
  if (values.length === 0) return NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

const ms = (v: number) => `${v.toFixed(2)} ms`;

interface RunSpec {
  readonly clients: number;
  readonly tokensPerStep: number;
  readonly answerTokens: number;
  readonly stepMs: number;
  readonly store: boolean;
  /** Client i starts at i/N × rampMs (0: all at once). */
  readonly rampMs: number;
}

export async function runOne(spec: RunSpec): Promise<{ tokensPerSecond: number; addedP99: number; steadyP99: number }> {
  const server = await startServer({
    RILL_TEST_ANSWER_TOKENS: String(spec.answerTokens),
    RILL_TEST_TOKENS_PER_STEP: String(spec.tokensPerStep),
    RILL_TEST_STEP_DELAY_MS: String(spec.stepMs),
  });
  try {
    await oneStream(server.url, false); // warm-up: JIT, first connection
    const start = performance.now();
    const results = await Promise.all(Array.from({ length: spec.clients }, async (_, i) => {
      if (spec.rampMs > 0) await new Promise((resolve) => setTimeout(resolve, (i / spec.clients) * spec.rampMs));
      return await oneStream(server.url, spec.store);
    }));
    const wall = (performance.now() - start) / 1000;
    const failed = results.filter((r) => !r.completed).length;
    const tokensPerSecond = (spec.clients * spec.answerTokens) / wall;
    const gaps = results.flatMap((r) => r.gaps);
    const ttfbs = results.map((r) => r.ttfb);
    const added = gaps.map((g) => g - spec.stepMs);
    // Steady state: events after every stream has started (no request setup competing for the thread).
    const allStarted = Math.max(...results.map((r) => r.firstByteAt)) + spec.stepMs;
    const steady = results.flatMap((r) =>
      r.gaps.filter((_, i) => r.gapAt[i]! > allStarted).map((g) => g - spec.stepMs)
    );
    const label = `http N=${spec.clients} ${spec.tokensPerStep} tokens/step` +
      (spec.stepMs > 0 ? ` paced ${spec.stepMs} ms/step` : "") + (spec.rampMs > 0 ? ` ramp ${spec.rampMs} ms` : "") +
      (spec.store ? " store" : "");
    let line = `${label}: ${Math.round(tokensPerSecond).toLocaleString("en-US")} streamed tokens/s; ` +
      `TTFB p50 ${ms(percentile(ttfbs, 50))} p99 ${ms(percentile(ttfbs, 99))}; ` +
      `inter-event p50 ${ms(percentile(gaps, 50))} p99 ${ms(percentile(gaps, 99))} max ${ms(percentile(gaps, 100))}`;
    if (spec.stepMs > 0) {
      line += `; added p50 ${ms(percentile(added, 50))} p99 ${ms(percentile(added, 99))}` +
        ` (steady state p50 ${ms(percentile(steady, 50))} p99 ${ms(percentile(steady, 99))})`;
    }
    if (failed > 0) line += `; ${failed} streams did not complete`;
    console.log(line);
    return { tokensPerSecond, addedP99: percentile(added, 99), steadyP99: percentile(steady, 99) };
  } finally {
    await server.stop();
  }
}

export async function run(): Promise<void> {
  let target = 0;
  for (const tokensPerStep of [1, 4]) {
    for (const clients of [1, 64, 256]) {
      // About 40k–100k tokens per run: long enough to be stable, short enough for CI.
      const answerTokens = Math.max(200, Math.round((tokensPerStep === 1 ? 40_000 : 100_000) / clients));
      const r = await runOne({ clients, tokensPerStep, answerTokens, stepMs: 0, store: false, rampMs: 0 });
      if (clients === 256 && tokensPerStep === 4) target = r.tokensPerSecond;
    }
  }
  // The default (store: true) path: every step's events are committed to SQLite before they are sent.
  await runOne({ clients: 256, tokensPerStep: 4, answerTokens: 400, stepMs: 0, store: true, rampMs: 0 });
  // Added latency with an engine that steps every 20 ms: all 256 arriving at once, then arrivals over 500 ms.
  await runOne({ clients: 256, tokensPerStep: 4, answerTokens: 200, stepMs: 20, store: false, rampMs: 0 });
  const paced = await runOne({
    clients: 256,
    tokensPerStep: 4,
    answerTokens: 200,
    stepMs: 20,
    store: false,
    rampMs: 500,
  });
  console.log(
    `http target: ${Math.round(target).toLocaleString("en-US")} tokens/s over 256 streams at 4 tokens/step ` +
      `(≥ 100,000: ${target >= 100_000 ? "met" : "NOT met"}); p99 added latency ${ms(paced.addedP99)} with arrivals, ` +
      `${ms(paced.steadyP99)} in steady state (≤ 10 ms: ${
        paced.steadyP99 <= 10 ? "met" : "NOT met"
      } in steady state, ` +
      `${paced.addedP99 <= 10 ? "met" : "NOT met"} with arrivals)`,
  );
}

if (import.meta.main) await run();
