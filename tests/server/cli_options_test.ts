import assert from "node:assert/strict";
import { CliError, DEFAULT_MODEL_DIR, parseServeArgs, serveHelp } from "../../server/cli_options.ts";

const noEnv = () => undefined;

Deno.test("parseServeArgs: defaults", () => {
  const c = parseServeArgs([], noEnv);
  assert.ok(c !== "help");
  assert.equal(c.modelDir, DEFAULT_MODEL_DIR);
  assert.equal(c.host, "127.0.0.1");
  assert.equal(c.port, 8000);
  assert.equal(c.backend, "auto");
  assert.equal(c.apiKey, undefined);
  assert.equal(c.shutdownTimeout, 30);
  assert.equal(c.logFormat, "text");
  assert.equal(c.speculative, "none");
  assert.equal(c.draftModel, undefined);
  assert.equal(c.maxModelLen, undefined);
  assert.equal(c.shards, "auto");
  assert.equal(c.device, "auto");
  assert.equal(c.threads, "auto");
  assert.equal(c.dtype, "auto");
  assert.equal(c.blockSize, 16);
  assert.equal(c.maxNumBatchedTokens, undefined);
  assert.equal(c.numKvBlocks, undefined);
  assert.equal(c.prefixCache, true);
});

Deno.test("backend flags: --backend onnx|native, --device, --threads, --dtype, --max-num-batched-tokens, --block-size, --num-kv-blocks", () => {
  const c = parseServeArgs([
    "--backend=native",
    "--device",
    "cuda",
    "--threads",
    "4",
    "--dtype",
    "bf16",
    "--max-num-batched-tokens",
    "2048",
    "--block-size",
    "32",
    "--num-kv-blocks",
    "500",
    "--gpu-memory-fraction",
    "0.75",
  ], noEnv);
  assert.ok(c !== "help");
  assert.equal(c.gpuMemoryFraction, 0.75);
  assert.deepEqual(
    [c.backend, c.device, c.threads, c.dtype, c.maxNumBatchedTokens, c.blockSize, c.numKvBlocks],
    ["native", "cuda", 4, "bf16", 2048, 32, 500],
  );
  const e = parseServeArgs([], (n) => ({ RILL_THREADS: "2", RILL_NUM_KV_BLOCKS: "64" } as Record<string, string>)[n]);
  assert.ok(e !== "help");
  assert.equal(e.threads, 2);
  assert.equal(e.numKvBlocks, 64);
  assert.equal(e.gpuMemoryFraction, undefined);
  const off = parseServeArgs(["--prefix-cache", "off"], noEnv);
  assert.ok(off !== "help" && off.prefixCache === false);
  assert.match(serveHelp(), /--threads N\|auto/);
  assert.match(serveHelp(), /--backend auto\|onnx\|native/);
});

Deno.test("--speculative draft --draft-model DIR (RILL_SPECULATIVE, RILL_DRAFT_MODEL)", () => {
  const c = parseServeArgs(["--backend", "native", "--speculative", "draft", "--draft-model", "models/small"], noEnv);
  assert.ok(c !== "help");
  assert.equal(c.speculative, "draft");
  assert.equal(c.draftModel, "models/small");
  const env: Record<string, string> = { RILL_SPECULATIVE: "draft", RILL_DRAFT_MODEL: "/m/draft" };
  const e = parseServeArgs([], (k) => env[k]);
  assert.ok(e !== "help");
  assert.deepEqual([e.speculative, e.draftModel], ["draft", "/m/draft"]);
  assert.match(serveHelp(), /--draft-model DIR/);
  assert.match(serveHelp(), /RILL_DRAFT_MODEL/);
});

Deno.test("--speculative eagle3 --draft-model DIR", () => {
  const c = parseServeArgs(["--speculative", "eagle3", "--draft-model", "models/head"], noEnv);
  assert.ok(c !== "help");
  assert.deepEqual([c.speculative, c.draftModel], ["eagle3", "models/head"]);
  assert.match(serveHelp(), /ngram\|draft\|eagle3\|none/);
});

Deno.test("--shards: a positive integer or auto (RILL_SHARDS)", () => {
  const c = parseServeArgs(["--shards", "3"], noEnv);
  assert.ok(c !== "help");
  assert.equal(c.shards, 3);
  const e = parseServeArgs([], (n) => n === "RILL_SHARDS" ? "1" : undefined);
  assert.ok(e !== "help");
  assert.equal(e.shards, 1);
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
    [["--speculative", "draft"], /--speculative draft needs --draft-model DIR/],
    [["--speculative", "eagle3"], /--speculative eagle3 needs --draft-model DIR/],
    [["--draft-model", "models/x"], /--draft-model is used only with --speculative draft or eagle3/],
    [["--speculative", "ngram", "--draft-model", "models/x"], /--draft-model is used only with --speculative draft/],
    [["--max-num-seqs", "0"], /--max-num-seqs/],
    [["--shards", "0"], /--shards must be 'auto' or an integer/],
    [["--shards", "two"], /--shards/],
    [["--threads", "0"], /--threads must be 'auto' or an integer/],
    [["--device", "tpu"], /--device/],
    [["--dtype", "int3"], /--dtype/],
    [["--block-size", "0"], /--block-size/],
    [["--max-num-batched-tokens", "x"], /--max-num-batched-tokens/],
    [["--num-kv-blocks", "-1"], /--num-kv-blocks/],
    [["--gpu-memory-fraction", "0"], /--gpu-memory-fraction must be a number in \(0, 1\]/],
    [["--gpu-memory-fraction", "1.5"], /--gpu-memory-fraction/],
    [["--gpu-memory-fraction", "half"], /--gpu-memory-fraction/],
    [["--prefix-cache", "yes"], /--prefix-cache/],
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

Deno.test("--store-ttl: a duration in seconds, minutes, hours or days (RILL_STORE_TTL); 30 days by default", () => {
  const ttl = (args: string[]) => {
    const c = parseServeArgs(args, noEnv);
    assert.ok(c !== "help");
    return c.storeTtl;
  };
  assert.equal(ttl([]), 30 * 86400);
  assert.equal(ttl(["--store-ttl", "3600"]), 3600);
  assert.equal(ttl(["--store-ttl=90m"]), 5400);
  assert.equal(ttl(["--store-ttl", "12h"]), 43200);
  assert.equal(ttl(["--store-ttl", "0"]), 0);
  assert.throws(() => ttl(["--store-ttl", "1w"]), (e) => e instanceof CliError && /--store-ttl/.test(e.message));
});

Deno.test("connection options: --max-connections N|auto and the header, body and idle timeouts in seconds", () => {
  const c = parseServeArgs([], noEnv);
  assert.ok(c !== "help");
  assert.deepEqual([c.maxConnections, c.headerTimeout, c.bodyTimeout, c.idleTimeout], ["auto", 10, 60, 60]);
  const d = parseServeArgs(["--max-connections", "64", "--header-timeout", "2", "--idle-timeout=5"], noEnv);
  assert.ok(d !== "help");
  assert.deepEqual([d.maxConnections, d.headerTimeout, d.idleTimeout], [64, 2, 5]);
  assert.throws(() => parseServeArgs(["--header-timeout", "0"], noEnv), CliError);
  assert.throws(() => parseServeArgs(["--max-connections", "many"], noEnv), CliError);
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
