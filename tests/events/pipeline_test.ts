import type { Logprob } from "../../parsers/logprob.ts";
import assert from "node:assert/strict";
import type { EngineChunk } from "../../engine/engine.ts";
import { CounterIds } from "../../events/ids.ts";
import { ParseCore } from "../../events/parse_stage.ts";
import { SplitCore } from "../../events/split_stage.ts";
import {
  collectResponse,
  emitterStage,
  parseStage,
  type PipelineOptions,
  responseEventStream,
  responseSseStream,
  sequencerStage,
  splitStage,
  sseEncoder,
} from "../../events/pipeline.ts";
import { Sequencer } from "../../events/sequencer_stage.ts";
import { HarmonyParser } from "../../parsers/harmony_parser.ts";
import { ChatmlParser } from "../../parsers/chatml_parser.ts";
import { SseEncoder } from "../../events/sse_encoder.ts";
import type { ResponseStreamEvent } from "../../events/types.ts";
import type { OutputParser, Segment } from "../../parsers/segment.ts";
import { fakeLogprobs, replayTokens, ScriptedEngine } from "../../testing/scripted_engine.ts";
import { ToyTokenizer } from "../../testing/toy_tokenizer.ts";
import { clock, template } from "../../testing/response_fixtures.ts";
import { PlainTextParser } from "../../testing/plain_text_parser.ts";
import * as b from "../../events/builders.ts";

const tok = new ToyTokenizer();

function options(overrides: Partial<PipelineOptions> = {}): PipelineOptions {
  return { template, tokenizer: tok, parser: new PlainTextParser(tok), ids: new CounterIds(), clock, ...overrides };
}

/** Records every push; token 1000+n opens/closes reasoning around it to exercise `inReasoning`. */
class SpyParser implements OutputParser {
  readonly pushes: { token: number; logprob: Logprob | undefined }[] = [];
  inReasoning = false;
  flushed = 0;
  push(token: number, logprob?: Logprob): Segment[] {
    this.pushes.push({ token, logprob });
    if (token === tok.specialId("<think>")) this.inReasoning = true;
    if (token === tok.specialId("</think>")) this.inReasoning = false;
    return [{ kind: "delta", text: String(token) }];
  }
  flush(): Segment[] {
    this.flushed++;
    return [{ kind: "close", reason: "implicit" }];
  }
}

Deno.test("split + parse: every token of a multi-token step reaches the parser alone, one chunk per step", () => {
  const parser = new SpyParser();
  const core = new ParseCore(parser);
  const out = core.push(new SplitCore(tok, false).push({ type: "step", tokens: [65, 66, 67] }));
  assert.deepEqual(parser.pushes.map((p) => p.token), [65, 66, 67]);
  assert.equal(out.length, 1);
  assert.deepEqual(out[0], {
    type: "segments",
    segments: [{ kind: "delta", text: "65" }, { kind: "delta", text: "66" }, { kind: "delta", text: "67" }],
  });
});

Deno.test("parse stage: finish flushes the parser once and reports usage with reasoning tokens", () => {
  const parser = new SpyParser();
  const core = new ParseCore(parser);
  const think = tok.specialId("<think>")!;
  const unthink = tok.specialId("</think>")!;
  core.push({ type: "tokens", tokens: [think, 65, 66, unthink, 67] });
  const out = core.push({ type: "finish", reason: "stop", promptTokens: 10, outputTokens: 5, cachedTokens: 4 });
  assert.equal(parser.flushed, 1);
  assert.deepEqual(out, [
    { type: "segments", segments: [{ kind: "close", reason: "implicit" }] },
    {
      type: "finish",
      reason: "stop",
      usage: {
        input_tokens: 10,
        input_tokens_details: { cached_tokens: 4, cache_write_tokens: 0 },
        output_tokens: 5,
        output_tokens_details: { reasoning_tokens: 4 },
        total_tokens: 15,
      },
    },
  ]);
  assert.deepEqual(core.flush(), [], "flush after finish adds nothing");
  assert.equal(parser.flushed, 1);
});

