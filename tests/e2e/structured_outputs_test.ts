/**
 * Structured outputs over HTTP on both bundled models, both APIs, streamed and not:
 * - Responses `text.format` json_schema and Chat `response_format` json_schema: the message text parses and validates
 *   against the schema for in-domain and off-domain prompts at several temperatures; every Responses stream passes
 *   the validator; streamed text deltas concatenate to the final text;
 * - forced tool choice (required, named) on the weather prompts: every call's arguments parse and validate, and the
 *   model reasons first; how often the city is right is printed next to `auto`;
 * - json_object (Responses and Chat, sampled at high temperatures with several seeds) is a JSON object;
 * - every constrained output (answers and call arguments) is laid out on one line with at most one space between
 *   tokens (no newline or tab outside strings), as the README promises;
 * - a schema xgrammar rejects, or a malformed format, is a 400 naming the parameter.
 */
import assert from "node:assert/strict";
import { validateSSE } from "../../conformance/validator.ts";
import { BUNDLED_MODELS, GET_WEATHER, withBundledServer } from "../../testing/bundled_server.ts";
import { schemaViolation } from "../../testing/json_schema_check.ts";
import { whitespaceBreach } from "../../testing/compact_json_check.ts";

const SCHEMA = {
  type: "object",
  properties: {
    answer: { type: "string", maxLength: 40 },
    score: { type: "integer", minimum: 0, maximum: 10 },
    items: {
      type: "array",
      items: { type: "object", properties: { k: { type: "string", enum: ["a", "b"] } }, required: ["k"] },
      maxItems: 2,
    },
  },
  required: ["answer", "score", "items"],
  additionalProperties: false,
};
const PROMPTS = [
  "What is 17 + 25?",
  "What is the capital of Japan?",
  "What is the weather in Paris?",
  "Describe your favourite colour.",
];
const CITIES = ["Paris", "Tokyo", "Berlin", "Madrid", "Rome", "Cairo", "Lima", "Oslo"];

