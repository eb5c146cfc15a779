/**
 * HTTP load: N concurrent streaming clients (N = 1, 64, 256) against a rill server process serving a paced,
 * time-stamped engine at 1 and 4 tokens per step. The server runs in its own process (the test entry
 * testing/scripted_serve.ts: the real CLI, server, pipeline and SSE path) so server and clients each get a core of
 * the 2-core machine; clients speak HTTP/1.1 over raw sockets so that they cost little.
 *
 * Every text delta starts with the 3-digit wall-clock millisecond at which the engine produced its step
 * (testing/paced_engine.ts), so each event's latency is measured exactly, across processes.
 *
 * Reported per run:
 * - streamed tokens/s: answer tokens of all streams ÷ wall time from the first request to the last stream's end;
 * - TTFB: request start → first response bytes, p50/p99;
 * - inter-event latency: per text-delta event, time since its stream's previous delta arrived, p50/p99;
 * - added latency: per text-delta event, arrival − the engine's production of that step (server pipeline, HTTP
 *   and socket delivery; the client's own reading delay is included), p50/p99/max;
 * - CPU per streamed event (Linux /proc): the server process's, and the client threads' (this process), so a run
 *   shows whether the clients, which share the machine's cores with the server, weigh on what they measure.
 * Runs: unpaced (the engine steps as fast as the server pulls: throughput; production outruns delivery there, so
 * their added latency is mostly queueing) and paced (all sequences step together every 20 ms like a batching
 * engine: latency, for 256 streams arriving at once and arriving over 500 ms).
 * Target (issue 3): ≥ 100,000 streamed tokens/s over 256 streams at 4 tokens/step, p99 added latency ≤ 10 ms.
 */

import { type ClientJob, type JobResult, oneStream } from "./http_client.ts";
import { type ScriptedServer, startScriptedServer } from "./scripted_server.ts";

/** Client threads: reading hundreds of sockets on one thread would add its own queueing to the latency. */
const CLIENT_THREADS = 2;

/**
 * Streams run all at once before each measurement, so V8 has optimised the streaming path when the clock starts, as
 * in a server that has been up for a while. After a single warm-up stream V8 was still optimising during the measured
 * run, which made the ramp's worst tick (about 400 ms in, ~216 streams) worse still. One paced tick holds over 1% of
 * a run's events, so that one tick can set the paced p99 by itself.
 */
const WARM_UP_STREAMS = 64;

/** CPU seconds (user + system) a process has used, from /proc; NaN where there is no /proc. */
export function cpuSeconds(pid: number): number {
  try {
    const fields = Deno.readTextFileSync(`/proc/${pid}/stat`).split(") ")[1]!.split(" ");
    // utime and stime (fields 14 and 15 of stat) in clock ticks, 100 per second on Linux.
    return (Number(fields[11]) + Number(fields[12])) / 100;
  } catch {
    return NaN;
  }
}

/**
 * `dataDir` null: an in-memory store (nothing is persisted unless a request asks, and these ask only in store runs).
 * Store runs get a fresh data directory on disk, as `rill serve` uses by default, so they pay for real commits.
 */
async function startServer(env: Record<string, string>, dataDir: string | null): Promise<ScriptedServer> {
  const profile = Deno.env.get("RILL_BENCH_PROFILE") ? ["--cpu-prof", "--cpu-prof-dir=/tmp/rill-prof"] : [];
  return await startScriptedServer(dataDir === null ? [] : ["--data-dir", dataDir], env, profile);
}

