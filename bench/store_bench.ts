/**
 * The store under streaming load (issue 22): 256 streaming clients at 4 tokens/step (`store: true`, every step's
 * events logged, each terminal event committed before it is sent), as the HTTP benchmark's "store on disk" row:
 * - one replica on the SQLite file (the default store);
 * - one replica on PostgreSQL (a server of its own, started for the benchmark: testing/postgres_server.ts);
 * - three replicas on one PostgreSQL database, client i streaming from replica i mod 3 (what any load balancer
 *   without affinity does).
 * Reported: streamed tokens/s and p99 added latency of each, and the two ratios of the target: PostgreSQL
 * ≥ 0.8× SQLite on one replica, three replicas ≥ 2.5× one. The replicas, the clients and PostgreSQL share this
 * machine's cores, so three replicas can scale only as far as there are cores for them (the line says how many).
 */
import { cpuSeconds, measure, type RunResult, type RunSpec } from "./http_bench.ts";
import { type ScriptedServer, startScriptedServer } from "./scripted_server.ts";
import { startPostgres } from "../testing/postgres_server.ts";

const SPEC: RunSpec = { clients: 256, tokensPerStep: 4, steps: 100, stepMs: 0, store: true, rampMs: 0 };

const ENV = {
  RILL_TEST_STEPS: String(SPEC.steps),
  RILL_TEST_TOKENS_PER_STEP: String(SPEC.tokensPerStep),
  RILL_TEST_STEP_DELAY_MS: String(SPEC.stepMs),
};

/** CPU seconds of every PostgreSQL server process on the machine (this benchmark's is the only one it starts). */
function postgresCpuSeconds(): number {
  let total = 0;
  for (const entry of Deno.readDirSync("/proc")) {
    if (!/^\d+$/.test(entry.name)) continue;
    try {
      const comm = Deno.readTextFileSync(`/proc/${entry.name}/comm`).trim();
      if (comm === "postgres") total += cpuSeconds(Number(entry.name));
    } catch {
      // Exited meanwhile.
    }
  }
  return total;
}

async function withServers(
  args: readonly (readonly string[])[],
  suffix: string,
): Promise<RunResult> {
  const servers: ScriptedServer[] = [];
  try {
    for (const a of args) servers.push(await startScriptedServer(a, ENV));
    const db0 = postgresCpuSeconds();
    const result = await measure(servers, SPEC, suffix);
    const db = postgresCpuSeconds() - db0;
    if (db > 0) console.log(`  PostgreSQL's processes: ${((db * 1e6) / result.events).toFixed(1)} µs CPU per event`);
    return result;
  } finally {
    for (const server of servers) await server.stop();
  }
}

export async function run(): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix: "rill-store-bench-" });
  const pg = await startPostgres();
  try {
    const sqlite = await withServers([["--data-dir", dir]], " store sqlite, 1 replica");
    const one = await withServers([["--store", await pg.createDatabase("bench_one")]], " store postgres, 1 replica");
    const url = await pg.createDatabase("bench_three");
    const three = await withServers(
      [["--store", url], ["--store", url], ["--store", url]],
      " store postgres, 3 replicas",
    );
    const share = one.tokensPerSecond / sqlite.tokensPerSecond;
    const scale = three.tokensPerSecond / one.tokensPerSecond;
    console.log(
      `store target: postgres ${(share * 100).toFixed(0)}% of sqlite's tokens/s on one replica ` +
        `(≥ 80%: ${share >= 0.8 ? "met" : "NOT met"}); three replicas ${scale.toFixed(2)}× one ` +
        `(≥ 2.5×: ${scale >= 2.5 ? "met" : "NOT met"}; ${navigator.hardwareConcurrency} cores shared by the ` +
        `replicas, PostgreSQL and the clients)`,
    );
  } finally {
    await pg.close();
    await Deno.remove(dir, { recursive: true });
  }
}

if (import.meta.main) await run();
