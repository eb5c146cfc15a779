/**
 * `rill serve` as a process: the API key from --api-key-file (never on the command line), every stdout and stderr
 * line JSON under --log-format json, health probes only at --log-level debug, and the request lines' fields.
 */
import assert from "node:assert/strict";
import { CliError, parseServeArgs } from "../../server/cli_options.ts";
import { resolveApiKey } from "../../server/serve.ts";
import { spawnServe } from "../../testing/serve_process.ts";

Deno.test("serve: --api-key-file, JSON on every line, health probes at debug only", async () => {
  const dir = await Deno.makeTempDir();
  try {
    await Deno.writeTextFile(`${dir}/key`, "file-key\n");
    for (const level of ["info", "debug"]) {
      const proc = await spawnServe("testing/scripted_serve.ts", [
        "--port",
        "0",
        "--data-dir",
        ":memory:",
        "--api-key-file",
        `${dir}/key`,
        "--log-format",
        "json",
        "--log-level",
        level,
      ]);
      let stdout = "";
      try {
        assert.equal(await fetch(`${proc.url}/health`).then(async (r) => (await r.body?.cancel(), r.status)), 200);
        const anonymous = await fetch(`${proc.url}/v1/models`);
        assert.equal(anonymous.status, 401);
        await anonymous.body?.cancel();
        const keyed = await fetch(`${proc.url}/v1/models`, { headers: { authorization: "Bearer file-key" } });
        assert.equal(keyed.status, 200);
        await keyed.body?.cancel();
      } finally {
        proc.child.kill("SIGTERM");
        const done = await proc.finish();
        assert.equal(done.code, 0);
        stdout = done.stdout;
        const lines = [...done.stdout.split("\n"), ...done.stderr.split("\n")].filter((l) => l !== "");
        const entries = lines.map((l) => JSON.parse(l) as Record<string, unknown>);
        assert.ok(!done.stderr.includes("file-key"), "the key reached the logs");
        const requests = entries.filter((e) => e.msg === "request");
        const health = requests.filter((e) => e.route === "/health");
        assert.equal(health.length, level === "debug" ? 1 : 0);
        const unauthorized = requests.find((e) => e.status === 401)!;
        assert.match(String(unauthorized.reason), /^invalid_api_key: /);
      }
      assert.match(stdout, /"url":"http:/);
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("resolveApiKey: the file's trimmed contents; both sources, or an empty or missing file, are errors", () => {
  const dir = Deno.makeTempDirSync();
  try {
    Deno.writeTextFileSync(`${dir}/key`, "  k1 \n");
    Deno.writeTextFileSync(`${dir}/empty`, "\n");
    const config = (args: string[]) => {
      const c = parseServeArgs(args, () => undefined);
      assert.ok(c !== "help");
      return c;
    };
    assert.equal(resolveApiKey(config(["--api-key-file", `${dir}/key`])), "k1");
    assert.equal(resolveApiKey(config(["--api-key", "k2"])), "k2");
    for (
      const args of [["--api-key", "k", "--api-key-file", `${dir}/key`], ["--api-key-file", `${dir}/empty`], [
        "--api-key-file",
        `${dir}/missing`,
      ]]
    ) {
      assert.throws(() => resolveApiKey(config(args)), CliError);
    }
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
});
