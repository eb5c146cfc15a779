import assert from "node:assert/strict";
import OpenAI from "openai";
import type { GenerateRequest } from "../../../engine/engine.ts";
import { MODEL, postJson, startTestServer, tokenizer } from "../../../testing/test_server.ts";

/** Continues a prompt with its upper-cased echo, then `<|return|>` (a stop token) — unless the prompt asks to ramble. */
function script(request: GenerateRequest): readonly number[] {
  const tok = tokenizer();
  const prompt = tok.decode(request.promptTokens);
  if (prompt.includes("ramble")) return tok.encode(" and on".repeat(40));
  return tok.encode(` -> ${prompt.toUpperCase()} é<|return|>`);
}

function client(baseURL: string): OpenAI {
  return new OpenAI({ baseURL, apiKey: "unused", maxRetries: 0 });
}

Deno.test("completions: string, list of strings, token ids and lists of ids, through the openai SDK", async () => {
  const t = startTestServer({ script });
  const tok = tokenizer();
  try {
    const openai = client(t.baseURL);
    const one = await openai.completions.create({ model: MODEL, prompt: "hi there", max_tokens: 50 });
    assert.equal(one.object, "text_completion");
    assert.ok(one.id.startsWith("cmpl"));
    assert.deepEqual(one.choices, [{ text: " -> HI THERE é", index: 0, logprobs: null, finish_reason: "stop" }]);
    const promptTokens = tok.encode("hi there").length;
    assert.equal(one.usage?.prompt_tokens, promptTokens);
    assert.equal(one.usage?.completion_tokens, tok.encode(" -> HI THERE é<|return|>").length);
    assert.equal(one.usage?.total_tokens, one.usage!.prompt_tokens + one.usage!.completion_tokens);
    // The raw prompt, without any chat template around it.
    assert.deepEqual(t.engine.requests.at(-1)?.promptTokens, tok.encode("hi there"));

    const many = await openai.completions.create({ model: MODEL, prompt: ["a", "b"], max_tokens: 50 });
    assert.deepEqual(many.choices.map((c) => [c.index, c.text]), [[0, " -> A é"], [1, " -> B é"]]);

    const ids = await openai.completions.create({ model: MODEL, prompt: tok.encode("xy"), max_tokens: 50 });
    assert.equal(ids.choices[0]?.text, " -> XY é");
    const idLists = await openai.completions.create({
      model: MODEL,
      prompt: [tok.encode("p"), tok.encode("q")],
      max_tokens: 50,
    });
    assert.deepEqual(idLists.choices.map((c) => c.text), [" -> P é", " -> Q é"]);

    // max_tokens defaults to 16, as OpenAI's; the cut is finish_reason "length".
    const long = await openai.completions.create({ model: MODEL, prompt: "ramble" });
    assert.equal(long.choices[0]?.finish_reason, "length");
    assert.equal(long.usage?.completion_tokens, 16);
    // stop strings reach the engine (which matches them; the scripted engine does not).
    await openai.completions.create({ model: MODEL, prompt: "ramble", max_tokens: 50, stop: ["on and", "x"] });
    assert.deepEqual(t.engine.requests.at(-1)?.sampling.stopStrings, ["on and", "x"]);
  } finally {
    await t.close();
  }
});

Deno.test("completions: streamed through the openai SDK, chunks per choice, finish, usage and [DONE]", async () => {
  const t = startTestServer({ script, chunking: { seed: 3, max: 2 } });
  try {
    const openai = client(t.baseURL);
    const stream = await openai.completions.create({
      model: MODEL,
      prompt: ["one", "two"],
      max_tokens: 50,
      stream: true,
      stream_options: { include_usage: true },
    });
    const texts = ["", ""];
    const finishes: (string | null)[] = [null, null];
    let usage: OpenAI.CompletionUsage | null | undefined = null;
    let chunks = 0;
    for await (const chunk of stream) {
      chunks++;
      assert.equal(chunk.object, "text_completion");
      for (const c of chunk.choices) {
        texts[c.index] += c.text;
        if (c.finish_reason !== null) finishes[c.index] = c.finish_reason;
      }
      if (chunk.usage) usage = chunk.usage;
    }
    assert.deepEqual(texts, [" -> ONE é", " -> TWO é"]);
    assert.deepEqual(finishes, ["stop", "stop"]);
    assert.ok(chunks > 4, `only ${chunks} chunks`);
    assert.equal(usage?.total_tokens, usage!.prompt_tokens + usage!.completion_tokens);

    // On the wire: SSE frames ending with [DONE].
    const raw = await (await postJson(`${t.baseURL}/completions`, { model: MODEL, prompt: "z", stream: true })).text();
    assert.match(raw, /^data: \{/);
    assert.ok(raw.endsWith("data: [DONE]\n\n"));
  } finally {
    await t.close();
  }
});

Deno.test("completions: unsupported and invalid parameters are a 400 naming them", async () => {
  const t = startTestServer({ script });
  try {
    const cases: [Record<string, unknown>, string][] = [
      [{ echo: true }, "echo"],
      [{ logprobs: 2 }, "logprobs"],
      [{ suffix: "end" }, "suffix"],
      [{ n: 17 }, "n"],
      [{ n: 0 }, "n"],
      [{ best_of: 3 }, "best_of"],
      [{ presence_penalty: 3 }, "presence_penalty"],
      [{ frequency_penalty: -2.5 }, "frequency_penalty"],
      [{ top_k: 1.5 }, "top_k"],
      [{ min_p: -0.1 }, "min_p"],
      [{ repetition_penalty: -1 }, "repetition_penalty"],
      [{ logit_bias: { "5": -101 } }, "logit_bias.5"],
      [{ logit_bias: { "999999999": 5 } }, "logit_bias"],
      [{ prompt: "" }, "prompt"],
      [{ prompt: [] }, "prompt"],
      [{ prompt: ["ok", ""] }, "prompt[1]"],
      [{ prompt: [1, 999_999_999] }, "prompt[1]"],
      [{ prompt: [[1], [2, 999_999_999]] }, "prompt[1][1]"],
      [{ prompt: [1, "x"] }, "prompt"],
      [{ max_tokens: 0 }, "max_tokens"],
      [{ bogus: 1 }, "bogus"],
    ];
    for (const [extra, param] of cases) {
      const r = await postJson(`${t.baseURL}/completions`, { model: MODEL, prompt: "hi", ...extra });
      const body = await r.json();
      assert.equal(r.status, 400, JSON.stringify(extra));
      assert.equal(body.error.param, param, JSON.stringify(extra));
    }
    const wrongModel = await postJson(`${t.baseURL}/completions`, { model: "nope", prompt: "hi" });
    assert.equal(wrongModel.status, 404);
    await wrongModel.body?.cancel();
    // echo: false and suffix "" ask for nothing and are accepted.
    const fine = await postJson(`${t.baseURL}/completions`, { model: MODEL, prompt: "hi", echo: false, suffix: "" });
    assert.equal(fine.status, 200);
    await fine.body?.cancel();
  } finally {
    await t.close();
  }
});
