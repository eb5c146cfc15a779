/**
 * The legacy `POST /v1/completions`: raw text continuation, no chat template and no output parsing. Each prompt of
 * the request is answered by `n` generations and choices (`index` = prompt position × n + choice); they run
 * concurrently, a prompt's later choices sharing its prefill (api/chat/choice_generations.ts). Special
 * tokens the model writes are not text (as vLLM's default `skip_special_tokens`). Streamed, every chunk carries the
 * text of one choice; each choice ends with a chunk holding its `finish_reason`, then the usage chunk when
 * `stream_options.include_usage` asks for it, then `data: [DONE]`.
 */
import type { Engine, EngineChunk, FinishReason, SamplingParams } from "../../engine/engine.ts";
import type { ChatFormat } from "../../prompt/chat_format.ts";
import type { Tokenizer } from "../../checkpoint/tokenizer.ts";
import { IncrementalDetokenizer } from "../../parsers/detokenizer.ts";
import { randomIds } from "../../events/ids.ts";
import { checkCompletionSupported, completionPrompts, CompletionSchema } from "./completions_schema.ts";
import { type ApiError, contextLengthExceeded, modelNotFound, serverError, unavailable } from "../../prompt/errors.ts";
import { cancelUnread, type Generation, startGeneration, stopOnDisconnect } from "../generation.ts";
import { tapChunks } from "../../events/chunk_tap.ts";
import { startChoices } from "./choice_generations.ts";
import { choiceSeed, samplingFields } from "../sampling_fields.ts";
import { jsonResponse, sseResponse } from "../http_response.ts";
import type { Metrics } from "../metrics.ts";
import type { SamplingDefaults } from "../sampling_defaults.ts";
import { samplerTopP } from "../sampling_defaults.ts";
import { parseOrThrow } from "../validation.ts";

/** OpenAI's default `max_tokens` for legacy completions. */
const DEFAULT_MAX_TOKENS = 16;

export interface CompletionsOptions {
  readonly engine: Engine;
  readonly format: ChatFormat;
  readonly modelId: string;
  readonly metrics: Metrics;
  readonly defaults: SamplingDefaults;
}

interface ChoiceEnd {
  readonly reason: FinishReason;
  readonly promptTokens: number;
  readonly outputTokens: number;
}

function unfinished(reason: FinishReason): ApiError | null {
  if (reason === "error") return serverError("The model failed while generating the completion");
  if (reason === "abort") return unavailable("The server stopped before the completion finished");
  return null;
}

/** Reads one generation to its end, handing each piece of text to `onText`. */
async function readText(
  chunks: ReadableStream<EngineChunk>,
  tokenizer: Tokenizer,
  onText: (text: string) => void,
): Promise<ChoiceEnd> {
  const detok = new IncrementalDetokenizer(tokenizer);
  let outputTokens = 0;
  try {
    for await (const chunk of chunks) {
      if (chunk.type === "finish") {
        const tail = detok.flush();
        if (tail !== "") onText(tail);
        return { reason: chunk.reason, promptTokens: chunk.promptTokens, outputTokens: chunk.outputTokens };
      }
      let text = "";
      for (const token of chunk.tokens) {
        outputTokens++;
        // A special token is no text, and bytes never join across it.
        text += tokenizer.isSpecial(token) ? detok.flush() : detok.push(token);
      }
      if (text !== "") onText(text);
    }
  } catch {
    return { reason: "error", promptTokens: 0, outputTokens };
  }
  return { reason: "abort", promptTokens: 0, outputTokens };
}

/** Each prompt counts once however many choices answer it (`n` consecutive choices per prompt). */
function usageOf(ends: readonly ChoiceEnd[], n: number) {
  const prompt = ends.reduce((sum, e, i) => i % n === 0 ? sum + e.promptTokens : sum, 0);
  const completion = ends.reduce((sum, e) => sum + e.outputTokens, 0);
  return { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion };
}

export class CompletionsService {
  readonly #o: CompletionsOptions;
  readonly #inFlight = new Set<Generation>();

  constructor(options: CompletionsOptions) {
    this.#o = options;
  }

  /** Generations in flight. */
  get active(): number {
    return this.#inFlight.size;
  }