Deno.test("parse stage: an engine stream without finish ends as an error", () => {
  const core = new ParseCore(new SpyParser());
  const out = core.flush();
  const last = out.at(-1)!;
  assert.ok(last.type === "finish" && last.reason === "error" && last.message !== undefined);
});

Deno.test("split stage: wire logprobs are built from the tokenizer (token text and bytes) only when requested", () => {
  const parser = new SpyParser();
  const core = new ParseCore(parser);
  const e = tok.encodeOrdinary("\u00e9")[0]!;
  const step = { type: "step", tokens: [e], logprobs: [{ logprob: -0.25, top: [{ id: 65, logprob: -2 }] }] } as const;
  core.push(new SplitCore(tok, true).push(step));
  assert.deepEqual(parser.pushes[0]!.logprob, {
    token: "\u00e9",
    bytes: [0xc3, 0xa9],
    logprob: -0.25,
    top_logprobs: [{ token: "A", bytes: [65], logprob: -2 }],
  });
  const off = new SpyParser();
  new ParseCore(off).push(new SplitCore(tok, false).push(step));
  assert.equal(off.pushes[0]!.logprob, undefined);
});

Deno.test("split stage: the reused buffers hold exactly the last step's tokens", () => {
  const split = new SplitCore(tok, true);
  const lp = { logprob: -1, top: [] };
  assert.equal(split.split({ type: "step", tokens: [65, 66, 67], logprobs: [lp, lp, lp] }), 3);
  assert.equal(split.split({ type: "step", tokens: [68], logprobs: [lp] }), 1);
  assert.deepEqual(split.tokens, [68]);
  assert.deepEqual(split.logprobs.map((l) => l.token), ["D"]);
});

Deno.test("split and parse stage streams: steps map to chunks, finish adds flush segments and the finish", async () => {
  const out = await Array.fromAsync(
    replayTokens([65, 66, 67], "one").pipeThrough(splitStage(tok)).pipeThrough(parseStage(new SpyParser())),
  );
  assert.deepEqual(out.map((c) => c.type), ["segments", "segments", "segments", "segments", "finish"]);
});

Deno.test("sequencer: numbers 0,1,2… across calls, only at the top level", () => {
  const seq = new Sequencer();
  const ref = { itemId: "msg_1", outputIndex: 0, contentIndex: 0 };
  const first = seq.stamp([b.outputTextDelta(ref, "a", []), b.outputTextDelta(ref, "b", [])]);
  const second = seq.stamp([b.outputTextDone(ref, "ab", [])]);
  assert.deepEqual([...first, ...second].map((e) => e.sequence_number), [0, 1, 2]);
  assert.equal(seq.next, 3);
  const item = { id: "msg_1", type: "message", role: "assistant", status: "in_progress", content: [] } as const;
  const added = seq.stamp([b.outputItemAdded(0, item)])[0]!;
  assert.ok(added.type === "response.output_item.added" && !("sequence_number" in added.item));
});

Deno.test("SSE encoder: event line equals type, one single-line data JSON, blank line; one chunk per array", async () => {
  const seq = new Sequencer();
  const ref = { itemId: "msg_1", outputIndex: 0, contentIndex: 0 };
  const events = seq.stamp([b.outputTextDelta(ref, "a\nb", []), b.outputTextDone(ref, "a\nb", [])]);
  const text = new SseEncoder().text(events);
  assert.equal(
    text,
    'event: response.output_text.delta\ndata: {"type":"response.output_text.delta","item_id":"msg_1","output_index":0,' +
      '"content_index":0,"delta":"a\\nb","logprobs":[],"sequence_number":0}\n\n' +
      'event: response.output_text.done\ndata: {"type":"response.output_text.done","item_id":"msg_1","output_index":0,' +
      '"content_index":0,"text":"a\\nb","logprobs":[],"sequence_number":1}\n\n',
  );
  const chunks = await Array.fromAsync(ReadableStream.from([events, []]).pipeThrough(sseEncoder()));
  assert.equal(chunks.length, 1);
  assert.equal(new TextDecoder().decode(chunks[0]), text);
});

