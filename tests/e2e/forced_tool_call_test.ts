/**
 * tool_choice "required" and a named choice on each bundled model over HTTP: the response holds a call to an offered
 * tool (the named one for a named choice), streamed and not, and every stream passes the validator with no
 * allowances (invariant 73). Before, both choices were only hints: asked "What is 2 plus 3?" with
 * `tool_choice: "required"`, the models answered in text; with a named choice they called the tool the question
 * suggested instead of the named one. The choice is enforced by the output grammar, after the model's reasoning.
 */
import assert from "node:assert/strict";
import { validateSSE } from "../../conformance/validator.ts";
import { BUNDLED_MODELS, GET_WEATHER, withBundledServer } from "../../testing/bundled_server.ts";

const LOOKUP = {
  type: "function",
  name: "lookup",
  description: "Look something up.",
  parameters: { type: "object", properties: { q: { type: "string" } } },
};

interface Item {
  type: string;
  name?: string;
  arguments?: string;
}

async function post(url: string, body: Record<string, unknown>): Promise<Item[]> {
  const res = await fetch(`${url}/v1/responses`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  const text = await res.text();
  assert.equal(res.status, 200, text);
  if (body["stream"] !== true) return (JSON.parse(text) as { output: Item[] }).output;
  const { events, violations } = validateSSE(text);
  assert.deepEqual(violations, [], JSON.stringify(body));
  const last = events.at(-1) as { type: string; response: { output: Item[] } };
  // Off-domain (a weather call for an arithmetic question) the tiny models may not close the city string before
  // max_output_tokens: the call is still the forced one, cut short.
  assert.ok(["response.completed", "response.incomplete"].includes(last.type), JSON.stringify(last).slice(0, 3000));
  return last.response.output;
}

function calls(output: Item[]): (string | undefined)[] {
  return output.filter((i) => i.type === "function_call").map((i) => i.name);
}

for (const name of BUNDLED_MODELS) {
  Deno.test(`${name} over HTTP: tool_choice required and named force a call to the right tool`, async () => {
    await withBundledServer(name, 8, async (url, model) => {
      const base = { model: model.modelId, temperature: 0, max_output_tokens: 200 };
      const cases = [
        { input: "What is 2 plus 3?", tools: [GET_WEATHER], tool_choice: "required", want: "get_weather" },
        {
          input: "What is the weather in Paris?",
          tools: [GET_WEATHER, LOOKUP],
          tool_choice: { type: "function", name: "lookup" },
          want: "lookup",
        },
        {
          input: "What is the capital of France?",
          tools: [GET_WEATHER, LOOKUP],
          tool_choice: { type: "function", name: "get_weather" },
          want: "get_weather",
        },
      ];
      const runs = cases.flatMap(({ want, ...body }) =>
        [false, true].map(async (stream) => ({ want, output: await post(url, { ...base, ...body, stream }) }))
      );
      for (const { want, output } of await Promise.all(runs)) {
        const names = calls(output);
        assert.ok(names.length > 0, `expected a call to ${want}, got ${JSON.stringify(output)}`);
        assert.ok(names.every((n) => n === want), `expected only ${want}, got ${JSON.stringify(output)}`);
        // The grammar enforces the choice after the model's reasoning (no prefilled call opening): reasoning first.
        assert.deepEqual(output.map((i) => i.type), ["reasoning", "function_call"], JSON.stringify(output));
      }
      // auto is untouched: the model still reasons before its call.
      const auto = await post(url, {
        ...base,
        input: "What is the weather in Paris?",
        tools: [GET_WEATHER],
        stream: true,
      });
      assert.deepEqual(auto.map((i) => i.type), ["reasoning", "function_call"]);
    });
  });
}
