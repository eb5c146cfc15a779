/**
 * Sampling parameters end to end over HTTP on the bundled ChatML model, through the official openai SDK where it has
 * the parameter: `n` choices (indexes, per-choice finish_reason, seeds derived per choice, usage counting the prompt
 * once, the later choices served from the prefix cache), `logit_bias` forcing a token, penalties changing the output,
 * Responses echoing the penalties in effect, and bad values answered with a 400 naming the param.
 */
import assert from "node:assert/strict";
import OpenAI from "openai";
import { validateSSE } from "../../conformance/validator.ts";
import { withBundledServer } from "../../testing/bundled_server.ts";

const MODEL_NAME = "rill-tiny-chatml";
const ROOT = new URL("../../", import.meta.url).pathname;
/** Long enough (well over one 16-token block) that the prefix cache has full blocks to share. */
const QUESTION = "Please tell me, in a few words and without any tools, what the weather is usually like in Paris.";

async function post(url: string, path: string, body: unknown): Promise<Response> {
  return await fetch(`${url}/v1${path}`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });
}

Deno.test("chat n: sampled choices differ by derived seed and repeat exactly; greedy ones agree; prefill is shared", async () => {
  await withBundledServer(MODEL_NAME, 8, async (url, model) => {
    const openai = new OpenAI({ baseURL: `${url}/v1`, apiKey: "unused", maxRetries: 0 });
    const messages = [{ role: "user" as const, content: QUESTION }];
    const single = await openai.chat.completions.create({ model: model.modelId, messages, max_tokens: 12, seed: 5 });
    const before = model.engine.stats().prefixCacheHitTokens ?? 0;
    const three = await openai.chat.completions.create({
      model: model.modelId,
      messages,
      max_tokens: 12,
      temperature: 1.2,
      seed: 5,
      n: 3,
    });
    assert.deepEqual(three.choices.map((c) => c.index), [0, 1, 2]);
    // The tiny model mostly writes reasoning: a choice is its whole message.
    const texts = three.choices.map((c) => JSON.stringify(c.message));
    assert.ok(new Set(texts).size > 1, `sampled choices differ: ${JSON.stringify(texts)}`);
    for (const c of three.choices) assert.ok(c.finish_reason === "stop" || c.finish_reason === "length");
    const prompt = single.usage!.prompt_tokens;
    assert.equal(three.usage!.prompt_tokens, prompt, "the prompt counts once");
    assert.ok(three.usage!.completion_tokens > 12 && three.usage!.completion_tokens <= 36);
    assert.equal(three.usage!.total_tokens, prompt + three.usage!.completion_tokens);
    // Choices 1 and 2 start after choice 0's prefill and take its full blocks from the prefix cache.
    const hits = (model.engine.stats().prefixCacheHitTokens ?? 0) - before;
    const fullBlocks = Math.floor(prompt / 16) * 16;
    assert.ok(fullBlocks > 0 && hits >= 2 * fullBlocks, `prefix cache hits ${hits}, want >= ${2 * fullBlocks}`);

    const again = await openai.chat.completions.create({
      model: model.modelId,
      messages,
      max_tokens: 12,
      temperature: 1.2,
      seed: 5,
      n: 3,
    });
    assert.deepEqual(
      again.choices.map((c) => JSON.stringify(c.message)),
      texts,
      "the same seed gives the same choices",
    );

    const greedy = await openai.chat.completions.create({
      model: model.modelId,
      messages,
      max_tokens: 12,
      temperature: 0,
      n: 3,
    });
    assert.equal(greedy.choices.length, 3);
    assert.equal(new Set(greedy.choices.map((c) => JSON.stringify(c.message))).size, 1, "greedy choices agree");
  }, ["--backend", "native"]);
});

Deno.test("chat n streamed: every chunk names its choice, each choice finishes, usage sums the choices", async () => {
  await withBundledServer(MODEL_NAME, 8, async (url, model) => {
    const openai = new OpenAI({ baseURL: `${url}/v1`, apiKey: "unused", maxRetries: 0 });
    const stream = await openai.chat.completions.create({
      model: model.modelId,
      messages: [{ role: "user", content: QUESTION }],
      max_tokens: 10,
      temperature: 1,
      seed: 11,
      n: 2,
      stream: true,
      stream_options: { include_usage: true },
    });
    const text = ["", ""];
    const finishes: (string | null)[] = [null, null];
    let usage: OpenAI.CompletionUsage | null | undefined = null;
    for await (const chunk of stream) {
      if (chunk.usage) usage = chunk.usage;
      for (const c of chunk.choices) {
        assert.ok(c.index === 0 || c.index === 1);
        const delta = c.delta as { content?: string | null; reasoning_content?: string };
        text[c.index] += (delta.content ?? "") + (delta.reasoning_content ?? "");
        if (c.finish_reason !== null) {
          assert.equal(finishes[c.index], null, "one finish per choice");
          finishes[c.index] = c.finish_reason;
        }
      }
    }
    assert.ok(finishes.every((f) => f === "stop" || f === "length"), JSON.stringify(finishes));
    assert.ok(usage !== null && usage !== undefined);
    assert.ok(usage.completion_tokens > 10 && usage.completion_tokens <= 20);
    // The same request not streamed gives the same choices.
    const whole = await openai.chat.completions.create({
      model: model.modelId,
      messages: [{ role: "user", content: QUESTION }],
      max_tokens: 10,
      temperature: 1,
      seed: 11,
      n: 2,
    });
    const wholeText = whole.choices.map((c) =>
      (c.message.content ?? "") + ((c.message as { reasoning_content?: string }).reasoning_content ?? "")
    );
    // Reasoning streams before the answer, so compare what each choice wrote as a multiset of characters.
    const sorted = (t: string) => [...t].sort().join("");
    assert.deepEqual(wholeText.map(sorted), text.map(sorted));
  });
});