async function streamed(chunks: ReadableStream<EngineChunk>, o: PipelineOptions): Promise<ResponseStreamEvent[][]> {
  return await Array.fromAsync(responseEventStream(chunks, o));
}

Deno.test("responseEventStream: opening events first, one array per step, sequence numbers contiguous", async () => {
  const tokens = tok.encode("Hello world");
  const arrays = await streamed(replayTokens(tokens, "one", { promptTokens: 4 }), options());
  assert.deepEqual(arrays[0]!.map((e) => e.type), ["response.created", "response.in_progress"]);
  assert.ok(arrays.length <= tokens.length + 2, "never more than one array per engine step");
  const flat = arrays.flat();
  assert.deepEqual(flat.map((e) => e.sequence_number), flat.map((_, i) => i));
  const terminal = flat.at(-1)!;
  assert.ok(terminal.type === "response.completed");
  assert.equal(
    terminal.response.output[0]?.type === "message" && terminal.response.output[0].content[0]?.type,
    "output_text",
  );
  assert.equal(terminal.response.usage?.input_tokens, 4);
  assert.equal(terminal.response.usage?.output_tokens, tokens.length);
});

Deno.test("responseEventStream: a failing engine stream ends with error then response.failed", async () => {
  let sent = false;
  const failing = new ReadableStream<EngineChunk>({
    pull(controller) {
      if (!sent) {
        sent = true;
        controller.enqueue({ type: "step", tokens: tok.encode("Hi") });
      } else controller.error(new Error("device lost"));
    },
  });
  const flat = (await streamed(failing, options())).flat();
  assert.deepEqual(flat.slice(-2).map((e) => e.type), ["error", "response.failed"]);
  const err = flat.at(-2)!;
  assert.ok(err.type === "error" && err.message === "device lost");
});

Deno.test("collectResponse: equals the streamed terminal response, events included", async () => {
  const tokens = tok.encode("caf\u00e9 \u20ac 😀 the end");
  const { response, events } = await collectResponse(replayTokens(tokens, { seed: 3 }), options());
  const flat = (await streamed(replayTokens(tokens, "one"), options())).flat();
  const terminal = flat.at(-1)!;
  assert.ok(terminal.type === "response.completed");
  assert.deepEqual(response, terminal.response);
  const last = events.at(-1)!;
  assert.ok(last.type === "response.completed" && last.response === response, "response is the terminal payload");
  assert.equal(last.sequence_number, events.length - 1);
  assert.equal(
    response.output[0]?.type === "message" && response.output[0].content[0]?.type === "output_text" &&
      response.output[0].content[0].text,
    "caf\u00e9 \u20ac 😀 the end",
  );
});

Deno.test("collectResponse: abort yields a cancelled response and no terminal event", async () => {
  const { response, events } = await collectResponse(
    replayTokens(tok.encode("partial"), "all", { finish: "abort" }),
    options(),
  );
  assert.equal(response.status, "cancelled");
  assert.ok(!events.some((e) => e.type === "response.completed" || e.type === "response.failed"));
});

Deno.test("logprobs flow from engine to delta events when included", async () => {
  const tokens = tok.encode("Hello world");
  const lps = fakeLogprobs(tokens, 2, tok.vocabSize);
  const { events } = await collectResponse(
    replayTokens(tokens, "one", { logprobs: lps }),
    options({ includeLogprobs: true }),
  );
  const deltas = events.filter((e) => e.type === "response.output_text.delta");
  const all = deltas.flatMap((d) => d.type === "response.output_text.delta" ? d.logprobs : []);
  assert.equal(all.length, tokens.length);
  assert.deepEqual(all.map((l) => l.logprob), lps.map((l) => l.logprob));
  assert.ok(all.every((l) => l.top_logprobs.length === 2));
});

