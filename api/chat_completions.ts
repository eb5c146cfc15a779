/**
 * `POST /v1/chat/completions`, streamed and not, from the same parse stage as the Responses pipeline: segments of a
 * reasoning item become `reasoning_content`, of a message `content`, of a function call `tool_calls` deltas (one
 * index per call, id and name in its first delta, then argument fragments). Hosted-tool items (web search, code
 * interpreter, MCP) have no Chat Completions form and produce no deltas.
 */
import type { ChatFormat } from "../engine/chat_format.ts";
import type { Engine, EngineChunk, FinishReason } from "../engine/engine.ts";
import type { PromptInput } from "../engine/conversation.ts";
import type { Segment } from "../parsers/segment.ts";
import { ParseCore } from "../events/parse_stage.ts";
import type { ParsedChunk } from "../events/parsed_chunk.ts";
import type { Logprob, Usage } from "../events/types.ts";
import { wireLogprob } from "../events/wire_logprob.ts";
import { type ApiError, modelNotFound, serverError, unavailable } from "./errors.ts";
import { type Generation, startGeneration, stopOnDisconnect } from "./generation.ts";
import { checkParallelToolCalls } from "./parallel_tool_calls.ts";
import { fitPrompt } from "./prompt_fit.ts";
import type { Metrics } from "./metrics.ts";
import { jsonResponse, sseResponse } from "./http_response.ts";
import {
  type ChatCompletionBody,
  ChatCompletionSchema,
  chatMessages,
  chatTools,
  checkChatSupported,
} from "./chat_schema.ts";
import type { SamplingDefaults } from "./responses_request.ts";
import { samplerTopP } from "./sampling_defaults.ts";
import { parseOrThrow } from "./validation.ts";
import { RequestTrace } from "./request_trace.ts";
import { newId } from "./responses_service.ts";

export interface ChatCompletionsOptions {
  readonly engine: Engine;
  readonly format: ChatFormat;
  readonly modelId: string;
  readonly metrics: Metrics;
  readonly defaults: SamplingDefaults;
}

interface ToolCallDelta {
  index: number;
  id?: string;
  type?: "function";
  function: { name?: string; arguments: string };
}

interface Delta {
  role?: "assistant";
  content?: string;
  reasoning_content?: string;
  tool_calls?: ToolCallDelta[];
}

type Mode = "none" | "content" | "reasoning" | "tool" | "other";

/** Segments → chat deltas, accumulating the whole message for the non-streamed form. */
export class ChatDeltaCore {
  #mode: Mode = "none";
  content = "";
  reasoning = "";
  readonly toolCalls: { id: string; name: string; arguments: string }[] = [];
  readonly logprobs: Logprob[] = [];

  /** One engine step's segments → deltas; consecutive deltas of the same field are merged. */
  push(segments: readonly Segment[]): { delta: Delta; logprobs: Logprob[] }[] {
    const out: { delta: Delta; logprobs: Logprob[] }[] = [];
    const append = (field: "content" | "reasoning_content", text: string, lps: readonly Logprob[] = []) => {
      const last = out[out.length - 1];
      if (last !== undefined && last.delta[field] !== undefined && last.delta.tool_calls === undefined) {
        last.delta[field] += text;
        last.logprobs.push(...lps);
      } else {
        out.push({ delta: { [field]: text }, logprobs: [...lps] });
      }
    };
    for (const s of segments) {
      switch (s.kind) {
        case "open":
          switch (s.item.type) {
            case "message":
              this.#mode = "content";
              break;
            case "reasoning":
              this.#mode = "reasoning";
              break;
            case "function_call": {
              const call = { id: s.item.callId ?? newId("call"), name: s.item.name, arguments: "" };
              this.toolCalls.push(call);
              this.#mode = "tool";
              out.push({
                delta: {
                  tool_calls: [{
                    index: this.toolCalls.length - 1,
                    id: call.id,
                    type: "function",
                    function: { name: call.name, arguments: "" },
                  }],
                },
                logprobs: [],
              });
              break;
            }
            case "web_search_call":
            case "code_interpreter_call":
            case "mcp_call":
              this.#mode = "other";
              break;
            default: {
              const never: never = s.item;
              throw new TypeError(`Unhandled item kind ${JSON.stringify(never)}`);
            }
          }
          break;
        case "delta":
          switch (this.#mode) {
            case "content": {
              this.content += s.text;
              const lps = s.logprobs?.map(wireLogprob) ?? [];
              this.logprobs.push(...lps);
              append("content", s.text, lps);
              break;
            }
            case "reasoning":
              this.reasoning += s.text;
              append("reasoning_content", s.text);
              break;
            case "tool": {
              const index = this.toolCalls.length - 1;
              this.toolCalls[index]!.arguments += s.text;
              const last = out[out.length - 1]?.delta.tool_calls?.[0];
              if (last !== undefined && last.index === index) last.function.arguments += s.text;
              else out.push({ delta: { tool_calls: [{ index, function: { arguments: s.text } }] }, logprobs: [] });
              break;
            }
            case "none":
            case "other":
              break;
            default: {
              const never: never = this.#mode;
              throw new TypeError(`Unhandled mode ${never}`);
            }
          }
          break;
        case "close":
          this.#mode = "none";
          break;
        default: {
          const never: never = s;
          throw new TypeError(`Unhandled segment ${JSON.stringify(never)}`);
        }
      }
    }
    return out;
  }

