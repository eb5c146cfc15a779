import assert from "node:assert/strict";
import { OPENAI_DEFAULTS, readDoSample, samplingDefaults } from "../../api/sampling_defaults.ts";
import type { GenerationConfig } from "../../checkpoint/model_dir.ts";
import { ModelDirError } from "../../checkpoint/model_dir.ts";

const config: GenerationConfig = {
  eosTokenIds: [1],
  temperature: 0.7,
  topP: 0.9,
  topK: 40,
  maxNewTokens: undefined,
};

Deno.test("samplingDefaults: do_sample false is greedy whatever temperature says", () => {
  assert.deepEqual(samplingDefaults(config, false), { temperature: 0, topP: 1, topK: 0 });
  assert.deepEqual(samplingDefaults(undefined, false), { temperature: 0, topP: 1, topK: 0 });
});

Deno.test("samplingDefaults: otherwise the file's values, and the OpenAI defaults for what it leaves out", () => {
  assert.deepEqual(samplingDefaults(config, true), { temperature: 0.7, topP: 0.9, topK: 40 });
  assert.deepEqual(samplingDefaults(config, undefined), { temperature: 0.7, topP: 0.9, topK: 40 });
  assert.deepEqual(samplingDefaults(undefined, undefined), OPENAI_DEFAULTS);
  const partial = { ...config, temperature: undefined, topK: undefined };
  assert.deepEqual(samplingDefaults(partial, undefined), { temperature: 1, topP: 0.9, topK: 0 });
});

Deno.test("readDoSample: the field of generation_config.json, undefined when absent, an error naming it when not a boolean", async () => {
  const dir = await Deno.makeTempDir({ prefix: "rill-gen-" });
  try {
    assert.equal(await readDoSample(dir), undefined);
    await Deno.writeTextFile(`${dir}/generation_config.json`, JSON.stringify({ temperature: 0.6 }));
    assert.equal(await readDoSample(dir), undefined);
    await Deno.writeTextFile(`${dir}/generation_config.json`, JSON.stringify({ do_sample: false, temperature: 0.6 }));
    assert.equal(await readDoSample(dir), false);
    await Deno.writeTextFile(`${dir}/generation_config.json`, JSON.stringify({ do_sample: true }));
    assert.equal(await readDoSample(dir), true);
    await Deno.writeTextFile(`${dir}/generation_config.json`, JSON.stringify({ do_sample: "no" }));
    await assert.rejects(
      readDoSample(dir),
      (e: unknown) => e instanceof ModelDirError && /"do_sample"/.test(e.message),
    );
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
