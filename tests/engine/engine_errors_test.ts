import assert from "node:assert/strict";
import type { Backend, BatchEntry, StepOutput } from "../../engine/backend.ts";
import type { EngineChunk, SamplingParams } from "../../engine/engine.ts";
import { createEngine } from "../../engine/llm_engine.ts";
import { ToyTokenizer } from "../../testing/toy_tokenizer.ts";

/** Always proposes token 7 with certainty; fails the step numbered `failAt` (1-based). */
class FlakyBackend implements Backend {
  readonly vocabSize = 16;
  readonly maxPositions = 64;
  readonly live = new Set<number>();
  steps = 0;
  constructor(readonly failAt: number) {}

  step(batch: readonly BatchEntry[]): Promise<StepOutput> {
    if (++this.steps === this.failAt) return Promise.reject(new Error("device lost"));
    for (const e of batch) this.live.add(e.seqId);
    const row = new Float32Array(16);
    row[7] = 10;
    return Promise.resolve({
      logits: (i: number) => {
        const out = new Float32Array(16 * batch[i]!.logitsCount);
        for (let r = 0; r < batch[i]!.logitsCount; r++) out.set(row, r * 16);
        return out;
      },
    });
  }
  truncate(): void {}
  release(seqId: number): void {
    this.live.delete(seqId);
  }
  close(): Promise<void> {
    return Promise.resolve();
  }
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
  const backend = new FlakyBackend(3);
  const engine = await createEngine({ customBackend: backend, tokenizer: new ToyTokenizer(), eosTokenIds: [] });
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
  assert.deepEqual(engine.stats(), { running: 0, waiting: 0, kvCacheUsage: 0 });
  await engine.close();
});

Deno.test("engine: invalid requests finish at once without reaching the backend", async () => {
  const backend = new FlakyBackend(0);
  const engine = await createEngine({ customBackend: backend, tokenizer: new ToyTokenizer(), maxModelLen: 32 });
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
