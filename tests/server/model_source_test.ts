import assert from "node:assert/strict";
import { resolve } from "node:path";
import { DEFAULT_MODEL_DIR } from "../../server/cli_options.ts";
import { compiledRoot, engineModelDir, isEmbedded } from "../../server/model_source.ts";
import { openEngine } from "../../engine/open_engine.ts";
import { loadModel } from "../../prompt/load_model.ts";

const FIXTURE = "tests/fixtures/tiny-random";

Deno.test("compiledRoot: the deno-compile-<binary> mount holding the main module, only in a compiled binary", () => {
  assert.equal(compiledRoot("file:///tmp/deno-compile-rill/main.ts", "/usr/local/bin/rill"), "/tmp/deno-compile-rill");
  assert.equal(
    compiledRoot("file:///var/tmp/deno-compile-rill/src/main.ts", "/opt/rill"),
    "/var/tmp/deno-compile-rill",
  );
  assert.equal(compiledRoot("file:///work/main/main.ts", "/usr/bin/deno"), undefined);
  // Another binary's mount is not ours.
  assert.equal(compiledRoot("file:///tmp/deno-compile-other/main.ts", "/usr/local/bin/rill"), undefined);
  assert.equal(compiledRoot("https://example.com/main.ts", "/usr/local/bin/rill"), undefined);
  // Under `deno test` nothing is embedded.
  assert.equal(compiledRoot(), undefined);
  assert.equal(isEmbedded(FIXTURE), false);
});

Deno.test("isEmbedded: paths are resolved before they are compared with the root", () => {
  assert.equal(isEmbedded("/tmp/deno-compile-rill/models/m", "/tmp/deno-compile-rill"), true);
  assert.equal(isEmbedded("/tmp/deno-compile-rill", "/tmp/deno-compile-rill"), true);
  assert.equal(isEmbedded("/tmp/deno-compile-rill2/models/m", "/tmp/deno-compile-rill"), false);
  assert.equal(isEmbedded("/tmp/deno-compile-rill/../elsewhere", "/tmp/deno-compile-rill"), false);
  assert.equal(isEmbedded(FIXTURE, resolve("tests")), true);
});

Deno.test("engineModelDir: a readable directory is used in place; an embedded one is copied, loads, and is released", async () => {
  const inPlace = await engineModelDir(FIXTURE, [], undefined);
  assert.deepEqual([inPlace.dir, inPlace.copied], [FIXTURE, false]);

  const loaded = await loadModel(FIXTURE);
  const copy = await engineModelDir(FIXTURE, [loaded.weights.onnxPath!], resolve("tests/fixtures"));
  assert.equal(copy.copied, true);
  assert.notEqual(copy.dir, FIXTURE);
  try {
    for (const name of ["config.json", "generation_config.json", "onnx/model.onnx"]) {
      assert.deepEqual(await Deno.readFile(`${copy.dir}/${name}`), await Deno.readFile(`${FIXTURE}/${name}`), name);
    }
    // The copy holds what the backend opens (as in `rill serve`); the description was read once from the original.
    const engine = await openEngine({
      modelDir: copy.dir,
      model: { ...loaded, weights: { ...loaded.weights, onnxPath: `${copy.dir}/onnx/model.onnx` } },
      maxNumSeqs: 1,
    });
    try {
      assert.equal(engine.maxModelLen, loaded.maxModelLen);
    } finally {
      await engine.close();
    }
  } finally {
    await copy.release();
  }
  await assert.rejects(Deno.stat(copy.dir), Deno.errors.NotFound);
});

Deno.test("engineModelDir: an embedded safetensors checkpoint is copied with its config and the native backend opens it", async () => {
  const bundled = "models/rill-tiny-harmony";
  const loaded = await loadModel(bundled);
  const weights = loaded.weights.safetensors!.paths;
  const copy = await engineModelDir(bundled, weights, resolve("models"));
  assert.equal(copy.copied, true);
  try {
    for (const name of ["config.json", "generation_config.json", "model.safetensors"]) {
      assert.deepEqual(await Deno.readFile(`${copy.dir}/${name}`), await Deno.readFile(`${bundled}/${name}`), name);
    }
    // Only the chosen backend's weights travel: the ONNX export stays behind.
    await assert.rejects(Deno.stat(`${copy.dir}/onnx`), Deno.errors.NotFound);
    const engine = await openEngine({ modelDir: copy.dir, model: loaded, maxNumSeqs: 1, backend: { kind: "native" } });
    await engine.close();
  } finally {
    await copy.release();
  }
});

Deno.test("the default model directory is the bundled model next to the program, whatever the working directory", async () => {
  assert.ok(DEFAULT_MODEL_DIR.startsWith("/"), DEFAULT_MODEL_DIR);
  assert.equal(DEFAULT_MODEL_DIR, resolve("models/rill-tiny-harmony"));
  const cwd = Deno.cwd();
  Deno.chdir("/");
  try {
    assert.ok((await Deno.stat(`${DEFAULT_MODEL_DIR}/config.json`)).isFile);
  } finally {
    Deno.chdir(cwd);
  }
});
