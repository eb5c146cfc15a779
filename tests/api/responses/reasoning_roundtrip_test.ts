/**
 * Stateless reasoning round-trips: `include: ["reasoning.encrypted_content"]` seals each reasoning item, and a
 * reasoning item sent back with only its blob renders into the prompt as the model wrote it. Checked through the
 * official `openai` SDK with `store: false`, on the prompts the scripted engine records.
 */
import assert from "node:assert/strict";
import OpenAI from "openai";
import { validateSSE } from "../../../conformance/validator.ts";
import { sseTap } from "../../../testing/sse_tap.ts";
import { MODEL, postJson, REASONING, startTestServer, type TestServer } from "../../../testing/test_server.ts";

const WEATHER = {
  type: "function" as const,
  name: "get_weather",
  description: "Weather of a city",
  parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
  strict: false,
};

const TOOL_REASONING = "Need a tool.";

function lastPrompt(t: TestServer): string {
  const request = t.engine.requests.at(-1);
  assert.ok(request !== undefined, "the engine saw no request");
  return t.engine.tokenizer.decode(request.promptTokens);
}

/** Reasoning items as a client that keeps only the opaque blob sends them back (OpenAI's own shape). */
function blobOnly(items: readonly Record<string, unknown>[]): Record<string, unknown>[] {
  return items.map((item) =>
    item.type === "reasoning"
      ? { type: "reasoning", id: item.id, summary: [], encrypted_content: item.encrypted_content }
      : item
  );
}

async function errorOf(response: Response): Promise<{ status: number; error: Record<string, unknown> }> {
  const body = await response.json() as { error: Record<string, unknown> };
  return { status: response.status, error: body.error };
}

Deno.test("reasoning: SDK round-trip with store false renders the sealed reasoning of the tool loop", async () => {
  const t = startTestServer();
  try {
    const openai = new OpenAI({ baseURL: t.baseURL, apiKey: "unused", maxRetries: 0 });
    const first = await openai.responses.create({
      model: MODEL,
      input: "Weather in Paris?",
      tools: [WEATHER],
      store: false,
      include: ["reasoning.encrypted_content"],
    });
    const reasoning = first.output.find((item) => item.type === "reasoning");
    assert.ok(reasoning !== undefined && reasoning.type === "reasoning");
    assert.equal(typeof reasoning.encrypted_content, "string");
    assert.ok(!reasoning.encrypted_content!.includes(TOOL_REASONING), "the blob must not carry the text in clear");
    const call = first.output.find((item) => item.type === "function_call");
    assert.ok(call !== undefined && call.type === "function_call");

    const second = await openai.responses.create({
      model: MODEL,
      store: false,
      tools: [WEATHER],
      include: ["reasoning.encrypted_content"],
      input: [
        { role: "user", content: "Weather in Paris?" },
        ...blobOnly(first.output as unknown as Record<string, unknown>[]),
        { type: "function_call_output", call_id: call.call_id, output: '{"sky":"sunny"}' },
      ] as unknown as OpenAI.Responses.ResponseInput,
    });
    assert.equal(second.status, "completed");
    // Harmony keeps the analysis of the unfinished tool loop (harmony.md): it is back, verbatim, before the call.
    const prompt = lastPrompt(t);
    assert.ok(
      prompt.includes(
        `<|start|>assistant<|channel|>analysis<|message|>${TOOL_REASONING}<|end|><|start|>assistant to=functions.get_weather`,
      ),
      prompt,
    );
  } finally {
    await t.close();
  }
});

/**
 * The blob with one base64 character in its middle (sealed bytes, never padding) replaced by another: always a change,
 * unlike overwriting its head with a constant, which its version byte and nonce may already spell.
 */
function flipMiddle(blob: string): string {
  const i = blob.length >> 1;
  return blob.slice(0, i) + (blob[i] === "A" ? "B" : "A") + blob.slice(i + 1);
}