function percentile(values: number[], p: number): number {
  if (values.length === 0) return NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

const ms = (v: number) => `${v.toFixed(2)} ms`;

export interface RunSpec {
  readonly clients: number;
  readonly tokensPerStep: number;
  /** Stamped steps per stream (each of `tokensPerStep` tokens). */
  readonly steps: number;
  readonly stepMs: number;
  readonly store: boolean;
  /** Client i starts at i/N × rampMs (0: all at once). */
  readonly rampMs: number;
}

export interface RunResult {
  readonly tokensPerSecond: number;
  readonly addedP99: number;
  /** Text-delta events the clients received. */
  readonly events: number;
}

export async function runOne(spec: RunSpec): Promise<RunResult> {
  const dataDir = spec.store ? await Deno.makeTempDir({ prefix: "rill-bench-" }) : null;
  const server = await startServer({
    RILL_TEST_STEPS: String(spec.steps),
    RILL_TEST_TOKENS_PER_STEP: String(spec.tokensPerStep),
    RILL_TEST_STEP_DELAY_MS: String(spec.stepMs),
  }, dataDir);
  try {
    return await measure([server], spec, spec.store ? " store" : "");
  } finally {
    await server.stop();
    if (dataDir !== null) await Deno.remove(dataDir, { recursive: true });
  }
}

/**
 * One measured run of `spec` against already started servers (several: replicas, client i on server i mod n);
 * prints its line, labelled with `suffix`. Server CPU is summed over the servers.
 */
export async function measure(servers: readonly ScriptedServer[], spec: RunSpec, suffix: string): Promise<RunResult> {
  const urls = servers.map((server) => server.url);
  await Promise.all(Array.from({ length: WARM_UP_STREAMS }, (_, i) => oneStream(urls[i % urls.length]!, false)));
  const workers = Array.from(
    { length: Math.min(CLIENT_THREADS, spec.clients) },
    () => new Worker(new URL("./http_client.ts", import.meta.url).href, { type: "module" }),
  );
  const replies = workers.map((worker) => {
    const ready = Promise.withResolvers<void>();
    const done = Promise.withResolvers<JobResult>();
    worker.onmessage = (e: MessageEvent<JobResult | "ready">) => {
      if (e.data === "ready") ready.resolve();
      else done.resolve(e.data);
    };
    worker.onerror = (e) => {
      const error = e.error ?? new Error(e.message);
      ready.reject(error);
      done.reject(error);
    };
    return { ready: ready.promise, done: done.promise };
  });
  await Promise.all(replies.map((r) => r.ready));
  const start = performance.now();
  const serverCpus = () => servers.reduce((sum, server) => sum + cpuSeconds(server.child.pid), 0);
  const serverCpu0 = serverCpus();
  workers.forEach((worker, first) => {
    const job: ClientJob = {
      urls,
      store: spec.store,
      first,
      step: workers.length,
      total: spec.clients,
      rampMs: spec.rampMs,
    };
    worker.postMessage(job);
  });
  const shares = await Promise.all(replies.map((r) => r.done));
  const wall = (performance.now() - start) / 1000;
  const serverCpu = serverCpus() - serverCpu0;
  const clientCpu = shares.reduce((sum, share) => sum + share.cpuSeconds, 0);
  for (const worker of workers) worker.terminate();
  const results = shares.flatMap((share) => share.streams);
  const failed = results.filter((r) => r.deltas !== spec.steps).length;
  const tokens = results.reduce((sum, r) => sum + r.deltas * spec.tokensPerStep, 0);
  const tokensPerSecond = tokens / wall;
  const gaps = results.flatMap((r) => r.gaps);
  const ttfbs = results.map((r) => r.ttfb);
  const added = results.flatMap((r) => r.latencies);
  const label = `http N=${spec.clients} ${spec.tokensPerStep} tokens/step` +
    (spec.stepMs > 0 ? ` paced ${spec.stepMs} ms/step` : "") + (spec.rampMs > 0 ? ` ramp ${spec.rampMs} ms` : "") +
    suffix;
  let line = `${label}: ${Math.round(tokensPerSecond).toLocaleString("en-US")} streamed tokens/s; ` +
    `TTFB p50 ${ms(percentile(ttfbs, 50))} p99 ${ms(percentile(ttfbs, 99))}; ` +
    `inter-event p50 ${ms(percentile(gaps, 50))} p99 ${ms(percentile(gaps, 99))}; ` +
    `added p50 ${ms(percentile(added, 50))} p99 ${ms(percentile(added, 99))} max ${ms(percentile(added, 100))}`;
  const events = results.reduce((sum, r) => sum + r.deltas, 0);
  if (events > 0 && !Number.isNaN(serverCpu)) {
    // Server CPU includes the streams' request handling; 10 ms clock ticks, so short runs read coarse.
    const us = (seconds: number) => `${((seconds * 1e6) / events).toFixed(1)} µs`;
    line += `; CPU per event: server ${us(serverCpu)}, clients ${us(clientCpu)}`;
  }
  if (failed > 0) line += `; ${failed} streams incomplete`;
  console.log(line);
  return { tokensPerSecond, addedP99: percentile(added, 99), events };
}

export async function run(): Promise<void> {
  let target = 0;
  for (const tokensPerStep of [1, 4]) {
    for (const clients of [1, 64, 256]) {
      // About 40k (1 token/step) or 100k (4 tokens/step) tokens per run: stable, and short enough for CI.
      const steps = Math.max(50, Math.round((tokensPerStep === 1 ? 40_000 : 25_000) / clients));
      const r = await runOne({ clients, tokensPerStep, steps, stepMs: 0, store: false, rampMs: 0 });
      if (clients === 256 && tokensPerStep === 4) target = r.tokensPerSecond;
    }
  }
  // The default (store: true) path, on disk: every step's events are logged to SQLite (the terminal one committed
  // before it is sent).
  await runOne({ clients: 256, tokensPerStep: 4, steps: 100, stepMs: 0, store: true, rampMs: 0 });
  await runOne({ clients: 256, tokensPerStep: 4, steps: 50, stepMs: 20, store: false, rampMs: 0 });
  await runOne({ clients: 256, tokensPerStep: 1, steps: 75, stepMs: 20, store: false, rampMs: 500 });
  const paced = await runOne({ clients: 256, tokensPerStep: 4, steps: 75, stepMs: 20, store: false, rampMs: 500 });
  console.log(
    `http target: ${Math.round(target).toLocaleString("en-US")} tokens/s over 256 streams at 4 tokens/step ` +
      `(≥ 100,000: ${target >= 100_000 ? "met" : "NOT met"}); p99 added latency ${ms(paced.addedP99)} ` +
      `at 256 paced streams arriving over 500 ms (≤ 10 ms: ${paced.addedP99 <= 10 ? "met" : "NOT met"})`,
  );
}

if (import.meta.main) await run();
