/**
 * A client disconnect against the real engine (tests/fixtures/tiny-random's ONNX backend in createEngine's
 * LlmEngine, not the scripted one): the sequence leaves the batch within one engine step and its KV memory is freed.
 * The backend's steps are paced to STEP_MS, as a real model's are; the fixture's own steps take ~0.4 ms, less than
 * the time the HTTP server needs to notice a closed connection, so "within one step" could not be told apart.
 */
import assert from "node:assert/strict";
import { SqliteStore } from "../../api/store/sqlite_store.ts";
import { createServer } from "../../server/server.ts";
import { createBackend } from "../../engine/backends/create_backend.ts";
import { createEngine } from "../../engine/llm_engine.ts";
import { loadModel } from "../../prompt/load_model.ts";
import type { Backend, BackendInfo, StepBatch, StepResult } from "../../engine/step_batch.ts";

const FIXTURE = "tests/fixtures/tiny-random";
const STEP_MS = 15;

/** The real ONNX backend, each step taking at least STEP_MS. */
class PacedBackend implements Backend {
  constructor(readonly inner: Backend) {}
  get info(): BackendInfo {
    return this.inner.info;
  }
  async step(batch: StepBatch, result: StepResult): Promise<void> {
    await Promise.all([this.inner.step(batch, result), new Promise((r) => setTimeout(r, STEP_MS))]);
  }
  release(seqId: number): void {
    this.inner.release(seqId);
  }
  close(): Promise<void> {
    return this.inner.close();
  }
}

async function until(check: () => boolean, ms: number): Promise<void> {
  const deadline = performance.now() + ms;
  while (!check() && performance.now() < deadline) await new Promise((r) => setTimeout(r, 2));
}

for (const api of ["responses", "chat"] as const) {
  Deno.test(`real engine (${api}): a disconnect aborts within a step and frees the sequence's KV memory`, async () => {
    const loaded = await loadModel(FIXTURE);
    // No stop tokens, so the generation would run to max tokens: only the disconnect can end it early.
    const backend = new PacedBackend(await createBackend(loaded, { maxNumSeqs: 4, maxModelLen: loaded.maxModelLen }));
    const engine = createEngine(backend, {
      tokenizer: loaded.tokenizer,
      maxNumSeqs: 4,
      eosTokenIds: [],
    });
    const format = { ...loaded.format, stopTokens: [] };
    const store = SqliteStore.open(":memory:");
    const server = createServer({ engine, format, modelId: "tiny", store, port: 0 });
    try {
      const controller = new AbortController();
      const body = api === "responses"
        ? { model: "tiny", input: "hi", stream: true, max_output_tokens: 200, temperature: 0 }
        : { model: "tiny", messages: [{ role: "user", content: "hi" }], stream: true, max_tokens: 200 };
      const r = await fetch(`${server.url}/v1/${api === "responses" ? "responses" : "chat/completions"}`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify(body),
        signal: controller.signal,
      });
      assert.equal(r.status, 200);
      const reader = r.body!.getReader();
      await until(() => engine.metrics().generatedTokens >= 3, 5000);
      await reader.read();
      assert.equal(engine.stats().running, 1);
      assert.ok(engine.stats().kvCacheUsage > 0);

      const stepsAtDisconnect = engine.metrics().steps;
      controller.abort();
      await reader.closed.catch(() => {});
      await until(() => engine.stats().running === 0, 5000);
      assert.equal(engine.stats().running, 0);
      assert.equal(engine.stats().waiting, 0);
      assert.equal(engine.stats().kvCacheUsage, 0);
      const generated = engine.metrics().generatedTokens;
      assert.ok(generated < 200, `generated ${generated} tokens: the disconnect did not stop the generation`);
      // The step in flight when the connection closed may finish, plus the one that notices the abort.
      const extra = engine.metrics().steps - stepsAtDisconnect;
      assert.ok(extra <= 2, `${extra} engine steps ran after the disconnect`);
      await until(() => server.active() === 0, 1000);
      const metrics = await (await fetch(`${server.url}/metrics`)).text();
      assert.match(metrics, /rill_requests_aborted_total\{[^}]*\} 1/);
      assert.match(metrics, /rill_num_requests_running\{[^}]*\} 0/);
      assert.match(metrics, /rill_kv_cache_usage_perc\{[^}]*\} 0\n/);
    } finally {
      await server.shutdown(1000);
      await engine.close();
      await store.close();
    }
  });
}
