/**
 * The Vercel AI SDK (`ai` + `@ai-sdk/openai`) against a real rill server over loopback, unchanged: `createOpenAI`
 * with a `baseURL`, through both `openai.responses(model)` (the SDK's default) and `openai.chat(model)`, with
 * `generateText`, `streamText` and a zod tool the SDK runs itself. Every Responses stream the SDK reads is also
 * checked by the stream validator. With `store` on (its default) the SDK sends earlier reasoning and assistant items
 * as `item_reference`s, which rill resolves from its store.
 */
import assert from "node:assert/strict";
import { createOpenAI } from "@ai-sdk/openai";
import { generateText, type LanguageModel, type ModelMessage, stepCountIs, streamText, tool } from "ai";
import { z } from "zod";
import { validateSSE } from "../../conformance/validator.ts";
import { sseTap } from "../../testing/sse_tap.ts";
import { ANSWER, MODEL, startTestServer, type TestServer, tokenizer } from "../../testing/test_server.ts";

type Api = "responses" | "chat";

interface Client {
  readonly model: LanguageModel;
  /** Every request body the SDK sent, parsed. */
  readonly sent: Record<string, unknown>[];
  /** Every SSE body the SDK read. */
  readonly sse: Promise<string>[];
}

function client(t: TestServer, api: Api): Client {
  const tap = sseTap();
  const sent: Record<string, unknown>[] = [];
  const recording: typeof fetch = async (input, init) => {
    if (typeof init?.body === "string") sent.push(JSON.parse(init.body));
    return await tap.fetch(input, init);
  };
  const openai = createOpenAI({ baseURL: t.baseURL, apiKey: "unused", fetch: recording });
  return { model: api === "responses" ? openai.responses(MODEL) : openai.chat(MODEL), sent, sse: tap.bodies };
}

async function assertValidResponseStreams(c: Client, expected: number): Promise<void> {
  assert.equal(c.sse.length, expected);
  for (const body of await Promise.all(c.sse)) assert.deepEqual(validateSSE(body).violations, [], body.slice(0, 1500));
}

function weatherTool(calls: string[]) {
  return tool({
    description: "Weather of a city",
    inputSchema: z.object({ city: z.string() }),
    execute: ({ city }) => {
      calls.push(city);
      return { city, sky: "sunny" };
    },
  });
}

function prompt(t: TestServer, i: number): string {
  return tokenizer().decode(t.engine.requests[i]!.promptTokens);
}

for (const api of ["responses", "chat"] as const) {
  Deno.test(`vercel ai (${api}): generateText and streamText`, async () => {
    const t = startTestServer({ chunking: { seed: 5, max: 3 } });
    try {
      const c = client(t, api);
      const generated = await generateText({ model: c.model, prompt: "hi" });
      assert.equal(generated.text, ANSWER);
      assert.equal(generated.finishReason, "stop");
      assert.equal(generated.usage.inputTokens, t.engine.requests[0]!.promptTokens.length);
      assert.ok((generated.usage.outputTokens ?? 0) > 0);

      const streamed = streamText({ model: c.model, prompt: "hi" });
      let text = "";
      for await (const delta of streamed.textStream) text += delta;
      assert.equal(text, ANSWER);
      assert.equal(await streamed.finishReason, "stop");
      assert.equal((await streamed.usage).inputTokens, t.engine.requests[1]!.promptTokens.length);
      assert.equal(c.sent[1]!.stream, true);
      if (api === "responses") await assertValidResponseStreams(c, 1);
    } finally {
      await t.close();
    }
  });

  Deno.test(`vercel ai (${api}): a zod tool runs and its result reaches the model, generated and streamed`, async () => {
    const t = startTestServer({ chunking: { seed: 9, max: 4 } });
    try {
      const c = client(t, api);
      const calls: string[] = [];
      const tools = { get_weather: weatherTool(calls) };
      const generated = await generateText({
        model: c.model,
        prompt: "Weather in Paris?",
        tools,
        stopWhen: stepCountIs(3),
      });
      assert.equal(generated.text, "It is sunny in Paris.");
      assert.deepEqual(generated.steps[0]!.toolCalls.map((call) => [call.toolName, call.input]), [
        ["get_weather", { city: "Paris" }],
      ]);

      const streamed = streamText({ model: c.model, prompt: "Weather in Paris?", tools, stopWhen: stepCountIs(3) });
      const parts = new Set<string>();
      for await (const part of streamed.fullStream) {
        assert.notEqual(part.type, "error", JSON.stringify(part));
        parts.add(part.type);
      }
      assert.equal(await streamed.text, "It is sunny in Paris.");
      assert.ok(parts.has("tool-call") && parts.has("tool-result") && parts.has("text-delta"), [...parts].join());

      assert.deepEqual(calls, ["Paris", "Paris"]);
      assert.equal(t.engine.requests.length, 4);
      for (const i of [1, 3]) assert.ok(prompt(t, i).includes('"sky":"sunny"'), "the tool result must reach the model");
      if (api === "responses") {
        // The SDK names the earlier reasoning item by id; rill resolves it, so the reasoning that led to the call is
        // in the follow-up prompt (harmony keeps the analysis of a turn that ended in a tool call).
        const followUp = c.sent[1]!.input as { type?: string; id?: string }[];
        const reference = followUp.find((item) => item.type === "item_reference");
        assert.ok(reference?.id?.startsWith("rs_"), JSON.stringify(followUp));
        assert.ok(prompt(t, 1).includes("Need a tool."), prompt(t, 1));
        await assertValidResponseStreams(c, 2);
      }
    } finally {
      await t.close();
    }
  });
}

