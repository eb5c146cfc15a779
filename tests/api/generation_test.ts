import assert from "node:assert/strict";
import { cancelUnread, startGeneration, stopOnDisconnect } from "../../api/generation.ts";
import { tapChunks } from "../../events/chunk_tap.ts";
import { Metrics } from "../../api/metrics.ts";
import { ScriptedEngine } from "../../testing/scripted_engine.ts";
import { tokenizer } from "../../testing/test_server.ts";

const sampling = {
  temperature: 0,
  topP: 1,
  topK: 0,
  maxTokens: 100,
  stopTokens: [],
  stopStrings: [],
  logprobs: -1,
} as const;

function setup(stepDelayMs: number) {
  const tok = tokenizer();
  const engine = new ScriptedEngine({ tokenizer: tok, script: tok.encode("one two three four five six"), stepDelayMs });
  const metrics = new Metrics();
  let cancelled = 0;
  const generation = startGeneration(engine, {
    id: "g",
    promptTokens: [1, 2, 3],
    sampling,
    metrics,
    startedAt: performance.now(),
    onCancel: () => cancelled++,
  });
  return { engine, metrics, generation, cancelled: () => cancelled };
}

Deno.test("stopOnDisconnect: a closed connection aborts the engine request at once, though nobody reads the stream", () => {
  const { engine, metrics, generation, cancelled } = setup(1000);
  const connection = new AbortController();
  stopOnDisconnect(new Request("http://rill.test/", { signal: connection.signal }), generation);
  assert.equal(engine.requests[0]!.signal!.aborted, false);
  connection.abort();
  assert.equal(engine.requests[0]!.signal!.aborted, true);
  assert.equal(cancelled(), 1);
  assert.equal(metrics.aborted, 1);
  generation.stop();
  assert.equal(cancelled(), 1, "stopping twice reports once");
  return cancelUnread(generation);
});

Deno.test("stopOnDisconnect: after the finish, the connection closing aborts nothing", async () => {
  const { engine, metrics, generation, cancelled } = setup(0);
  const connection = new AbortController();
  stopOnDisconnect(new Request("http://rill.test/", { signal: connection.signal }), generation);
  const reasons: string[] = [];
  for await (const chunk of tapChunks(generation.source, generation.tap)) {
    if (chunk.type === "finish") reasons.push(chunk.reason);
  }
  await generation.done;
  assert.deepEqual(reasons, ["stop"]);
  connection.abort(); // Deno's legacy behaviour: request.signal also aborts once a response was delivered.
  assert.equal(engine.requests[0]!.signal!.aborted, false);
  assert.equal(cancelled(), 0);
  assert.equal(metrics.aborted, 0);
});
