/**
 * `@openai/agents` keeping its memory in rill's Conversations API: with an `OpenAIConversationsSession` (the SDK
 * reads the history with `conversations.items.list` and writes each turn with `conversations.items.create`), and
 * with `conversationId` (the SDK sends `conversation` and rill appends each turn itself). Two turns each, with a
 * scripted model that answers from what its prompt holds.
 */
import assert from "node:assert/strict";
import OpenAI from "openai";
import { Agent, OpenAIConversationsSession, OpenAIResponsesModel, run, setTracingDisabled } from "@openai/agents";
import type { GenerateRequest } from "../../engine/engine.ts";
import { answerText, MODEL, startTestServer, type TestServer, tokenizer } from "../../testing/test_server.ts";

setTracingDisabled(true);

function countingScript(request: GenerateRequest): readonly number[] {
  const tok = tokenizer();
  const prompt = tok.decode(request.promptTokens);
  const users = [...prompt.matchAll(/<\|start\|>user<\|message\|>(.*?)<\|end\|>/gs)].map((m) => m[1]!);
  return tok.encode(answerText(`I have seen ${users.length} user messages; the last said: ${users.at(-1) ?? ""}`));
}

function setup(t: TestServer): { client: OpenAI; agent: Agent } {
  const client = new OpenAI({ baseURL: t.baseURL, apiKey: "unused", maxRetries: 0 });
  const agent = new Agent({
    name: "memory",
    instructions: "Remember what the user tells you.",
    model: new OpenAIResponsesModel(client, MODEL),
  });
  return { client, agent };
}

Deno.test("agents SDK: OpenAIConversationsSession keeps two turns in a rill conversation", async () => {
  const t = startTestServer({ script: countingScript });
  try {
    const { client, agent } = setup(t);
    const session = new OpenAIConversationsSession({ client });
    const first = await run(agent, "My name is Ada.", { session });
    assert.equal(first.finalOutput, "I have seen 1 user messages; the last said: My name is Ada.");
    const second = await run(agent, "What is my name?", { session });
    assert.equal(second.finalOutput, "I have seen 2 user messages; the last said: What is my name?");
    const prompt = tokenizer().decode(t.engine.requests.at(-1)!.promptTokens);
    assert.match(prompt, /My name is Ada\./);
    assert.match(prompt, /I have seen 1 user messages/, "the first answer reached the second prompt");

    const id = await session.getSessionId();
    assert.match(id, /^conv_/);
    const stored = await client.conversations.items.list(id, { order: "asc" });
    const roles = stored.data.map((item) => item.type === "message" ? item.role : item.type);
    assert.deepEqual(roles.filter((r) => r !== "reasoning"), ["user", "assistant", "user", "assistant"]);
    assert.equal((await session.getItems()).length, stored.data.length);

    const popped = await session.popItem();
    assert.equal(popped?.type, "message");
    assert.equal((await client.conversations.items.list(id)).data.length, stored.data.length - 1);
    await session.clearSession();
    await assert.rejects(client.conversations.retrieve(id), (e: unknown) => e instanceof OpenAI.NotFoundError);
  } finally {
    await t.close();
  }
});

Deno.test("agents SDK: conversationId makes rill keep the history across two runs", async () => {
  const t = startTestServer({ script: countingScript });
  try {
    const { client, agent } = setup(t);
    const conversation = await client.conversations.create();
    const first = await run(agent, "My name is Ada.", { conversationId: conversation.id });
    assert.equal(first.finalOutput, "I have seen 1 user messages; the last said: My name is Ada.");
    const second = await run(agent, "What is my name?", { conversationId: conversation.id });
    assert.equal(second.finalOutput, "I have seen 2 user messages; the last said: What is my name?");
    const items = await client.conversations.items.list(conversation.id, { order: "asc" });
    const roles = items.data.map((item) => item.type === "message" ? item.role : item.type);
    assert.deepEqual(roles, ["user", "reasoning", "assistant", "user", "reasoning", "assistant"]);
  } finally {
    await t.close();
  }
});