  /** Aborts every generation in flight (end of the shutdown grace period). */
  abortAll(): void {
    for (const generation of this.#inFlight) generation.stop();
  }

  async create(raw: Record<string, unknown>, request: Request, startedAt: number): Promise<Response> {
    const body = parseOrThrow(CompletionSchema, raw);
    const { engine, format, modelId, defaults } = this.#o;
    if (body.model !== modelId) throw modelNotFound(body.model, modelId);
    checkCompletionSupported(body);
    const tokenizer = engine.tokenizer;
    const addSpecials = body.add_special_tokens ?? true;
    const encode = (text: string) => {
      const ids = tokenizer.encode(text);
      return addSpecials && tokenizer.withSpecialTokens !== undefined ? tokenizer.withSpecialTokens(ids) : ids;
    };
    const prompts = completionPrompts(body.prompt, encode, tokenizer.vocabSize);
    prompts.forEach((ids, i) => {
      if (ids.length >= engine.maxModelLen) {
        throw contextLengthExceeded(ids.length, engine.maxModelLen, prompts.length === 1 ? "prompt" : `prompt[${i}]`);
      }
    });
    const stop = body.stop == null ? [] : typeof body.stop === "string" ? [body.stop] : body.stop;
    const id = randomIds.next("cmpl");
    const n = body.n ?? 1;
    const generations: Generation[] = [];
    try {
      for (const [p, promptTokens] of prompts.entries()) {
        const room = engine.maxModelLen - promptTokens.length;
        const sampling: SamplingParams = {
          temperature: body.temperature ?? defaults.temperature,
          topP: samplerTopP(body.top_p ?? defaults.topP),
          ...samplingFields(body, defaults.topK, tokenizer.vocabSize),
          maxTokens: Math.min(body.max_tokens ?? DEFAULT_MAX_TOKENS, room),
          stopTokens: format.stopTokens,
          stopStrings: stop,
          logprobs: -1,
        };
        generations.push(...startChoices(n, (c) =>
          startGeneration(engine, {
            id: prompts.length * n === 1 ? id : `${id}-${p * n + c}`,
            promptTokens,
            sampling: body.seed == null ? sampling : { ...sampling, seed: choiceSeed(body.seed, c) },
            metrics: this.#o.metrics,
            startedAt,
            admitted: c > 0,
          })));
      }
    } catch (error) {
      // A full queue for a later prompt: the ones already started are let go.
      for (const g of generations) await cancelUnread(g);
      throw error;
    }
    for (const g of generations) {
      this.#inFlight.add(g);
      g.done.then(() => this.#inFlight.delete(g));
      stopOnDisconnect(request, g);
    }
    const head = { id, object: "text_completion", created: Math.floor(Date.now() / 1000), model: modelId };
    if (body.stream === true) {
      return sseResponse(this.#stream(generations, n, head, body.stream_options?.include_usage === true));
    }

    const texts = generations.map(() => "");
    const ends = await Promise.all(
      generations.map((g, i) => readText(tapChunks(g.source, g.tap), tokenizer, (t) => texts[i] += t)),
    );
    for (const end of ends) {
      const failure = unfinished(end.reason);
      if (failure !== null) throw failure;
    }
    return jsonResponse({
      ...head,
      choices: ends.map((end, i) => ({
        text: texts[i],
        index: i,
        logprobs: null,
        finish_reason: end.reason === "length" ? "length" : "stop",
      })),
      usage: usageOf(ends, n),
    });
  }

  #stream(
    generations: readonly Generation[],
    n: number,
    head: Record<string, unknown>,
    includeUsage: boolean,
  ): ReadableStream<Uint8Array> {
    const utf8 = new TextEncoder();
    const tokenizer = this.#o.engine.tokenizer;
    const frame = (index: number, text: string, finish: string | null) =>
      `data: ${
        JSON.stringify({
          ...head,
          choices: [{ text, index, logprobs: null, finish_reason: finish }],
          ...(includeUsage ? { usage: null } : {}),
        })
      }\n\n`;
    let closed = false;
    return new ReadableStream<Uint8Array>({
      start: (controller) => {
        const send = (s: string) => {
          if (!closed) controller.enqueue(utf8.encode(s));
        };
        const runs = generations.map(async (g, i) => {
          const end = await readText(tapChunks(g.source, g.tap), tokenizer, (text) => send(frame(i, text, null)));
          const failure = unfinished(end.reason);
          if (failure !== null) send(`data: ${JSON.stringify(failure.toJSON())}\n\n`);
          else send(frame(i, "", end.reason === "length" ? "length" : "stop"));
          return end;
        });
        Promise.all(runs).then((ends) => {
          if (includeUsage) {
            send(
              `data: ${JSON.stringify({ ...head, choices: [], usage: usageOf(ends, n) })}\n\n`,
            );
          }
          send("data: [DONE]\n\n");
          if (!closed) {
            closed = true;
            controller.close();
          }
        });
      },
      cancel: () => {
        closed = true;
        for (const g of generations) g.stop();
      },
    });
  }
}
