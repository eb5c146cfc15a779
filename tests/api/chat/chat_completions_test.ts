import assert from "node:assert/strict";
import { MODEL, postJson, startTestServer } from "../../../testing/test_server.ts";

// OpenAI's chat completion ids are `chatcmpl-…` (a hyphen); clients and log tools match on that prefix.
const CHAT_ID = /^chatcmpl-[0-9a-f]{32}$/;

Deno.test("chat completion ids start chatcmpl- like OpenAI's, streamed and not", async () => {
  const t = startTestServer();
  try {
    const plain = await (await postJson(`${t.baseURL}/chat/completions`, {
      model: MODEL,
      messages: [{ role: "user", content: "hi" }],
    })).json();
    assert.match(plain.id, CHAT_ID);

    const streamed = await (await postJson(`${t.baseURL}/chat/completions`, {
      model: MODEL,
      messages: [{ role: "user", content: "hi" }],
      stream: true,
    })).text();
    const chunks = streamed.split("\n").filter((l) => l.startsWith("data: {")).map((l) => JSON.parse(l.slice(6)));
    assert.ok(chunks.length > 0);
    for (const chunk of chunks) assert.match(chunk.id, CHAT_ID);
    assert.equal(new Set(chunks.map((c) => c.id)).size, 1);
  } finally {
    await t.close();
  }
});
