/**
 * A tapped chunk stream calls its hooks the same way whether it is read as a stream or taken apart by the pipeline
 * (which reads the source directly and calls the hooks inline).
 */
import assert from "node:assert/strict";
import type { EngineChunk } from "../../engine/engine.ts";
import { type ChunkTap, tapChunks, untap } from "../../events/chunk_tap.ts";
import { CounterIds } from "../../events/ids.ts";
import { type PipelineOptions, responseEventStream, responseSseStream } from "../../events/pipeline.ts";
import { replayTokens } from "../../testing/scripted_engine.ts";
import { ToyTokenizer } from "../../testing/toy_tokenizer.ts";
import { clock, template } from "../../testing/response_fixtures.ts";
import { PlainTextParser } from "../../testing/plain_text_parser.ts";

const tok = new ToyTokenizer();

function options(): PipelineOptions {
  return { template, tokenizer: tok, parser: new PlainTextParser(tok), ids: new CounterIds(), clock };
}

/** A tap that logs its calls, and a source that logs its cancellation into the same log. */
function logged(source: ReadableStream<EngineChunk>) {
  const log: string[] = [];
  const tap: ChunkTap = {
    chunk: (c) => log.push(c.type === "step" ? `step ${c.tokens.join(",")}` : `finish ${c.reason}`),
    end: () => log.push("end"),
    cancel: () => log.push("cancel"),
  };
  const reader = source.getReader();
  const watched = new ReadableStream<EngineChunk>({
    async pull(controller) {
      const r = await reader.read();
      if (r.done) controller.close();
      else controller.enqueue(r.value);
    },
    cancel(reason) {
      log.push(`source cancelled: ${reason}`);
      return reader.cancel(reason);
    },
  }, { highWaterMark: 0 });
  return { log, stream: tapChunks(watched, tap) };
}

const tokens = tok.encode("Hello world");

Deno.test("chunk tap: the pipeline calls the hooks for every chunk, in order, as a reader of the tapped stream would", async () => {
  const read = logged(replayTokens(tokens, { seed: 4 }));
  const chunks = await Array.fromAsync(read.stream);
  const piped = logged(replayTokens(tokens, { seed: 4 }));
  const events = (await Array.fromAsync(responseEventStream(piped.stream, options()))).flat();
  assert.equal(events.at(-1)?.type, "response.completed");
  const expected = chunks.map((c) => c.type === "step" ? `step ${c.tokens.join(",")}` : `finish ${c.reason}`);
  assert.deepEqual(read.log, [...expected, "end"]);
  // The pipeline stops at the finish chunk and cancels its source (a cancel hook after the finish is a no-op for
  // api/generation), instead of reading the end.
  assert.deepEqual(piped.log, [...expected, "cancel", "source cancelled: undefined"]);
  // The same SSE bytes as an untapped source.
  const plain = await new Response(responseSseStream(replayTokens(tokens, { seed: 4 }), options())).text();
  const tapped = await new Response(responseSseStream(logged(replayTokens(tokens, { seed: 4 })).stream, options()))
    .text();
  assert.equal(tapped, plain);
});

Deno.test("chunk tap: cancelling the pipeline calls cancel before the source is cancelled", async () => {
  const piped = logged(replayTokens(tokens, "one"));
  const reader = responseSseStream(piped.stream, options()).getReader();
  await reader.read();
  await reader.read();
  await reader.cancel("client gone");
  assert.deepEqual(piped.log.slice(-2), ["cancel", "source cancelled: client gone"]);
  assert.ok(piped.log[0]?.startsWith("step "));
});

Deno.test("chunk tap: a failing source calls end, and the pipeline still ends with error + response.failed", async () => {
  const log: string[] = [];
  let sent = false;
  const failing = new ReadableStream<EngineChunk>({
    pull(controller) {
      if (sent) return controller.error(new Error("device lost"));
      sent = true;
      controller.enqueue({ type: "step", tokens: tok.encode("Hi") });
    },
  });
  const stream = tapChunks(failing, { chunk: (c) => log.push(c.type), end: () => log.push("end"), cancel: () => {} });
  const events = (await Array.fromAsync(responseEventStream(stream, options()))).flat();
  assert.deepEqual(events.slice(-2).map((e) => e.type), ["error", "response.failed"]);
  assert.deepEqual(log, ["step", "end"]);
});

Deno.test("chunk tap: only an untouched tapped stream is taken apart, and it is locked afterwards", async () => {
  const plain = replayTokens(tokens, "all");
  assert.equal(untap(plain), undefined);
  const fresh = logged(replayTokens(tokens, "all")).stream;
  assert.ok(untap(fresh) !== undefined);
  assert.ok(fresh.locked);
  assert.equal(untap(fresh), undefined);
  const started = logged(replayTokens(tokens, "all"));
  const reader = started.stream.getReader();
  await reader.read();
  reader.releaseLock();
  assert.equal(untap(started.stream), undefined, "a stream already read keeps its own reading");
});
