/**
 * Chat Completions from the same stages as the Responses pipeline: engine chunks → split → parse → chat deltas →
 * SSE `chat.completion.chunk` frames, or the collected message for the non-streamed form.
 *
 * A streamed completion always ends with exactly one of: a frame carrying `finish_reason` (then the usage frame when
 * asked for) or an error frame for a generation that did not run to its end — then `data: [DONE]`. A truncated
 * message never looks finished.
 */
import type { EngineChunk, FinishReason } from "../engine/engine.ts";
import type { Tokenizer } from "../checkpoint/tokenizer.ts";
import type { Logprob } from "../parsers/logprob.ts";
import type { OutputParser } from "../parsers/segment.ts";
import { type ChatDelta, ChatDeltaCore } from "./chat_delta.ts";
import type { ChunkTap } from "./chunk_tap.ts";
import type { IdSource } from "./ids.ts";
import { ParseCore } from "./parse_stage.ts";
import type { ParsedChunk } from "./parsed_chunk.ts";
import { SplitCore } from "./split_stage.ts";
import type { Usage } from "./types.ts";

export interface ChatPipelineOptions {
  readonly tokenizer: Tokenizer;
  /** Fresh per generation, from ChatFormat.createParser. */
  readonly parser: OutputParser;
  readonly includeLogprobs: boolean;
  /** Call-id source for tool calls the model gave no id. Default: random ids. */
  readonly ids?: IdSource;
  /** The engine stream's hooks (api/generation.ts), called inline as the pipeline reads it, in chunk order. */
  readonly tap?: ChunkTap;
}

export interface ChatStreamOptions extends Omit<ChatPipelineOptions, "parser"> {
  readonly head: { readonly id: string; readonly created: number; readonly model: string };
  /** `stream_options.include_usage`. */
  readonly includeUsage: boolean;
  /** The error body sent instead of a finish_reason when the generation did not run to its end; null when it did. */
  readonly failure: (reason: FinishReason) => unknown | null;
}

/** Usage in the Chat Completions shape. */
export function chatUsage(u: Usage) {
  return {
    prompt_tokens: u.input_tokens,
    completion_tokens: u.output_tokens,
    total_tokens: u.total_tokens,
    prompt_tokens_details: { cached_tokens: u.input_tokens_details.cached_tokens },
    completion_tokens_details: { reasoning_tokens: u.output_tokens_details.reasoning_tokens },
  };
}

/**
 * Engine chunks → parsed chunks through the split and parse cores, calling the chunk hooks inline; a failing engine
 * stream becomes an error finish.
 */
class ChatReader {
  readonly #reader: ReadableStreamDefaultReader<EngineChunk>;
  readonly #tap: ChunkTap | undefined;
  readonly #split: SplitCore;
  readonly #parse: ParseCore;

  constructor(chunks: ReadableStream<EngineChunk>, options: ChatPipelineOptions) {
    this.#reader = chunks.getReader();
    this.#tap = options.tap;
    this.#split = new SplitCore(options.tokenizer, options.includeLogprobs);
    this.#parse = new ParseCore(options.parser);
  }

  async next(): Promise<ParsedChunk[]> {
    let r: ReadableStreamReadResult<EngineChunk>;
    try {
      r = await this.#reader.read();
    } catch (e) {
      this.#tap?.end();
      const message = e instanceof Error ? e.message : String(e);
      return this.#parse.push({ type: "finish", reason: "error", promptTokens: 0, outputTokens: 0, message });
    }
    if (r.done) {
      this.#tap?.end();
      return this.#parse.flush();
    }
    this.#tap?.chunk(r.value);
    return this.#parse.push(this.#split.push(r.value));
  }

  cancel(reason: unknown): Promise<void> {
    this.#tap?.cancel();
    return this.#reader.cancel(reason);
  }
}

/** The whole completion, for the non-streamed form. */
export async function collectChatCompletion(
  chunks: ReadableStream<EngineChunk>,
  options: ChatPipelineOptions,
): Promise<{ readonly message: ChatDeltaCore; readonly reason: FinishReason; readonly usage: Usage }> {
  const reader = new ChatReader(chunks, options);
  const core = new ChatDeltaCore(options.ids);
  for (;;) {
    for (const p of await reader.next()) {
      switch (p.type) {
        case "segments":
          core.push(p.segments);
          break;
        case "finish":
          return { message: core, reason: p.reason, usage: p.usage };
        default: {
          const never: never = p;
          throw new Error(`unknown parsed chunk ${JSON.stringify(never)}`);
        }
      }
    }
  }
}

/** One choice of a streamed completion: its engine stream, that stream's hooks, and its own parser. */
export interface ChatChoiceSource {
  readonly chunks: ReadableStream<EngineChunk>;
  readonly tap?: ChunkTap;
  readonly parser: OutputParser;
}

