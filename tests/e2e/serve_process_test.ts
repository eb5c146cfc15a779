/**
 * rill as a real process: `deno run main.ts serve` on the fixture model, and the scripted test entry (same CLI,
 * store and signal handling) for SIGTERM drain, shutdown timeout and persistence across `kill -9`.
 */
import assert from "node:assert/strict";
import { validateSSE } from "../../conformance/validator.ts";
import { MODEL } from "../../testing/test_server.ts";
import { runToExit, spawnServe } from "../../testing/serve_process.ts";

const FIXTURE_MODEL = "tests/fixtures/tiny-random";

Deno.test("main.ts serve: a missing or invalid model directory is a one-line error, no stack trace", async () => {
  for (const dir of ["/nonexistent/model", "tests"]) {
    const r = await runToExit("main.ts", ["serve", dir, "--port", "0"]);
    assert.equal(r.code, 1);
    const lines = r.stderr.trim().split("\n");
    assert.equal(lines.length, 1, r.stderr);
    assert.match(lines[0]!, /^rill: /);
    assert.ok(!/\bat .*\.ts:\d+/.test(r.stderr), r.stderr);
  }
  const bad = await runToExit("main.ts", ["serve", "--port", "http"]);
  assert.equal(bad.code, 1);
  assert.match(bad.stderr, /--port must be an integer/);
  // A draft model the backend cannot use is a startup error, not a crash.
  const onnxDraft = await runToExit("main.ts", [
    "serve",
    FIXTURE_MODEL,
    "--port",
    "0",
    "--data-dir",
    ":memory:",
    "--speculative",
    "draft",
    "--draft-model",
    FIXTURE_MODEL,
  ]);
  assert.equal(onnxDraft.code, 1);
  // Loading logs come first; the error is the one last line.
  assert.match(onnxDraft.stderr.trim().split("\n").at(-1)!, /^rill: --speculative draft needs --backend native/);
  assert.ok(!/\bat .*\.ts:\d+/.test(onnxDraft.stderr), onnxDraft.stderr);
});

Deno.test("main.ts serve --help documents every option and its environment variable", async () => {
  const r = await runToExit("main.ts", ["serve", "--help"]);
  assert.equal(r.code, 0);
  for (
    const flag of [
      "host",
      "port",
      "backend",
      "served-model-name",
      "api-key",
      "data-dir",
      "max-num-seqs",
      "max-queue",
      "max-model-len",
      "shutdown-timeout",
      "log-format",
      "speculative",
      "draft-model",
      "num-speculative-tokens",
      "reasoning-key",
      "reasoning-key-file",
    ]
  ) {
    assert.match(r.stdout, new RegExp(`--${flag}\\b`));
    assert.match(r.stdout, new RegExp(`RILL_${flag.toUpperCase().replaceAll("-", "_")}\\b`));
  }
});

Deno.test("main.ts serve on the fixture model: startup line, a streamed request, SIGTERM exits 0", async () => {
  const p = await spawnServe("main.ts", [
    FIXTURE_MODEL,
    "--port",
    "0",
    "--data-dir",
    ":memory:",
    "--log-format",
    "json",
  ], {
    RILL_SERVED_MODEL_NAME: "tiny",
  });
  try {
    const models = await (await fetch(`${p.url}/v1/models`)).json();
    assert.equal(models.data[0].id, "tiny");
    const r = await fetch(`${p.url}/v1/responses`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: "tiny", input: "hi", stream: true, max_output_tokens: 16, temperature: 0 }),
    });
    // A random-weight model emits arbitrary tokens (including U+FFFD and markup-looking text).
    const { violations } = validateSSE(await r.text(), { allowMarkup: true, allowReplacementChar: true });
    assert.deepEqual(violations, []);
  } finally {
    p.child.kill("SIGTERM");
  }
  const done = await p.finish();
  assert.equal(done.code, 0, done.stderr);
  assert.match(done.stdout, /serving model 'tiny'/);
  const logs = done.stderr.trim().split("\n").filter((l) => l.startsWith("{")).map((l) => JSON.parse(l));
  assert.ok(logs.some((l) => l.msg === "request" && l.route === "/v1/responses" && l.status === 200));
  assert.ok(logs.some((l) => l.msg === "shutting down" && l.signal === "SIGTERM"));
});

async function startStream(url: string): Promise<ReadableStreamDefaultReader<Uint8Array>> {
  const r = await fetch(`${url}/v1/responses`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model: MODEL, input: "hi", stream: true }),
  });
  assert.equal(r.status, 200);
  const reader = r.body!.getReader();
  await reader.read(); // response.created: the generation is running
  return reader;
}

async function readAll(reader: ReadableStreamDefaultReader<Uint8Array>): Promise<string> {
  const decoder = new TextDecoder();
  let text = "";
  for (;;) {
    const { done, value } = await reader.read();
    if (done) return text;
    text += decoder.decode(value, { stream: true });
  }
}

