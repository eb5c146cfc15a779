/**
 * The HTTP benchmark's streaming client (see http_bench.ts): one request per raw TCP connection, stamps read from
 * the bytes. Loaded as a Web Worker it runs a share of the clients on its own thread, so reading 256 sockets does
 * not queue behind one JavaScript thread and inflate the measured latency.
 */

const MODEL = "rill-test";

/** Text deltas are the only events with a `"delta":"` key here; the stamp is the 3 digits after it. */
const STAMP = new TextEncoder().encode('"delta":"');
/** Bytes of a stamp match: the key and the 3 digits. */
const MATCH = STAMP.length + 3;

/** Calls `found(stamp)` for each stamp whose match lies fully in `bytes`; returns where unfinished tail bytes begin. */
function scanStamps(bytes: Uint8Array, found: (stamp: number) => void): number {
  const first = STAMP[0]!;
  let i = bytes.indexOf(first);
  outer: for (; i >= 0 && i + MATCH <= bytes.length; i = bytes.indexOf(first, i + 1)) {
    for (let j = 1; j < STAMP.length; j++) if (bytes[i + j] !== STAMP[j]) continue outer;
    const d = i + STAMP.length;
    found((bytes[d]! - 48) * 100 + (bytes[d + 1]! - 48) * 10 + (bytes[d + 2]! - 48));
  }
  return Math.max(0, bytes.length - (MATCH - 1));
}

function wallMs(): number {
  return performance.timeOrigin + performance.now();
}

export interface StreamResult {
  readonly ttfb: number;
  readonly gaps: number[];
  readonly latencies: number[];
  readonly deltas: number;
}

/** One streaming request over a raw TCP connection (HTTP/1.1, `Connection: close`). */
export async function oneStream(url: string, store: boolean): Promise<StreamResult> {
  const { hostname, port } = new URL(url);
  const body = JSON.stringify({ model: MODEL, input: "go", stream: true, store });
  const request = new TextEncoder().encode(
    `POST /v1/responses HTTP/1.1\r\nhost: ${hostname}:${port}\r\ncontent-type: application/json\r\n` +
      `content-length: ${body.length}\r\nconnection: close\r\n\r\n${body}`,
  );
  const start = performance.now();
  const conn = await Deno.connect({ hostname, port: Number(port) });
  await conn.write(request);
  const buffer = new Uint8Array(64 * 1024 + MATCH);
  let carry = 0;
  let ttfb = -1;
  let last = -1;
  const gaps: number[] = [];
  const latencies: number[] = [];
  let deltas = 0;
  for (;;) {
    const n = await conn.read(buffer.subarray(carry));
    if (n === null) break;
    const now = performance.now();
    const wall = wallMs();
    if (ttfb < 0) ttfb = now - start;
    let inRead = 0;
    const bytes = buffer.subarray(0, carry + n);
    const tail = scanStamps(bytes, (stamp) => {
      // The stamp is the production millisecond mod 1000 (floored): latencies up to 1 s are exact to < 1 ms.
      latencies.push((wall % 1000 - stamp + 1000) % 1000);
      // Events that arrive in the same read waited for the first of them: their own gap is 0.
      if (inRead > 0) gaps.push(0);
      else if (last >= 0) gaps.push(now - last);
      inRead++;
    });
    // A match can straddle two reads: keep the bytes it might start in.
    buffer.copyWithin(0, tail, bytes.length);
    carry = bytes.length - tail;
    if (inRead > 0) last = now;
    deltas += inRead;
  }
  conn.close();
  return { ttfb, gaps, latencies, deltas };
}

/** A worker's share: clients `first`, `first + step`, … of `total`, each started at its place in the ramp. */
export interface ClientJob {
  /** Servers taking the streams in turn: client i streams from `urls[i % urls.length]` (replicas; usually one). */
  readonly urls: readonly string[];
  readonly store: boolean;
  readonly first: number;
  readonly step: number;
  readonly total: number;
  readonly rampMs: number;
}

/** A worker's streams, and the CPU seconds its thread spent on them (NaN without Linux /proc). */
export interface JobResult {
  readonly streams: StreamResult[];
  readonly cpuSeconds: number;
}

/** CPU seconds (user + system) of the calling thread. */
function threadCpuSeconds(): number {
  try {
    const fields = Deno.readTextFileSync("/proc/thread-self/stat").split(") ")[1]!.split(" ");
    // utime and stime (fields 14 and 15 of stat) in clock ticks, 100 per second on Linux.
    return (Number(fields[11]) + Number(fields[12])) / 100;
  } catch {
    return NaN;
  }
}

export async function runJob(job: ClientJob): Promise<JobResult> {
  const cpu0 = threadCpuSeconds();
  const mine: number[] = [];
  for (let i = job.first; i < job.total; i += job.step) mine.push(i);
  const streams = await Promise.all(mine.map(async (i) => {
    if (job.rampMs > 0) await new Promise((resolve) => setTimeout(resolve, (i / job.total) * job.rampMs));
    return await oneStream(job.urls[i % job.urls.length]!, job.store);
  }));
  return { streams, cpuSeconds: threadCpuSeconds() - cpu0 };
}

if ("WorkerGlobalScope" in globalThis) {
  const scope = globalThis as unknown as {
    onmessage: ((e: MessageEvent<ClientJob>) => void) | null;
    postMessage(message: JobResult | "ready"): void;
  };
  scope.onmessage = async (e) => scope.postMessage(await runJob(e.data));
  // Loaded: the bench starts its clock only now, so a thread's start-up is not counted as streaming time.
  scope.postMessage("ready");
}
