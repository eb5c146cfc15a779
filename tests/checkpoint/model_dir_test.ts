import assert from "node:assert/strict";
import { externalDataLocations, ModelDirError, onnxExternalData, readModelDir } from "../../checkpoint/model_dir.ts";
import { editJson, withTempDir } from "../../testing/temp_dir.ts";

const TINY = new URL("../fixtures/tiny-random/", import.meta.url).pathname.replace(/\/$/, "");

/** A copy of tests/fixtures/tiny-random in a temp dir, edited by `edit`, removed afterwards. */
function withModelCopy(edit: (dir: string) => Promise<void>, body: (dir: string) => Promise<void>): Promise<void> {
  return withTempDir(async (dir) => {
    for (const name of ["config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json"]) {
      await Deno.copyFile(`${TINY}/${name}`, `${dir}/${name}`);
    }
    await Deno.mkdir(`${dir}/onnx`);
    await Deno.copyFile(`${TINY}/onnx/model.onnx`, `${dir}/onnx/model.onnx`);
    await edit(dir);
  }, body);
}

async function expectError(edit: (dir: string) => Promise<void>, message: (dir: string) => string): Promise<void> {
  await withModelCopy(edit, async (dir) => {
    await assert.rejects(readModelDir(dir), (e: unknown) => {
      assert.ok(e instanceof ModelDirError, `expected ModelDirError, got ${e}`);
      assert.equal(e.message, message(dir));
      assert.ok(!e.message.includes("\n"));
      return true;
    });
  });
}

Deno.test("readModelDir reads the tiny-random fixture and reports progress per file", async () => {
  const lines: string[] = [];
  const m = await readModelDir(TINY, { onProgress: (l) => lines.push(l) });
  assert.equal(m.config.modelType, "llama");
  assert.equal(m.config.vocabSize, 265);
  assert.equal(m.config.numKeyValueHeads, 2);
  assert.equal(m.config.headDim, 8);
  assert.deepEqual(m.config.eosTokenIds, [263, 257, 264]);
  assert.equal(m.config.chatFormat, "harmony");
  assert.deepEqual(m.generationConfig?.eosTokenIds, [263, 257, 264]);
  assert.equal(m.generationConfig?.topP, 1);
  assert.equal(m.tokenizerConfig.eosToken, "<|return|>");
  assert.equal(m.tokenizerConfig.modelMaxLength, 512);
  assert.equal(m.tokenizer.specialId("<|return|>"), 263);
  assert.deepEqual(m.weights, {
    onnxPath: `${TINY}/onnx/model.onnx`,
    safetensors: { paths: [`${TINY}/model.safetensors`], bytes: (await Deno.stat(`${TINY}/model.safetensors`)).size },
  });
  assert.deepEqual((await onnxExternalData(TINY, m.weights.onnxPath!)).paths, []);
  // Weight files are logged by the backend that reads them, not here.
  assert.deepEqual(
    lines.map((l) => l.split(":")[0]),
    ["config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json"],
  );
  assert.match(lines[2]!, /^tokenizer\.json: 265 tokens, byte-level \(\d+ ms\)$/);
});

Deno.test("missing directory and missing files are named", async () => {
  await assert.rejects(readModelDir("/nonexistent/rill-model"), {
    name: "ModelDirError",
    message: "/nonexistent/rill-model: directory not found",
  });
  for (const name of ["config.json", "tokenizer.json"]) {
    await expectError((d) => Deno.remove(`${d}/${name}`), (d) => `${d}: ${name}: file not found`);
  }
  // Weights are optional here: each backend asks for its own (engine/backends/choose_backend.ts).
  await withModelCopy((d) => Deno.remove(`${d}/onnx/model.onnx`), async (d) => {
    assert.deepEqual((await readModelDir(d)).weights, { onnxPath: undefined, safetensors: undefined });
  });
});