async function postJson(
  url: string,
  path: string,
  body: Record<string, unknown>,
): Promise<{ status: number; text: string }> {
  const res = await fetch(`${url}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  return { status: res.status, text: await res.text() };
}

interface OutputItem {
  type: string;
  name?: string;
  arguments?: string;
  content?: { type: string; text: string }[];
}

/** Final output items of a Responses call; a stream is validated and its text deltas compared with the final text. */
async function responses(url: string, body: Record<string, unknown>): Promise<OutputItem[]> {
  const { status, text } = await postJson(url, "/v1/responses", body);
  assert.equal(status, 200, text);
  if (body.stream !== true) return (JSON.parse(text) as { output: OutputItem[] }).output;
  const { events, violations } = validateSSE(text);
  assert.deepEqual(violations, [], JSON.stringify(body));
  const last = events.at(-1) as { type: string; response: { output: OutputItem[] } };
  assert.equal(last.type, "response.completed", text.slice(-500));
  const deltas = (events as { type: string; delta?: string }[])
    .filter((e) => e.type === "response.output_text.delta")
    .map((e) => e.delta ?? "")
    .join("");
  assert.equal(deltas, messageText(last.response.output));
  return last.response.output;
}

function messageText(output: OutputItem[]): string {
  return output.filter((i) => i.type === "message").flatMap((i) => i.content ?? []).map((c) => c.text).join("");
}

/** Chat message content (streamed: the concatenated deltas, checked against nothing else the server sends). */
async function chat(url: string, body: Record<string, unknown>): Promise<{ content: string; toolArgs: string[] }> {
  const { status, text } = await postJson(url, "/v1/chat/completions", body);
  assert.equal(status, 200, text);
  if (body.stream !== true) {
    const message = (JSON.parse(text) as {
      choices: { message: { content: string | null; tool_calls?: { function: { arguments: string } }[] } }[];
    }).choices[0]!.message;
    return { content: message.content ?? "", toolArgs: (message.tool_calls ?? []).map((c) => c.function.arguments) };
  }
  let content = "";
  const args = new Map<number, string>();
  for (const line of text.split("\n")) {
    if (!line.startsWith("data: ") || line === "data: [DONE]") continue;
    const chunk = JSON.parse(line.slice(6)) as {
      choices: {
        delta: { content?: string | null; tool_calls?: { index: number; function?: { arguments?: string } }[] };
      }[];
    };
    const delta = chunk.choices[0]?.delta;
    content += delta?.content ?? "";
    for (const c of delta?.tool_calls ?? []) {
      args.set(c.index, (args.get(c.index) ?? "") + (c.function?.arguments ?? ""));
    }
  }
  return { content, toolArgs: [...args.values()] };
}

function assertValid(text: string, schema: unknown, context: string): void {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    assert.fail(`not JSON: ${JSON.stringify(text)} (${context})`);
  }
  assert.equal(schemaViolation(value, schema), undefined, `${text} (${context})`);
  assert.equal(whitespaceBreach(text), undefined, `${JSON.stringify(text)} (${context})`);
}

for (const name of BUNDLED_MODELS) {
  Deno.test(`${name} over HTTP: structured outputs`, async (t) => {
    await withBundledServer(name, 16, async (url, model) => {
      const base = { model: model.modelId, max_output_tokens: 300 };
      await t.step("Responses text.format json_schema validates, streamed and not", async () => {
        const runs = PROMPTS.flatMap((input, i) =>
          [0, 0.8].flatMap((temperature) =>
            [false, true].map((stream) =>
              responses(url, {
                ...base,
                input,
                temperature,
                stream,
                text: { format: { type: "json_schema", name: "answer", schema: SCHEMA, strict: true } },
              }).then((output) => ({ output, context: `${input} t=${temperature} stream=${stream} #${i}` }))
            )
          )
        );
        for (const { output, context } of await Promise.all(runs)) assertValid(messageText(output), SCHEMA, context);
      });
      await t.step("Chat response_format json_schema validates, streamed and not", async () => {
        const runs = PROMPTS.flatMap((content) =>
          [false, true].map((stream) =>
            chat(url, {
              model: model.modelId,
              messages: [{ role: "user", content }],
              temperature: 0.7,
              seed: 3,
              max_completion_tokens: 300,
              stream,
              response_format: { type: "json_schema", json_schema: { name: "answer", schema: SCHEMA, strict: true } },
            }).then((r) => ({ ...r, context: `${content} stream=${stream}` }))
          )
        );
        const results = await Promise.all(runs);
        for (const { content, context } of results) assertValid(content, SCHEMA, context);
        // Same seed, streamed or not: the streamed deltas add up to the non-streamed message.
        for (let i = 0; i < results.length; i += 2) assert.equal(results[i + 1]!.content, results[i]!.content);
      });
      await t.step("json_object: one line, one space at most between tokens, sampled hot", async () => {
        // Unbounded strings let a tiny model write until the token limit, so an answer cut there is checked for its
        // layout only; every answer the model ended must be a JSON object, and several must end.
        const runs = PROMPTS.flatMap((content, i) => [
          ...[1, 2, 3].map(async (seed) => {
            const { status, text } = await postJson(url, "/v1/chat/completions", {
              model: model.modelId,
              messages: [{ role: "user", content }],
              temperature: 1,
              seed: seed + 10 * i,
              max_completion_tokens: 200,
              response_format: { type: "json_object" },
            });
            assert.equal(status, 200, text);
            const choice = (JSON.parse(text) as { choices: { message: { content: string }; finish_reason: string }[] })
              .choices[0]!;
            return {
              text: choice.message.content,
              ended: choice.finish_reason === "stop",
              context: `chat #${i}/${seed}`,
            };
          }),
          (async () => {
            const { status, text } = await postJson(url, "/v1/responses", {
              ...base,
              input: content,
              temperature: 1,
              max_output_tokens: 200,
              text: { format: { type: "json_object" } },
            });
            assert.equal(status, 200, text);
            const response = JSON.parse(text) as { status: string; output: OutputItem[] };
            return {
              text: messageText(response.output),
              ended: response.status === "completed",
              context: `responses #${i}`,
            };
          })(),
        ]);
        let ended = 0;
        for (const { text, ended: done, context } of await Promise.all(runs)) {
          assert.equal(whitespaceBreach(text), undefined, `${JSON.stringify(text)} (${context})`);
          if (!done) continue;
          ended++;
          assertValid(text, { type: "object" }, context);
        }
        console.log(`${name}: json_object ${ended}/${runs.length} answers ended before the token limit`);
        assert.ok(ended >= 2, `only ${ended} json_object answers ended`);
      });
      await t.step("forced tool choice: valid arguments on every weather prompt, reasoning first", async () => {
        const tally = { forced: 0, auto: 0, n: 0 };
        const strictWeather = {
          ...GET_WEATHER,
          strict: true,
          parameters: { ...GET_WEATHER.parameters, additionalProperties: false },
        };
        for (const [i, city] of CITIES.entries()) {
          const input = `What is the weather in ${city}?`;
          const choice = i % 2 === 0 ? "required" : { type: "function", name: "get_weather" };
          const [forced, auto] = await Promise.all([
            responses(url, {
              ...base,
              input,
              temperature: 0,
              tools: [strictWeather],
              tool_choice: choice,
              stream: i % 4 < 2,
            }),
            responses(url, { ...base, input, temperature: 0, tools: [strictWeather], stream: false }),
          ]);
          const call = forced.find((o) => o.type === "function_call");
          assert.ok(call !== undefined, JSON.stringify(forced));
          assert.equal(call.name, "get_weather");
          assertValid(call.arguments ?? "", strictWeather.parameters, input);
          assert.equal(forced[0]?.type, "reasoning", JSON.stringify(forced));
          tally.n++;
          if ((JSON.parse(call.arguments ?? "{}") as { city?: string }).city === city) tally.forced++;
          const autoCall = auto.find((o) => o.type === "function_call");
          if (autoCall !== undefined && (JSON.parse(autoCall.arguments ?? "{}") as { city?: string }).city === city) {
            tally.auto++;
          }
        }
        console.log(`${name}: city right ${tally.forced}/${tally.n} forced, ${tally.auto}/${tally.n} auto`);
        // Reasoning comes first, so a forced call names the city about as often as auto does.
        assert.ok(tally.forced >= tally.auto - 1, JSON.stringify(tally));
      });
      await t.step("Chat strict tool under tool_choice required: arguments validate", async () => {
        const params = { ...GET_WEATHER.parameters, additionalProperties: false };
        for (const stream of [false, true]) {
          const r = await chat(url, {
            model: model.modelId,
            messages: [{ role: "user", content: "What is the weather in Oslo?" }],
            temperature: 0,
            max_completion_tokens: 200,
            stream,
            tools: [{ type: "function", function: { name: "get_weather", parameters: params, strict: true } }],
            tool_choice: "required",
          });
          assert.equal(r.toolArgs.length, 1, JSON.stringify(r));
          assertValid(r.toolArgs[0]!, params, `chat stream=${stream}`);
        }
      });
      await t.step("schemas xgrammar rejects are 400s naming the parameter", async () => {
        const bad = { type: "object", properties: { n: { type: "integer", minimum: 5, maximum: 2 } } };
        const r1 = await postJson(url, "/v1/responses", {
          ...base,
          input: "hi",
          text: { format: { type: "json_schema", name: "x", schema: bad } },
        });
        assert.equal(r1.status, 400, r1.text);
        const e1 = (JSON.parse(r1.text) as { error: { param: string; message: string } }).error;
        assert.equal(e1.param, "text.format.schema");
        assert.match(e1.message, /minimum/);
        const r2 = await postJson(url, "/v1/chat/completions", {
          model: model.modelId,
          messages: [{ role: "user", content: "hi" }],
          tools: [{
            type: "function",
            function: { name: "f", parameters: { type: "string", pattern: "((" }, strict: true },
          }],
        });
        assert.equal(r2.status, 400, r2.text);
        assert.equal((JSON.parse(r2.text) as { error: { param: string } }).error.param, "tools[0].function.parameters");
        const huge = {
          type: "object",
          properties: Object.fromEntries(
            Array.from(
              { length: 200 },
              (_, i) => [`f${i}`, { type: "object", properties: { a: { type: "integer" } } }],
            ),
          ),
        };
        const r4 = await postJson(url, "/v1/responses", {
          ...base,
          input: "hi",
          text: { format: { type: "json_schema", name: "x", schema: huge } },
        });
        assert.equal(r4.status, 400, r4.text);
        const e4 = (JSON.parse(r4.text) as { error: { param: string; message: string } }).error;
        assert.equal(e4.param, "text.format.schema");
        assert.match(e4.message, /too large/);
        const r3 = await postJson(url, "/v1/responses", {
          ...base,
          input: "hi",
          text: { format: { type: "json_schema", name: "x" } },
        });
        assert.equal(r3.status, 400, r3.text);
        assert.equal((JSON.parse(r3.text) as { error: { param: string } }).error.param, "text.format.schema");
      });
    });
  });
}
