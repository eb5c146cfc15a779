/** Test support: run `rill serve` (main.ts or a test entry) as a real process and wait for its listening line. */

export interface Proc {
  readonly child: Deno.ChildProcess;
  readonly url: string;
  /** All stderr text read so far (logs). */
  stderr(): string;
  /** Waits for exit; returns the code and the output. */
  finish(): Promise<{ code: number; signal: Deno.Signal | null; stdout: string; stderr: string }>;
}

/** Starts a serve process and waits for its "serving … at URL" line. */
export async function spawnServe(
  entry: string,
  args: string[],
  env: Record<string, string> = {},
  cwd?: string,
): Promise<Proc> {
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", entry, "serve", ...args],
    env: { RUST_BACKTRACE: "0", ...env },
    ...(cwd === undefined ? {} : { cwd }),
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const decoder = new TextDecoder();
  let out = "";
  let err = "";
  const stdoutDone = (async () => {
    for await (const chunk of child.stdout) out += decoder.decode(chunk, { stream: true });
  })();
  const stderrDone = (async () => {
    for await (const chunk of child.stderr) err += decoder.decode(chunk, { stream: true });
  })();
  let exited = false;
  child.status.then(() => (exited = true));
  let url: string | undefined;
  // A process that exits before listening (a start-up error) ends the wait at once.
  for (let i = 0; i < 600 && url === undefined && !exited; i++) {
    url = /"url":"(http:\/\/[^"]+)"/.exec(out)?.[1] ?? /at (http:\/\/[^\s]+)/.exec(out)?.[1];
    if (url === undefined) await new Promise((r) => setTimeout(r, 25));
  }
  const finish = async () => {
    const status = await child.status;
    await Promise.all([stdoutDone, stderrDone]);
    return { code: status.code, signal: status.signal, stdout: out, stderr: err };
  };
  if (url === undefined) {
    if (!exited) child.kill("SIGKILL");
    const r = await finish();
    throw new Error(`server did not start:\n${r.stdout}\n${r.stderr}`);
  }
  return { child, url, stderr: () => err, finish };
}

export async function runToExit(entry: string, args: string[]) {
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", entry, ...args],
    env: { RUST_BACKTRACE: "0" },
    stdout: "piped",
    stderr: "piped",
  }).output();
  return { code: out.code, stdout: new TextDecoder().decode(out.stdout), stderr: new TextDecoder().decode(out.stderr) };
}