Deno.test("completions: n choices per prompt, logit_bias +100 forces a token, -100 forbids it", async () => {
  await withBundledServer(MODEL_NAME, 8, async (url, model) => {
    const openai = new OpenAI({ baseURL: `${url}/v1`, apiKey: "unused", maxRetries: 0 });
    const many = await openai.completions.create({
      model: model.modelId,
      prompt: ["The capital of France is", "Once upon a time"],
      max_tokens: 6,
      temperature: 1,
      seed: 1,
      n: 2,
    });
    assert.deepEqual(many.choices.map((c) => c.index), [0, 1, 2, 3]);
    const one = await openai.completions.create({ model: model.modelId, prompt: "The capital of France is" });
    const other = await openai.completions.create({ model: model.modelId, prompt: "Once upon a time" });
    assert.equal(many.usage!.prompt_tokens, one.usage!.prompt_tokens + other.usage!.prompt_tokens);
    const streamed = await openai.completions.create({
      model: model.modelId,
      prompt: ["The capital of France is", "Once upon a time"],
      max_tokens: 6,
      temperature: 1,
      seed: 1,
      n: 2,
      stream: true,
    });
    const texts = ["", "", "", ""];
    const finishes = [0, 0, 0, 0];
    for await (const chunk of streamed) {
      for (const c of chunk.choices) {
        texts[c.index] += c.text;
        if (c.finish_reason !== null) finishes[c.index]!++;
      }
    }
    assert.deepEqual(finishes, [1, 1, 1, 1]);
    assert.deepEqual(texts, many.choices.map((c) => c.text), "streamed choices equal the whole ones (same seed)");

    const tokenizer = model.engine.tokenizer;
    const forced = tokenizer.encode(" banana")[0]!;
    const biased = await openai.completions.create({
      model: model.modelId,
      prompt: "The capital of France is",
      max_tokens: 4,
      temperature: 1,
      logit_bias: { [String(forced)]: 100 },
    });
    assert.equal(biased.choices[0]!.text, tokenizer.decode([forced, forced, forced, forced]));

    const plain = await openai.completions.create({
      model: model.modelId,
      prompt: "The capital of France is",
      max_tokens: 8,
      temperature: 0,
    });
    const first = tokenizer.encode(plain.choices[0]!.text)[0]!;
    const banned = await openai.completions.create({
      model: model.modelId,
      prompt: "The capital of France is",
      max_tokens: 8,
      temperature: 0,
      logit_bias: { [String(first)]: -100 },
    });
    assert.ok(!tokenizer.encode(banned.choices[0]!.text).includes(first));
  });
});

Deno.test("penalties: a frequency penalty changes greedy output; Responses echoes the penalties in every response", async () => {
  await withBundledServer(MODEL_NAME, 4, async (url, model) => {
    const openai = new OpenAI({ baseURL: `${url}/v1`, apiKey: "unused", maxRetries: 0 });
    // A held-out prompt whose greedy answer repeats "000" from the reasoning before it.
    const file = JSON.parse(await Deno.readTextFile(`${ROOT}models/${MODEL_NAME}/golden/prompts.json`)) as {
      cases: { input_ids: number[] }[];
    };
    const prompt = file.cases[11]!.input_ids;
    const ask = async (frequency_penalty: number) =>
      (await openai.completions.create({
        model: model.modelId,
        prompt,
        max_tokens: 48,
        temperature: 0,
        frequency_penalty,
      }))
        .choices[0]!.text;
    const repeats = (text: string) => {
      const ids = model.engine.tokenizer.encode(text);
      return ids.length - new Set(ids).size;
    };
    const plain = await ask(0);
    const penalised = await ask(2);
    assert.notEqual(penalised, plain);
    assert.ok(repeats(penalised) < repeats(plain), `${JSON.stringify(penalised)} vs ${JSON.stringify(plain)}`);

    const created = await openai.responses.create({
      model: model.modelId,
      input: QUESTION,
      max_output_tokens: 8,
      temperature: 0,
      presence_penalty: 0.5,
      frequency_penalty: -0.25,
    } as OpenAI.Responses.ResponseCreateParamsNonStreaming);
    const echoed = created as unknown as { presence_penalty: number; frequency_penalty: number };
    assert.equal(echoed.presence_penalty, 0.5);
    assert.equal(echoed.frequency_penalty, -0.25);

    const res = await post(url, "/responses", {
      model: model.modelId,
      input: QUESTION,
      max_output_tokens: 8,
      presence_penalty: 1,
      frequency_penalty: 1.5,
      stream: true,
    });
    const { events, violations } = validateSSE(await res.text());
    assert.deepEqual(violations, []);
    const withResponse = (events as unknown as Record<string, unknown>[]).filter((e) => "response" in e) as {
      response: Record<string, unknown>;
    }[];
    assert.ok(withResponse.length >= 2);
    for (const e of withResponse) {
      assert.equal(e.response.presence_penalty, 1);
      assert.equal(e.response.frequency_penalty, 1.5);
    }
  });
});