Deno.test("safetensors weights are found single or sharded; an index naming a missing shard is an error", async () => {
  await withModelCopy((d) => Deno.writeFile(`${d}/model.safetensors`, new Uint8Array(100)), async (d) => {
    assert.deepEqual((await readModelDir(d)).weights.safetensors, { paths: [`${d}/model.safetensors`], bytes: 100 });
  });
  const index = (files: string[]) =>
    JSON.stringify({ metadata: {}, weight_map: Object.fromEntries(files.map((f, i) => [`t${i}`, f])) });
  await withModelCopy(async (d) => {
    await Deno.writeTextFile(
      `${d}/model.safetensors.index.json`,
      index(["b.safetensors", "a.safetensors", "a.safetensors"]),
    );
    await Deno.writeFile(`${d}/a.safetensors`, new Uint8Array(10));
    await Deno.writeFile(`${d}/b.safetensors`, new Uint8Array(20));
  }, async (d) => {
    assert.deepEqual((await readModelDir(d)).weights.safetensors, {
      paths: [`${d}/a.safetensors`, `${d}/b.safetensors`],
      bytes: 30,
    });
  });
  await expectError(
    (d) => Deno.writeTextFile(`${d}/model.safetensors.index.json`, index(["model-00001-of-00002.safetensors"])),
    (d) => `${d}: model.safetensors.index.json: shard model-00001-of-00002.safetensors not found`,
  );
  await expectError(
    (d) => Deno.writeTextFile(`${d}/model.safetensors.index.json`, index(["../x.safetensors"])),
    (d) => `${d}: model.safetensors.index.json: "weight_map.t0" must be a file name next to the index`,
  );
});

Deno.test("optional files may be absent", async () => {
  await withModelCopy(async (d) => {
    await Deno.remove(`${d}/generation_config.json`);
    await Deno.remove(`${d}/tokenizer_config.json`);
  }, async (d) => {
    const m = await readModelDir(d);
    assert.equal(m.generationConfig, undefined);
    assert.equal(m.chatTemplate, undefined);
    assert.equal(m.tokenizerConfig.eosToken, undefined);
  });
});

Deno.test("invalid JSON and invalid config fields are named", async () => {
  await expectError(
    (d) => Deno.writeTextFile(`${d}/config.json`, "{ nope"),
    (d) => `${d}: config.json: invalid JSON: ${jsonError("{ nope")}`,
  );
  await expectError(
    (d) => Deno.writeTextFile(`${d}/config.json`, "[1]"),
    (d) => `${d}: config.json: must be a JSON object`,
  );
  const cases: [(j: Record<string, unknown>) => void, string][] = [
    [(j) => (j.hidden_size = 0), `"hidden_size" must be a positive integer`],
    [(j) => delete j.vocab_size, `"vocab_size" must be a positive integer`],
    [(j) => (j.num_hidden_layers = 2.5), `"num_hidden_layers" must be a positive integer`],
    [(j) => (j.num_key_value_heads = 3), `"num_key_value_heads" (3) must divide "num_attention_heads" (4)`],
    [(j) => (j.model_type = 7), `"model_type" must be a string`],
    [(j) => (j.eos_token_id = []), `"eos_token_id" must be a token id or a non-empty list of token ids`],
    [(j) => (j.eos_token_id = 999), `"eos_token_id" (999) must be below "vocab_size" (265)`],
    [(j) => (j.rms_norm_eps = -1), `"rms_norm_eps" must be a positive number`],
    [(j) => (j.rill = { chat_format: "alpaca" }), `"rill.chat_format" must be "harmony" or "chatml"`],
    [(j) => (j.architectures = "Llama"), `"architectures" must be a list of strings`],
    [(j) => {
      delete j.head_dim;
      j.hidden_size = 30;
    }, `"head_dim" is missing and "hidden_size" is not a multiple of "num_attention_heads"`],
  ];
  for (const [edit, message] of cases) {
    await expectError((d) => editJson(`${d}/config.json`, edit), (d) => `${d}: config.json: ${message}`);
  }
});

function jsonError(text: string): string {
  try {
    JSON.parse(text);
  } catch (e) {
    return (e as Error).message;
  }
  throw new Error("valid JSON");
}

Deno.test("head_dim and num_key_value_heads default like HF", async () => {
  await withModelCopy((d) =>
    editJson(`${d}/config.json`, (j) => {
      delete j.head_dim;
      delete j.num_key_value_heads;
    }), async (d) => {
    const m = await readModelDir(d);
    assert.equal(m.config.headDim, 32 / 4);
    assert.equal(m.config.numKeyValueHeads, 4);
  });
});

