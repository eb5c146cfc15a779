/**
 * The streaming core: engine chunks → split (one token at a time) → parse → emit → sequence → (SSE).
 *
 * Each stage is a synchronous core with its own thin TransformStream, in a file named after it: splitStage
 * (SplitCore), parseStage (ParseCore), emitterStage (ResponseEmitter), sequencerStage (Sequencer), sseEncoder
 * (SseEncoder). The production path does not chain those streams: it runs the same cores inside one fused stream,
 * because the chain costs far more than the 10% the design allows. Measured with `deno task bench pipeline`
 * (bench/pipeline_bench.ts, which alternates the fused stream and `chunks.pipeThrough(split).pipeThrough(parse)
 * .pipeThrough(emit).pipeThrough(sequence).pipeThrough(sse)` within one run, 5 rounds, medians; 2 shared cores):
 *
 *   tokens/step          1            4            8
 *   harmony fused     782k tok/s  2,328k tok/s  3,604k tok/s
 *   harmony staged    242k (0.31×)  850k (0.37×) 1,567k (0.43×)
 *   simple  fused     731k        1,959k        2,970k
 *   simple  staged    235k (0.32×)  809k (0.41×) 1,447k (0.49×)
 *
 *   allocation (o200k harmony, bytes/step)   1 token/step   4 tokens/step
 *   fused stream                              3,601          4,582
 *   staged chain                             11,459         12,685
 *   API path (tap + recorder), fused          3,753          4,837
 *   API path (tap + recorder), staged        14,798         16,151
 *
 * Over three such runs the chain reached 0.26–0.50× the fused stream's tokens/s and allocated 3–4× its bytes per
 * step: each stage boundary is a queued chunk, a read result and its promises per step, where the fused stream
 * crosses one boundary per step.
 *
 * Hooks are arguments, never found behind the caller's back: the generation's chunk hooks (metrics, abort on cancel)
 * come as `tap`, the server's abort-as-error as `abortAs`, the event log as `onEvents`. A chunk always carries a whole
 * engine step, never one token.
 */
import type { EngineChunk } from "../engine/engine.ts";
import type { Tokenizer } from "../checkpoint/tokenizer.ts";
import type { OutputParser, Segment } from "../parsers/segment.ts";
import type { ChunkTap } from "./chunk_tap.ts";
import { ResponseEmitter } from "./emitter_stage.ts";
import { type IdSource, randomIds } from "./ids.ts";
import { ParseCore } from "./parse_stage.ts";
import { SplitCore } from "./split_stage.ts";
import type { ResponseTemplate } from "./response_template.ts";
import { Sequencer } from "./sequencer_stage.ts";
import { SseEncoder } from "./sse_encoder.ts";
import type { Response, ResponseStreamEvent, UnsequencedEvent } from "./types.ts";

export type { AbortAsError, ParsedChunk } from "./parsed_chunk.ts";
import type { AbortAsError } from "./parsed_chunk.ts";
export type { ResponseTemplate } from "./response_template.ts";
export { parseStage } from "./parse_stage.ts";
export { type SplitChunk, splitStage } from "./split_stage.ts";
export { sseEncoder } from "./sse_encoder.ts";
export { emitterStage } from "./emitter_stage.ts";
export { sequencerStage } from "./sequencer_stage.ts";
export { type ChunkTap, tapChunks } from "./chunk_tap.ts";

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
  /** An abort the server caused is reported as this error (`error` + `response.failed`) instead of cancelling. */
  readonly abortAs?: () => AbortAsError | undefined;
  /** See EmitterOptions.sealReasoning. */
  readonly sealReasoning?: (text: string) => string;
  /** The engine stream's hooks (api/generation.ts), called inline as the pipeline reads it, in chunk order. */
  readonly tap?: ChunkTap;
}

interface Cores {
  readonly tap: ChunkTap | undefined;
  readonly split: SplitCore;
  readonly parse: ParseCore;
  readonly emitter: ResponseEmitter;
  readonly sequencer: Sequencer;
}

function cores(options: PipelineOptions): Cores {
  return {
    tap: options.tap,
    split: new SplitCore(options.tokenizer, options.includeLogprobs ?? false),
    parse: new ParseCore(options.parser, options.abortAs),
    emitter: new ResponseEmitter({
      template: options.template,
      ids: options.ids ?? randomIds,
      ...(options.clock === undefined ? {} : { clock: options.clock }),
      ...(options.sealReasoning === undefined ? {} : { sealReasoning: options.sealReasoning }),
    }),
    sequencer: new Sequencer(),
  };
}

/**
 * Pulls engine chunks through split, parse and emit and hands `deliver` the (unsequenced) events of each step that produced
 * any, then null after the emitter's finish. A failing engine stream becomes an `error` finish so the client still
 * gets `error` + `response.failed` (§5.12 #115).
 *
 * Per step it allocates one events array and the read's promises, nothing else of its own: promise handlers are
 * bound once, segments go through one reused buffer, and the chunk hooks (`tap`) are called inline.
 */
class StepPump {
  readonly #reader: ReadableStreamDefaultReader<EngineChunk>;
  readonly #tap: ChunkTap | undefined;
  readonly #split: SplitCore;
  readonly #parse: ParseCore;
  readonly #emitter: ResponseEmitter;
  readonly #deliver: (events: UnsequencedEvent[] | null) => void;
  readonly #segments: Segment[] = [];
  readonly #onRead = (r: ReadableStreamReadResult<EngineChunk>) => this.#read(r);
  readonly #onError = (e: unknown) => this.#failed(e);

