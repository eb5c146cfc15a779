import assert from "node:assert/strict";
import { CliError, parseServeArgs, type ServeConfig } from "../../server/cli_options.ts";
import { Logger } from "../../server/logger.ts";
import { loadServedModel } from "../../server/serve.ts";

const DIR = "tests/fixtures/tiny-random";

function config(...flags: string[]): ServeConfig {
  return configFor(DIR, ...flags);
}

function configFor(dir: string, ...flags: string[]): ServeConfig {
  return parseServeArgs([dir, "--data-dir", ":memory:", ...flags], () => undefined) as ServeConfig;
}

/** Serves `dir` with `flags`, returns the start-up log and the backend's kind, and closes the engine. */
async function startUp(dir: string, ...flags: string[]): Promise<{ lines: string[]; kind: string }> {
  const lines: string[] = [];
  const model = await loadServedModel(configFor(dir, ...flags), new Logger("text", (line) => lines.push(line)));
  try {
    return { lines, kind: (model.engine as unknown as { backend: object }).backend.constructor.name };
  } finally {
    await model.engine.close();
  }
}

/** The bundled harmony model: safetensors weights the native library serves, and its ONNX export. */
const BUNDLED = "models/rill-tiny-harmony";

/** A copy of the bundled model with only the files `keep` names (and config.json edited by `edit`). */
async function fixtureCopy(keep: readonly string[], edit: (config: Record<string, unknown>) => void = () => {}) {
  const dir = await Deno.makeTempDir({ prefix: "rill-serve-backend-" });
  for (const name of ["config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json", ...keep]) {
    await Deno.mkdir(`${dir}/${name}`.replace(/\/[^/]+$/, ""), { recursive: true });
    await Deno.copyFile(`${BUNDLED}/${name}`, `${dir}/${name}`);
  }
  const config = JSON.parse(await Deno.readTextFile(`${dir}/config.json`));
  edit(config);
  await Deno.writeTextFile(`${dir}/config.json`, JSON.stringify(config));
  return { dir, [Symbol.asyncDispose]: () => Deno.remove(dir, { recursive: true }) };
}

const count = (lines: string[], pattern: RegExp) => lines.filter((l) => pattern.test(l)).length;

Deno.test("rill serve: a backend the build cannot make is a one-line CliError naming the flag", async () => {
  for (
    const [flags, pattern] of [[["--backend", "native"], /native backend: .*missing tensor/], [
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
    config(
      "--backend",
      "onnx",
      "--block-size",
      "32",
      "--num-kv-blocks",
      "64",
      "--max-num-batched-tokens",
      "256",
      "--max-num-seqs",
      "4",
    ),
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

Deno.test("rill serve: with no flag a directory with safetensors weights is served by the native library", async () => {
  await using onlySafetensors = await fixtureCopy(["model.safetensors"]);
  for (const dir of [BUNDLED, onlySafetensors.dir]) {
    const { lines, kind } = await startUp(dir);
    assert.equal(kind, "NativeBackend", lines.join("\n"));
    assert.equal(count(lines, /backend: native \(safetensors weights and the native library\)/), 1, lines.join("\n"));
    assert.equal(count(lines, /model\.safetensors: \d+\.\d MB/), 1, lines.join("\n"));
    // Only the files the chosen backend reads are logged, and the pool's size once.
    assert.equal(count(lines, /onnx/i), 0, lines.join("\n"));
    assert.equal(count(lines, /blocks of 16/), 1, lines.join("\n"));
  }
});

Deno.test("rill serve: ONNX serves an ONNX-only directory with no flag, and --backend onnx logs only the graph", async () => {
  await using onlyOnnx = await fixtureCopy(["onnx/model.onnx"]);
  for (
    const [dir, flags, why] of [[onlyOnnx.dir, [], /no safetensors weights/], [
      DIR,
      ["--backend", "onnx"],
      /--backend onnx/,
    ]] as const
  ) {
    const { lines, kind } = await startUp(dir, ...flags);
    assert.equal(kind, "HostSampledBackend", lines.join("\n"));
    assert.equal(count(lines, /backend: onnx \(/), 1, lines.join("\n"));
    assert.ok(lines.some((l) => why.test(l)), lines.join("\n"));
    assert.equal(count(lines, /onnx\/model\.onnx: \d+\.\d MB/), 1, lines.join("\n"));
    assert.equal(count(lines, /model\.safetensors|safetensors shards/), 0, lines.join("\n"));
  }
});

Deno.test("rill serve: a checkpoint the native library cannot read falls back to ONNX (tiny-random's weights are not HF's)", async () => {
  const { lines, kind } = await startUp(DIR);
  assert.equal(kind, "HostSampledBackend", lines.join("\n"));
  assert.equal(
    count(lines, /native backend cannot serve this model, trying onnx: native backend: .*missing tensor/),
    1,
  );
});

Deno.test("rill serve: a checkpoint the native library refuses falls back to the directory's ONNX graph, saying why", async () => {
  await using exotic = await fixtureCopy(["model.safetensors", "onnx/model.onnx"], (c) => {
    c.architectures = ["ExoticForCausalLM"];
    c.model_type = "exotic";
  });
  const { lines, kind } = await startUp(exotic.dir);
  assert.equal(kind, "HostSampledBackend", lines.join("\n"));
  assert.ok(
    lines.some((l) => /native backend cannot serve this model, trying onnx: .*unsupported architecture Exotic/.test(l)),
    lines.join("\n"),
  );
  await using noOnnx = await fixtureCopy(["model.safetensors"], (c) => {
    c.architectures = ["ExoticForCausalLM"];
    c.model_type = "exotic";
  });
  await assert.rejects(
    () => loadServedModel(configFor(noOnnx.dir), new Logger("text", () => {})),
    (e: unknown) =>
      e instanceof CliError && /unsupported architecture Exotic/.test(e.message) && !e.message.includes("\n"),
  );
});

Deno.test("rill serve: a directory without weights is one line naming what is missing", async () => {
  await using bare = await fixtureCopy([]);
  await assert.rejects(
    () => loadServedModel(configFor(bare.dir), new Logger("text", () => {})),
    (e: unknown) =>
      e instanceof CliError && /no weights: model\.safetensors .* or onnx\/model\.onnx/.test(e.message) &&
      !e.message.includes("\n"),
  );
});
