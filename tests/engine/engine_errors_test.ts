import assert from "node:assert/strict";
import type { EngineChunk, SamplingParams } from "../../engine/engine.ts";
import { createEngine } from "../../engine/llm_engine.ts";
import { HistoryBackend } from "../../testing/history_backend.ts";
import { ToyTokenizer } from "../../testing/toy_tokenizer.ts";

/** Always proposes token 7 with certainty; fails the step numbered `failAt` (1-based). */
function flaky(failAt: number): HistoryBackend {
  return new HistoryBackend({
    vocabSize: 16,
    maxPositions: 64,
    numBlocks: 64,
    failAt,
    logitsOf: (_h, _n, out) => {
      out.fill(0);
      out[7] = 10;
    },
  });
}

const sampling: SamplingParams = {
  temperature: 0,
  topP: 1,
  topK: 0,
  maxTokens: 10,
  stopTokens: [],
  stopStrings: [],
  logprobs: -1,
};

async function collect(s: ReadableStream<EngineChunk>): Promise<EngineChunk[]> {
  const out: EngineChunk[] = [];
  for await (const c of s) out.push(c);
  return out;
}

Deno.test("engine: a failing backend step ends that batch with 'error', frees caches, and the engine keeps serving", async () => {
  const backend = flaky(3);
  const engine = createEngine(backend.sampled(), { tokenizer: new ToyTokenizer(), eosTokenIds: [] });
  const [a, b] = await Promise.all([
    collect(engine.generate({ id: "a", promptTokens: [1, 2], sampling })),
    collect(engine.generate({ id: "b", promptTokens: [3], sampling })),
  ]);
  for (const chunks of [a, b]) {
    const fin = chunks.at(-1)!;
    assert.ok(fin.type === "finish" && fin.reason === "error" && fin.message === "device lost");
    assert.ok(fin.type === "finish" && fin.outputTokens === 2);
  }
  assert.equal(backend.live.size, 0);
  const c = await collect(engine.generate({ id: "c", promptTokens: [1], sampling }));
  const fin = c.at(-1)!;
  assert.ok(fin.type === "finish" && fin.reason === "length" && fin.outputTokens === 10);
  const stats = engine.stats();
  assert.deepEqual([stats.running, stats.waiting, stats.kvCacheUsage, stats.kvBlocksUsed], [0, 0, 0, 0]);
  await engine.close();
});

Deno.test("engine: invalid requests finish at once without reaching the backend", async () => {
  const backend = flaky(0);
  const engine = createEngine(backend.sampled(), { tokenizer: new ToyTokenizer(), maxModelLen: 32 });
  const cases: [number[], Partial<SamplingParams>, string, RegExp | undefined][] = [
    [[], {}, "error", /empty/],
    [[99], {}, "error", /vocabulary/],
    [Array(40).fill(1), {}, "error", /context length/],
    [[1], { maxTokens: 0 }, "length", undefined],
  ];
  for (const [promptTokens, p, reason, message] of cases) {
    const chunks = await collect(engine.generate({ id: "x", promptTokens, sampling: { ...sampling, ...p } }));
    assert.equal(chunks.length, 1);
    const fin = chunks[0]!;
    assert.ok(fin.type === "finish");
    assert.equal(fin.reason, reason);
    if (message) assert.match(fin.message ?? "", message);
  }
  assert.equal(backend.steps, 0);
  await engine.close();
});
