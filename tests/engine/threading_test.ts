import assert from "node:assert/strict";
import { parameterCount, resolveThreading, SMALL_MODEL_PARAMS } from "../../engine/backends/threading.ts";
import { readModelDir } from "../../checkpoint/model_dir.ts";

const ROOT = new URL("../../", import.meta.url).pathname;

Deno.test("parameterCount: the bundled model's 2,164,416 parameters (its README's figure)", async () => {
  const m = await readModelDir(`${ROOT}models/rill-tiny-harmony`);
  // The README counts the RMSNorm weights too (2 per layer + 1 final, of hidden size); the estimate leaves them out.
  const norms = (2 * m.config.numHiddenLayers + 1) * m.config.hiddenSize;
  assert.equal(parameterCount(m.config) + norms, 2_164_416);
});

Deno.test("resolveThreading: small models keep two 1-thread shards for big batches; large models one session, all cores", () => {
  const small = 2e6;
  const qwen05 = 494e6;
  assert.ok(small < SMALL_MODEL_PARAMS && qwen05 > SMALL_MODEL_PARAMS);
  const auto = { shards: "auto", threads: "auto" } as const;
  assert.deepEqual(resolveThreading({ params: small, maxNumSeqs: 32, cores: 2, ...auto }), { shards: 2, threads: 1 });
  assert.deepEqual(resolveThreading({ params: small, maxNumSeqs: 8, cores: 2, ...auto }), { shards: 1, threads: 1 });
  assert.deepEqual(resolveThreading({ params: small, maxNumSeqs: 32, cores: 1, ...auto }), { shards: 1, threads: 1 });
  assert.deepEqual(resolveThreading({ params: qwen05, maxNumSeqs: 32, cores: 2, ...auto }), { shards: 1, threads: 2 });
  assert.deepEqual(resolveThreading({ params: qwen05, maxNumSeqs: 1, cores: 16, ...auto }), { shards: 1, threads: 16 });
  // Explicit values win; auto threads then share the cores among the shards of a large model.
  assert.deepEqual(resolveThreading({ params: qwen05, maxNumSeqs: 32, cores: 8, shards: 2, threads: "auto" }), {
    shards: 2,
    threads: 4,
  });
  assert.deepEqual(resolveThreading({ params: small, maxNumSeqs: 32, cores: 8, shards: "auto", threads: 3 }), {
    shards: 2,
    threads: 3,
  });
});
