import assert from "node:assert/strict";
import { createHarmonyFormat } from "../../formats/harmony_format.ts";
import { MODEL, postJson, startTestServer, tokenizer } from "../../testing/test_server.ts";

const TOOL = { type: "function", name: "get_weather", parameters: { type: "object", properties: {} } };
const CHAT_TOOL = { type: "function", function: { name: "get_weather", parameters: { type: "object" } } };

async function statusAndParam(r: Response): Promise<[number, string | null]> {
  const body = await r.json();
  return [r.status, r.status === 200 ? null : body.error.param];
}

Deno.test("parallel_tool_calls false: honoured by harmony models (one call, then stop)", async () => {
  const t = startTestServer();
  try {
    const r = await postJson(`${t.baseURL}/responses`, {
      model: MODEL,
      input: "weather?",
      tools: [TOOL],
      parallel_tool_calls: false,
    });
    const response = await r.json();
    assert.equal(r.status, 200);
    assert.equal(response.parallel_tool_calls, false);
    assert.equal(response.output.filter((i: { type: string }) => i.type === "function_call").length, 1);
  } finally {
    await t.close();
  }
});

Deno.test("parallel_tool_calls false: a 400 naming it for template models, on every endpoint that takes it", async () => {
  // A template-format model: only the format's name matters to the check.
  const t = startTestServer({ server: { format: { ...createHarmonyFormat(tokenizer()), name: "chatml" } } });
  try {
    const responses = { model: MODEL, input: "weather?", tools: [TOOL], parallel_tool_calls: false };
    const chat = {
      model: MODEL,
      messages: [{ role: "user", content: "weather?" }],
      tools: [CHAT_TOOL],
      parallel_tool_calls: false,
    };
    for (
      const [path, body] of [
        ["responses", responses],
        ["responses/input_tokens", responses],
        ["chat/completions", chat],
      ] as const
    ) {
      assert.deepEqual(await statusAndParam(await postJson(`${t.baseURL}/${path}`, body)), [
        400,
        "parallel_tool_calls",
      ]);
    }
    // Without function tools, or with parallel calls allowed, there is nothing to refuse.
    assert.deepEqual(
      await statusAndParam(await postJson(`${t.baseURL}/responses`, { ...responses, tools: [] })),
      [200, null],
    );
    assert.deepEqual(
      await statusAndParam(await postJson(`${t.baseURL}/chat/completions`, { ...chat, parallel_tool_calls: true })),
      [200, null],
    );
  } finally {
    await t.close();
  }
});
