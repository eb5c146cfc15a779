/**
 * Chat Completions from the same stages as the Responses pipeline: engine chunks → split → parse → chat deltas →
 * SSE `chat.completion.chunk` frames, or the collected message for the non-streamed form.
 *
 * A streamed completion always ends with exactly one of: a frame carrying `finish_reason` (then the usage frame when
 * asked for) or an error frame for a generation that did not run to its end — then `data: [DONE]`. A truncated
 * message never looks finished.
 */
import type { EngineChunk, FinishReason } from "../engine/engine.ts";
import type { Tokenizer } from "../model/tokenizer.ts";
import type { Logprob } from "../parsers/logprob.ts";
import type { OutputParser } from "../parsers/segment.ts";
import { type ChatDelta, ChatDeltaCore } from "./chat_delta.ts";
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
}

export interface ChatStreamOptions extends ChatPipelineOptions {
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

/** Engine chunks → parsed chunks through the split and parse cores; a failing engine stream becomes an error finish. */
class ChatReader {
  readonly #reader: ReadableStreamDefaultReader<EngineChunk>;
  readonly #split: SplitCore;
  readonly #parse: ParseCore;

  constructor(chunks: ReadableStream<EngineChunk>, options: ChatPipelineOptions) {
    this.#reader = chunks.getReader();
    this.#split = new SplitCore(options.tokenizer, options.includeLogprobs);
    this.#parse = new ParseCore(options.parser);
  }

  async next(): Promise<ParsedChunk[]> {
    try {
      const r = await this.#reader.read();
      return r.done ? this.#parse.flush() : this.#parse.push(this.#split.push(r.value));
    } catch (e) {
      const message = e instanceof Error ? e.message : String(e);
      return this.#parse.push({ type: "finish", reason: "error", promptTokens: 0, outputTokens: 0, message });
    }
  }

  cancel(reason: unknown): Promise<void> {
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
      if (p.type === "segments") core.push(p.segments);
      else return { message: core, reason: p.reason, usage: p.usage };
    }
  }
}

/** The streamed completion as SSE bytes: one write per engine step that produced deltas. */
export function chatCompletionSseStream(
  chunks: ReadableStream<EngineChunk>,
  options: ChatStreamOptions,
): ReadableStream<Uint8Array> {
  const { head, includeUsage, includeLogprobs } = options;
  const utf8 = new TextEncoder();
  const prefix = `{"id":${JSON.stringify(head.id)},"object":"chat.completion.chunk","created":${head.created},` +
    `"model":${JSON.stringify(head.model)},"system_fingerprint":null,"choices":[{"index":0,`;
  const suffix = includeUsage ? `}],"usage":null}` : `}]}`;
  const frame = (delta: ChatDelta, lps: readonly Logprob[] | null, finish: string | null) =>
    `data: ${prefix}"delta":${JSON.stringify(delta)},"logprobs":${
      lps === null ? "null" : JSON.stringify({ content: lps, refusal: null })
    },"finish_reason":${finish === null ? "null" : JSON.stringify(finish)}${suffix}\n\n`;
  const reader = new ChatReader(chunks, options);
  const core = new ChatDeltaCore(options.ids);
  let done = false;
  return new ReadableStream<Uint8Array>({
    start(controller) {
      controller.enqueue(utf8.encode(frame({ role: "assistant", content: "" }, includeLogprobs ? [] : null, null)));
    },
    async pull(controller) {
      if (done) return;
      let text = "";
      // With highWaterMark 0 a pull that enqueues nothing is never repeated: read until there is something to send.
      while (text === "" && !done) {
        for (const p of await reader.next()) {
          if (p.type === "segments") {
            for (const d of core.push(p.segments)) text += frame(d.delta, includeLogprobs ? d.logprobs : null, null);
            continue;
          }
          done = true;
          const failure = options.failure(p.reason);
          if (failure !== null) {
            text += `data: ${JSON.stringify(failure)}\n\n`;
          } else {
            text += frame({}, null, core.finishReason(p.reason));
            if (includeUsage) {
              text += `data: ${
                JSON.stringify({
                  ...head,
                  object: "chat.completion.chunk",
                  system_fingerprint: null,
                  choices: [],
                  usage: chatUsage(p.usage),
                })
              }\n\n`;
            }
          }
          text += "data: [DONE]\n\n";
        }
      }
      if (text !== "") controller.enqueue(utf8.encode(text));
      if (done) controller.close();
    },
    cancel: (reason) => reader.cancel(reason),
  }, { highWaterMark: 0 });
}
