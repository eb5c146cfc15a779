import assert from "node:assert/strict";
import type { EngineChunk } from "../../engine/engine.ts";
import { HfTokenizer } from "../../checkpoint/hf_tokenizer.ts";
import { readModelDir } from "../../checkpoint/model_dir.ts";
import { openEngine } from "../../engine/open_engine.ts";
import { withTempDir } from "../../testing/temp_dir.ts";

const FIXTURE = new URL("../fixtures/tiny-random", import.meta.url).pathname;
const tokenizer = await HfTokenizer.fromFile(`${FIXTURE}/tokenizer.json`);

async function run(
  shards: number,
  speculative: "ngram" | "none",
  source: { modelDir: string; modelBytes?: Uint8Array },
) {
  const model = await readModelDir(FIXTURE);
  const engine = await openEngine({
    modelDir: source.modelDir,
    model: { ...model, weights: { ...model.weights, onnxPath: `${source.modelDir}/onnx/model.onnx` } },
    tokenizer,
    eosTokenIds: [],
    speculative,
    backend: { shards, ...(source.modelBytes === undefined ? {} : { modelBytes: source.modelBytes }) },
  });
  try {
    // 12 at once: with two shards the main thread takes the first 8, the worker the other 4.
    const prompts = [
      "Hello, world!",
      "abcabcabc",
      "x",
      "The quick brown fox",
      "1 2 3 1 2 3",
      "Zürich",
      "aaaa",
      "hm",
      "lorem ipsum",
      "ok ok ok",
      "🙂 smile",
      "end",
    ];
    const outs = await Promise.all(prompts.map(async (p, i) => {
      const tokens: number[] = [];
      let reason = "";
      const stream: ReadableStream<EngineChunk> = engine.generate({
        id: `r${i}`,
        promptTokens: tokenizer.encode(p),
        sampling: {
          temperature: i % 2 === 0 ? 0 : 0.8,
          topP: 1,
          topK: 0,
          seed: i,
          maxTokens: 20 + 5 * i,
          stopTokens: [],
          stopStrings: [],
          logprobs: -1,
        },
      });
      for await (const c of stream) {
        if (c.type === "step") tokens.push(...c.tokens);
        else reason = c.reason;
      }
      return { tokens, reason };
    }));
    const stats = engine.stats();
    assert.deepEqual([stats.running, stats.waiting, stats.kvCacheUsage], [0, 0, 0]);
    return outs;
  } finally {
    await engine.close();
  }
}

Deno.test("engine with 2 shards (main thread + worker) gives the same outputs as one", async () => {
  const one = await run(1, "none", { modelDir: FIXTURE });
  const two = await run(2, "none", { modelDir: FIXTURE });
  assert.deepEqual(two, one);
  const twoSpec = await run(2, "ngram", { modelDir: FIXTURE });
  twoSpec.forEach((r, i) => {
    if (i % 2 === 0) assert.deepEqual(r, one[i], `greedy prompt ${i} with speculation`);
    assert.equal(r.tokens.length, 20 + 5 * i);
  });
});

Deno.test("engine from model bytes (no onnx/model.onnx on disk), on one and two shards, matches the file", async () => {
  const one = await run(1, "none", { modelDir: FIXTURE });
  // Nothing on disk: the model description supplies the dims and context length, the bytes supply the graph.
  const setup = (_dir: string) => Promise.resolve();
  await withTempDir(setup, async (dir) => {
    const modelBytes = await Deno.readFile(`${FIXTURE}/onnx/model.onnx`);
    assert.deepEqual(await run(1, "none", { modelDir: dir, modelBytes }), one);
    assert.deepEqual(await run(2, "none", { modelDir: dir, modelBytes }), one);
    await assert.rejects(
      async () =>
        openEngine({
          modelDir: dir,
          model: {
            ...await readModelDir(FIXTURE),
            weights: { onnxPath: `${dir}/onnx/model.onnx`, safetensors: undefined },
          },
        }),
      (e: unknown) => e instanceof Error && e.message.includes(`${dir}/onnx/model.onnx`),
    );
  });
});