Deno.test("SIGTERM: stops accepting, lets the running request finish, exits 0", async () => {
  const p = await spawnServe("testing/scripted_serve.ts", ["--port", "0", "--data-dir", ":memory:"], {
    RILL_TEST_STEP_DELAY_MS: "20",
  });
  const reader = await startStream(p.url);
  p.child.kill("SIGTERM");
  const rest = await readAll(reader);
  assert.match(rest, /event: response\.completed/);
  const done = await p.finish();
  assert.equal(done.code, 0, done.stderr);
  await assert.rejects(fetch(`${p.url}/health`));
});

Deno.test("SIGINT with --shutdown-timeout 0: running requests are aborted and the process exits 0 at once", async () => {
  const p = await spawnServe("testing/scripted_serve.ts", ["--port", "0", "--data-dir", ":memory:"], {
    RILL_TEST_STEP_DELAY_MS: "400",
    RILL_SHUTDOWN_TIMEOUT: "0",
  });
  const reader = await startStream(p.url);
  const started = performance.now();
  p.child.kill("SIGINT");
  const rest = await readAll(reader).catch(() => "");
  assert.doesNotMatch(rest, /response\.completed/);
  const done = await p.finish();
  assert.equal(done.code, 0, done.stderr);
  // The script has ~20 steps of 400 ms; an aborted generation ends within one step.
  assert.ok(performance.now() - started < 3000, `took ${performance.now() - started} ms`);
});

Deno.test("stored responses, and the generated reasoning key, survive kill -9 after the terminal event was sent", async () => {
  const dataDir = await Deno.makeTempDir({ prefix: "rill-store-" });
  try {
    const first = await spawnServe("testing/scripted_serve.ts", ["--port", "0", "--data-dir", dataDir]);
    const text = await (await fetch(`${first.url}/v1/responses`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: MODEL, input: "hi", stream: true, include: ["reasoning.encrypted_content"] }),
    })).text();
    const events = validateSSE(text).events as {
      type: string;
      response?: { id: string; output: { type: string; encrypted_content?: string }[] };
    }[];
    const terminal = events.at(-1)!;
    assert.equal(terminal.type, "response.completed");
    first.child.kill("SIGKILL");
    assert.equal((await first.finish()).signal, "SIGKILL");

    const second = await spawnServe("testing/scripted_serve.ts", ["--port", "0", "--data-dir", dataDir]);
    try {
      const got = await (await fetch(`${second.url}/v1/responses/${terminal.response!.id}`)).json();
      assert.deepEqual(got, terminal.response);
      const replay = await (await fetch(`${second.url}/v1/responses/${terminal.response!.id}?stream=true`)).text();
      assert.equal(replay, text);
      // The key was generated into the data directory (owner-only) and read back: the old blob still opens.
      assert.equal((await Deno.stat(`${dataDir}/reasoning.key`)).mode! & 0o777, 0o600);
      const sealed = terminal.response!.output.find((item) => item.type === "reasoning")!;
      const next = await fetch(`${second.url}/v1/responses`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({
          model: MODEL,
          store: false,
          input: [{ role: "user", content: "hi" }, {
            type: "reasoning",
            summary: [],
            encrypted_content: sealed.encrypted_content,
          }],
        }),
      });
      assert.equal(next.status, 200, await next.clone().text());
      await next.body?.cancel();
    } finally {
      second.child.kill("SIGTERM");
      assert.equal((await second.finish()).code, 0);
    }
  } finally {
    await Deno.remove(dataDir, { recursive: true });
  }
});

Deno.test("the scripted entry honours --max-model-len like rill serve: /v1/models reports it, a longer prompt is a 400", async () => {
  const p = await spawnServe("testing/scripted_serve.ts", ["--port", "0", "--data-dir", ":memory:"], {
    RILL_MAX_MODEL_LEN: "64",
  });
  try {
    const models = await (await fetch(`${p.url}/v1/models`)).json();
    assert.equal(models.data[0].max_model_len, 64);
    const r = await fetch(`${p.url}/v1/responses`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: MODEL, input: "word ".repeat(200) }),
    });
    assert.equal(r.status, 400);
    const { error } = await r.json();
    assert.equal(error.code, "context_length_exceeded");
    assert.equal(error.param, "input");
  } finally {
    p.child.kill("SIGTERM");
  }
  assert.equal((await p.finish()).code, 0);
});

Deno.test("rill serve without MODEL_DIR serves the bundled model, found next to the program from any directory", async () => {
  const main = new URL("../../main.ts", import.meta.url).pathname;
  const p = await spawnServe(main, ["--port", "0", "--data-dir", ":memory:"], {}, "/");
  try {
    const models = await (await fetch(`${p.url}/v1/models`)).json();
    assert.equal(models.data[0].id, "rill-tiny-harmony");
  } finally {
    p.child.kill("SIGTERM");
  }
  const done = await p.finish();
  assert.equal(done.code, 0, done.stderr);
  assert.match(done.stdout, /serving model 'rill-tiny-harmony' \(harmony, context \d+\) at http/);
});
