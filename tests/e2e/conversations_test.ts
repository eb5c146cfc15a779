/**
 * The Conversations API through the official `openai` client against a real rill server: the conversation and item
 * routes, and `responses.create({conversation})` over several turns with a scripted model that answers from what its
 * prompt holds, so each turn shows the model saw the earlier ones. Every object is checked against the OpenAI
 * OpenAPI shapes (tests/conformance/openapi_conversation_check.ts), every stream by the validator.
 */
import assert from "node:assert/strict";
import OpenAI from "openai";
import type { GenerateRequest } from "../../engine/engine.ts";
import { validateSSE } from "../../conformance/validator.ts";
import { sseTap } from "../../testing/sse_tap.ts";
import { answerText, MODEL, postJson, startTestServer, type TestServer, tokenizer } from "../../testing/test_server.ts";
import {
  conversationDeletedErrors,
  conversationErrors,
  conversationItemErrors,
  itemListErrors,
  responseConversationErrors,
} from "../conformance/openapi_conversation_check.ts";
import { responseSchemaErrors } from "../conformance/openapi_response_check.ts";

/** Answers "I have seen N user messages; the last said: TEXT", from the rendered prompt. */
function countingScript(request: GenerateRequest): readonly number[] {
  const tok = tokenizer();
  const prompt = tok.decode(request.promptTokens);
  const users = [...prompt.matchAll(/<\|start\|>user<\|message\|>(.*?)<\|end\|>/gs)].map((m) => m[1]!);
  return tok.encode(answerText(`I have seen ${users.length} user messages; the last said: ${users.at(-1) ?? ""}`));
}

function client(t: TestServer): { openai: OpenAI; sse: Promise<string>[] } {
  const tap = sseTap();
  return {
    openai: new OpenAI({ baseURL: t.baseURL, apiKey: "unused", fetch: tap.fetch, maxRetries: 0 }),
    sse: tap.bodies,
  };
}

function promptOf(t: TestServer, index: number): string {
  return tokenizer().decode(t.engine.requests.at(index)!.promptTokens);
}

async function rawJson(
  t: TestServer,
  path: string,
  init: RequestInit = {},
): Promise<[number, Record<string, unknown>]> {
  const r = await fetch(`${t.baseURL}${path}`, init);
  return [r.status, await r.json()];
}

/** A user message with a client-chosen id (the API takes one; the SDK's input type has no field for it). */
function userWithId(text: string, id: string): OpenAI.Responses.ResponseInputItem {
  return { type: "message", role: "user", content: text, id } as OpenAI.Responses.ResponseInputItem;
}

function assertNoErrors(errors: string[]): void {
  assert.deepEqual(errors, []);
}

Deno.test("openai: conversations create, retrieve, update, delete", async () => {
  const t = startTestServer();
  try {
    const { openai } = client(t);
    const empty = await openai.conversations.create();
    assertNoErrors(conversationErrors(empty));
    assert.match(empty.id, /^conv_[0-9a-f]{32}$/);
    assert.deepEqual(empty.metadata, {});
    const created = await openai.conversations.create({
      metadata: { topic: "demo" },
      items: [{ type: "message", role: "user", content: "Hello there" }],
    });
    assertNoErrors(conversationErrors(created));
    assert.equal(created.object, "conversation");
    assert.ok(Math.abs(created.created_at - Date.now() / 1000) < 60);
    assert.deepEqual(await openai.conversations.retrieve(created.id), created);
    const updated = await openai.conversations.update(created.id, { metadata: { topic: "other", k: "v" } });
    assertNoErrors(conversationErrors(updated));
    assert.deepEqual(updated.metadata, { topic: "other", k: "v" });
    assert.deepEqual((await openai.conversations.retrieve(created.id)).metadata, { topic: "other", k: "v" });
    const deleted = await openai.conversations.delete(created.id);
    assertNoErrors(conversationDeletedErrors(deleted));
    assert.deepEqual(deleted, { id: created.id, object: "conversation.deleted", deleted: true });
    await assert.rejects(openai.conversations.retrieve(created.id), (e: unknown) => e instanceof OpenAI.NotFoundError);
    await assert.rejects(openai.conversations.delete(created.id), (e: unknown) => e instanceof OpenAI.NotFoundError);
    await assert.rejects(
      openai.conversations.update(created.id, { metadata: {} }),
      (e: unknown) => e instanceof OpenAI.NotFoundError,
    );
  } finally {
    await t.close();
  }
});

