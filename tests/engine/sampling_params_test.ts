/**
 * The request-level sampling parameters on a bundled model, through the engine: the host sampler (ONNX Runtime) and
 * the native library give the same tokens with a logit bias and penalties (same rule, same Philox draws); a bias of
 * -100 forbids a token and +100 forces one; a frequency penalty makes greedy output repeat itself less.
 */
import assert from "node:assert/strict";
import type { Engine, SamplingParams } from "../../engine/engine.ts";
import { collectRun, goldenPrompts, openGoldenEngine } from "./engine_golden.ts";

const MODEL = "rill-tiny-chatml";

function sampling(stopTokens: readonly number[], extra: Partial<SamplingParams>): SamplingParams {
  return { temperature: 0, topP: 1, topK: 0, maxTokens: 32, stopTokens, stopStrings: [], logprobs: -1, ...extra };
}

async function run(engine: Engine, prompt: readonly number[], params: SamplingParams, id = "s"): Promise<number[]> {
  return (await collectRun(engine.generate({ id, promptTokens: prompt, sampling: params }))).tokens;
}

/** How many generated tokens repeat one generated before. */
function repeats(tokens: readonly number[]): number {
  return tokens.length - new Set(tokens).size;
}

Deno.test("sampling parameters: host and native samplers agree with logit_bias and penalties", async () => {
  const { prompts, stopTokens } = await goldenPrompts(MODEL);
  const onnx = await openGoldenEngine(MODEL, { kind: "onnx" });
  const native = await openGoldenEngine(MODEL, { kind: "native" });
  try {
    const prompt = prompts.at(-1)!;
    const plain = await run(onnx, prompt, sampling(stopTokens, {}));
    const cases: Partial<SamplingParams>[] = [
      { logitBias: new Map([[plain[0]!, -100]]) },
      { logitBias: new Map([[plain[0]!, -3], [plain[1]!, 2.5], [7, 1]]), frequencyPenalty: 0.5, presencePenalty: 0.3 },
      { temperature: 0.9, seed: 42, logitBias: new Map([[plain[0]!, -5], [plain[2]!, 3]]), repetitionPenalty: 1.2 },
      { temperature: 1.1, seed: 7, topK: 40, minP: 0.05, frequencyPenalty: 1, logitBias: new Map([[plain[3]!, 4]]) },
    ];
    for (const [i, extra] of cases.entries()) {
      const params = sampling(stopTokens, extra);
      const host = await run(onnx, prompt, params, `h${i}`);
      const dev = await run(native, prompt, params, `n${i}`);
      assert.deepEqual(dev, host, `case ${i}`);
      if (i === 0) assert.notEqual(host[0], plain[0], "the forbidden first token is not sampled");
    }
  } finally {
    await onnx.close();
    await native.close();
  }
});

Deno.test("sampling parameters: logit_bias -100 forbids a token, +100 forces one; frequency penalty cuts repeats", async () => {
  const { prompts, stopTokens } = await goldenPrompts(MODEL);
  const engine = await openGoldenEngine(MODEL, { kind: "native" });
  try {
    for (const prompt of prompts.slice(0, 3)) {
      const plain = await run(engine, prompt, sampling(stopTokens, {}));
      const banned = plain[0]!;
      const without = await run(engine, prompt, sampling(stopTokens, { logitBias: new Map([[banned, -100]]) }));
      assert.ok(!without.includes(banned), `token ${banned} was forbidden`);
      const forced = 42;
      const only = await run(
        engine,
        prompt,
        sampling(stopTokens, { temperature: 1, seed: 3, maxTokens: 8, logitBias: new Map([[forced, 100]]) }),
      );
      assert.deepEqual(only, Array(8).fill(forced));
    }
    // The tiny model loops on greedy decoding; a frequency penalty breaks the loop.
    let before = 0;
    let after = 0;
    for (const prompt of prompts) {
      before += repeats(await run(engine, prompt, sampling(stopTokens, { maxTokens: 48 })));
      after += repeats(await run(engine, prompt, sampling(stopTokens, { maxTokens: 48, frequencyPenalty: 1.5 })));
    }
    assert.ok(after < before, `repeats with the penalty ${after}, without ${before}`);
  } finally {
    await engine.close();
  }
});
