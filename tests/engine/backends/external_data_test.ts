import assert from "node:assert/strict";
import type { EngineChunk, SamplingParams } from "../../../engine/engine.ts";
import { openEngine } from "../../../engine/open_engine.ts";
import { loadModel } from "../../../prompt/load_model.ts";
import { onnxExternalData } from "../../../checkpoint/model_dir.ts";
import { withTempDir } from "../../../testing/temp_dir.ts";

const TINY = new URL("../../fixtures/tiny-random", import.meta.url).pathname;

async function greedy(dir: string): Promise<{ tokens: number[][]; dataPaths: readonly string[] }> {
  const model = await loadModel(dir);
  const engine = await openEngine({ modelDir: dir, tokenizer: model.tokenizer, eosTokenIds: [], maxNumSeqs: 4 });
  const sampling: SamplingParams = {
    temperature: 0,
    topP: 1,
    topK: 0,
    maxTokens: 12,
    stopTokens: [],
    stopStrings: [],
    logprobs: -1,
  };
  try {
    const tokens = await Promise.all(["Hello, world!", "abc abc", "Zürich"].map(async (text, i) => {
      const out: number[] = [];
      const stream: ReadableStream<EngineChunk> = engine.generate({
        id: `x${i}`,
        promptTokens: model.tokenizer.encode(text),
        sampling,
      });
      for await (const c of stream) if (c.type === "step") out.push(...c.tokens);
      return out;
    }));
    return { tokens, dataPaths: (await onnxExternalData(dir, model.weights.onnxPath!)).paths };
  } finally {
    await engine.close();
  }
}

Deno.test("a model with its weights in onnx/model.onnx_data loads and decodes like the self-contained one", async () => {
  const plain = await greedy(TINY);
  assert.deepEqual(plain.dataPaths, []);
  await withTempDir(async (dir) => {
    for (const name of ["config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json"]) {
      await Deno.copyFile(`${TINY}/${name}`, `${dir}/${name}`);
    }
    await Deno.mkdir(`${dir}/onnx`);
    for (const name of ["model.onnx", "model.onnx_data"]) {
      await Deno.copyFile(`${TINY}/onnx-external/${name}`, `${dir}/onnx/${name}`);
    }
  }, async (dir) => {
    const external = await greedy(dir);
    assert.deepEqual(external.dataPaths, [`${dir}/onnx/model.onnx_data`]);
    assert.deepEqual(external.tokens, plain.tokens);
    assert.ok(plain.tokens.every((t) => t.length === 12));
  });
});