Deno.test("openai: conversation items create, list (pages, both orders), retrieve, delete", async () => {
  const t = startTestServer();
  try {
    const { openai } = client(t);
    const conversation = await openai.conversations.create({
      items: [{ type: "message", role: "user", content: "first" }],
    });
    const added = await openai.conversations.items.create(conversation.id, {
      items: [
        { type: "message", role: "assistant", content: "second" },
        { type: "function_call", call_id: "call_1", name: "get_weather", arguments: '{"city":"Paris"}' },
        { type: "function_call_output", call_id: "call_1", output: '{"sky":"sunny"}' },
        userWithId("fourth", "msg_client"),
      ],
    });
    assertNoErrors(itemListErrors(added));
    assert.deepEqual(added.data.map((item) => item.type), [
      "message",
      "function_call",
      "function_call_output",
      "message",
    ]);
    assert.equal(added.first_id, added.data[0]!.id);
    assert.equal(added.last_id, "msg_client", "an id the client sent is kept");
    assert.equal(added.has_more, false);

    const all: string[] = [];
    for await (const item of openai.conversations.items.list(conversation.id, { order: "asc", limit: 2 })) {
      assertNoErrors(conversationItemErrors(item));
      all.push(item.id!);
    }
    assert.equal(all.length, 5);
    assert.deepEqual(all.slice(1), added.data.map((item) => item.id));
    const newest = await openai.conversations.items.list(conversation.id, { limit: 2 });
    const [status, raw] = await rawJson(t, `/conversations/${conversation.id}/items?limit=2`);
    assert.equal(status, 200);
    assertNoErrors(itemListErrors(raw));
    assert.deepEqual(raw.data, newest.data);
    assert.deepEqual(newest.data.map((item) => item.id), [all[4], all[3]], "default order is newest first");
    assert.equal(newest.has_more, true);

    const call = await openai.conversations.items.retrieve(all[2]!, { conversation_id: conversation.id });
    assertNoErrors(conversationItemErrors(call));
    assert.deepEqual(call, { ...added.data[1], status: "completed" });
    const after = await openai.conversations.items.delete(all[2]!, { conversation_id: conversation.id });
    assertNoErrors(conversationErrors(after));
    assert.equal(after.id, conversation.id);
    await assert.rejects(
      openai.conversations.items.retrieve(all[2]!, { conversation_id: conversation.id }),
      (e: unknown) => e instanceof OpenAI.NotFoundError,
    );
    const left = await openai.conversations.items.list(conversation.id, { order: "asc" });
    assert.deepEqual(left.data.map((item) => item.id), [all[0], all[1], all[3], all[4]]);

    // A second item with an id the conversation holds is refused, naming it; nothing of the request is added.
    const duplicate = await openai.conversations.items.create(conversation.id, {
      items: [{ type: "message", role: "user", content: "x" }, userWithId("y", "msg_client")],
    }).catch((e: unknown) => e);
    assert.ok(duplicate instanceof OpenAI.BadRequestError);
    assert.equal(duplicate.param, "items[1].id");
    assert.equal((await openai.conversations.items.list(conversation.id)).data.length, 4);

    // item_reference: a stored response's output item into a conversation, and a conversation's item into a request.
    const response = await openai.responses.create({ model: MODEL, input: "hi" });
    const answer = response.output.at(-1)!;
    const referenced = await openai.conversations.items.create(conversation.id, {
      items: [{ type: "item_reference", id: answer.id! }],
    });
    assert.deepEqual(referenced.data, [answer]);
    await openai.responses.create({ model: MODEL, input: [{ type: "item_reference", id: "msg_client" }] });
    assert.match(promptOf(t, -1), /<\|start\|>user<\|message\|>fourth<\|end\|>/);
  } finally {
    await t.close();
  }
});

