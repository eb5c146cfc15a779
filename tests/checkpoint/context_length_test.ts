import assert from "node:assert/strict";
import { contextLength, DEFAULT_CONTEXT_LENGTH, type ModelConfig } from "../../checkpoint/model_dir.ts";

function len(raw: Record<string, unknown>, modelMaxLength?: number): number {
  const maxPositionEmbeddings = typeof raw.max_position_embeddings === "number"
    ? raw.max_position_embeddings
    : undefined;
  return contextLength({
    config: { maxPositionEmbeddings, raw } as unknown as ModelConfig,
    tokenizerConfig: { bosToken: undefined, eosToken: undefined, padToken: undefined, modelMaxLength },
  });
}

Deno.test("context length: config.json's positions win over a smaller tokenizer model_max_length", () => {
  // The gpt-oss release: 131072 positions (YaRN from 4096) beside a tokenizer_config copied with 4096... or less.
  assert.equal(len({ max_position_embeddings: 131072 }, 4096), 131072);
  assert.equal(len({ max_position_embeddings: 1024 }, 1024), 1024);
  assert.equal(len({}, 4096), 4096);
  assert.equal(len({}), DEFAULT_CONTEXT_LENGTH);
});

Deno.test("context length: rope scaling that stretches positions stretches the context", () => {
  assert.equal(len({ max_position_embeddings: 4096, rope_scaling: { type: "linear", factor: 2 } }), 8192);
  assert.equal(len({ max_position_embeddings: 4096, rope_scaling: { rope_type: "dynamic", factor: 4 } }), 16384);
  assert.equal(
    len({
      max_position_embeddings: 131072,
      rope_scaling: { rope_type: "yarn", factor: 32, original_max_position_embeddings: 4096, truncate: false },
    }),
    131072,
  );
  assert.equal(
    len({
      max_position_embeddings: 32768,
      rope_scaling: { type: "yarn", factor: 4, original_max_position_embeddings: 32768 },
    }),
    131072,
  );
  // llama3 configs state the extended length already.
  assert.equal(
    len({
      max_position_embeddings: 131072,
      rope_scaling: { rope_type: "llama3", factor: 8, original_max_position_embeddings: 8192 },
    }),
    131072,
  );
  assert.equal(len({ max_position_embeddings: 2048, rope_scaling: null }), 2048);
  assert.equal(len({ max_position_embeddings: 2048, rope_scaling: { type: "linear", factor: 0.5 } }), 2048);
});