Deno.test("responseSseStream: same bytes as responseEventStream piped through sseEncoder", async () => {
  const tokens = tok.encode("Hello world, the end");
  const a = await new Response(
    responseEventStream(replayTokens(tokens, { seed: 9 }), options()).pipeThrough(sseEncoder()),
  ).text();
  const logged: ResponseStreamEvent[] = [];
  const bStream = responseSseStream(replayTokens(tokens, { seed: 9 }), options(), (e) => logged.push(...e));
  const bText = await new Response(bStream).text();
  assert.equal(bText, a);
  assert.equal(new SseEncoder().text(logged), a);
});

Deno.test("reasoning tokens: text a parser releases late (a header recovered at EOS) still counts", async () => {
  const tokens = tok.encode("<|channel|>analysis Hello world");
  const { response } = await collectResponse(
    replayTokens(tokens, "one"),
    options({ parser: new HarmonyParser(tok, { toolNames: [] }) }),
  );
  const item = response.output[0];
  assert.ok(item?.type === "reasoning" && item.content[0]!.text.length > 0, JSON.stringify(response.output));
  assert.ok(response.usage!.output_tokens_details.reasoning_tokens > 0);
  assert.ok(response.usage!.output_tokens_details.reasoning_tokens <= tokens.length);
});

Deno.test("SSE encoder: pre-rendered delta frames equal JSON.stringify, logprobs and every delta family included", async () => {
  const tokens = tok.encode("Hello world caf\u00e9");
  const lps = fakeLogprobs(tokens, 1, tok.vocabSize);
  const { events } = await collectResponse(
    replayTokens(tokens, "one", { logprobs: lps }),
    options({ includeLogprobs: true }),
  );
  const seq = new Sequencer();
  const ref = { itemId: 'fc_"q"', outputIndex: 3, contentIndex: 0 };
  const others = seq.stamp([
    b.reasoningTextDelta(ref, "r\u2028"),
    b.functionCallArgumentsDelta(ref, '{"a":1}'),
    b.mcpCallArgumentsDelta(ref, "{}"),
    b.codeInterpreterCallCodeDelta(ref, "print()"),
    b.functionCallArgumentsDelta(ref, "x"),
  ]);
  for (const list of [events, others]) {
    const plain = list.map((e) => `event: ${e.type}\ndata: ${JSON.stringify(e)}\n\n`).join("");
    assert.equal(new SseEncoder().text(list), plain);
  }
});

Deno.test("cancelling the SSE stream (client gone) cancels the engine stream", async () => {
  const engine = new ScriptedEngine({ tokenizer: tok, script: tok.encode("Hello world, the end of it") });
  const chunks = engine.generate({
    id: "r",
    promptTokens: [1],
    sampling: { temperature: 0, topP: 1, topK: 0, maxTokens: 100, stopTokens: [], stopStrings: [], logprobs: -1 },
  });
  const reader = responseSseStream(chunks, options()).getReader();
  await reader.read();
  await reader.read();
  assert.equal(engine.stats().running, 1);
  await reader.cancel("client went away");
  assert.equal(engine.stats().running, 0);
});

Deno.test("the separate stage streams, chained, give the same bytes as the fused pipeline", async () => {
  const tokens = tok.encode("<think>\nplan\n</think>\n\nHello world");
  const o = options({ parser: new ChatmlParser(tok, { toolNames: [] }) });
  const fused = await new Response(responseSseStream(replayTokens(tokens, { seed: 5 }), o)).text();
  const chained = replayTokens(tokens, { seed: 5 })
    .pipeThrough(splitStage(tok))
    .pipeThrough(parseStage(new ChatmlParser(tok, { toolNames: [] })))
    .pipeThrough(emitterStage({ template, ids: new CounterIds(), clock }))
    .pipeThrough(sequencerStage())
    .pipeThrough(sseEncoder());
  assert.equal(await new Response(chained).text(), fused);
});