Deno.test("conversations: bad bodies are 400s naming the param, unknown ids 404s", async () => {
  const t = startTestServer();
  try {
    const json = (body: unknown): RequestInit => ({
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(body),
    });
    const expect400 = async (path: string, body: unknown, param: string) => {
      const [status, error] = await rawJson(t, path, json(body));
      assert.equal(status, 400, JSON.stringify(error));
      assert.equal((error.error as { param: string }).param, param);
    };
    await expect400("/conversations", { items: [{ type: "message", role: "pirate", content: "x" }] }, "items[0].role");
    await expect400(
      "/conversations",
      { items: [{ type: "message", role: "user", content: [{ type: "nope" }] }] },
      "items[0].content[0].type",
    );
    await expect400("/conversations", { metadata: { k: 1 } }, "metadata.k");
    await expect400("/conversations", { colour: "red" }, "colour");
    await expect400("/conversations", { items: "hello" }, "items");
    const [, created] = await rawJson(t, "/conversations", json({}));
    const id = created.id as string;
    await expect400(`/conversations/${id}`, {}, "metadata");
    await expect400(`/conversations/${id}/items`, {}, "items");
    await expect400(`/conversations/${id}/items`, { items: [{ type: "function_call" }] }, "items[0].call_id");
    await expect400(`/conversations/${id}/items`, { items: [{ type: "item_reference", id: "" }] }, "items[0].id");
    for (const [query, param] of [["limit=0", "limit"], ["order=up", "order"], ["colour=red", "colour"]]) {
      const [status, error] = await rawJson(t, `/conversations/${id}/items?${query}`);
      assert.equal(status, 400);
      assert.equal((error.error as { param: string }).param, param);
    }
    for (
      const [path, init] of [
        ["/conversations/conv_missing", {}],
        ["/conversations/conv_missing", { method: "DELETE" }],
        ["/conversations/conv_missing/items", {}],
        ["/conversations/conv_missing/items", json({ items: [] })],
        ["/conversations/conv_missing/items/msg_1", {}],
        [`/conversations/${id}/items/msg_missing`, {}],
        [`/conversations/${id}/items/msg_missing`, { method: "DELETE" }],
        [`/conversations/${id}/items?after=msg_missing`, {}],
        [`/conversations/${id}/items`, json({ items: [{ type: "item_reference", id: "msg_missing" }] })],
      ] as const
    ) {
      const [status, error] = await rawJson(t, path, init);
      assert.equal(status, 404, `${path} ${JSON.stringify(error)}`);
      assert.equal((error.error as { type: string }).type, "invalid_request_error");
    }
    const put = await fetch(`${t.baseURL}/conversations/${id}`, { method: "PUT" });
    assert.equal(put.status, 405);
    assert.equal(put.headers.get("allow"), "GET, POST, DELETE");
    await put.body?.cancel();
  } finally {
    await t.close();
  }
});