Deno.test("sampling parameters: bad values are a 400 naming the param", async () => {
  await withBundledServer(MODEL_NAME, 2, async (url, model) => {
    const chat = { model: model.modelId, messages: [{ role: "user", content: "hi" }] };
    const cases: [string, Record<string, unknown>, string][] = [
      ["/chat/completions", { ...chat, n: 17 }, "n"],
      ["/chat/completions", { ...chat, frequency_penalty: 2.5 }, "frequency_penalty"],
      ["/chat/completions", { ...chat, top_k: -3 }, "top_k"],
      ["/chat/completions", { ...chat, min_p: 2 }, "min_p"],
      ["/chat/completions", { ...chat, repetition_penalty: 0 }, "repetition_penalty"],
      ["/chat/completions", { ...chat, logit_bias: { "1": 150 } }, "logit_bias.1"],
      ["/chat/completions", { ...chat, logit_bias: { [String(model.engine.tokenizer.vocabSize)]: 1 } }, "logit_bias"],
      ["/completions", { model: model.modelId, prompt: "hi", n: 0 }, "n"],
      ["/completions", { model: model.modelId, prompt: "hi", presence_penalty: -3 }, "presence_penalty"],
      ["/responses", { model: model.modelId, input: "hi", presence_penalty: 3 }, "presence_penalty"],
      ["/responses", { model: model.modelId, input: "hi", top_k: 3 }, "top_k"],
    ];
    for (const [path, body, param] of cases) {
      const res = await post(url, path, body);
      const json = await res.json();
      assert.equal(res.status, 400, `${path} ${JSON.stringify(body)}`);
      assert.equal(json.error.param, param, `${path} ${JSON.stringify(body)}`);
    }
    // The extras vLLM clients send are accepted.
    const ok = await post(url, "/chat/completions", {
      ...chat,
      max_tokens: 4,
      top_k: 20,
      min_p: 0.1,
      repetition_penalty: 1.1,
      presence_penalty: 0.5,
    });
    assert.equal(ok.status, 200);
    await ok.body?.cancel();
  });
});

Deno.test("chat n with structured output and tools: every choice follows its own grammar", async () => {
  await withBundledServer(MODEL_NAME, 8, async (url, model) => {
    const openai = new OpenAI({ baseURL: `${url}/v1`, apiKey: "unused", maxRetries: 0 });
    const schema = {
      type: "object",
      // Closed values, so the tiny model cannot ramble inside a string until max_tokens.
      properties: { city: { enum: ["Paris", "London"] }, sunny: { type: "boolean" } },
      required: ["city", "sunny"],
      additionalProperties: false,
    };
    const shaped = await openai.chat.completions.create({
      model: model.modelId,
      messages: [{ role: "user", content: "Is it sunny in Paris? Answer in JSON." }],
      max_tokens: 200,
      temperature: 1,
      seed: 9,
      n: 3,
      response_format: { type: "json_schema", json_schema: { name: "weather", schema, strict: true } },
    });
    assert.equal(shaped.choices.length, 3);
    for (const c of shaped.choices) {
      assert.equal(c.finish_reason, "stop", JSON.stringify(c.message));
      const value = JSON.parse(c.message.content!) as { city: unknown; sunny: unknown };
      assert.ok(value.city === "Paris" || value.city === "London");
      assert.equal(typeof value.sunny, "boolean");
    }
    const called = await openai.chat.completions.create({
      model: model.modelId,
      messages: [{ role: "user", content: "What is the weather in Paris?" }],
      tools: [{
        type: "function",
        function: {
          name: "get_weather",
          parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
        },
      }],
      tool_choice: "required",
      max_tokens: 200,
      temperature: 0.7,
      seed: 4,
      n: 2,
    });
    assert.equal(called.choices.length, 2);
    for (const c of called.choices) {
      assert.equal(c.finish_reason, "tool_calls");
      const call = c.message.tool_calls![0]! as { function: { name: string; arguments: string } };
      assert.equal(call.function.name, "get_weather");
      assert.equal(typeof (JSON.parse(call.function.arguments) as { city: unknown }).city, "string");
    }
  });
});
