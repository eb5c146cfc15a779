import assert from "node:assert/strict";
import { NativeBackend } from "../../engine/backends/native_backend.ts";
import { prefillBatch, resultBuffers } from "./step_batches.ts";

const ROOT = new URL("../../", import.meta.url).pathname;
const MODEL = `${ROOT}models/rill-tiny-chatml`;

Deno.test("native: a malformed batch is rejected with an Error naming the field, and the engine keeps working", async () => {
  const backend = await NativeBackend.create(MODEL, { threads: 1, maxSeqs: 2, maxBatchTokens: 64, numBlocks: 16 });
  try {
    const V = backend.info.vocabSize;
    const good = () => prefillBatch(backend.info, [{ seqId: 1, tokens: [5, 6, 7, 8] }]);
    const result = resultBuffers(backend.info, 1);

    const badToken = good();
    badToken.tokens[2] = V;
    await assert.rejects(backend.step(badToken, result), /tokens\[2\]/);

    const badBlock = good();
    badBlock.blockTables[0] = backend.info.numBlocks;
    await assert.rejects(backend.step(badBlock, result), /block_tables/);

    const badDrafts = good();
    badDrafts.draftCounts[0] = backend.info.maxDrafts + 1;
    await assert.rejects(backend.step(badDrafts, result), /draft_counts/);

    const badStart = good();
    badStart.queryStart[1] = 3;
    await assert.rejects(backend.step(badStart, result), /query_start/);

    // Buffers shorter than the batch claims are caught in TypeScript, before any pointer crosses.
    const short = { ...good(), numTokens: 9 };
    await assert.rejects(backend.step(short, result), /tokens has 4 entries, needs 9/);

    await backend.step(good(), result);
    assert.equal(result.counts[0], 1);
    assert.ok(result.tokens[0]! >= 0 && result.tokens[0]! < V);
  } finally {
    await backend.close();
  }
});

Deno.test("native: a model directory that cannot load is an Error naming it", async () => {
  const dir = await Deno.makeTempDir({ prefix: "rill-bad-model-" });
  try {
    await Deno.writeTextFile(`${dir}/config.json`, JSON.stringify({ architectures: ["NoSuchForCausalLM"] }));
    await assert.rejects(NativeBackend.create(dir, { threads: 1 }), (e: Error) => e.message.length > 0);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
