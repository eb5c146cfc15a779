import assert from "node:assert/strict";
import { CliError, DEFAULT_MODEL_DIR, parseServeArgs, resolveShards, serveHelp } from "../../api/cli_options.ts";

const noEnv = () => undefined;

Deno.test("parseServeArgs: defaults", () => {
  const c = parseServeArgs([], noEnv);
  assert.ok(c !== "help");
  assert.equal(c.modelDir, DEFAULT_MODEL_DIR);
  assert.equal(c.host, "127.0.0.1");
  assert.equal(c.port, 8000);
  assert.equal(c.backend, "onnx");
  assert.equal(c.apiKey, undefined);
  assert.equal(c.shutdownTimeout, 30);
  assert.equal(c.logFormat, "text");
  assert.equal(c.speculative, "none");
  assert.equal(c.maxModelLen, undefined);
  assert.equal(c.shards, "auto");
});

Deno.test("--shards: a positive integer or auto (RILL_SHARDS); auto is 2 for batches over 8 on 2+ cores", () => {
  const c = parseServeArgs(["--shards", "3"], noEnv);
  assert.ok(c !== "help");
  assert.equal(c.shards, 3);
  const e = parseServeArgs([], (n) => n === "RILL_SHARDS" ? "1" : undefined);
  assert.ok(e !== "help");
  assert.equal(e.shards, 1);
  assert.equal(resolveShards("auto", 32, 2), 2);
  assert.equal(resolveShards("auto", 32, 16), 2);
  assert.equal(resolveShards("auto", 32, 1), 1);
  assert.equal(resolveShards("auto", 8, 2), 1);
  assert.equal(resolveShards(3, 4, 1), 3);
  assert.match(serveHelp(), /--shards N\|auto .*\[default: auto\] \(RILL_SHARDS\)/);
});

Deno.test("parseServeArgs: flags beat RILL_* variables, which beat defaults; --x=y and --x y both work", () => {
  const env: Record<string, string> = {
    RILL_PORT: "9000",
    RILL_HOST: "0.0.0.0",
    RILL_API_KEY: "k",
    RILL_MAX_QUEUE: "7",
  };
  const c = parseServeArgs(["models/x", "--port=1234", "--max-queue", "3", "--speculative", "ngram"], (n) => env[n]);
  assert.ok(c !== "help");
  assert.equal(c.modelDir, "models/x");
  assert.equal(c.port, 1234);
  assert.equal(c.host, "0.0.0.0");
  assert.equal(c.apiKey, "k");
  assert.equal(c.maxQueue, 3);
  assert.equal(c.speculative, "ngram");
});

Deno.test("parseServeArgs: bad values are one-line CliErrors naming the option", () => {
  const cases: [string[], RegExp][] = [
    [["--port", "x"], /--port/],
    [["--port", "70000"], /--port/],
    [["--log-format", "xml"], /--log-format/],
    [["--backend", "cuda"], /--backend/],
    [["--speculative", "eagle"], /--speculative/],
    [["--max-num-seqs", "0"], /--max-num-seqs/],
    [["--shards", "0"], /--shards must be 'auto' or an integer/],
    [["--shards", "two"], /--shards/],
    [["--nope"], /--nope/],
    [["--host"], /--host needs a value/],
    [["a", "b"], /one MODEL_DIR/],
  ];
  for (const [args, pattern] of cases) {
    assert.throws(() => parseServeArgs(args, noEnv), (e: unknown) => e instanceof CliError && pattern.test(e.message));
  }
  assert.equal(parseServeArgs(["--help"], noEnv), "help");
  assert.match(serveHelp(), /RILL_SHUTDOWN_TIMEOUT/);
});

Deno.test("--allowed-origins (a comma list, none by default) and the --metrics-public switch", () => {
  const d = parseServeArgs([], noEnv);
  assert.ok(d !== "help");
  assert.deepEqual(d.allowedOrigins, []);
  assert.equal(d.metricsPublic, false);
  // A switch takes no value: the model directory after it stays positional.
  const c = parseServeArgs(
    ["--allowed-origins", "https://a.example, http://localhost:3000", "--metrics-public", "m"],
    noEnv,
  );
  assert.ok(c !== "help");
  assert.deepEqual(c.allowedOrigins, ["https://a.example", "http://localhost:3000"]);
  assert.equal(c.metricsPublic, true);
  assert.equal(c.modelDir, "m");
  const off = parseServeArgs(["--metrics-public=false"], (n) => n === "RILL_METRICS_PUBLIC" ? "1" : undefined);
  assert.ok(off !== "help");
  assert.equal(off.metricsPublic, false);
  const env = parseServeArgs([], (n) => ({ RILL_METRICS_PUBLIC: "true", RILL_ALLOWED_ORIGINS: "*" })[n]);
  assert.ok(env !== "help");
  assert.equal(env.metricsPublic, true);
  assert.deepEqual(env.allowedOrigins, ["*"]);
  assert.throws(() => parseServeArgs(["--metrics-public=maybe"], noEnv), CliError);
  assert.match(serveHelp(), /--allowed-origins ORIGINS/);
});
