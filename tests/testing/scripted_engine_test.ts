import assert from "node:assert/strict";
import { type EngineChunk, type GenerateRequest, QueueFullError, type SamplingParams } from "../../engine/engine.ts";
import { replayTokens, ScriptedEngine, splitSteps } from "../../testing/scripted_engine.ts";
import { ToyTokenizer } from "../../testing/toy_tokenizer.ts";

const tok = new ToyTokenizer();

async function drain(stream: ReadableStream<EngineChunk>): Promise<EngineChunk[]> {
  return await Array.fromAsync(stream);
}

function sampling(overrides: Partial<SamplingParams> = {}): SamplingParams {
  return {
    temperature: 0,
    topP: 1,
    topK: 0,
    maxTokens: 100,
    stopTokens: [],
    stopStrings: [],
    logprobs: -1,
    ...overrides,
  };
}

function request(overrides: Partial<SamplingParams> = {}, signal?: AbortSignal): GenerateRequest {
  return { id: "r", promptTokens: [1, 2, 3], sampling: sampling(overrides), ...(signal ? { signal } : {}) };
}

Deno.test("splitSteps: every chunking preserves the tokens in order with non-empty steps", () => {
  const tokens = Array.from({ length: 50 }, (_, i) => i);
  for (const c of ["one", "all", { seed: 7 }, { seed: 8, max: 3 }] as const) {
    const steps = splitSteps(tokens, c);
    assert.deepEqual(steps.flat(), tokens);
    assert.ok(
      steps.every((s) => s.length >= 1 && s.length <= (c === "all" ? 50 : typeof c === "object" ? c.max ?? 8 : 1)),
    );
  }
  assert.deepEqual(splitSteps(tokens, { seed: 3 }), splitSteps(tokens, { seed: 3 }));
  assert.equal(splitSteps(tokens, "one").length, 50);
  assert.equal(splitSteps(tokens, "all").length, 1);
});

Deno.test("replayTokens: steps then one finish with the output token count", async () => {
  const chunks = await drain(replayTokens([5, 6, 7], "all", { promptTokens: 9, finish: "length" }));
  assert.deepEqual(chunks, [
    { type: "step", tokens: [5, 6, 7] },
    { type: "finish", reason: "length", promptTokens: 9, outputTokens: 3 },
  ]);
});

Deno.test("ScriptedEngine: maxTokens cuts with finish length; stop token ends with stop and is reported", async () => {
  const engine = new ScriptedEngine({ tokenizer: tok, script: [10, 11, 12, 13] });
  const cut = await drain(engine.generate(request({ maxTokens: 2 })));
  assert.deepEqual(cut.at(-1), { type: "finish", reason: "length", promptTokens: 3, outputTokens: 2 });
  const stopped = await drain(engine.generate(request({ stopTokens: [12] })));
  assert.deepEqual(stopped.filter((c) => c.type === "step").flatMap((c) => c.type === "step" ? c.tokens : []), [
    10,
    11,
    12,
  ]);
  const last = stopped.at(-1);
  assert.ok(last?.type === "finish" && last.reason === "stop");
});

Deno.test("ScriptedEngine: abort ends the generation with finish abort at the next step", async () => {
  const engine = new ScriptedEngine({ tokenizer: tok, script: [1, 2, 3, 4, 5] });
  const ac = new AbortController();
  const reader = engine.generate(request({}, ac.signal)).getReader();
  const first = await reader.read();
  assert.ok(first.value?.type === "step");
  ac.abort();
  const next = await reader.read();
  assert.ok(next.value?.type === "finish" && next.value.reason === "abort" && next.value.outputTokens === 1);
  assert.equal((await reader.read()).done, true);
  assert.equal(engine.stats().running, 0);
});

Deno.test("ScriptedEngine: throws QueueFullError synchronously past its queue size and frees slots", async () => {
  const engine = new ScriptedEngine({ tokenizer: tok, script: [1, 2], queueSize: 1 });
  const first = engine.generate(request());
  assert.throws(() => engine.generate(request()), QueueFullError);
  await drain(first);
  await drain(engine.generate(request()));
  const cancelled = engine.generate(request());
  await cancelled.cancel();
  assert.equal(engine.stats().running, 0);
  await engine.close();
});

Deno.test("ScriptedEngine: logprobs are attached per token when requested", async () => {
  const engine = new ScriptedEngine({ tokenizer: tok, script: [1, 2, 3], chunking: { seed: 1, max: 2 } });
  const chunks = await drain(engine.generate(request({ logprobs: 2 })));
  for (const c of chunks) {
    if (c.type !== "step") continue;
    assert.equal(c.logprobs?.length, c.tokens.length);
    assert.ok(c.logprobs!.every((l) => l.top.length === 2 && l.logprob <= 0));
  }
});
