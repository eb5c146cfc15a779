/**
 * Prefix-cache hits reach the client: a repeated long prompt is served partly from cached KV blocks, and the usage
 * says so (`input_tokens_details.cached_tokens` on Responses, `prompt_tokens_details.cached_tokens` on Chat). The
 * engine runs over a fake model that shares prefix blocks (testing/history_backend.ts), and over the bundled model on
 * ONNX split across two shards (sessions), which share one pool of prefix blocks.
 */
import assert from "node:assert/strict";
import { SqliteStore } from "../../api/store/sqlite_store.ts";
import { createServer } from "../../server/server.ts";
import { createEngine, LlmEngine } from "../../engine/llm_engine.ts";
import { loadModel } from "../../prompt/load_model.ts";
import { HistoryBackend } from "../../testing/history_backend.ts";
import { withBundledServer } from "../../testing/bundled_server.ts";
import { describeBackend } from "../../engine/backends/create_backend.ts";

const FIXTURE = "tests/fixtures/tiny-random";

Deno.test("a repeated prompt reports cached tokens in usage on Responses and Chat, and in /metrics", async () => {
  const loaded = await loadModel(FIXTURE);
  const backend = new HistoryBackend({ vocabSize: loaded.config.vocabSize, numBlocks: 256, maxPositions: 512 });
  const engine = createEngine(backend.sampled(), { tokenizer: loaded.tokenizer, maxModelLen: 512 });
  const store = SqliteStore.open(":memory:");
  const server = createServer({ engine, format: loaded.format, modelId: "tiny", store, port: 0 });
  const text = "Tell me about the weather in Paris, in Lyon and in Marseille, in detail, please.";
  try {
    const post = async (path: string, body: unknown) => {
      const r = await fetch(`${server.url}/v1/${path}`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify(body),
      });
      assert.equal(r.status, 200);
      return await r.json();
    };
    const responses = () =>
      post("responses", { model: "tiny", input: text, max_output_tokens: 4, temperature: 0, store: false });
    const first = await responses();
    const second = await responses();
    const inputTokens = first.usage.input_tokens;
    assert.ok(inputTokens > 32);
    assert.equal(first.usage.input_tokens_details.cached_tokens, 0);
    // Whole 16-token blocks before the last prompt token come from the cache.
    assert.equal(second.usage.input_tokens_details.cached_tokens, Math.floor((inputTokens - 1) / 16) * 16);
    const chat = () =>
      post("chat/completions", { model: "tiny", messages: [{ role: "user", content: text }], max_tokens: 4 });
    await chat();
    const again = await chat();
    assert.ok(again.usage.prompt_tokens_details.cached_tokens >= 16, JSON.stringify(again.usage));
    const metrics = await (await fetch(`${server.url}/metrics`)).text();
    const hits = Number(/^rill_prefix_cache_hits_total\{[^}]*\} (\d+)$/m.exec(metrics)?.[1]);
    assert.ok(hits >= second.usage.input_tokens_details.cached_tokens + 16, metrics);
    assert.match(metrics, /^rill_kv_cache_blocks_total\{[^}]*\} 256$/m);
  } finally {
    await server.shutdown(1000);
    await engine.close();
    await store.close();
  }
});

Deno.test("ONNX on 2 shards: a repeated long prompt, and one sharing its prefix, are served from cached blocks", async () => {
  const args = ["--backend", "onnx", "--shards", "2", "--prefix-cache", "on"];
  await withBundledServer("rill-tiny-harmony", 16, async (url, model) => {
    const text = Array.from({ length: 24 }, (_, i) => `Item ${i + 1}: the weather in Paris is mild today.`).join(" ");
    const usage = async (input: string) => {
      const r = await fetch(`${url}/v1/responses`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ model: model.modelId, input, max_output_tokens: 4, temperature: 0, store: false }),
      });
      assert.equal(r.status, 200);
      return (await r.json()).usage as { input_tokens: number; input_tokens_details: { cached_tokens: number } };
    };
    const first = await usage(text);
    const n = first.input_tokens;
    assert.ok(n > 320 && n < 900, `${n} prompt tokens`);
    assert.equal(first.input_tokens_details.cached_tokens, 0);
    const again = await usage(text);
    assert.equal(again.input_tokens, n);
    assert.equal(again.input_tokens_details.cached_tokens, Math.floor((n - 1) / 16) * 16);
    // Same prefix, another ending: the whole blocks before the two prompts part come from the cache.
    const other = await usage(`${text} Item 25: and in Lyon it rains.`);
    const cached = other.input_tokens_details.cached_tokens;
    assert.ok(cached >= Math.floor((n - 1) / 16) * 16 - 16 && cached % 16 === 0, `${cached} cached of ${n}`);
    // The served engine is rill's LlmEngine: its backend was the sharded one this test is about.
    assert.ok(model.engine instanceof LlmEngine);
    assert.match(describeBackend(model.engine.backend), /^2 ONNX sessions .*prefix cache/);
  }, args);
});
