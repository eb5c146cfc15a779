import assert from "node:assert/strict";
import { NativeBackend } from "../../engine/backends/native_backend.ts";
import { resultBuffers, stepBatch, type StepSeq } from "./step_batches.ts";

const ROOT = new URL("../../", import.meta.url).pathname;
const PROMPT = [1018, 364, 10, 35, 405, 10, 10, 360, 406, 320, 321, 365, 355, 322, 295, 403, 402, 46, 404, 321];

/**
 * Through FFI on a bundled model: drafts verified in one step give exactly the tokens that decoding one token per step
 * gives for the same seed (sampled, with penalties), and a wrong draft ends the row with plain decoding's token.
 */
Deno.test("native: speculative verification reproduces plain sampled decoding for the same seed", async () => {
  const backend = await NativeBackend.create(`${ROOT}models/rill-tiny-chatml`, {
    threads: 2,
    maxSeqs: 8,
    maxBatchTokens: 256,
    numBlocks: 32,
    maxDrafts: 4,
  });
  try {
    const info = backend.info;
    const result = resultBuffers(info, 8);
    const K1 = info.maxDrafts + 1;
    const sampling = { temperature: 0.9, topK: 40, repetitionPenalty: 1.1, frequencyPenalty: 0.2, seed: 123456789n };
    const run = async (seqs: StepSeq[]) => {
      await backend.step(stepBatch(seqs), result);
      return seqs.map((_, i) => [...result.tokens.subarray(i * K1, i * K1 + result.counts[i]!)]);
    };

    // Plain decoding, one token per step (blocks 0-1).
    const plain: number[] = [];
    const n = PROMPT.length;
    plain.push(
      ...(await run([{
        seqId: 1,
        fed: PROMPT,
        contextLen: n,
        blocks: [0, 1],
        history: PROMPT,
        historyPromptLen: n,
        ...sampling,
      }]))[0]!,
    );
    for (let k = 1; k <= 4; k++) {
      const history = [...PROMPT, ...plain];
      const [out] = await run([{
        seqId: 1,
        fed: [plain[k - 1]!],
        contextLen: n + k,
        blocks: [0, 1],
        history,
        historyPromptLen: n,
        ...sampling,
      }]);
      assert.equal(out!.length, 1);
      plain.push(out![0]!);
    }
    // The draws matter: other seeds sample other first tokens from the same prompt.
    const firsts = await run([1n, 2n, 3n, 4n, 5n, 6n, 7n, 8n].map((seed, i) => ({
      seqId: 10 + i,
      fed: PROMPT,
      contextLen: n,
      blocks: [8 + 2 * i, 9 + 2 * i],
      history: PROMPT,
      historyPromptLen: n,
      ...sampling,
      seed,
    })));
    assert.ok(new Set([plain[0], ...firsts.map((f) => f[0])]).size > 1, "the seed changes the sampled token");

    // Speculative: prefill (blocks 2-3), then the last token plus 3 drafts equal to plain decoding's, in a batch
    // behind an unrelated sequence (blocks 4-5).
    const [first] = await run([{
      seqId: 2,
      fed: PROMPT,
      contextLen: n,
      blocks: [2, 3],
      history: PROMPT,
      historyPromptLen: n,
      ...sampling,
    }]);
    assert.deepEqual(first, [plain[0]]);
    const other: StepSeq = { seqId: 3, fed: PROMPT.slice(0, 7), contextLen: 7, blocks: [4], temperature: 1, seed: 5n };
    const spec = (drafts: number[]): StepSeq => ({
      seqId: 2,
      fed: [plain[0]!, ...drafts],
      contextLen: n + 1 + drafts.length,
      drafts: drafts.length,
      blocks: [2, 3],
      history: [...PROMPT, plain[0]!],
      historyPromptLen: n,
      ...sampling,
    });
    const [, all] = await run([other, spec(plain.slice(1, 4))]);
    assert.deepEqual(all, plain.slice(1, 5), "every draft accepted, then plain decoding's next token");
    const wrong = (plain[2]! + 1) % info.vocabSize;
    const [, cut] = await run([other, spec([plain[1]!, wrong, plain[3]!])]);
    assert.deepEqual(cut, plain.slice(1, 3), "the first draft accepted, the second replaced by plain decoding's token");
  } finally {
    await backend.close();
  }
});

/**
 * A draft model through FFI: the bundled model drafting for itself proposes exactly its own greedy continuation
 * (what plain one-token steps produce), a batch asking for proposals from an engine without a draft model is
 * rejected naming the field, and the result needs its proposal buffers.
 */
Deno.test("native: a draft model proposes the target's greedy continuation inside the step", async () => {
  const dir = `${ROOT}models/rill-tiny-chatml`;
  const sizes = { threads: 2, maxSeqs: 4, maxBatchTokens: 128, numBlocks: 32, maxDrafts: 4 };
  const plainBackend = await NativeBackend.create(dir, sizes);
  const backend = await NativeBackend.create(dir, { ...sizes, draftModelDir: dir });
  try {
    assert.equal(plainBackend.info.proposesDrafts, false);
    assert.equal(backend.info.proposesDrafts, true);
    assert.ok(backend.info.draftWeightBytes > 0);
    const info = backend.info;
    const n = PROMPT.length;
    // Plain greedy decoding, one token per step (blocks 0-1).
    const plainResult = resultBuffers(info, 1);
    const plain: number[] = [];
    for (let k = 0; k <= 4; k++) {
      const fed = k === 0 ? PROMPT : [plain[k - 1]!];
      await plainBackend.step(stepBatch([{ seqId: 1, fed, contextLen: n + k, blocks: [0, 1] }]), plainResult);
      plain.push(plainResult.tokens[0]!);
    }
    // The prompt in one step, asking for 4 proposals: the target's token, then its next 4 greedy tokens.
    const result = { ...resultBuffers(info, 1), proposedCounts: new Int32Array(1), proposed: new Int32Array(4) };
    const batch = {
      ...stepBatch([{ seqId: 1, fed: PROMPT, contextLen: n, blocks: [0, 1] }]),
      proposeCounts: Int32Array.of(4),
    };
    await backend.step(batch, result);
    assert.deepEqual([result.counts[0], result.tokens[0]], [1, plain[0]]);
    assert.equal(result.proposedCounts[0], 4);
    assert.deepEqual([...result.proposed], plain.slice(1, 5));
    // Fed back as drafts, every one is accepted, and the next proposals continue from the target's own token.
    const verify = {
      ...stepBatch([{
        seqId: 1,
        fed: [plain[0]!, ...plain.slice(1, 5)],
        contextLen: n + 5,
        drafts: 4,
        blocks: [0, 1],
      }]),
      proposeCounts: Int32Array.of(2),
    };
    await backend.step(verify, result);
    assert.equal(result.counts[0], 5);
    assert.deepEqual([...result.tokens.subarray(0, 4)], plain.slice(1, 5));
    assert.equal(result.proposedCounts[0], 2);

    await assert.rejects(plainBackend.step(batch, result), /propose_counts\[0\] = 4: this engine has no draft model/);
    await assert.rejects(backend.step(batch, resultBuffers(info, 1)), /proposeCounts needs result\.proposedCounts/);
  } finally {
    await plainBackend.close();
    await backend.close();
  }
});
