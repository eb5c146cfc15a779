/**
 * KV sizing for gpt-oss-20b's attention shape (24 layers, even ones sliding over 128 positions, 8 KV heads of 64,
 * bf16 KV, blocks of 16) on a checkpoint with that attention and tiny everything else: with its sliding layers in
 * the main pool a token costs 49,152 bytes; with their own pool the main pool's token costs 24,576 and the sliding pool
 * takes a bounded number of blocks per sequence (rill.h), so the same 8 GiB budget holds about twice the context.
 */
import assert from "node:assert/strict";
import { NativeBackend } from "../../engine/backends/native_backend.ts";
import { writeGptOssCheckpoint } from "../../testing/gptoss_checkpoint.ts";

Deno.test("native gpt-oss-20b KV shape: 24,576 bytes a token in the main pool plus a bounded sliding pool", async () => {
  const dir = await Deno.makeTempDir({ prefix: "rill-kv20b-" });
  const backends: NativeBackend[] = [];
  try {
    await writeGptOssCheckpoint(dir, {
      hidden: 64,
      intermediate: 64,
      layers: 24,
      heads: 64,
      kvHeads: 8,
      headDim: 64,
      experts: 2,
      perToken: 1,
      slidingWindow: 128,
      vocab: 256,
    }, 3);
    const budget = 8 * 2 ** 30;
    const common = { threads: 1, kvDtype: "bf16", kvBytes: budget, maxSeqs: 8, blockSize: 16 } as const;
    const whole = await NativeBackend.create(dir, { ...common, slidingKvInMain: true });
    backends.push(whole);
    const split = await NativeBackend.create(dir, common);
    backends.push(split);
    const bs = 16;
    const w = whole.info, s = split.info;
    assert.equal(w.slidingWindow, 0);
    assert.equal(w.kvBytes / w.numBlocks / bs, 49152, "24 layers × 8 heads × 64 × (K, V) × 2 bytes");
    assert.equal(s.slidingWindow, 128);
    assert.equal((s.kvBytes - s.slidingKvBytes) / s.numBlocks / bs, 24576, "the 12 full layers only");
    assert.equal(s.slidingKvBytes / s.numSlidingBlocks! / bs, 24576, "the 12 sliding layers, per slot");
    // max_seqs × (ceil((128 + 8 drafts) / 16) + 1) + ceil(8192 batch tokens / 16)
    assert.equal(s.numSlidingBlocks, 8 * 10 + 512);
    assert.ok(s.kvBytes <= budget && w.kvBytes <= budget);
    const before = w.numBlocks * bs, after = s.numBlocks * bs;
    console.log(
      `20b KV shape, 8 GiB bf16: ${before} tokens with every layer in one pool; ${after} tokens in the full ` +
        `layers' pool + ${s.numSlidingBlocks} sliding blocks (${(s.slidingKvBytes / 2 ** 20).toFixed(0)} MiB, ` +
        `${(9 * bs * 24576 / 2 ** 20).toFixed(3)} MiB a sequence between steps): ${(after / before).toFixed(2)}×`,
    );
    assert.ok(after > 1.9 * before, `${after} tokens against ${before}`);
  } finally {
    for (const b of backends) await b.close();
    await Deno.remove(dir, { recursive: true });
  }
});
