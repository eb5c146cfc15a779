/**
 * A gpt-oss checkpoint in the release layout (testing/gptoss_checkpoint.ts: sharded safetensors with MXFP4 experts,
 * random weights, the released o200k_harmony tokenizer and vocabulary) served as a user serves it: `rill serve DIR`
 * with no flag, talked to over HTTP through the openai client. The native library runs its MXFP4 experts, sinks,
 * sliding window and YaRN; prompts render in harmony with the tokenizer's own special ids (reasoning effort included);
 * the framing holds for streamed and non-streamed Responses and Chat Completions. The weights are random, so only
 * framing and determinism are judged: greedy output is the same alone and batched.
 */
import assert from "node:assert/strict";
import OpenAI from "openai";
import { validateSSE } from "../../conformance/validator.ts";
import { loadModel } from "../../prompt/load_model.ts";
import { SMALL_GPTOSS, writeGptOssCheckpoint } from "../../testing/gptoss_checkpoint.ts";
import { spawnServe } from "../../testing/serve_process.ts";
import { sseTap } from "../../testing/sse_tap.ts";
import { withTempDir } from "../../testing/temp_dir.ts";

Deno.test("rill serve DIR on a gpt-oss release-layout checkpoint: native, harmony, streamed and not, greedy deterministic", async () => {
  // Seed 1: its greedy output holds a harmony header addressed to `pirates.axis-beta`, a hosted (MCP) call the request
  // never declared, which must stay text (conformance invariant 73).
  await withTempDir((dir) => writeGptOssCheckpoint(dir, SMALL_GPTOSS, 1), async (dir) => {
    const model = await loadModel(dir, { now: () => new Date("2026-01-01T00:00:00Z") });
    assert.equal(model.tokenizer.vocabSize, 200019, "the released o200k_harmony tokenizer.json");
    assert.equal(model.formatName, "harmony");
    const rendered = model.format.render({
      messages: [{ role: "user", content: "Say hello." }],
      tools: [],
      toolChoice: "auto",
      reasoningEffort: "low",
    });
    assert.ok(rendered.includes(200006) && rendered.includes(200008), "harmony's <|start|> and <|message|> ids");
    assert.ok(model.tokenizer.decode(rendered).includes("Reasoning: low"), "the system message's reasoning effort");

    const server = await spawnServe("main.ts", [
      dir,
      "--port",
      "0",
      "--data-dir",
      ":memory:",
      "--max-model-len",
      "4096",
      "--max-num-seqs",
      "4",
      "--served-model-name",
      "gpt-oss-test",
    ]);
    const { fetch: tapped, bodies } = sseTap();
    const client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: "x", maxRetries: 0, fetch: tapped });
    try {
      const log = server.stderr();
      assert.match(log, /backend: native \(safetensors weights and the native library\)/);
      assert.match(log, /\d+ safetensors shards: \d+\.\d MB/);
      assert.match(log, /GptOss|gpt_oss/);
      assert.doesNotMatch(log, /onnx/i);
      const request = {
        model: "gpt-oss-test",
        input: "Say hello.",
        reasoning: { effort: "low" as const },
        max_output_tokens: 12,
        temperature: 0,
      };
      const streamed = await client.responses.stream(request).finalResponse();
      assert.ok(streamed.status === "completed" || streamed.status === "incomplete", String(streamed.status));
      assert.ok(streamed.usage !== undefined && streamed.usage !== null);
      assert.ok(streamed.usage.output_tokens > 0 && streamed.usage.output_tokens <= 12);
      assert.ok(streamed.usage.input_tokens > 10, "the harmony prompt: system, user, the assistant's start");
      const plain = await client.responses.create(request);
      assert.deepEqual(plain.output.map((i) => i.type), streamed.output.map((i) => i.type));
      assert.equal(plain.usage?.output_tokens, streamed.usage.output_tokens);
      for (const body of await Promise.all(bodies)) {
        const { violations } = validateSSE(body, { allowMarkup: true, allowReplacementChar: true });
        if (violations.length > 0) console.log(body);
        assert.deepEqual(violations, []);
      }
      const chat = () =>
        client.chat.completions.create({
          model: "gpt-oss-test",
          messages: [{ role: "user", content: "Say hello." }],
          max_completion_tokens: 10,
          temperature: 0,
        });
      const alone = await chat();
      assert.ok(alone.usage !== undefined && alone.usage.completion_tokens > 0);
      assert.ok(alone.usage.completion_tokens <= 10);
      const [a, b] = await Promise.all([chat(), chat()]);
      assert.deepEqual(a.choices[0]?.message, alone.choices[0]?.message, "greedy output batched = alone");
      assert.deepEqual(b.choices[0]?.message, alone.choices[0]?.message, "greedy output batched = alone");
    } finally {
      server.child.kill("SIGTERM");
      await server.finish();
    }
  });
});