Deno.test("openai: responses.create({conversation}) over several turns: the model sees every earlier turn", async () => {
  const t = startTestServer({ script: countingScript });
  try {
    const { openai, sse } = client(t);
    const conversation = await openai.conversations.create({
      items: [{ type: "message", role: "user", content: "My name is Ada." }],
    });
    const first = await openai.responses.create({ model: MODEL, conversation: conversation.id, input: "Hi!" });
    assertNoErrors(responseSchemaErrors(first));
    assertNoErrors(responseConversationErrors(first as unknown as Record<string, unknown>));
    assert.deepEqual(first.conversation, { id: conversation.id });
    assert.equal(first.output_text, "I have seen 2 user messages; the last said: Hi!");

    // The `{id}` form, streamed.
    const stream = await openai.responses.create({
      model: MODEL,
      conversation: { id: conversation.id },
      input: "What is my name?",
      stream: true,
    });
    let completed: OpenAI.Responses.Response | undefined;
    for await (const event of stream) if (event.type === "response.completed") completed = event.response;
    assert.ok(completed !== undefined);
    assert.deepEqual(completed.conversation, { id: conversation.id });
    const said = completed.output.flatMap((item) => item.type === "message" ? item.content : [])
      .map((part) => part.type === "output_text" ? part.text : "").join("");
    assert.equal(said, "I have seen 3 user messages; the last said: What is my name?");
    const secondPrompt = promptOf(t, -1);
    assert.match(secondPrompt, /My name is Ada\./);
    assert.match(secondPrompt, /I have seen 2 user messages; the last said: Hi!/, "the first answer is in the prompt");

    // No new input: the model continues from the conversation as it stands.
    const third = await openai.responses.create({ model: MODEL, conversation: conversation.id });
    assert.equal(third.output_text, "I have seen 3 user messages; the last said: What is my name?");

    const items = await openai.conversations.items.list(conversation.id, { order: "asc", limit: 100 });
    assertNoErrors(itemListErrors((await rawJson(t, `/conversations/${conversation.id}/items?order=asc`))[1]));
    const shape = items.data.map((item) =>
      item.type === "message"
        ? `${item.role}:${item.role === "user" ? (item.content[0] as { text: string }).text : ""}`
        : item.type
    );
    assert.deepEqual(shape, [
      "user:My name is Ada.",
      "user:Hi!",
      "reasoning",
      "assistant:",
      "user:What is my name?",
      "reasoning",
      "assistant:",
      "reasoning",
      "assistant:",
    ]);
    // The output items are stored as the response returned them.
    assert.deepEqual(items.data.slice(2, 4), first.output);
    for (const body of await Promise.all(sse)) assert.deepEqual(validateSSE(body).violations, []);

    // A response made in a conversation can be continued with previous_response_id: it keeps the history it saw.
    const branched = await openai.responses.create({ model: MODEL, previous_response_id: first.id, input: "Branch" });
    assert.equal(branched.output_text, "I have seen 3 user messages; the last said: Branch");
    assert.equal(branched.conversation, undefined);
    assert.equal((await openai.conversations.items.list(conversation.id, { limit: 100 })).data.length, 9);
  } finally {
    await t.close();
  }
});

Deno.test("responses with conversation: conflicts, unknown conversations, duplicate ids; refused turns add nothing", async () => {
  const t = startTestServer({ script: countingScript });
  try {
    const { openai } = client(t);
    const conversation = await openai.conversations.create({
      items: [userWithId("held", "msg_held")],
    });
    const both = await openai.responses.create({
      model: MODEL,
      conversation: conversation.id,
      previous_response_id: "resp_x",
      input: "x",
    }).catch((e: unknown) => e);
    assert.ok(both instanceof OpenAI.BadRequestError);
    assert.equal(both.param, "conversation");
    const unknown = await openai.responses.create({ model: MODEL, conversation: "conv_missing", input: "x" })
      .catch((e: unknown) => e);
    assert.ok(unknown instanceof OpenAI.NotFoundError);
    assert.equal(unknown.param, "conversation");
    assert.deepEqual(Object.keys((unknown.error ?? {}) as object).sort(), ["code", "message", "param", "type"]);
    const duplicate = await openai.responses.create({
      model: MODEL,
      conversation: conversation.id,
      input: [userWithId("again", "msg_held")],
    }).catch((e: unknown) => e);
    assert.ok(duplicate instanceof OpenAI.BadRequestError);
    assert.equal(duplicate.param, "input[0].id");
    const repeated = await openai.responses.create({
      model: MODEL,
      conversation: conversation.id,
      input: [userWithId("one", "msg_twice"), userWithId("two", "msg_twice")],
    }).catch((e: unknown) => e);
    assert.ok(repeated instanceof OpenAI.BadRequestError);
    assert.equal(repeated.param, "input[1].id");
    // input_tokens counts the conversation's items too.
    const r = await postJson(`${t.baseURL}/responses/input_tokens`, { conversation: conversation.id, input: "x" });
    const alone = await postJson(`${t.baseURL}/responses/input_tokens`, { input: "x" });
    assert.ok((await r.json()).input_tokens > (await alone.json()).input_tokens);
    assert.equal(t.engine.requests.length, 0, "no refused request reached the engine");
    assert.equal((await openai.conversations.items.list(conversation.id)).data.length, 1);
  } finally {
    await t.close();
  }
});

