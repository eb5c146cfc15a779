/**
 * `POST /v1/chat/completions`, streamed and not: request validation, prompt rendering and the generations here (one
 * per choice of `n`, api/chat/choice_generations.ts); the deltas and frames come from the same stream stages as the
 * Responses pipeline (events/chat_pipeline.ts).
 */
import type { ChatFormat } from "../../prompt/chat_format.ts";
import type { Engine, FinishReason, SamplingParams } from "../../engine/engine.ts";
import type { FunctionTool, PromptInput, ToolChoice } from "../../prompt/conversation.ts";
import { chatCompletionSseStream, chatUsage, choicesUsage, collectChatCompletion } from "../../events/chat_pipeline.ts";
import { randomIds } from "../../events/ids.ts";
import { type ApiError, modelNotFound, serverError, unavailable, unsupportedParameter } from "../../prompt/errors.ts";
import {
  chatResponseFormat,
  grammarForcesChoice,
  type StructuredOutputs,
  structuredRequest,
} from "../../prompt/structured_output.ts";
import { type Generation, startGeneration, stopOnDisconnect } from "../generation.ts";
import { startChoices } from "./choice_generations.ts";
import { choiceSeed, samplingFields } from "../sampling_fields.ts";
import { parallelToolCallLimit } from "../../prompt/parallel_tool_calls.ts";
import { fitPrompt } from "../../prompt/prompt_fit.ts";
import type { Metrics } from "../metrics.ts";
import type { GrammarConstraint } from "../../grammar/grammar_constraint.ts";
import { jsonResponse, sseResponse } from "../http_response.ts";
import {
  type ChatCompletionBody,
  ChatCompletionSchema,
  chatMessages,
  chatTools,
  checkChatSupported,
} from "./chat_schema.ts";
import type { SamplingDefaults } from "../sampling_defaults.ts";
import { samplerTopP } from "../sampling_defaults.ts";
import { parseOrThrow } from "../validation.ts";
import { RequestTrace } from "../request_trace.ts";

export interface ChatCompletionsOptions {
  readonly engine: Engine;
  readonly format: ChatFormat;
  readonly modelId: string;
  readonly metrics: Metrics;
  readonly defaults: SamplingDefaults;
  /** Grammar-constrained decoding for this model; absent when its tokenizer cannot be described to xgrammar. */
  readonly structuredOutputs?: StructuredOutputs;
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

