/**
 * The engine on the bundled trained models (when committed): greedy output is the same alone, inside a batch of 8
 * mixed requests, and with n-gram speculation; and it ends on the chat format's stop tokens.
 */
import assert from "node:assert/strict";
import type { EngineChunk, SamplingParams } from "../../engine/engine.ts";
import { openEngine } from "../../engine/open_engine.ts";
import { loadModel } from "../../prompt/load_model.ts";

const ROOT = new URL("../../", import.meta.url).pathname;
const QUESTIONS = [
  "Repeat the phrase 'good morning' 4 times.",
  "What is 17 + 25?",
  "What is the capital of Japan?",
  "Convert 3 kilometers to meters.",
  "Say hi there 3 times.",
  "What is 9 times 7?",
  "Which city is the capital of France?",
  "What is the weather in Paris?",
];

async function tokensOf(stream: ReadableStream<EngineChunk>): Promise<{ tokens: number[]; reason: string }> {
  const tokens: number[] = [];
  let reason = "";
  for await (const c of stream) {
    if (c.type === "step") tokens.push(...c.tokens);
    else reason = c.reason;
  }
  return { tokens, reason };
}

for (const name of ["rill-tiny-harmony", "rill-tiny-chatml"]) {
  const dir = `${ROOT}models/${name}`;
  Deno.test(`engine on ${name}: greedy output identical alone, batched, and with speculation`, async () => {
    const model = await loadModel(dir);
    const prompts = QUESTIONS.map((q) =>
      model.format.render({ messages: [{ role: "user", content: q }], tools: [], toolChoice: "auto" })
    );
    const sampling: SamplingParams = {
      temperature: 0,
      topP: 1,
      topK: 0,
      maxTokens: 96,
      stopTokens: model.format.stopTokens,
      stopStrings: [],
      logprobs: -1,
    };
    const make = (speculative: "ngram" | "none") =>
      openEngine({
        modelDir: dir,
        tokenizer: model.tokenizer,
        eosTokenIds: model.eosTokenIds,
        maxNumSeqs: 8,
        speculative,
      });
    const plain = await make("none");
    const spec = await make("ngram");
    try {
      const alone = [];
      for (const [i, p] of prompts.entries()) {
        alone.push(await tokensOf(plain.generate({ id: `a${i}`, promptTokens: p, sampling })));
      }
      const batched = await Promise.all(
        prompts.map((p, i) => tokensOf(plain.generate({ id: `b${i}`, promptTokens: p, sampling }))),
      );
      const speculative = await Promise.all(
        prompts.map((p, i) => tokensOf(spec.generate({ id: `s${i}`, promptTokens: p, sampling }))),
      );
      for (let i = 0; i < prompts.length; i++) {
        assert.deepEqual(batched[i], alone[i], `batched vs alone, prompt ${i}`);
        assert.deepEqual(speculative[i], alone[i], `speculative vs plain, prompt ${i}`);
      }
      assert.ok(alone.filter((r) => r.reason === "stop").length >= 6, "answers end on the format's stop tokens");
      assert.ok(spec.metrics().acceptedDrafts > 0);
    } finally {
      await plain.close();
      await spec.close();
    }
  });
}
