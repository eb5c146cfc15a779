import assert from "node:assert/strict";
import { ANSWER, MODEL, postJson, startTestServer } from "../../../testing/test_server.ts";

interface WireLogprob {
  token: string;
  logprob: number;
  bytes: number[];
  top_logprobs: { token: string; logprob: number; bytes: number[] }[];
}

const BODY = { model: MODEL, messages: [{ role: "user", content: "hi" }], logprobs: true, top_logprobs: 2 };

Deno.test("chat logprobs: one entry per answer token, streamed the same as non-streamed, none for reasoning", async () => {
  const t = startTestServer();
  try {
    const whole = await (await postJson(`${t.baseURL}/chat/completions`, BODY)).json();
    const choice = whole.choices[0];
    assert.equal(choice.message.content, ANSWER);
    const lps = choice.logprobs.content as WireLogprob[];
    assert.equal(lps.map((l) => l.token).join(""), ANSWER);
    for (const l of lps) {
      assert.ok(l.logprob <= 0);
      assert.deepEqual(l.bytes, [...new TextEncoder().encode(l.token)]);
      assert.equal(l.top_logprobs.length, 2);
      for (const top of l.top_logprobs) assert.deepEqual(Object.keys(top).sort(), ["bytes", "logprob", "token"]);
    }
    assert.equal(t.engine.requests[0]!.sampling.logprobs, 2);

    const text = await (await postJson(`${t.baseURL}/chat/completions`, { ...BODY, stream: true })).text();
    const chunks = text.split("\n\n").filter((f) => f.startsWith("data: {")).map((f) => JSON.parse(f.slice(6)));
    const streamed: WireLogprob[] = [];
    for (const c of chunks) {
      const { delta, logprobs } = c.choices[0];
      if (delta.reasoning_content !== undefined) assert.deepEqual(logprobs.content, []);
      if (delta.content !== undefined && delta.content !== "") {
        assert.equal(logprobs.content.map((l: WireLogprob) => l.token).join(""), delta.content);
      }
      if (logprobs !== null) streamed.push(...logprobs.content);
    }
    assert.deepEqual(streamed, lps);
  } finally {
    await t.close();
  }
});