Deno.test("vercel ai (responses): a second turn sends the first answer as item references, resolved from the store", async () => {
  const t = startTestServer();
  try {
    const c = client(t, "responses");
    const first = await generateText({ model: c.model, prompt: "hi" });
    const messages: ModelMessage[] = [
      { role: "user", content: "hi" },
      ...first.response.messages,
      { role: "user", content: "again" },
    ];
    const second = await generateText({ model: c.model, messages });
    assert.equal(second.text, ANSWER);
    const references = (c.sent[1]!.input as { type?: string; id?: string }[])
      .filter((item) => item.type === "item_reference")
      .map((item) => item.id?.slice(0, 3));
    assert.deepEqual(references, ["rs_", "msg"]);
    assert.ok(prompt(t, 1).includes(`<|channel|>final<|message|>${ANSWER}`), prompt(t, 1));

    // Once no stored response holds the items (the second one keeps them as its input), a reference is a 404.
    for (const id of [first.response.id, second.response.id]) assert.ok(await t.store.delete(id));
    await assert.rejects(generateText({ model: c.model, messages, maxRetries: 0 }), (e: unknown) => {
      const error = e as { statusCode?: number; responseBody?: string };
      assert.equal(error.statusCode, 404);
      assert.match(error.responseBody ?? "", /"param":"input\[1\]\.id"/);
      return true;
    });
  } finally {
    await t.close();
  }
});

Deno.test("vercel ai (responses): with store false the SDK replays items in full and the tool loop still works", async () => {
  const t = startTestServer();
  try {
    const c = client(t, "responses");
    const calls: string[] = [];
    const generated = await generateText({
      model: c.model,
      prompt: "Weather in Paris?",
      tools: { get_weather: weatherTool(calls) },
      stopWhen: stepCountIs(3),
      providerOptions: { openai: { store: false } },
    });
    assert.equal(generated.text, "It is sunny in Paris.");
    assert.deepEqual(calls, ["Paris"]);
    assert.ok(c.sent.every((body) => body.store === false));
    const followUp = c.sent[1]!.input as { type?: string }[];
    assert.ok(!followUp.some((item) => item.type === "item_reference"), JSON.stringify(followUp));
    assert.equal(await t.store.get(generated.response.id), undefined);
  } finally {
    await t.close();
  }
});

Deno.test("vercel ai (responses): store false with include reasoning.encrypted_content sends the sealed reasoning back, and it reaches the prompt", async () => {
  const t = startTestServer();
  try {
    const c = client(t, "responses");
    const calls: string[] = [];
    const generated = await generateText({
      model: c.model,
      prompt: "Weather in Paris?",
      tools: { get_weather: weatherTool(calls) },
      stopWhen: stepCountIs(3),
      providerOptions: { openai: { store: false, include: ["reasoning.encrypted_content"] } },
    });
    assert.equal(generated.text, "It is sunny in Paris.");
    const followUp = c.sent[1]!.input as { type?: string; encrypted_content?: unknown }[];
    const reasoning = followUp.filter((item) => item.type === "reasoning");
    assert.equal(reasoning.length, 1, JSON.stringify(followUp));
    assert.equal(typeof reasoning[0]!.encrypted_content, "string");
    assert.ok(prompt(t, 1).includes("<|channel|>analysis<|message|>Need a tool.<|end|>"), prompt(t, 1));
  } finally {
    await t.close();
  }
});
