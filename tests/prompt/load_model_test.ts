import assert from "node:assert/strict";
import { loadModel } from "../../prompt/load_model.ts";
import { ModelDirError } from "../../checkpoint/model_dir.ts";
import { editJson, withTempDir } from "../../testing/temp_dir.ts";

const TINY = new URL("../fixtures/tiny-random/", import.meta.url).pathname.replace(/\/$/, "");
const TOKENIZERS = new URL("../fixtures/tokenizers/", import.meta.url).pathname;
const MODELS = new URL("../../models/", import.meta.url).pathname;

/** The tiny-random config and ONNX file around the ChatML fixture tokenizer and Qwen3-style template. */
async function chatmlDir(dir: string, template: boolean): Promise<void> {
  await Deno.mkdir(`${dir}/onnx`);
  await Deno.copyFile(`${TINY}/onnx/model.onnx`, `${dir}/onnx/model.onnx`);
  await Deno.copyFile(`${TOKENIZERS}/byte_level.json`, `${dir}/tokenizer.json`);
  await Deno.copyFile(`${TINY}/config.json`, `${dir}/config.json`);
  await editJson(`${dir}/config.json`, (j) => {
    delete j.rill;
    j.vocab_size = 279;
    j.eos_token_id = 273;
    j.bos_token_id = null;
  });
  const tc: Record<string, unknown> = { eos_token: "<|im_end|>", pad_token: "<|endoftext|>" };
  if (template) tc.chat_template = await Deno.readTextFile(`${TOKENIZERS}/chatml_think_tools.jinja`);
  await Deno.writeTextFile(`${dir}/tokenizer_config.json`, JSON.stringify(tc));
}

Deno.test("loadModel: tiny-random is a harmony model (rill.chat_format) with progress lines", async () => {
  const lines: string[] = [];
  const m = await loadModel(TINY, { onProgress: (l) => lines.push(l), harmony: { date: "2025-01-01" } });
  assert.equal(m.modelId, "tiny-random");
  assert.equal(m.formatName, "harmony");
  assert.equal(m.format.name, "harmony");
  assert.equal(m.maxModelLen, 512);
  assert.deepEqual(m.eosTokenIds, [263, 257, 264]);
  assert.equal(m.weights.onnxPath, `${TINY}/onnx/model.onnx`);
  assert.ok(m.format.stopTokens.includes(m.tokenizer.specialId("<|return|>")!));
  const prompt = m.format.render({ messages: [{ role: "user", content: "hi" }], tools: [], toolChoice: "auto" });
  assert.equal(prompt[0], m.tokenizer.specialId("<|start|>"));
  assert.match(lines.at(-2)!, /^chat format: harmony, stop tokens \[[\d, ]+\] \(\d+ ms\)$/);
  assert.match(lines.at(-1)!, /^loaded tiny-random in \d+ ms \(max model len 512\)$/);
});

Deno.test("loadModel: harmony is detected from a <|channel|> special without rill.chat_format", async () => {
  await withTempDir(async (dir) => {
    for (const f of ["config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json"]) {
      await Deno.copyFile(`${TINY}/${f}`, `${dir}/${f}`);
    }
    await Deno.mkdir(`${dir}/onnx`);
    await Deno.copyFile(`${TINY}/onnx/model.onnx`, `${dir}/onnx/model.onnx`);
    await editJson(`${dir}/config.json`, (j) => delete j.rill);
  }, async (dir) => {
    assert.equal((await loadModel(`${dir}/`)).formatName, "harmony");
    // An explicit rill.chat_format wins over detection: chatml then needs a chat template, which this dir lacks.
    await editJson(`${dir}/config.json`, (j) => (j.rill = { chat_format: "chatml" }));
    await assert.rejects(loadModel(dir), /"chat_template" is missing/);
  });
});

Deno.test("loadModel: a ChatML model uses its chat template and config EOS", async () => {
  await withTempDir((d) => chatmlDir(d, true), async (dir) => {
    const m = await loadModel(dir);
    assert.equal(m.formatName, "chatml");
    assert.equal(m.format.name, "chatml");
    assert.deepEqual(m.eosTokenIds, [273]);
    assert.ok(m.format.stopTokens.includes(m.tokenizer.specialId("<|im_end|>")!));
    assert.ok(m.format.stopTokens.includes(273));
    const ids = m.format.render({ messages: [{ role: "user", content: "hi" }], tools: [], toolChoice: "auto" });
    assert.equal(m.tokenizer.decode(ids), "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n");
    assert.equal(m.maxModelLen, 512);
  });
});

Deno.test("loadModel: a missing chat template and missing harmony specials are named", async () => {
  await withTempDir((d) => chatmlDir(d, false), async (dir) => {
    await assert.rejects(loadModel(dir), (e: unknown) => {
      assert.ok(e instanceof ModelDirError);
      assert.equal(
        e.message,
        `${dir}: tokenizer_config.json: "chat_template" is missing (no chat_template.jinja either) and the model is ` +
          `not a harmony model`,
      );
      return true;
    });
    await editJson(`${dir}/config.json`, (j) => (j.rill = { chat_format: "harmony" }));
    await assert.rejects(loadModel(dir), /tokenizer\.json: cannot use the harmony format: .*<\|return\|>/);
  });
});

// Both bundled models ship with the repo and must load.
for (const name of ["rill-tiny-harmony", "rill-tiny-chatml"]) {
  Deno.test(`loadModel: bundled ${name} loads and renders a prompt`, async () => {
    const m = await loadModel(`${MODELS}${name}`);
    assert.equal(m.modelId, name);
    assert.equal(m.formatName, name.endsWith("harmony") ? "harmony" : "chatml");
    const ids = m.format.render({
      messages: [{ role: "user", content: "What is 2 + 3?" }],
      tools: [{ name: "get_weather", parameters: { type: "object", properties: { city: { type: "string" } } } }],
      toolChoice: "auto",
    });
    assert.ok(ids.length > 0 && ids.every((id) => id >= 0 && id < m.config.vocabSize));
    assert.ok(m.format.stopTokens.length > 0);
  });
}