  finishReason(reason: FinishReason): "stop" | "length" | "tool_calls" {
    if (reason === "length") return "length";
    return this.toolCalls.length > 0 ? "tool_calls" : "stop";
  }
}

function chatUsage(u: Usage) {
  return {
    prompt_tokens: u.input_tokens,
    completion_tokens: u.output_tokens,
    total_tokens: u.total_tokens,
    prompt_tokens_details: { cached_tokens: u.input_tokens_details.cached_tokens },
    completion_tokens_details: { reasoning_tokens: u.output_tokens_details.reasoning_tokens },
  };
}

/**
 * The error a completion that did not run to its end answers with. An abort is the server shutting down (a client
 * that went away reads nothing): a truncated message must not look finished (`finish_reason: "stop"`).
 */
function unfinished(reason: FinishReason): ApiError | null {
  if (reason === "error") return serverError("The model failed while generating the completion");
  if (reason === "abort") return unavailable("The server stopped before the completion finished");
  return null;
}

/** Reads engine chunks into parsed chunks; a failing engine stream becomes an `error` finish. */
async function nextParsed(
  reader: ReadableStreamDefaultReader<EngineChunk>,
  core: ParseCore,
): Promise<ParsedChunk[]> {
  try {
    const r = await reader.read();
    return r.done ? core.flush() : core.push(r.value);
  } catch (e) {
    const message = e instanceof Error ? e.message : String(e);
    return core.push({ type: "finish", reason: "error", promptTokens: 0, outputTokens: 0, message });
  }
}

export class ChatCompletionsService {
  readonly #o: ChatCompletionsOptions;
  /** Generations in flight, so shutdown can abort what outlives its grace period. */
  readonly #inFlight = new Set<Generation>();

  constructor(options: ChatCompletionsOptions) {
    this.#o = options;
  }

  /** Completions being generated. */
  get active(): number {
    return this.#inFlight.size;
  }

