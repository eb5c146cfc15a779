/**
 * Runs the whole test suite and ends with the plain summary line CI reads: `N passed, N failed`.
 * Extra arguments are passed to `deno test` (e.g. a path or `--filter`). First the native library is built when
 * missing or stale (scripts/build_ffi.ts; a build failure is a failed test). Without extra arguments the library's C
 * test programs are built too (AddressSanitizer/UBSan, into build/ffi/tests/), run, and their counts join the summary.
 */
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { buildFfi } from "./build_ffi.ts";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const C_TESTS = join(ROOT, "build/ffi/tests");
/** A C test program that runs longer than this is killed and counted as failed. */
const C_TEST_TIMEOUT_MS = 300_000;

// deno-lint-ignore no-control-regex
const stripAnsi = (s: string): string => s.replace(/\x1b\[[0-9;]*m/g, "");

interface CTestRun {
  readonly name: string;
  readonly passed: number;
  readonly failed: number;
  readonly stdout: string;
  readonly stderr: string;
}

/** Runs one C test program: its last `N passed, N failed` line is its count, and a crash, leak or timeout a failure. */
async function runCTest(program: string): Promise<CTestRun> {
  const child = new Deno.Command(program, {
    cwd: ROOT,
    stdout: "piped",
    stderr: "piped",
    env: { ASAN_OPTIONS: "detect_leaks=1:abort_on_error=0", UBSAN_OPTIONS: "print_stacktrace=1" },
  }).spawn();
  const timer = setTimeout(() => child.kill("SIGKILL"), C_TEST_TIMEOUT_MS);
  const { code, stdout, stderr } = await child.output();
  clearTimeout(timer);
  const out = new TextDecoder().decode(stdout);
  const counts = [...out.matchAll(/^(\d+) passed, (\d+) failed$/gm)].at(-1);
  const passed = counts ? Number(counts[1]) : 0;
  const failed = counts ? Number(counts[2]) : 0;
  return {
    name: program.slice(C_TESTS.length + 1),
    passed,
    failed: code !== 0 && failed === 0 ? 1 : failed,
    stdout: out,
    stderr: new TextDecoder().decode(stderr),
  };
}

/** Runs the C test programs, as many at a time as there are cores, and reports them in name order. */
async function runCTests(): Promise<{ passed: number; failed: number }> {
  const programs: string[] = [];
  try {
    for await (const entry of Deno.readDir(C_TESTS)) {
      if (entry.isFile && !entry.name.endsWith(".tmp")) programs.push(join(C_TESTS, entry.name));
    }
  } catch (e) {
    if (!(e instanceof Deno.errors.NotFound)) throw e;
  }
  programs.sort();
  const runs: CTestRun[] = new Array(programs.length);
  let next = 0;
  const worker = async () => {
    while (next < programs.length) {
      const k = next++;
      runs[k] = await runCTest(programs[k]!);
    }
  };
  await Promise.all(Array.from({ length: Math.min(programs.length, navigator.hardwareConcurrency || 2) }, worker));
  let passed = 0;
  let failed = 0;
  for (const run of runs) {
    passed += run.passed;
    failed += run.failed;
    console.log(
      `${
        run.failed === 0 ? "ok" : "FAILED"
      } | build/ffi/tests/${run.name} | ${run.passed} passed | ${run.failed} failed`,
    );
    if (run.failed > 0) {
      await Deno.stdout.write(new TextEncoder().encode(run.stdout));
      await Deno.stderr.write(new TextEncoder().encode(run.stderr));
    }
  }
  return { passed, failed };
}

let buildFailed = 0;
try {
  await buildFfi({ tests: Deno.args.length === 0 });
} catch (e) {
  console.error(`build:ffi failed: ${e instanceof Error ? e.message : String(e)}`);
  buildFailed = 1;
}
const cTests = Deno.args.length ? { passed: 0, failed: 0 } : await runCTests();
const c = { passed: cTests.passed, failed: cTests.failed + buildFailed };

const args = ["test", "-A", "--no-prompt", ...(Deno.args.length ? Deno.args : ["tests/"])];
const child = new Deno.Command(Deno.execPath(), { args, stdout: "piped", stderr: "inherit" }).spawn();

let tail = "";
const decoder = new TextDecoder();
for await (const chunk of child.stdout) {
  await Deno.stdout.write(chunk);
  tail = (tail + decoder.decode(chunk, { stream: true })).slice(-4096);
}
const { code } = await child.status;

// deno prints e.g. "ok | 12 passed (3 steps) | 0 failed (1s)" or "FAILED | 1 passed | 2 failed (1s)".
const plain = stripAnsi(tail);
const summary = [...plain.matchAll(/(\d+) passed(?: \(\d+ steps?\))? \| (\d+) failed/g)].at(-1);
const passed = (summary ? Number(summary[1]) : 0) + c.passed;
let failed = (summary ? Number(summary[2]) : 0) + c.failed;
if (code !== 0 && failed === 0) failed = 1; // a crash or type error before any test ran still fails the run
console.log(`${passed} passed, ${failed} failed`);
Deno.exit(code === 0 && c.failed === 0 ? 0 : 1);
