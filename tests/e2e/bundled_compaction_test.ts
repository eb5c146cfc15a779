/**
 * Compaction and stateless reasoning on the bundled trained models over HTTP, as `rill serve` builds the server:
 * the model writes the summary (whatever a tiny model writes), the compacted list is accepted as the input of the
 * next turn, and a reasoning blob sent back with `store: false` continues a tool loop.
 */
import assert from "node:assert/strict";
import OpenAI from "openai";
import { BUNDLED_MODELS, GET_WEATHER, withBundledServer } from "../../testing/bundled_server.ts";

for (const name of BUNDLED_MODELS) {
  Deno.test(`${name}: responses.compact, then the compacted list as input`, async () => {
    await withBundledServer(name, 2, async (url, model) => {
      const openai = new OpenAI({ baseURL: `${url}/v1`, apiKey: "unused", maxRetries: 0 });
      const compacted = await openai.responses.compact({
        model: model.modelId,
        input: [
          { role: "user", content: "What is the weather in Paris?" },
          { role: "assistant", content: "It is sunny in Paris." },
          { role: "user", content: "And in Rome?" },
        ],
      });
      assert.equal(compacted.object, "response.compaction");
      assert.deepEqual(compacted.output.map((i) => i.type), ["message", "message", "compaction"]);
      const compaction = compacted.output.at(-1)!;
      assert.ok(compaction.type === "compaction" && compaction.encrypted_content.length > 0);
      assert.ok(compacted.usage.output_tokens >= 1);
      const next = await openai.responses.create({
        model: model.modelId,
        store: false,
        max_output_tokens: 16,
        temperature: 0,
        input: [...compacted.output, { role: "user", content: "Thanks!" }] as OpenAI.Responses.ResponseInput,
      });
      assert.ok(next.status === "completed" || next.status === "incomplete", String(next.status));
    });
  });
}

Deno.test("rill-tiny-harmony: a sealed reasoning item continues a tool loop with store false", async () => {
  await withBundledServer("rill-tiny-harmony", 2, async (url, model) => {
    const openai = new OpenAI({ baseURL: `${url}/v1`, apiKey: "unused", maxRetries: 0 });
    const first = await openai.responses.create({
      model: model.modelId,
      input: "What is the weather in Paris?",
      tools: [{ ...GET_WEATHER, strict: false } as OpenAI.Responses.FunctionTool],
      temperature: 0,
      store: false,
      include: ["reasoning.encrypted_content"],
    });
    const reasoning = first.output.filter((i) => i.type === "reasoning");
    const call = first.output.find((i) => i.type === "function_call");
    assert.ok(call !== undefined && call.type === "function_call", JSON.stringify(first.output));
    assert.ok(reasoning.length > 0, JSON.stringify(first.output));
    for (const item of reasoning) assert.ok(item.type === "reasoning" && typeof item.encrypted_content === "string");
    const replay = first.output.map((item) =>
      item.type === "reasoning"
        ? { type: "reasoning", id: item.id, summary: [], encrypted_content: item.encrypted_content }
        : item
    );
    const second = await openai.responses.create({
      model: model.modelId,
      tools: [{ ...GET_WEATHER, strict: false } as OpenAI.Responses.FunctionTool],
      temperature: 0,
      store: false,
      max_output_tokens: 32,
      input: [
        { role: "user", content: "What is the weather in Paris?" },
        ...replay,
        { type: "function_call_output", call_id: call.call_id, output: '{"temperature_c": 21, "sky": "sunny"}' },
      ] as OpenAI.Responses.ResponseInput,
    });
    assert.ok(second.status === "completed" || second.status === "incomplete", String(second.status));
  });
});
