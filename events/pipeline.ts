/**
 * The streaming core: engine chunks → parse (one token per parser push) → emit → sequence → (SSE).
 *
 * Each stage is a synchronous core with its own thin TransformStream (parseStage, emitterStage, sequencerStage,
 * sseEncoder). `responseEventStream` composes the three cores inside one stream instead of chaining three
 * TransformStreams: the result is the same, but each engine step crosses one stream boundary instead of three,
 * which is most of the per-step cost. A chunk always carries a whole engine step, never one token.
 */
import type { EngineChunk } from "../engine/engine.ts";
import type { Tokenizer } from "../engine/tokenizer.ts";
import type { OutputParser } from "../parsers/segment.ts";
import { ResponseEmitter } from "./emitter.ts";
import { type IdSource, randomIds } from "./ids.ts";
import type { ParsedChunk } from "./parsed_chunk.ts";
import { ParseCore } from "./parse_stage.ts";
import type { ResponseTemplate } from "./response_template.ts";
import { Sequencer } from "./sequencer.ts";
import { SseEncoder } from "./sse.ts";
import type { Response, ResponseStreamEvent, UnsequencedEvent } from "./types.ts";

export type { ParsedChunk } from "./parsed_chunk.ts";
export type { ResponseTemplate } from "./response_template.ts";
export { parseStage } from "./parse_stage.ts";
export { sseEncoder } from "./sse.ts";
export { emitterStage } from "./emitter.ts";
export { sequencerStage } from "./sequencer.ts";

export interface PipelineOptions {
  readonly template: ResponseTemplate;
  readonly tokenizer: Tokenizer;
  /** Fresh per generation, from ChatFormat.createParser. */
  readonly parser: OutputParser;
  /** Item-id source (tests: deterministic). Default: random ids. */
  readonly ids?: IdSource;
  /** include: ["message.output_text.logprobs"] */
  readonly includeLogprobs?: boolean;
  /** Unix seconds, for completed_at. */
  readonly clock?: () => number;
}

interface Cores {
  readonly parse: ParseCore;
  readonly emitter: ResponseEmitter;
  readonly sequencer: Sequencer;
}

function cores(options: PipelineOptions): Cores {
  return {
    parse: new ParseCore(options.tokenizer, options.parser, options.includeLogprobs ?? false),
    emitter: new ResponseEmitter({
      template: options.template,
      ids: options.ids ?? randomIds,
      ...(options.clock === undefined ? {} : { clock: options.clock }),
    }),
    sequencer: new Sequencer(),
  };
}

/**
 * Pulls engine chunks and returns the events of each (unsequenced), ending after the emitter's finish. A failing
 * engine stream becomes an `error` finish so the client still gets `error` + `response.failed` (§5.12 #115).
 */
function eventSource(
  chunks: ReadableStream<EngineChunk>,
  { parse, emitter }: Cores,
): { next(): Promise<UnsequencedEvent[] | null>; cancel(reason: unknown): Promise<void> } {
  const reader = chunks.getReader();
  return {
    async next() {
      for (;;) {
        if (emitter.ended) {
          reader.cancel().catch(() => {});
          return null;
        }
        let parsed: ParsedChunk[];
        try {
          const r = await reader.read();
          parsed = r.done ? parse.flush() : parse.push(r.value);
        } catch (e) {
          const message = e instanceof Error ? e.message : String(e);
          parsed = parse.push({ type: "finish", reason: "error", promptTokens: 0, outputTokens: 0, message });
        }
        let events: UnsequencedEvent[] | null = null;
        for (const p of parsed) {
          const produced = emitter.push(p);
          if (events === null) events = produced;
          else for (const e of produced) events.push(e);
        }
        if (events !== null && events.length > 0) return events;
      }
    },
    cancel: (reason) => reader.cancel(reason),
  };
}

/** Streaming: one array of sequenced events per engine step that produced events (never one chunk per token). */
export function responseEventStream(
  chunks: ReadableStream<EngineChunk>,
  options: PipelineOptions,
): ReadableStream<ResponseStreamEvent[]> {
  return eventStream(chunks, cores(options));
}

function eventStream(chunks: ReadableStream<EngineChunk>, c: Cores): ReadableStream<ResponseStreamEvent[]> {
  const source = eventSource(chunks, c);
  return new ReadableStream<ResponseStreamEvent[]>({
    start(controller) {
      controller.enqueue(c.sequencer.stamp(c.emitter.start()));
    },
    async pull(controller) {
      const events = await source.next();
      if (events === null) controller.close();
      else controller.enqueue(c.sequencer.stamp(events));
    },
    cancel: (reason) => source.cancel(reason),
  }, { highWaterMark: 0 });
}

/**
 * Token ids to SSE bytes in one stream: the same cores as `responseEventStream` piped through `sseEncoder`, fused
 * so a step crosses a single stream boundary. `onEvents` sees every sequenced array before it is encoded (for an
 * event log).
 */
export function responseSseStream(
  chunks: ReadableStream<EngineChunk>,
  options: PipelineOptions,
  onEvents?: (events: readonly ResponseStreamEvent[]) => void,
): ReadableStream<Uint8Array> {
  const c = cores(options);
  const source = eventSource(chunks, c);
  const sse = new SseEncoder();
  const emit = (controller: ReadableStreamDefaultController<Uint8Array>, events: UnsequencedEvent[]) => {
    const sequenced = c.sequencer.stamp(events);
    onEvents?.(sequenced);
    controller.enqueue(sse.encode(sequenced));
  };
  return new ReadableStream<Uint8Array>({
    start(controller) {
      emit(controller, c.emitter.start());
    },
    async pull(controller) {
      const events = await source.next();
      if (events === null) controller.close();
      else emit(controller, events);
    },
    cancel: (reason) => source.cancel(reason),
  }, { highWaterMark: 0 });
}

/**
 * Non-streaming: the same pipeline, collected. `response` is the terminal event's response object; for an
 * aborted generation (no terminal event exists) it is the emitter's "cancelled" response.
 */
export async function collectResponse(
  chunks: ReadableStream<EngineChunk>,
  options: PipelineOptions,
): Promise<{ response: Response; events: ResponseStreamEvent[] }> {
  const c = cores(options);
  const events: ResponseStreamEvent[] = [];
  for await (const step of eventStream(chunks, c)) for (const e of step) events.push(e);
  const response = c.emitter.response;
  if (response === null) throw new Error("pipeline ended without a finish");
  return { response, events };
}
