/**
 * `--log-format json` promises one JSON object per stderr line, for log shippers. Nothing else may reach stderr
 * during ordinary traffic and a SIGTERM shutdown, including warnings from the Deno runtime itself.
 */
import assert from "node:assert/strict";

Deno.test("--log-format json: every stderr line of a served, streamed and stopped server is JSON", async () => {
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", "main.ts", "serve", "models/rill-tiny-chatml", "--port", "0", "--data-dir", ":memory:"],
    env: { RILL_LOG_FORMAT: "json" },
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
  let url: string | undefined;
  for (let i = 0; i < 600 && url === undefined; i++) {
    url = /at (http:\/\/[^\s]+)/.exec(out)?.[1];
    if (url === undefined) await new Promise((r) => setTimeout(r, 25));
  }
  try {
    assert.ok(url !== undefined, `server did not start: ${err}`);
    const base: string = url;
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
    child.kill("SIGTERM");
  }
  const status = await child.status;
  await Promise.all([stdoutDone, stderrDone]);
  assert.equal(status.code, 0);
  const lines = err.split("\n").filter((l) => l !== "");
  assert.ok(lines.length >= 5, err);
  for (const line of lines) {
    assert.doesNotThrow(() => JSON.parse(line), `not a JSON log line: ${line}`);
  }
});

Deno.test("--log-format json: a fatal startup error is a JSON log line too, and the exit code is 1", async () => {
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", "main.ts", "serve", "/nonexistent-model-dir", "--log-format", "json", "--port", "0"],
    stdout: "piped",
    stderr: "piped",
  }).output();
  assert.equal(out.code, 1);
  const lines = new TextDecoder().decode(out.stderr).split("\n").filter((l) => l !== "");
  assert.equal(lines.length, 1, lines.join("\n"));
  const entry = JSON.parse(lines[0]!);
  assert.equal(entry.level, "error");
  assert.match(entry.msg, /\/nonexistent-model-dir/);
});
