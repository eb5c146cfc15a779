import assert from "node:assert/strict";
import { createHarmonyFormat } from "../../prompt/harmony_format.ts";
import { MODEL, postJson, startTestServer, tokenizer } from "../../testing/test_server.ts";

Deno.test("tokenize and detokenize, as vLLM serves them", async () => {
  const t = startTestServer({ maxModelLen: 4096 });
  const tok = tokenizer();
  try {
    const r = await postJson(`${t.url}/tokenize`, { model: MODEL, prompt: "Hello world<|end|>" });
    assert.equal(r.status, 200);
    const body = await r.json();
    assert.deepEqual(body, {
      count: body.tokens.length,
      max_model_len: 4096,
      tokens: tok.encode("Hello world<|end|>"),
    });
    // Special-token text is the special token, as the completions endpoint reads a prompt.
    assert.equal(body.tokens.at(-1), tok.specialId("<|end|>"));

    const strs = await (await postJson(`${t.url}/tokenize`, { prompt: "Hi there", return_token_strs: true })).json();
    assert.equal(strs.token_strs.join(""), "Hi there");
    assert.equal(strs.token_strs.length, strs.count);

    // Messages are rendered exactly as a chat completion's prompt is.
    const messages = [{ role: "user", content: "What is 2+2?" }];
    const chat = await (await postJson(`${t.url}/tokenize`, { messages, add_special_tokens: false })).json();
    const expected = createHarmonyFormat(tok).render({
      messages: [{ role: "user", content: "What is 2+2?" }],
      tools: [],
      toolChoice: "auto",
    });
    assert.deepEqual(chat.tokens, expected);
    assert.equal(chat.count, expected.length);
    await (await postJson(`${t.baseURL}/chat/completions`, { model: MODEL, messages })).json();
    assert.deepEqual(t.engine.requests.at(-1)?.promptTokens, expected);

    const d = await postJson(`${t.url}/detokenize`, { model: MODEL, tokens: body.tokens });
    assert.deepEqual(await d.json(), { prompt: "Hello world<|end|>" });
  } finally {
    await t.close();
  }
});

Deno.test("tokenize and detokenize: bad input is a 400 naming the parameter, a wrong model a 404", async () => {
  const t = startTestServer();
  try {
    const cases: [string, Record<string, unknown>, number, string | null][] = [
      ["tokenize", {}, 400, "prompt"],
      ["tokenize", { prompt: 3 }, 400, "prompt"],
      ["tokenize", { prompt: "a", messages: [] }, 400, "messages"],
      ["tokenize", { messages: [{ role: "robot", content: "x" }] }, 400, "messages[0].role"],
      ["tokenize", { prompt: "a", add_special_tokens: "yes" }, 400, "add_special_tokens"],
      ["tokenize", { prompt: "a", bogus: 1 }, 400, "bogus"],
      ["tokenize", { model: "other", prompt: "a" }, 404, "model"],
      ["detokenize", {}, 400, "tokens"],
      ["detokenize", { tokens: [1, -2] }, 400, "tokens[1]"],
      ["detokenize", { tokens: [1, 999_999_999] }, 400, "tokens[1]"],
      ["detokenize", { tokens: [1], model: "other" }, 404, "model"],
    ];
    for (const [path, body, status, param] of cases) {
      const r = await postJson(`${t.url}/${path}`, body);
      const json = await r.json();
      assert.equal(r.status, status, `${path} ${JSON.stringify(body)}`);
      assert.equal(json.error.param, param, `${path} ${JSON.stringify(body)}`);
    }
    const get = await fetch(`${t.url}/tokenize`);
    assert.equal(get.status, 405);
    await get.body?.cancel();
  } finally {
    await t.close();
  }
});
