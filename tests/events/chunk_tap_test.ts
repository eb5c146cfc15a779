/**
 * The chunk hooks are called the same way whether a pipeline receives them as an argument (and calls them inline as
 * it reads the engine's stream) or the stream is wrapped with `tapChunks` for an ordinary reader.
 */
import assert from "node:assert/strict";
import type { EngineChunk } from "../../engine/engine.ts";
import { type ChunkTap, tapChunks } from "../../events/chunk_tap.ts";
import { chatCompletionSseStream, collectChatCompletion } from "../../events/chat_pipeline.ts";
import { CounterIds } from "../../events/ids.ts";
import { type PipelineOptions, responseEventStream, responseSseStream } from "../../events/pipeline.ts";
import { replayTokens } from "../../testing/scripted_engine.ts";
import { ToyTokenizer } from "../../testing/toy_tokenizer.ts";
import { clock, template } from "../../testing/response_fixtures.ts";
import { PlainTextParser } from "../../testing/plain_text_parser.ts";

const tok = new ToyTokenizer();

function options(tap?: ChunkTap): PipelineOptions {
  return {
    template,
    tokenizer: tok,
    parser: new PlainTextParser(tok),
    ids: new CounterIds(),
    clock,
    ...(tap === undefined ? {} : { tap }),
  };
}

/** Hooks that log their calls, and a source that logs its cancellation into the same log. */
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
  return { log, tap, source: watched };
}

const tokens = tok.encode("Hello world");

/** The hook calls a reader of the tapped stream sees, to the end. */
async function readerLog(): Promise<{ log: string[]; chunks: string[] }> {
  const read = logged(replayTokens(tokens, { seed: 4 }));
  const chunks = await Array.fromAsync(tapChunks(read.source, read.tap));
  return {
    log: read.log,
    chunks: chunks.map((c) => c.type === "step" ? `step ${c.tokens.join(",")}` : `finish ${c.reason}`),
  };
}

Deno.test("chunk tap: the pipeline calls the hooks it is given for every chunk, in order, as a tapped stream's reader sees", async () => {
  const read = await readerLog();
  assert.deepEqual(read.log, [...read.chunks, "end"]);
  const piped = logged(replayTokens(tokens, { seed: 4 }));
  const events = (await Array.fromAsync(responseEventStream(piped.source, options(piped.tap)))).flat();
  assert.equal(events.at(-1)?.type, "response.completed");
  // The pipeline stops at the finish chunk and cancels its source (a cancel hook after the finish is a no-op for
  // api/generation), instead of reading the end.
  assert.deepEqual(piped.log, [...read.chunks, "cancel", "source cancelled: undefined"]);
  // The same SSE bytes as without hooks, and as a tapped stream read as an ordinary stream.
  const plain = await new Response(responseSseStream(replayTokens(tokens, { seed: 4 }), options())).text();
  const hooked = logged(replayTokens(tokens, { seed: 4 }));
  assert.equal(await new Response(responseSseStream(hooked.source, options(hooked.tap))).text(), plain);
  const wrapped = logged(replayTokens(tokens, { seed: 4 }));
  const viaStream = await new Response(responseSseStream(tapChunks(wrapped.source, wrapped.tap), options())).text();
  assert.equal(viaStream, plain);
  assert.deepEqual(wrapped.log, [...read.chunks, "cancel", "source cancelled: undefined"]);
});

Deno.test("chunk tap: cancelling the pipeline calls cancel before the source is cancelled", async () => {
  const piped = logged(replayTokens(tokens, "one"));
  const reader = responseSseStream(piped.source, options(piped.tap)).getReader();
  await reader.read();
  await reader.read();
  await reader.cancel("client gone");
  assert.deepEqual(piped.log.slice(-2), ["cancel", "source cancelled: client gone"]);
  assert.ok(piped.log[0]?.startsWith("step "));
});

function failingSource(): ReadableStream<EngineChunk> {
  let sent = false;
  return new ReadableStream<EngineChunk>({
    pull(controller) {
      if (sent) return controller.error(new Error("device lost"));
      sent = true;
      controller.enqueue({ type: "step", tokens: tok.encode("Hi") });
    },
  });
}

Deno.test("chunk tap: a failing source calls end, and the pipeline still ends with error + response.failed", async () => {
  const log: string[] = [];
  const tap: ChunkTap = { chunk: (c) => log.push(c.type), end: () => log.push("end"), cancel: () => {} };
  const events = (await Array.fromAsync(responseEventStream(failingSource(), options(tap)))).flat();
  assert.deepEqual(events.slice(-2).map((e) => e.type), ["error", "response.failed"]);
  assert.deepEqual(log, ["step", "end"]);
  const wrapped: string[] = [];
  const stream = tapChunks(failingSource(), {
    chunk: (c) => wrapped.push(c.type),
    end: () => wrapped.push("end"),
    cancel: () => {},
  });
  await assert.rejects(Array.fromAsync(stream), /device lost/);
  assert.deepEqual(wrapped, log);
});

Deno.test("chunk tap: the chat pipeline calls the hooks it is given, in order, and cancel before the source", async () => {
  const read = await readerLog();
  const collected = logged(replayTokens(tokens, { seed: 4 }));
  const { reason } = await collectChatCompletion(collected.source, {
    tokenizer: tok,
    parser: new PlainTextParser(tok),
    includeLogprobs: false,
    tap: collected.tap,
  });
  assert.equal(reason, "stop");
  // The collector stops at the finish chunk.
  assert.deepEqual(collected.log, read.chunks);

  const streamed = logged(replayTokens(tokens, "one"));
  const reader = chatCompletionSseStream([{
    chunks: streamed.source,
    tap: streamed.tap,
    parser: new PlainTextParser(tok),
  }], {
    tokenizer: tok,
    includeLogprobs: false,
    head: { id: "chatcmpl-1", created: 0, model: "m" },
    includeUsage: false,
    failure: () => null,
  }).getReader();
  await reader.read();
  await reader.read();
  await reader.cancel("client gone");
  assert.ok(streamed.log[0]?.startsWith("step "));
  assert.deepEqual(streamed.log.slice(-2), ["cancel", "source cancelled: client gone"]);

  const failing: string[] = [];
  const failed = await collectChatCompletion(failingSource(), {
    tokenizer: tok,
    parser: new PlainTextParser(tok),
    includeLogprobs: false,
    tap: { chunk: (c) => failing.push(c.type), end: () => failing.push("end"), cancel: () => {} },
  });
  assert.equal(failed.reason, "error");
  assert.deepEqual(failing, ["step", "end"]);
});
