/**
 * A rill server process for benchmarks: testing/scripted_serve.ts (the real CLI, server, relay, pipeline and store over
 * a paced, scripted engine) on a free port of 127.0.0.1, started with the V8 flags `deno task serve` uses, so a
 * benchmark measures the server as users run it.
 */
const ENTRY = new URL("../testing/scripted_serve.ts", import.meta.url).pathname;

export interface ScriptedServer {
  readonly url: string;
  readonly child: Deno.ChildProcess;
  /** Sends `signal` (default SIGTERM) and resolves with the exit code. */
  stop(signal?: Deno.Signal): Promise<number>;
}

/**
 * The V8 flags of deno.json's serve task. RILL_BENCH_V8_FLAGS replaces them (comma-separated V8 flags; empty for
 * none), for experiments.
 */
export function serveV8Flags(): string[] {
  const override = Deno.env.get("RILL_BENCH_V8_FLAGS");
  if (override !== undefined) return override === "" ? [] : [`--v8-flags=${override}`];
  const config = JSON.parse(Deno.readTextFileSync(new URL("../deno.json", import.meta.url)));
  const flags = /(?:^|\s)(--v8-flags=\S+)/.exec(String(config?.tasks?.serve ?? ""))?.[1];
  return flags === undefined ? [] : [flags];
}

/**
 * Starts the server with `serve --port 0 --data-dir :memory: --log-format json` followed by `args` (a later flag wins)
 * and resolves once its JSON serving line names the URL. `denoArgs` go to `deno run` (e.g. profiling flags).
 */
export async function startScriptedServer(
  args: readonly string[],
  env: Record<string, string>,
  denoArgs: readonly string[] = [],
): Promise<ScriptedServer> {
  const child = new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "-A",
      ...serveV8Flags(),
      ...denoArgs,
      ENTRY,
      "serve",
      "--port",
      "0",
      "--data-dir",
      ":memory:",
      "--log-format",
      "json",
      ...args,
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
    url = /"url":"(http:\/\/[^"]+)"/.exec(out)?.[1];
  }
  reader.releaseLock();
  child.stdout.cancel().catch(() => {});
  return {
    url,
    child,
    async stop(signal: Deno.Signal = "SIGTERM") {
      try {
        child.kill(signal);
      } catch { /* exited */ }
      return (await child.status).code;
    },
  };
}
