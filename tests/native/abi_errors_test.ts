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

Deno.test("native gpt-oss: a missing, short or wrong sliding block table is an Error naming it", async () => {
  const backend = await NativeBackend.create(`${ROOT}tests/fixtures/checkpoints/gptoss-bf16`, {
    threads: 1,
    maxSeqs: 2,
    maxBatchTokens: 64,
    numBlocks: 16,
    numSlidingBlocks: 8,
  });
  try {
    const good = () => prefillBatch(backend.info, [{ seqId: 1, tokens: Array.from({ length: 40 }, (_, i) => i) }]);
    const result = resultBuffers(backend.info, 1);
    const { slidingBlockTables: _, ...missing } = good();
    await assert.rejects(backend.step(missing, result), /sliding_block_tables: NULL/);
    const short = { ...good(), slidingBlockTables: new Int32Array(2) };
    await assert.rejects(backend.step(short, result), /slidingBlockTables has 2 entries, needs 3/);
    const outside = good();
    outside.slidingBlockTables![1] = 8;
    await assert.rejects(
      backend.step(outside, result),
      /sliding_block_tables\[0\]\[1\] = 8 is outside the sliding pool/,
    );
    const gone = good();
    gone.slidingBlockTables![0] = -1; // position 0 is in the window of the first fed position
    await assert.rejects(backend.step(gone, result), /sliding_block_tables\[0\]\[0\] = -1/);
    await backend.step(good(), result);
    assert.equal(result.counts[0], 1);
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