  /** The request's output constraint; Chat function tools are strict only when they say so. */
  #structured(body: ChatCompletionBody, tools: readonly FunctionTool[], choice: ToolChoice) {
    const text = chatResponseFormat(body.response_format);
    if (this.#o.structuredOutputs === undefined) {
      if (text !== undefined) {
        throw unsupportedParameter(
          "response_format",
          "Structured outputs are not available for this model's tokenizer",
        );
      }
      return undefined;
    }
    const index = new Map(tools.map((t, i) => [t.name, i]));
    return structuredRequest({
      text,
      textParam: "response_format.json_schema",
      tools,
      choice,
      strictDefault: false,
      toolParam: (name) => `tools[${index.get(name) ?? 0}].function.parameters`,
    });
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
    const callLimit = parallelToolCallLimit(format, body.parallel_tool_calls, tools.length);
    const effort = body.reasoning_effort;
    const structured = this.#structured(body, tools, choice);
    // With the grammar enforcing the choice the model reasons first and then calls: no prefilled call opening.
    const renderChoice = grammarForcesChoice(structured) ? "auto" : choice;
    const prompt: PromptInput = {
      messages: chatMessages(body),
      tools,
      toolChoice: renderChoice,
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
    const id = randomIds.next("chatcmpl");
    const n = body.n ?? 1;
    const sampling: SamplingParams = {
      temperature: body.temperature ?? defaults.temperature,
      topP: samplerTopP(body.top_p ?? defaults.topP),
      ...samplingFields(body, defaults.topK, engine.tokenizer.vocabSize),
      maxTokens: Math.min(body.max_completion_tokens ?? body.max_tokens ?? room, room),
      stopTokens: format.stopTokens,
      stopStrings: [...stop, ...callLimit.stopStrings],
      logprobs: body.logprobs === true ? (body.top_logprobs ?? 0) : -1,
    };
    // Compiled before anything is sent: a schema xgrammar rejects is a 400. Each choice walks its own grammar state.
    const constraints: (GrammarConstraint | undefined)[] = [];
    for (let i = 0; i < n; i++) {
      constraints.push(structured === undefined ? undefined : await this.#o.structuredOutputs?.constraint(structured));
    }
    let generations: Generation[];
    try {
      generations = startChoices(n, (i) => {
        const c = constraints[i];
        return startGeneration(engine, {
          id: n === 1 ? id : `${id}-${i}`,
          promptTokens,
          sampling: body.seed == null ? sampling : { ...sampling, seed: choiceSeed(body.seed, i) },
          metrics: this.#o.metrics,
          startedAt,
          admitted: i > 0,
          ...(c === undefined ? {} : { constraint: c }),
        });
      });
    } catch (error) {
      // A full queue (429) before anything started: no grammar is in use.
      constraints.forEach((c) => c?.dispose());
      throw error;
    }
    const allDone = Promise.all(generations.map((g) => g.done));
    // A later choice stopped before it started never releases its grammar itself (dispose is idempotent).
    allDone.then(() => constraints.forEach((c) => c?.dispose()));
    for (const generation of generations) {
      this.#inFlight.add(generation);
      generation.done.then(() => this.#inFlight.delete(generation));
      stopOnDisconnect(request, generation);
    }
    const parser = () =>
      callLimit.limit(
        // tool_choice none: no tool is callable, so a call the model writes anyway parses as a plain message.
        format.createParser({ toolNames: choice === "none" ? [] : tools.map((t) => t.name), toolChoice: renderChoice }),
      );
    const head = { id, created: Math.floor(Date.now() / 1000), model: modelId };
    trace.responseId = id;
    trace.count(allDone.then((totals) => ({
      promptTokens: totals[0]?.promptTokens ?? 0,
      outputTokens: totals.reduce((sum, t) => sum + t.outputTokens, 0),
    })));
    if (body.stream === true) {
      trace.streamsUntil(allDone);
      return sseResponse(
        chatCompletionSseStream(generations.map((g) => ({ chunks: g.source, tap: g.tap, parser: parser() })), {
          tokenizer: engine.tokenizer,
          includeLogprobs: body.logprobs === true,
          head,
          includeUsage: body.stream_options?.include_usage === true,
          failure: (reason) => unfinished(reason)?.toJSON() ?? null,
        }),
      );
    }

    const collected = await Promise.all(generations.map((g) =>
      collectChatCompletion(g.source, {
        tap: g.tap,
        tokenizer: engine.tokenizer,
        parser: parser(),
        includeLogprobs: body.logprobs === true,
      })
    ));
    for (const { reason } of collected) {
      const failure = unfinished(reason);
      if (failure !== null) throw failure;
    }
    return jsonResponse({
      ...head,
      object: "chat.completion",
      choices: collected.map(({ message, reason }, index) => ({
        index,
        message: {
          role: "assistant",
          content: message.content === "" && message.toolCalls.length > 0 ? null : message.content,
          refusal: null,
          ...(message.reasoning === "" ? {} : { reasoning_content: message.reasoning }),
          ...(message.toolCalls.length === 0 ? {} : {
            tool_calls: message.toolCalls.map((c) => ({
              id: c.id,
              type: "function",
              function: { name: c.name, arguments: c.arguments },
            })),
          }),
        },
        logprobs: body.logprobs === true ? { content: message.logprobs, refusal: null } : null,
        finish_reason: message.finishReason(reason),
      })),
      usage: chatUsage(choicesUsage(collected.map((c) => c.usage))),
    });
  }
}
