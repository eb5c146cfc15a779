/**
 * The openai client against rill serving a real ONNX model: the bundled model when it exists, else the tiny
 * random-weight fixture (whose arbitrary output only the framing/lifecycle invariants can judge).
 */
import assert from "node:assert/strict";
import OpenAI from "openai";
import { parseServeArgs, type ServeConfig } from "../../server/cli_options.ts";
import { Logger } from "../../server/logger.ts";
import { SqliteStore } from "../../api/store/sqlite_store.ts";
import { loadServedModel } from "../../server/serve.ts";
import { createServer } from "../../server/server.ts";
import { validateSSE } from "../../conformance/validator.ts";
import { sseTap } from "../../testing/sse_tap.ts";

const BUNDLED = "models/rill-tiny-harmony";
const FIXTURE = "tests/fixtures/tiny-random";

async function modelDir(): Promise<{ dir: string; random: boolean }> {
  try {
    await Deno.stat(`${BUNDLED}/onnx/model.onnx`);
    return { dir: BUNDLED, random: false };
  } catch {
    return { dir: FIXTURE, random: true };
  }
}

Deno.test("openai client against a real ONNX model: streamed, non-streamed, chat", async () => {
  const { dir, random } = await modelDir();
  const config = parseServeArgs([dir, "--port", "0", "--data-dir", ":memory:"], () => undefined) as ServeConfig;
  const model = await loadServedModel(config, new Logger("text", () => {}));
  const store = SqliteStore.open(":memory:");
  const server = createServer({ ...model, store, port: 0 });
  const { fetch: tapped, bodies } = sseTap();
  const client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: "x", maxRetries: 0, fetch: tapped });
  try {
    const request = { model: model.modelId, input: "Say hello.", max_output_tokens: 24, temperature: 0 };
    const final = await client.responses.stream(request).finalResponse();
    assert.ok(final.status === "completed" || final.status === "incomplete", String(final.status));
    assert.ok(final.usage !== undefined && final.usage !== null && final.usage.output_tokens <= 24);
    const plain = await client.responses.create(request);
    assert.deepEqual(plain.output.map((i) => i.type), final.output.map((i) => i.type));
    assert.equal(plain.usage?.output_tokens, final.usage.output_tokens);
    for (const body of await Promise.all(bodies)) {
      const { violations } = validateSSE(body, { allowMarkup: random, allowReplacementChar: random });
      assert.deepEqual(violations, []);
    }
    const chat = await client.chat.completions.create({
      model: model.modelId,
      messages: [{ role: "user", content: "Say hello." }],
      max_completion_tokens: 16,
      temperature: 0,
    });
    assert.ok(chat.usage !== undefined && chat.usage.completion_tokens <= 16);
  } finally {
    await server.shutdown(1000);
    await model.engine.close();
    await store.close();
  }
});