  constructor(
    chunks: ReadableStream<EngineChunk>,
    { tap, split, parse, emitter }: Cores,
    deliver: (events: UnsequencedEvent[] | null) => void,
  ) {
    this.#tap = tap;
    this.#reader = chunks.getReader();
    this.#split = split;
    this.#parse = parse;
    this.#emitter = emitter;
    this.#deliver = deliver;
  }

  /** Delivers the opening events. */
  start(): void {
    const events: UnsequencedEvent[] = [];
    this.#emitter.startInto(events);
    this.#deliver(events);
  }

  /** Delivers the next step's events, or null once the finish was delivered. */
  pull(): Promise<void> | undefined {
    if (this.#emitter.ended) {
      this.#cancelSource(undefined);
      this.#deliver(null);
      return undefined;
    }
    return this.#reader.read().then(this.#onRead, this.#onError);
  }

  cancel(reason: unknown): Promise<void> {
    this.#tap?.cancel();
    return this.#reader.cancel(reason);
  }

  #cancelSource(reason: unknown): void {
    this.#tap?.cancel();
    this.#reader.cancel(reason).catch(() => {});
  }

  #read(r: ReadableStreamReadResult<EngineChunk>): Promise<void> | undefined {
    const events: UnsequencedEvent[] = [];
    if (r.done) {
      this.#tap?.end();
      for (const p of this.#parse.flush()) this.#emitter.pushInto(p, events);
    } else {
      const chunk = r.value;
      this.#tap?.chunk(chunk);
      switch (chunk.type) {
        case "step": {
          const split = this.#split;
          const count = split.split(chunk);
          const logprobs = split.includeLogprobs && chunk.logprobs !== undefined ? split.logprobs : undefined;
          const n = this.#parse.tokensInto(split.tokens, logprobs, count, this.#segments);
          this.#emitter.pushSegments(this.#segments, n, events);
          break;
        }
        case "finish":
          for (const p of this.#parse.push(chunk)) this.#emitter.pushInto(p, events);
          break;
        default: {
          const never: never = chunk;
          throw new Error(`unknown engine chunk ${JSON.stringify(never)}`);
        }
      }
    }
    return this.#settle(events);
  }

  #failed(e: unknown): Promise<void> | undefined {
    this.#tap?.end();
    const message = e instanceof Error ? e.message : String(e);
    const events: UnsequencedEvent[] = [];
    const parsed = this.#parse.push({ type: "finish", reason: "error", promptTokens: 0, outputTokens: 0, message });
    for (const p of parsed) this.#emitter.pushInto(p, events);
    return this.#settle(events);
  }

  /** A step that produced no event (e.g. inside a header) is not delivered: the next one is read instead. */
  #settle(events: UnsequencedEvent[]): Promise<void> | undefined {
    if (events.length === 0) return this.pull();
    this.#deliver(events);
    return undefined;
  }
}

/** Streaming: one array of sequenced events per engine step that produced events (never one chunk per token). */
export function responseEventStream(
  chunks: ReadableStream<EngineChunk>,
  options: PipelineOptions,
): ReadableStream<ResponseStreamEvent[]> {
  return eventStream(chunks, cores(options));
}

function eventStream(chunks: ReadableStream<EngineChunk>, c: Cores): ReadableStream<ResponseStreamEvent[]> {
  let pump!: StepPump;
  return new ReadableStream<ResponseStreamEvent[]>({
    start(controller) {
      pump = new StepPump(chunks, c, (events) => {
        if (events === null) controller.close();
        else controller.enqueue(c.sequencer.stamp(events));
      });
      pump.start();
    },
    pull: () => pump.pull(),
    cancel: (reason) => pump.cancel(reason),
  }, { highWaterMark: 0 });
}

/**
 * Token ids to SSE bytes in one stream: the same cores as `responseEventStream` piped through `sseEncoder`, fused
 * so a step crosses a single stream boundary. `onEvents` sees every sequenced array before it is encoded (for an
 * event log); when it returns a promise (an event log that must commit the terminal event before it is sent), that
 * step's bytes and everything after them wait for it, in order.
 */
export function responseSseStream(
  chunks: ReadableStream<EngineChunk>,
  options: PipelineOptions,
  onEvents?: (events: readonly ResponseStreamEvent[]) => unknown,
): ReadableStream<Uint8Array> {
  const c = cores(options);
  const sse = new SseEncoder();
  let pump!: StepPump;
  /** Set while a step waits for its `onEvents` promise: later output queues behind it. */
  let waiting: Promise<void> | null = null;
  return new ReadableStream<Uint8Array>({
    start(controller) {
      const emit = (out: () => void) => {
        if (waiting === null) return out();
        // Deferred output may find the stream already cancelled by its reader: nothing is left to send then.
        waiting = waiting.then(() => {
          try {
            out();
          } catch {
            // Cancelled meanwhile.
          }
        });
      };
      pump = new StepPump(chunks, c, (events) => {
        if (events === null) return emit(() => controller.close());
        const sequenced = c.sequencer.stamp(events);
        const wait = onEvents?.(sequenced);
        if (wait instanceof Promise) {
          const bytes = sse.encode(sequenced);
          const before = waiting ?? Promise.resolve();
          waiting = before.then(() => wait).catch(() => {});
          emit(() => controller.enqueue(bytes));
        } else {
          emit(() => controller.enqueue(sse.encode(sequenced)));
        }
      });
      pump.start();
    },
    pull: () => pump.pull(),
    cancel: (reason) => pump.cancel(reason),
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