/**
 * Usage of several choices answering one prompt: the prompt (and what the prefix cache served of it) counts once,
 * the output tokens of every choice add up.
 */
export function choicesUsage(usages: readonly Usage[]): Usage {
  const first = usages[0];
  if (first === undefined) throw new RangeError("choicesUsage: no choice");
  const output = usages.reduce((n, u) => n + u.output_tokens, 0);
  return {
    input_tokens: first.input_tokens,
    input_tokens_details: { ...first.input_tokens_details },
    output_tokens: output,
    output_tokens_details: {
      reasoning_tokens: usages.reduce((n, u) => n + u.output_tokens_details.reasoning_tokens, 0),
    },
    total_tokens: first.input_tokens + output,
  };
}

interface ChoiceState {
  readonly reader: ChatReader;
  readonly core: ChatDeltaCore;
  pending: Promise<{ readonly index: number; readonly parsed: ParsedChunk[] }> | null;
  done: boolean;
}

/**
 * The streamed completion as SSE bytes: one write per engine step that produced deltas. With several choices each
 * frame carries its choice's `index`, choices interleave as their steps arrive, each ends with its own
 * `finish_reason`, and the usage frame (when asked for) and `[DONE]` follow the last. A choice that fails sends the
 * error frame and ends the stream (the other choices are cancelled).
 */
export function chatCompletionSseStream(
  choices: readonly ChatChoiceSource[],
  options: ChatStreamOptions,
): ReadableStream<Uint8Array> {
  const { head, includeUsage, includeLogprobs } = options;
  const utf8 = new TextEncoder();
  const prefix = `{"id":${JSON.stringify(head.id)},"object":"chat.completion.chunk","created":${head.created},` +
    `"model":${JSON.stringify(head.model)},"choices":[{"index":`;
  const suffix = includeUsage ? `}],"usage":null}` : `}]}`;
  const frame = (index: number, delta: ChatDelta, lps: readonly Logprob[] | null, finish: string | null) =>
    `data: ${prefix}${index},"delta":${JSON.stringify(delta)},"logprobs":${
      lps === null ? "null" : JSON.stringify({ content: lps, refusal: null })
    },"finish_reason":${finish === null ? "null" : JSON.stringify(finish)}${suffix}\n\n`;
  const states: ChoiceState[] = choices.map((c) => ({
    reader: new ChatReader(c.chunks, {
      ...options,
      parser: c.parser,
      ...(c.tap === undefined ? {} : { tap: c.tap }),
    }),
    core: new ChatDeltaCore(options.ids),
    pending: null,
    done: false,
  }));
  const usages: Usage[] = [];
  let done = false;
  const cancelAll = (reason: unknown) => Promise.all(states.map((s) => s.reader.cancel(reason))).then(() => {});
  const next = (): Promise<{ readonly index: number; readonly parsed: ParsedChunk[] }> => {
    states.forEach((s, index) => {
      if (!s.done && s.pending === null) s.pending = s.reader.next().then((parsed) => ({ index, parsed }));
    });
    return Promise.race(states.flatMap((s) => s.pending === null ? [] : [s.pending]));
  };
  return new ReadableStream<Uint8Array>({
    start(controller) {
      let text = "";
      states.forEach((_, i) => text += frame(i, { role: "assistant", content: "" }, includeLogprobs ? [] : null, null));
      controller.enqueue(utf8.encode(text));
    },
    async pull(controller) {
      if (done) return;
      let text = "";
      // With highWaterMark 0 a pull that enqueues nothing is never repeated: read until there is something to send.
      while (text === "" && !done) {
        const { index, parsed } = await next();
        const state = states[index]!;
        state.pending = null;
        for (const p of parsed) {
          if (p.type === "segments") {
            for (const d of state.core.push(p.segments)) {
              text += frame(index, d.delta, includeLogprobs ? d.logprobs : null, null);
            }
            continue;
          }
          // The only other parsed chunk: a new variant fails to compile here.
          const finish: Extract<ParsedChunk, { type: "finish" }> = p;
          state.done = true;
          const failure = options.failure(finish.reason);
          if (failure !== null) {
            done = true;
            text += `data: ${JSON.stringify(failure)}\n\n`;
            await cancelAll("another choice failed");
          } else {
            text += frame(index, {}, null, state.core.finishReason(finish.reason));
            usages.push(finish.usage);
            if (states.every((s) => s.done)) {
              done = true;
              if (includeUsage) {
                text += `data: ${
                  JSON.stringify({
                    ...head,
                    object: "chat.completion.chunk",
                    choices: [],
                    usage: chatUsage(choicesUsage(usages)),
                  })
                }\n\n`;
              }
            }
          }
          if (done) text += "data: [DONE]\n\n";
          break;
        }
      }
      if (text !== "") controller.enqueue(utf8.encode(text));
      if (done) controller.close();
    },
    cancel: cancelAll,
  }, { highWaterMark: 0 });
}
