/**
 * `@openai/agents` running a function-tool loop against a real rill server: the agent calls the model, the model
 * calls `get_weather`, the SDK runs the tool and sends its output back, and the model answers.
 */
import assert from "node:assert/strict";
import OpenAI from "openai";
import { Agent, OpenAIResponsesModel, run, setTracingDisabled, tool } from "@openai/agents";
import { z } from "zod";
import { validateSSE } from "../../conformance/validator.ts";
import { sseTap } from "../../testing/sse_tap.ts";
import { MODEL, startTestServer, tokenizer } from "../../testing/test_server.ts";

setTracingDisabled(true);

function weatherTool(calls: string[]) {
  return tool({
    name: "get_weather",
    description: "Weather of a city",
    parameters: z.object({ city: z.string() }),
    execute: ({ city }) => {
      calls.push(city);
      return `{"sky":"sunny","city":"${city}"}`;
    },
  });
}

Deno.test("agents SDK: function-tool loop, non-streamed", async () => {
  const t = startTestServer();
  try {
    const client = new OpenAI({ baseURL: t.baseURL, apiKey: "unused", maxRetries: 0 });
    const calls: string[] = [];
    const agent = new Agent({
      name: "weather",
      instructions: "Answer weather questions with the tool.",
      model: new OpenAIResponsesModel(client, MODEL),
      tools: [weatherTool(calls)],
    });
    const result = await run(agent, "What is the weather in Paris?");
    assert.deepEqual(calls, ["Paris"]);
    assert.equal(result.finalOutput, "It is sunny in Paris.");
    assert.equal(t.engine.requests.length, 2);
    const secondPrompt = tokenizer().decode(t.engine.requests[1]!.promptTokens);
    assert.ok(secondPrompt.includes('"sky":"sunny"'), "the tool output must reach the second prompt");
  } finally {
    await t.close();
  }
});

Deno.test("agents SDK: function-tool loop, streamed, every stream valid", async () => {
  const t = startTestServer({ chunking: { seed: 11, max: 3 } });
  try {
    const { fetch: tapped, bodies } = sseTap();
    const client = new OpenAI({ baseURL: t.baseURL, apiKey: "unused", maxRetries: 0, fetch: tapped });
    const calls: string[] = [];
    const agent = new Agent({
      name: "weather",
      model: new OpenAIResponsesModel(client, MODEL),
      tools: [weatherTool(calls)],
    });
    const stream = await run(agent, "Weather in Paris?", { stream: true });
    let deltas = "";
    for await (const event of stream) {
      if (event.type === "raw_model_stream_event" && event.data.type === "output_text_delta") {
        deltas += event.data.delta;
      }
    }
    await stream.completed;
    assert.deepEqual(calls, ["Paris"]);
    assert.equal(stream.finalOutput, "It is sunny in Paris.");
    assert.equal(deltas, "It is sunny in Paris.");
    assert.equal(bodies.length, 2);
    for (const body of await Promise.all(bodies)) assert.deepEqual(validateSSE(body).violations, []);
  } finally {
    await t.close();
  }
});
