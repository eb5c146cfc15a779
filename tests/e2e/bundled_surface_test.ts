/**
 * The API surface beyond Responses and Chat Completions on the bundled trained models, through the real server:
 * `parallel_tool_calls: false` on the ChatML model (stops at the first call's `</tool_call>`), legacy completions
 * through the openai SDK (streamed and not), and tokenize agreeing with the prompt the engine is given.
 */
import assert from "node:assert/strict";
import OpenAI from "openai";
import { validateSSE } from "../../conformance/validator.ts";
import { BUNDLED_MODELS, GET_WEATHER, withBundledServer } from "../../testing/bundled_server.ts";

Deno.test("rill-tiny-chatml: parallel_tool_calls false gives one completed call", async () => {
  await withBundledServer("rill-tiny-chatml", 2, async (url, model) => {
    const res = await fetch(`${url}/v1/responses`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        model: model.modelId,
        input: "What is the weather in Paris?",
        tools: [GET_WEATHER],
        parallel_tool_calls: false,
        temperature: 0,
        stream: true,
      }),
    });
    assert.equal(res.status, 200);
    const { events, violations } = validateSSE(await res.text());
    assert.deepEqual(violations, []);
    const done = events.at(-1) as { type: string; response: { output: { type: string; arguments?: string }[] } };
    assert.equal(done.type, "response.completed");
    const calls = done.response.output.filter((i) => i.type === "function_call");
    assert.equal(calls.length, 1);
    assert.deepEqual(JSON.parse(calls[0]!.arguments!), { city: "Paris" });
    assert.equal(done.response.output.at(-1)?.type, "function_call");
  });
});

for (const name of BUNDLED_MODELS) {
  Deno.test(`${name}: legacy completions through the openai SDK, and tokenize`, async () => {
    await withBundledServer(name, 2, async (url, model) => {
      const openai = new OpenAI({ baseURL: `${url}/v1`, apiKey: "unused", maxRetries: 0 });
      const one = await openai.completions.create({
        model: model.modelId,
        prompt: "The capital of France is",
        max_tokens: 8,
        temperature: 0,
      });
      assert.equal(one.choices.length, 1);
      assert.equal(typeof one.choices[0]?.text, "string");
      assert.ok(one.usage!.completion_tokens >= 1 && one.usage!.completion_tokens <= 8);
      const stream = await openai.completions.create({
        model: model.modelId,
        prompt: "The capital of France is",
        max_tokens: 8,
        temperature: 0,
        stream: true,
      });
      let text = "";
      for await (const chunk of stream) text += chunk.choices[0]?.text ?? "";
      // Greedy decoding: the streamed text is the same as the whole one.
      assert.equal(text, one.choices[0]?.text);

      const tokenized = await (await fetch(`${url}/tokenize`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ prompt: "The capital of France is" }),
      })).json();
      assert.equal(one.usage!.prompt_tokens, tokenized.count);
      const back = await (await fetch(`${url}/detokenize`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ tokens: tokenized.tokens }),
      })).json();
      assert.equal(back.prompt, "The capital of France is");
    });
  });
}