Deno.test("reasoning: a finished turn's sealed reasoning is opened but dropped from the next turn (harmony rule)", async () => {
  const t = startTestServer();
  try {
    const first = await (await postJson(`${t.baseURL}/responses`, {
      model: MODEL,
      input: "hi",
      store: false,
      include: ["reasoning.encrypted_content"],
    })).json() as { output: Record<string, unknown>[] };
    const response = await postJson(`${t.baseURL}/responses`, {
      model: MODEL,
      store: false,
      input: [{ role: "user", content: "hi" }, ...blobOnly(first.output), { role: "user", content: "again" }],
    });
    assert.equal(response.status, 200);
    assert.ok(!lastPrompt(t).includes(REASONING));
    // Dropped from the prompt, still verified: a broken blob of an earlier turn is refused all the same.
    const broken = blobOnly(first.output).map((item) =>
      item.type === "reasoning" ? { ...item, encrypted_content: flipMiddle(String(item.encrypted_content)) } : item
    );
    const refused = await postJson(`${t.baseURL}/responses`, {
      model: MODEL,
      input: [{ role: "user", content: "hi" }, ...broken, { role: "user", content: "again" }],
    });
    assert.equal(refused.status, 400);
  } finally {
    await t.close();
  }
});

Deno.test("reasoning: streamed output_item.done and response.completed carry encrypted_content; none unless asked", async () => {
  const t = startTestServer();
  try {
    const tap = sseTap();
    const openai = new OpenAI({ baseURL: t.baseURL, apiKey: "unused", fetch: tap.fetch, maxRetries: 0 });
    const stream = await openai.responses.create({
      model: MODEL,
      input: "hi",
      stream: true,
      store: true,
      include: ["reasoning.encrypted_content"],
    });
    let doneBlob: string | undefined;
    let completedBlob: string | undefined;
    for await (const event of stream) {
      if (event.type === "response.output_item.done" && event.item.type === "reasoning") {
        doneBlob = event.item.encrypted_content ?? undefined;
      }
      if (event.type === "response.completed") {
        const item = event.response.output.find((i) => i.type === "reasoning");
        completedBlob = item?.type === "reasoning" ? item.encrypted_content ?? undefined : undefined;
      }
    }
    assert.equal(typeof doneBlob, "string");
    assert.equal(completedBlob, doneBlob);
    for (const body of await Promise.all(tap.bodies)) assert.deepEqual(validateSSE(body).violations, []);

    const plain = await openai.responses.create({ model: MODEL, input: "hi" });
    const item = plain.output.find((i) => i.type === "reasoning");
    assert.ok(item !== undefined && !("encrypted_content" in item));
  } finally {
    await t.close();
  }
});

