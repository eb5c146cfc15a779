import assert from "node:assert/strict";
import type { GenerateRequest } from "../../../engine/engine.ts";
import { createEngine } from "../../../engine/llm_engine.ts";
import { HistoryBackend } from "../../../testing/history_backend.ts";
import { ToyTokenizer } from "../../../testing/toy_tokenizer.ts";
import { samplerTopP } from "../../../api/sampling_defaults.ts";
import { answerText, MODEL, postJson, startTestServer, tokenizer } from "../../../testing/test_server.ts";

/** A server whose script records the sampling each request reached the engine with. */
function recordingServer() {
  const seen: GenerateRequest["sampling"][] = [];
  const tok = tokenizer();
  const t = startTestServer({
    script: (request) => {
      seen.push(request.sampling);
      return tok.encode(answerText());
    },
  });
  return { t, seen };
}

Deno.test("top_p 0 is accepted by Responses, echoed as 0, and reaches the engine as a top-token-only cut", async () => {
  const { t, seen } = recordingServer();
  try {
    const r = await postJson(`${t.baseURL}/responses`, { model: MODEL, input: "hi", top_p: 0, temperature: 1 });
    assert.equal(r.status, 200, await r.clone().text());
    const body = await r.json();
    assert.equal(body.top_p, 0);
    assert.equal(body.status, "completed");
    assert.equal(seen.length, 1);
    assert.ok(seen[0]!.topP > 0 && seen[0]!.topP < 1e-300, `topP ${seen[0]!.topP}`);
  } finally {
    await t.close();
  }
});

Deno.test("top_p 0 is accepted by Chat Completions and reaches the engine as a top-token-only cut", async () => {
  const { t, seen } = recordingServer();
  try {
    const r = await postJson(`${t.baseURL}/chat/completions`, {
      model: MODEL,
      messages: [{ role: "user", content: "hi" }],
      top_p: 0,
      temperature: 1,
    });
    assert.equal(r.status, 200, await r.clone().text());
    assert.equal((await r.json()).choices[0].finish_reason, "stop");
    assert.equal(seen.length, 1);
    assert.ok(seen[0]!.topP > 0 && seen[0]!.topP < 1e-300, `topP ${seen[0]!.topP}`);
  } finally {
    await t.close();
  }
});

Deno.test("the engine given top_p 0's value keeps only the most likely token, with no NaN", async () => {
  const row = [0.5, 2.0, 1.9, -1, 1.99];
  const backend = new HistoryBackend({ vocabSize: 5, numBlocks: 16, logitsOf: (_h, _n, out) => out.set(row) });
  // Through the packed batch: its Float32 top-p must not round the tiny value to 0 (which means "off").
  const engine = createEngine(backend.sampled(), { tokenizer: new ToyTokenizer() });
  const sampling = {
    temperature: 1.5,
    topP: samplerTopP(0),
    topK: 0,
    seed: 42,
    maxTokens: 200,
    stopTokens: [],
    stopStrings: [],
    logprobs: -1,
  };
  const tokens: number[] = [];
  for await (const c of engine.generate({ id: "t", promptTokens: [0], sampling })) {
    if (c.type === "step") tokens.push(...c.tokens);
  }
  await engine.close();
  assert.deepEqual(tokens, new Array(200).fill(1));
  assert.equal(samplerTopP(0.5), 0.5);
  assert.equal(samplerTopP(1), 1);
});