Deno.test("responses with conversation: a cancelled background turn adds nothing, a completed one adds its items", async () => {
  const t = startTestServer({ script: countingScript, stepDelayMs: 20, chunking: "one" });
  try {
    const { openai } = client(t);
    const conversation = await openai.conversations.create();
    const background = await openai.responses.create({
      model: MODEL,
      conversation: conversation.id,
      input: "slow",
      background: true,
    });
    assert.deepEqual(background.conversation, { id: conversation.id });
    const cancelled = await openai.responses.cancel(background.id);
    assert.equal(cancelled.status, "cancelled");
    assert.equal((await openai.conversations.items.list(conversation.id)).data.length, 0);

    const done = await openai.responses.create({
      model: MODEL,
      conversation: conversation.id,
      input: "wait for me",
      background: true,
    });
    let final = done;
    while (final.status === "queued" || final.status === "in_progress") {
      await new Promise((resolve) => setTimeout(resolve, 20));
      final = await openai.responses.retrieve(done.id);
    }
    assert.equal(final.status, "completed");
    const items = await openai.conversations.items.list(conversation.id, { order: "asc" });
    assert.deepEqual(items.data.map((item) => item.type), ["message", "reasoning", "message"]);
    assert.deepEqual(items.data.slice(1), final.output);
  } finally {
    await t.close();
  }
});

Deno.test("responses with conversation: two turns at once on one conversation both land whole", async () => {
  const t = startTestServer({ script: countingScript, stepDelayMs: 5 });
  try {
    const { openai } = client(t);
    const conversation = await openai.conversations.create();
    const [a, b] = await Promise.all([
      openai.responses.create({ model: MODEL, conversation: conversation.id, input: "from A" }),
      openai.responses.create({ model: MODEL, conversation: conversation.id, input: "from B", stream: false }),
    ]);
    // Both started from the empty conversation.
    assert.equal(a.output_text, "I have seen 1 user messages; the last said: from A");
    assert.equal(b.output_text, "I have seen 1 user messages; the last said: from B");
    const items = (await openai.conversations.items.list(conversation.id, { order: "asc" })).data;
    assert.equal(items.length, 6);
    // Each turn's input and output stay together.
    for (const response of [a, b]) {
      const at = items.findIndex((item) => item.id === response.output[0]!.id);
      assert.ok(at >= 1);
      assert.equal(items[at - 1]!.type, "message");
      assert.deepEqual(items.slice(at, at + 2), response.output);
    }
  } finally {
    await t.close();
  }
});

Deno.test("responses with conversation and store: false: the turn is added, the response is not stored", async () => {
  const t = startTestServer({ script: countingScript });
  try {
    const { openai } = client(t);
    const conversation = await openai.conversations.create();
    const first = await openai.responses.create({
      model: MODEL,
      conversation: conversation.id,
      input: "a",
      store: false,
    });
    await assert.rejects(openai.responses.retrieve(first.id), (e: unknown) => e instanceof OpenAI.NotFoundError);
    const second = await openai.responses.create({ model: MODEL, conversation: conversation.id, input: "b" });
    assert.equal(second.output_text, "I have seen 2 user messages; the last said: b");
    assert.equal((await openai.conversations.items.list(conversation.id)).data.length, 6);
  } finally {
    await t.close();
  }
});
