/**
 * `--log-format json` promises one JSON object per stderr line, for log shippers. Nothing else may reach stderr
 * during ordinary traffic and a SIGTERM shutdown, including warnings from the Deno runtime itself.
 */
import assert from "node:assert/strict";
import { runToExit, spawnServe } from "../../testing/serve_process.ts";

Deno.test("--log-format json: every stderr line of a served, streamed and stopped server is JSON", async () => {
  const proc = await spawnServe(
    "main.ts",
    ["models/rill-tiny-chatml", "--port", "0", "--data-dir", ":memory:"],
    { RILL_LOG_FORMAT: "json" },
  );
  try {
    const base = proc.url;
    const headers = { "content-type": "application/json" };
    for (const stream of [false, true]) {
      const chat = await fetch(`${base}/v1/chat/completions`, {
        method: "POST",
        headers,
        body: JSON.stringify({
          model: "rill-tiny-chatml",
          messages: [{ role: "user", content: "What is 2 plus 3?" }],
          stream,
        }),
      });
      assert.equal(chat.status, 200);
      await chat.text();
      const resp = await fetch(`${base}/v1/responses`, {
        method: "POST",
        headers,
        body: JSON.stringify({ model: "rill-tiny-chatml", input: "What is 2 plus 3?", stream, store: false }),
      });
      assert.equal(resp.status, 200);
      await resp.text();
    }
  } finally {
    proc.child.kill("SIGTERM");
  }
  const { code, stderr } = await proc.finish();
  assert.equal(code, 0);
  const lines = stderr.split("\n").filter((l) => l !== "");
  assert.ok(lines.length >= 5, stderr);
  for (const line of lines) {
    assert.doesNotThrow(() => JSON.parse(line), `not a JSON log line: ${line}`);
  }
});

Deno.test("--log-format json: a fatal startup error is a JSON log line too, and the exit code is 1", async () => {
  const out = await runToExit("main.ts", [
    "serve",
    "/nonexistent-model-dir",
    "--log-format",
    "json",
    "--port",
    "0",
  ]);
  assert.equal(out.code, 1);
  const lines = out.stderr.split("\n").filter((l) => l !== "");
  assert.equal(lines.length, 1, lines.join("\n"));
  const entry = JSON.parse(lines[0]!);
  assert.equal(entry.level, "error");
  assert.match(entry.msg, /\/nonexistent-model-dir/);
});