Deno.test("reasoning: tampered, truncated, foreign and misplaced blobs are a 400 naming the item", async () => {
  const key = crypto.getRandomValues(new Uint8Array(32));
  const t = startTestServer({ server: { reasoningKey: key } });
  const other = startTestServer({ server: { reasoningKey: crypto.getRandomValues(new Uint8Array(32)) } });
  try {
    const sealed = async (server: TestServer) => {
      const body = await (await postJson(`${server.baseURL}/responses`, {
        model: MODEL,
        input: "hi",
        store: false,
        include: ["reasoning.encrypted_content"],
      })).json() as { output: { type: string; encrypted_content?: string }[] };
      const blob = body.output.find((item) => item.type === "reasoning")?.encrypted_content;
      assert.ok(blob !== undefined);
      return blob;
    };
    const good = await sealed(t);
    const foreign = await sealed(other);
    const bytes = Uint8Array.from(atob(good), (c) => c.charCodeAt(0));
    bytes[bytes.length - 20]! ^= 1;
    const flipped = btoa(String.fromCharCode(...bytes));
    const cases: [string, string][] = [
      ["flipped bit", flipped],
      ["truncated", good.slice(0, good.length - 8)],
      ["too short", good.slice(0, 12)],
      ["not base64", "!!!" + good],
      ["other server key", foreign],
      ["empty", ""],
    ];
    for (const [label, blob] of cases) {
      const response = await postJson(`${t.baseURL}/responses`, {
        model: MODEL,
        input: [
          { role: "user", content: "hi" },
          { type: "reasoning", summary: [], encrypted_content: blob },
          { role: "user", content: "more" },
        ],
      });
      const { status, error } = await errorOf(response);
      assert.equal(status, 400, label);
      assert.equal(error.type, "invalid_request_error", label);
      assert.equal(error.param, "input[1].encrypted_content", label);
    }
    // A reasoning blob is not a compaction summary.
    const misplaced = await errorOf(
      await postJson(`${t.baseURL}/responses`, {
        model: MODEL,
        input: [{ type: "compaction", encrypted_content: good }, { role: "user", content: "more" }],
      }),
    );
    assert.equal(misplaced.status, 400);
    assert.equal(misplaced.error.param, "input[0].encrypted_content");
    // The server still answers, and the untouched blob still opens.
    const ok = await postJson(`${t.baseURL}/responses`, {
      model: MODEL,
      input: [{ role: "user", content: "hi" }, { type: "reasoning", summary: [], encrypted_content: good }],
    });
    assert.equal(ok.status, 200);
    await ok.body?.cancel();
  } finally {
    await t.close();
    await other.close();
  }
});

Deno.test("reasoning: a blob is bound to the model it was made for", async () => {
  const key = crypto.getRandomValues(new Uint8Array(32));
  const a = startTestServer({ server: { reasoningKey: key } });
  const b = startTestServer({ server: { reasoningKey: key, modelId: "another-model" } });
  try {
    const body = await (await postJson(`${a.baseURL}/responses`, {
      model: MODEL,
      input: "hi",
      include: ["reasoning.encrypted_content"],
    })).json() as { output: { type: string; encrypted_content?: string }[] };
    const blob = body.output.find((item) => item.type === "reasoning")?.encrypted_content;
    const response = await postJson(`${b.baseURL}/responses`, {
      model: "another-model",
      input: [{ role: "user", content: "hi" }, { type: "reasoning", summary: [], encrypted_content: blob }],
    });
    const { status, error } = await errorOf(response);
    assert.equal(status, 400);
    assert.equal(error.param, "input[1].encrypted_content");
  } finally {
    await a.close();
    await b.close();
  }
});

Deno.test("reasoning: a stored input reasoning item that carries only its blob is opened when the chain is replayed", async () => {
  const t = startTestServer();
  try {
    const first = await (await postJson(`${t.baseURL}/responses`, {
      model: MODEL,
      input: "Weather in Paris?",
      tools: [WEATHER],
      include: ["reasoning.encrypted_content"],
      store: false,
    })).json() as { output: Record<string, unknown>[] };
    // Stored: the blob-only reasoning and the call of the first turn; the model calls again (its own reasoning is
    // stored in clear).
    const stored = await (await postJson(`${t.baseURL}/responses`, {
      model: MODEL,
      tools: [WEATHER],
      input: [{ role: "user", content: "Weather in Paris?" }, ...blobOnly(first.output)],
    })).json() as { id: string; output: Record<string, unknown>[] };
    const call = stored.output.find((item) => item.type === "function_call")!;
    const next = await postJson(`${t.baseURL}/responses`, {
      model: MODEL,
      tools: [WEATHER],
      previous_response_id: stored.id,
      input: [{ type: "function_call_output", call_id: call.call_id, output: "sunny" }],
    });
    assert.equal(next.status, 200);
    await next.body?.cancel();
    // Both analyses of the unfinished tool loop: the opened blob's and the stored clear one.
    const analyses = lastPrompt(t).split(`<|channel|>analysis<|message|>${TOOL_REASONING}<|end|>`).length - 1;
    assert.equal(analyses, 2, lastPrompt(t));
  } finally {
    await t.close();
  }
});