Deno.test("invalid generation_config.json and tokenizer files are named", async () => {
  const gen: [(j: Record<string, unknown>) => void, string][] = [
    [(j) => (j.top_p = 1.5), `"top_p" must be a number in (0, 1]`],
    [(j) => (j.temperature = "hot"), `"temperature" must be a number >= 0`],
    [(j) => (j.eos_token_id = 300), `"eos_token_id" (300) must be below config.json "vocab_size" (265)`],
    [(j) => (j.top_k = -1), `"top_k" must be a non-negative integer`],
  ];
  for (const [edit, message] of gen) {
    await expectError(
      (d) => editJson(`${d}/generation_config.json`, edit),
      (d) => `${d}: generation_config.json: ${message}`,
    );
  }
  await expectError(
    (d) => editJson(`${d}/tokenizer.json`, (j) => ((j.model as Record<string, unknown>).type = "WordPiece")),
    (d) => `${d}: tokenizer.json: "model.type" "WordPiece" is not supported (BPE only)`,
  );
  await expectError(
    async (d) => {
      await Deno.remove(`${d}/generation_config.json`);
      await editJson(`${d}/config.json`, (j) => {
        j.vocab_size = 260;
        j.eos_token_id = 257;
      });
    },
    (d) => `${d}: tokenizer.json: has 265 token ids but config.json "vocab_size" is 260`,
  );
  await expectError(
    (d) => editJson(`${d}/tokenizer_config.json`, (j) => (j.chat_template = 5)),
    (d) => `${d}: tokenizer_config.json: "chat_template" must be a string or a list of {name, template}`,
  );
  await expectError(
    (d) =>
      editJson(
        `${d}/tokenizer_config.json`,
        (j) => (j.chat_template = [{ name: "tool_use", template: "x" }, { name: "rag", template: "y" }]),
      ),
    (d) => `${d}: tokenizer_config.json: "chat_template" list has no "default" entry`,
  );
  await expectError(
    (d) => editJson(`${d}/tokenizer_config.json`, (j) => (j.eos_token = 3)),
    (d) => `${d}: tokenizer_config.json: "eos_token" must be a string or {"content": string}`,
  );
});

Deno.test("chat templates: string, named list, and chat_template.jinja (which wins)", async () => {
  await withModelCopy((d) =>
    editJson(`${d}/tokenizer_config.json`, (j) => {
      j.chat_template = [{ name: "default", template: "D" }, { name: "tool_use", template: "T" }];
      j.eos_token = { content: "<|return|>", special: true };
    }), async (d) => {
    const m = await readModelDir(d);
    assert.equal(m.chatTemplate, "D");
    assert.deepEqual(m.chatTemplates, { default: "D", tool_use: "T" });
    assert.equal(m.tokenizerConfig.eosToken, "<|return|>");
    await Deno.writeTextFile(`${d}/chat_template.jinja`, "J{{ messages }}");
    const withFile = await readModelDir(d);
    assert.equal(withFile.chatTemplate, "J{{ messages }}");
    assert.equal(withFile.chatTemplates.tool_use, "T");
  });
  await withModelCopy((d) => editJson(`${d}/tokenizer_config.json`, (j) => (j.chat_template = "S")), async (d) => {
    assert.equal((await readModelDir(d)).chatTemplate, "S");
  });
});

/** Bytes of an ONNX TensorProto external_data entry {key: "location", value: loc} amid other bytes. */
function externalDataEntry(loc: string): Uint8Array {
  const value = new TextEncoder().encode(loc);
  return Uint8Array.from([
    0x01,
    0x0a,
    0x02,
    ...new TextEncoder().encode("xx"),
    0x0a,
    0x08,
    ...new TextEncoder().encode("location"),
    0x12,
    value.length,
    ...value,
    0x0a,
    0x06,
    ...new TextEncoder().encode("offset"),
  ]);
}

Deno.test("externalDataLocations finds referenced files in ONNX bytes", async () => {
  const bytes = new Uint8Array([...externalDataEntry("model.onnx_data"), ...externalDataEntry("model.onnx_data")]);
  assert.deepEqual(externalDataLocations(bytes), ["model.onnx_data"]);
  assert.deepEqual(externalDataLocations(new Uint8Array([1, 2, 3])), []);
  assert.deepEqual(externalDataLocations(await Deno.readFile(`${TINY}/onnx/model.onnx`)), []);
});

Deno.test("referenced external data must exist next to model.onnx", async () => {
  const edit = (d: string) => Deno.writeFile(`${d}/onnx/model.onnx`, externalDataEntry("model.onnx_data"));
  await withModelCopy(edit, async (d) => {
    await assert.rejects(onnxExternalData(d, `${d}/onnx/model.onnx`), {
      name: "ModelDirError",
      message: `${d}: onnx/model.onnx: external data file "model.onnx_data" not found next to it`,
    });
  });
  await withModelCopy(async (d) => {
    await edit(d);
    await Deno.writeFile(`${d}/onnx/model.onnx_data`, new Uint8Array(8));
  }, async (d) => {
    assert.deepEqual((await onnxExternalData(d, `${d}/onnx/model.onnx`)).paths, [`${d}/onnx/model.onnx_data`]);
  });
});
