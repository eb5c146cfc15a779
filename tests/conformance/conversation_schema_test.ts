/**
 * Responses made in a conversation — POST, GET, background, and the `response` of every lifecycle event — against
 * the Response schema and the OpenAI shape of `conversation`, and which endings add the turn to the conversation:
 * completed and incomplete ones do, failed ones do not. The Conversations API objects themselves are checked in
 * tests/e2e/conversations_test.ts with the same checker.
 */
import assert from "node:assert/strict";
import type { Engine, EngineChunk } from "../../engine/engine.ts";
import { MODEL, postJson, startTestServer, type TestServer, tokenizer } from "../../testing/test_server.ts";
import {
  conversationDeletedErrors,
  conversationErrors,
  conversationItemErrors,
  itemListErrors,
  responseConversationErrors,
} from "./openapi_conversation_check.ts";
import { eventSchemaErrors, isLifecycleEvent, responseSchemaErrors } from "./openapi_response_check.ts";

function assertConforms(response: Record<string, unknown>, where: string, conversation: string): void {
  assert.deepEqual([...responseSchemaErrors(response, where), ...responseConversationErrors(response, where)], []);
  assert.deepEqual(response.conversation, { id: conversation }, where);
}

async function lifecycleEvents(r: Response): Promise<Record<string, unknown>[]> {
  const text = await r.text();
  const events = text.split("\n\n").flatMap((frame) => {
    const data = frame.split("\n").find((l) => l.startsWith("data: "));
    return data === undefined ? [] : [JSON.parse(data.slice(6)) as Record<string, unknown>];
  });
  for (const e of events) assert.deepEqual(eventSchemaErrors(e), [], String(e["type"]));
  return events.filter((e) => isLifecycleEvent(String(e["type"])));
}

async function newConversation(t: TestServer): Promise<string> {
  return (await (await postJson(`${t.baseURL}/conversations`, {})).json()).id;
}

async function itemCount(t: TestServer, id: string): Promise<number> {
  return (await (await fetch(`${t.baseURL}/conversations/${id}/items?limit=100`)).json()).data.length;
}

Deno.test("the conversation checker rejects what the spec forbids", () => {
  assert.deepEqual(conversationErrors({ id: "conv_1", object: "conversation", created_at: 1, metadata: {} }), []);
  assert.deepEqual(conversationErrors({ id: "conv_1", object: "conversation", created_at: 1.5 }), [
    "conversation.metadata: missing",
    "conversation.created_at: 1.5 is not integer",
  ]);
  assert.deepEqual(conversationDeletedErrors({ id: "c", object: "conversation", deleted: true }), [
    'deleted.object: "conversation" is not one of conversation.deleted',
  ]);
  assert.deepEqual(itemListErrors({ object: "list", data: [], has_more: false, first_id: null, last_id: "" }), [
    "list.first_id: null is not string",
  ]);
  assert.deepEqual(conversationItemErrors({ type: "message", id: "m", role: "user", content: [] }), [
    "item.status: missing",
  ]);
  assert.deepEqual(conversationItemErrors({ type: "function_call", id: "f", call_id: "c", name: "n" }), [
    "item.arguments: missing",
    "item.status: missing",
  ]);
  assert.deepEqual(responseConversationErrors({ conversation: { id: 3 } }), [
    "response.conversation.id: 3 is not string",
  ]);
});

Deno.test("responses in a conversation conform, POST, GET, streamed and background, and echo it", async () => {
  const t = startTestServer({ stepDelayMs: 2 });
  try {
    const id = await newConversation(t);
    const plain = await (await postJson(`${t.baseURL}/responses`, { model: MODEL, input: "hi", conversation: id }))
      .json();
    assertConforms(plain, "POST", id);
    assertConforms(await (await fetch(`${t.baseURL}/responses/${plain.id}`)).json(), "GET", id);
    const streamed = await lifecycleEvents(
      await postJson(`${t.baseURL}/responses`, { model: MODEL, input: "hi", conversation: { id }, stream: true }),
    );
    assert.deepEqual(streamed.map((e) => e["type"]), [
      "response.created",
      "response.in_progress",
      "response.completed",
    ]);
    for (const e of streamed) assertConforms(e["response"] as Record<string, unknown>, String(e["type"]), id);
    const background = await postJson(`${t.baseURL}/responses`, {
      model: MODEL,
      input: "hi",
      conversation: id,
      background: true,
      stream: true,
    });
    const events = await lifecycleEvents(background);
    assert.equal(events.at(-1)!["type"], "response.completed");
    for (const e of events) assertConforms(e["response"] as Record<string, unknown>, String(e["type"]), id);
    // Three turns of input, reasoning and answer.
    assert.equal(await itemCount(t, id), 9);
    // A response outside any conversation has no `conversation` key.
    const outside = await (await postJson(`${t.baseURL}/responses`, { model: MODEL, input: "hi" })).json();
    assert.equal("conversation" in outside, false);
  } finally {
    await t.close();
  }
});

Deno.test("an incomplete turn is added to its conversation, a failed one is not", async () => {
  const t = startTestServer();
  try {
    const id = await newConversation(t);
    const cut = await (await postJson(`${t.baseURL}/responses`, {
      model: MODEL,
      input: "hi",
      conversation: id,
      max_output_tokens: 2,
    })).json();
    assert.equal(cut.status, "incomplete");
    assertConforms(cut, "incomplete", id);
    const items = (await (await fetch(`${t.baseURL}/conversations/${id}/items?order=asc`)).json()).data;
    assert.deepEqual(items.slice(1), cut.output, "the input, then the output as far as it got");
  } finally {
    await t.close();
  }
  const failing: Engine = {
    modelId: MODEL,
    tokenizer: tokenizer(),
    maxModelLen: 8192,
    generate: (request) =>
      new ReadableStream<EngineChunk>({
        start(controller) {
          controller.enqueue({ type: "step", tokens: tokenizer().encode("<|channel|>final<|message|>Hi") });
          controller.enqueue({
            type: "finish",
            reason: "error",
            promptTokens: request.promptTokens.length,
            outputTokens: 1,
            message: "boom",
          });
          controller.close();
        },
      }),
    stats: () => ({ running: 0, waiting: 0, kvCacheUsage: 0 }),
    close: () => Promise.resolve(),
  };
  const f = startTestServer({ server: { engine: failing } });
  try {
    const id = await newConversation(f);
    const events = await lifecycleEvents(
      await postJson(`${f.baseURL}/responses`, { model: MODEL, input: "hi", conversation: id, stream: true }),
    );
    assert.equal(events.at(-1)!["type"], "response.failed");
    assertConforms(events.at(-1)!["response"] as Record<string, unknown>, "failed", id);
    assert.equal(await itemCount(f, id), 0);
  } finally {
    await f.close();
  }
});
