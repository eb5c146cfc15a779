/**
 * Runs the whole test suite and ends with the plain summary line CI reads: `N passed, N failed`.
 * Extra arguments are passed to `deno test` (e.g. a path or `--filter`).
 */
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
// deno-lint-ignore no-control-regex
const plain = tail.replace(/\x1b\[[0-9;]*m/g, "");
const summary = [...plain.matchAll(/(\d+) passed(?: \(\d+ steps?\))? \| (\d+) failed/g)].at(-1);
const passed = summary ? Number(summary[1]) : 0;
let failed = summary ? Number(summary[2]) : 0;
if (code !== 0 && failed === 0) failed = 1; // a crash or type error before any test ran still fails the run
console.log(`${passed} passed, ${failed} failed`);
Deno.exit(code === 0 ? 0 : 1);