  /** Aborts every completion in flight (end of the shutdown grace period). */
  abortAll(): void {
    for (const generation of this.#inFlight) generation.stop();
  }

  async create(
    raw: Record<string, unknown>,
    request: Request,
    startedAt: number,
    trace: RequestTrace = new RequestTrace(),
  ): Promise<Response> {
    const body = parseOrThrow(ChatCompletionSchema, raw);
    const { engine, format, modelId, defaults } = this.#o;
    if (body.model !== modelId) {
      throw modelNotFound(body.model, modelId);
    }
    checkChatSupported(body);
    const { tools, choice } = chatTools(body);
    checkParallelToolCalls(format, body.parallel_tool_calls, tools.length);
    const effort = body.reasoning_effort;
    const prompt: PromptInput = {
      messages: chatMessages(body),
      tools,
      toolChoice: choice,
      ...(effort == null ? {} : {
        reasoningEffort: effort === "medium" ? "medium" : effort === "high" || effort === "xhigh" ? "high" : "low",
      }),
    };
    const { tokens: promptTokens } = await fitPrompt(
      format,
      engine.tokenizer,
      prompt,
      engine.maxModelLen,
      "disabled",
      "messages",
    );
    const room = engine.maxModelLen - promptTokens.length;
    const stop = body.stop == null ? [] : typeof body.stop === "string" ? [body.stop] : body.stop;
    const id = newId("chatcmpl", "-"); // OpenAI's chat ids use a hyphen, unlike its Responses ids (resp_, msg_)
    const generation = startGeneration(engine, {
      id,
      promptTokens,
      sampling: {
        temperature: body.temperature ?? defaults.temperature,
        topP: samplerTopP(body.top_p ?? defaults.topP),
        topK: defaults.topK,
        ...(body.seed == null ? {} : { seed: body.seed }),
        maxTokens: Math.min(body.max_completion_tokens ?? body.max_tokens ?? room, room),
        stopTokens: format.stopTokens,
        stopStrings: stop,
        logprobs: body.logprobs === true ? (body.top_logprobs ?? 0) : -1,
      },
      metrics: this.#o.metrics,
      startedAt,
    });
    this.#inFlight.add(generation);
    generation.done.then(() => this.#inFlight.delete(generation));
    const parseCore = new ParseCore(
      engine.tokenizer,
      format.createParser({ toolNames: tools.map((t) => t.name), toolChoice: choice }),
      body.logprobs === true,
    );
    const head = { id, created: Math.floor(Date.now() / 1000), model: modelId };
    stopOnDisconnect(request, generation);
    trace.responseId = id;
    trace.count(generation.done);
    if (body.stream === true) {
      trace.streamsUntil(generation.done);
      return this.#stream(body, generation.chunks, parseCore, head);
    }

    const reader = generation.chunks.getReader();
    const core = new ChatDeltaCore();
    for (;;) {
      for (const p of await nextParsed(reader, parseCore)) {
        if (p.type === "segments") {
          core.push(p.segments);
          continue;
        }
        const failure = unfinished(p.reason);
        if (failure !== null) throw failure;
        return jsonResponse({
          ...head,
          object: "chat.completion",
          system_fingerprint: null,
          choices: [{
            index: 0,
            message: {
              role: "assistant",
              content: core.content === "" && core.toolCalls.length > 0 ? null : core.content,
              refusal: null,
              ...(core.reasoning === "" ? {} : { reasoning_content: core.reasoning }),
              ...(core.toolCalls.length === 0 ? {} : {
                tool_calls: core.toolCalls.map((c) => ({
                  id: c.id,
                  type: "function",
                  function: { name: c.name, arguments: c.arguments },
                })),
              }),
            },
            logprobs: body.logprobs === true ? { content: core.logprobs, refusal: null } : null,
            finish_reason: core.finishReason(p.reason),
          }],
          usage: chatUsage(p.usage),
        });
      }
    }
  }

  #stream(
    body: ChatCompletionBody,
    chunks: ReadableStream<EngineChunk>,
    parseCore: ParseCore,
    head: { id: string; created: number; model: string },
  ): Response {
    const includeUsage = body.stream_options?.include_usage === true;
    const logprobs = body.logprobs === true;
    const utf8 = new TextEncoder();
    const prefix = `{"id":${JSON.stringify(head.id)},"object":"chat.completion.chunk","created":${head.created},` +
      `"model":${JSON.stringify(head.model)},"system_fingerprint":null,"choices":[{"index":0,`;
    const suffix = includeUsage ? `}],"usage":null}` : `}]}`;
    const frame = (delta: Delta, lps: Logprob[] | null, finish: string | null) =>
      `data: ${prefix}"delta":${JSON.stringify(delta)},"logprobs":${
        lps === null ? "null" : JSON.stringify({ content: lps, refusal: null })
      },"finish_reason":${finish === null ? "null" : JSON.stringify(finish)}${suffix}\n\n`;
    const core = new ChatDeltaCore();
    const reader = chunks.getReader();
    let done = false;
    const stream = new ReadableStream<Uint8Array>({
      start(controller) {
        controller.enqueue(utf8.encode(frame({ role: "assistant", content: "" }, logprobs ? [] : null, null)));
      },
      async pull(controller) {
        if (done) return;
        let text = "";
        // With highWaterMark 0 a pull that enqueues nothing is never repeated: read until there is something to send.
        while (text === "" && !done) {
          for (const p of await nextParsed(reader, parseCore)) {
            if (p.type === "segments") {
              for (const d of core.push(p.segments)) text += frame(d.delta, logprobs ? d.logprobs : null, null);
              continue;
            }
            done = true;
            const failure = unfinished(p.reason);
            if (failure !== null) {
              text += `data: ${JSON.stringify(failure.toJSON())}\n\n`;
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
    return sseResponse(stream);
  }
}
