import assert from "node:assert/strict";
import { CliError, parseServeArgs, type ServeConfig } from "../../api/cli_options.ts";
import { Logger } from "../../api/logger.ts";
import { loadServedModel } from "../../api/serve.ts";

const DIR = "tests/fixtures/tiny-random";

function config(...flags: string[]): ServeConfig {
  return parseServeArgs([DIR, "--data-dir", ":memory:", ...flags], () => undefined) as ServeConfig;
}

Deno.test("rill serve: a backend the build cannot make is a one-line CliError naming the flag", async () => {
  for (
    const [flags, pattern] of [[["--backend", "native"], /--backend native/], [
      ["--device", "cuda"],
      /CPU only/,
    ]] as const
  ) {
    await assert.rejects(
      () => loadServedModel(config(...flags), new Logger("text", () => {})),
      (e: unknown) => e instanceof CliError && pattern.test(e.message) && !e.message.includes("\n"),
    );
  }
});

Deno.test("rill serve: the backend flags reach the backend and the startup log", async () => {
  const lines: string[] = [];
  const model = await loadServedModel(
    config("--block-size", "32", "--num-kv-blocks", "64", "--max-num-batched-tokens", "256", "--max-num-seqs", "4"),
    new Logger("text", (line) => lines.push(line)),
  );
  try {
    const info = (model.engine as unknown as { backend: { info: Record<string, number> } }).backend.info;
    assert.deepEqual([info.blockSize, info.numBlocks, info.maxBatchTokens, info.maxSeqs], [32, 64, 256, 4]);
    assert.ok(
      lines.some((l) =>
        /onnx backend: 1 ONNX session × 1 thread, host sampler, prefix cache.*KV 64 blocks of 32/.test(l)
      ),
      lines.join("\n"),
    );
  } finally {
    await model.engine.close();
  }
});

Deno.test("rill serve: --prefix-cache off keeps every sequence's cache to itself", async () => {
  const model = await loadServedModel(config("--prefix-cache", "off"), new Logger("text", () => {}));
  try {
    const info = (model.engine as unknown as { backend: { info: { sharesPrefixBlocks: boolean } } }).backend.info;
    assert.equal(info.sharesPrefixBlocks, false);
  } finally {
    await model.engine.close();
  }
});
