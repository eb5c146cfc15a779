/**
 * The Responses endpoints: create (streamed, non-streamed, background), retrieve (JSON or replay/tail), delete,
 * cancel, input_items and input_tokens.
 *
 * Lifetimes:
 * - Foreground: the generation belongs to the HTTP request; a client that disconnects aborts it and a stored
 *   response is then marked "cancelled".
 * - Background: the generation runs detached (its events go to the store only); clients poll, tail the log
 *   (`GET ?stream=true`, also what `background + stream` returns) or cancel it. Background implies `store`.
 */
import type { ChatFormat } from "../formats/chat_format.ts";
import type { Engine } from "../engine/engine.ts";
import {
  type AbortAsError,
  collectResponse,
  type PipelineOptions,
  responseEventStream,
  responseSseStream,
} from "../stream/pipeline.ts";
import { buildResponse } from "../stream/response_template.ts";
import type { Response as ResponseObject } from "../stream/types.ts";
import { type IdSource, randomIds } from "../stream/ids.ts";
import { invalidRequest, modelNotFound, notFound, shuttingDown } from "./errors.ts";
import { startGeneration, stopOnDisconnect } from "./generation.ts";
import type { Metrics } from "./metrics.ts";
import { ResponseRecorder } from "./response_recorder.ts";
import { asConversationItem } from "./conversations_service.ts";
import type { ResponseStore } from "./response_store.ts";
import { tailEvents } from "./event_tail.ts";
import { RequestTrace } from "./request_trace.ts";
import { CreateResponseSchema, InputTokensSchema } from "./responses_schema.ts";
import {
  preparePrompt,
  prepareResponse,
  previousItems,
  type PreviousLookup,
  type RequestContext,
} from "./responses_request.ts";
import type { SamplingDefaults } from "./sampling_defaults.ts";
import { checkQuery, parseOrThrow } from "./validation.ts";
import type { StructuredOutputs } from "./structured_output.ts";
import { jsonResponse, sseResponse } from "./http_response.ts";
import type { ResponseStreamEvent } from "../stream/types.ts";
import type { ReasoningSeal } from "./reasoning_seal.ts";
import { keptUserMessages, summaryRequest, summaryText } from "./response_compaction.ts";

export interface ResponsesServiceOptions {
  readonly engine: Engine;
  readonly format: ChatFormat;
  readonly modelId: string;
  readonly store: ResponseStore;
  readonly metrics: Metrics;
  readonly defaults: SamplingDefaults;
  /** Seals reasoning and compaction `encrypted_content` under the server key. */
  readonly seal: ReasoningSeal;
  /** Grammar-constrained decoding for this model; absent when its tokenizer cannot be described to xgrammar. */
  readonly structuredOutputs?: StructuredOutputs;
  /** Item ids of generated output (tests: deterministic). */
  readonly ids?: IdSource;
  /** Internal failures that must not reach clients (e.g. a store write failing mid-stream). */
  readonly onError?: (error: unknown) => void;
}

/** One response of `ResponsesService.stream`. */
export interface StreamedResponse {
  readonly id: string;
  /** Every item before this response's output, in wire form: what a continuation of it puts before that output. */
  readonly history: readonly Record<string, unknown>[];
  /**
   * The next step's sequenced events (each batch recorded, and stored when `store` is on), or null once the stream
   * ended after its terminal event (or early, once stopped).
   */
  read(): Promise<readonly ResponseStreamEvent[] | null>;
  /** The client went away: aborts the generation, and the response ends "cancelled". */
  stop(): void;
  /** The latest Response snapshot: after the stream ended, the final one. */
  final(): ResponseObject;
}

interface BackgroundRun {
  readonly abort: AbortController;
  readonly finished: Promise<void>;
}

/** What a generation cut by shutdown reports: its `error` event's code, and the message of both. */
const SHUTDOWN: AbortAsError = {
  code: "server_shutting_down",
  message: "The server shut down before this response finished; retry the request",
};

function nowSeconds(): number {
  return Math.floor(Date.now() / 1000);
}

export class ResponsesService {
  readonly #o: ResponsesServiceOptions;
  readonly #ctx: RequestContext;
  readonly #runs = new Map<string, BackgroundRun>();
  /** Foreground generations by response id, so shutdown can abort them and tails of stored ones stay live. */
  readonly #foreground = new Map<string, AbortController>();
  #shuttingDown = false;
  readonly #abortAs = (): AbortAsError | undefined => this.#shuttingDown ? SHUTDOWN : undefined;
  readonly #sealReasoning = (text: string): string => this.#o.seal.sealReasoning(text);

  constructor(options: ResponsesServiceOptions) {
    this.#o = options;
    this.#ctx = {
      format: options.format,
      tokenizer: options.engine.tokenizer,
      modelId: options.modelId,
      maxModelLen: options.engine.maxModelLen,
      defaults: options.defaults,
      previous: (id) => {
        const stored = options.store.get(id);
        if (stored === undefined) return undefined;
        return { response: stored.response, conversation: { version: 1, items: options.store.conversationItems(id) } };
      },
      item: (id) => options.store.item(id) ?? options.store.conversations.anyItem(id),
      conversationItems: (id) => options.store.conversations.items(id),
      newId: (prefix) => randomIds.next(prefix),
      now: nowSeconds,
      constrainedDecoding: options.structuredOutputs !== undefined,
      seal: options.seal,
    };
  }

  /** Whether a generation may still append events for `id`: one in this process, or another live server's. */
  readonly #isLive = (id: string): boolean => {
    if (this.#runs.has(id) || this.#foreground.has(id)) return true;
    const owner = this.#o.store.ownerOf(id);
    return owner !== null && owner !== this.#o.store.owner && this.#o.store.ownerAlive(owner);
  };

  /** Generations in flight (foreground and background). */
  get active(): number {
    return this.#runs.size + this.#foreground.size;
  }

  /**
   * Aborts every generation in flight at the end of the shutdown grace period. Each then ends as a failure the
   * client can see, never as a quiet end: a stream with `error` (code `server_shutting_down`) + `response.failed`, a
   * non-streamed request with a 503, a background response stored `failed`.
   */
  abortAll(): void {
    this.#shuttingDown = true;
    for (const run of this.#runs.values()) run.abort.abort();
    for (const abort of this.#foreground.values()) abort.abort();
  }

  /**
   * What every create shares, whatever carries its events: the request prepared against `ctx` (whose `previous`
   * lookup the WebSocket mode widens to its socket's recent responses), the generation started, the initial
   * response stored when `store` is on, and the pipeline's options.
   */
  async #start(body: Record<string, unknown>, ctx: RequestContext, startedAt: number, trace: RequestTrace) {
    const parsed = parseOrThrow(CreateResponseSchema, body);
    const prep = await prepareResponse(parsed, ctx);
    const { engine, format, store } = this.#o;
    const initial = buildResponse(prep.template, {
      status: prep.background ? "queued" : "in_progress",
      output: [],
      usage: null,
    });
    const id = prep.template.id;
    trace.responseId = id;
    // Compiled before anything is stored or sent: a schema xgrammar rejects is a 400.
    const constraint = prep.structured === undefined
      ? undefined
      : await this.#o.structuredOutputs?.constraint(prep.structured);
    const recorder: ResponseRecorder = new ResponseRecorder(initial, prep.store ? store : null, {
      onEnd: () => {
        this.#foreground.delete(id);
        if (prep.conversationId !== undefined) {
          this.#appendTurn(prep.conversationId, prep.inputItems, recorder.snapshot);
        }
      },
      onStoreError: (error) => this.#o.onError?.(error),
    });
    const generation = startGeneration(engine, {
      id: prep.template.id,
      promptTokens: prep.promptTokens,
      sampling: prep.sampling,
      metrics: this.#o.metrics,
      startedAt,
      onCancel: () => recorder.cancel(),
      ...(constraint === undefined ? {} : { constraint }),
    });
    if (prep.store) {
      try {
        store.create(initial as unknown as Record<string, unknown>, prep.inputItems, prep.conversation);
      } catch (error) {
        // Nothing was sent yet: free the engine slot and answer 500.
        await generation.chunks.cancel();
        throw error;
      }
    }
    const pipeline: PipelineOptions = {
      template: prep.template,
      tokenizer: engine.tokenizer,
      parser: prep.toolCallLimit.limit(
        format.createParser({ toolNames: prep.toolNames, toolChoice: prep.prompt.toolChoice }),
      ),
      includeLogprobs: prep.includeLogprobs,
      abortAs: this.#abortAs,
      ...(prep.sealReasoning ? { sealReasoning: this.#sealReasoning } : {}),
      ...(this.#o.ids === undefined ? {} : { ids: this.#o.ids }),
    };
    return { prep, initial, recorder, generation, pipeline };
  }

  async create(
    body: Record<string, unknown>,
    request: Request,
    startedAt: number,
    trace: RequestTrace = new RequestTrace(),
  ): Promise<Response> {
    const { prep, initial, recorder, generation, pipeline } = await this.#start(body, this.#ctx, startedAt, trace);
    const id = prep.template.id;
    if (prep.background) {
      const events = responseEventStream(generation.chunks, pipeline);
      const finished = (async () => {
        try {
          for await (const batch of events) recorder.record(batch);
        } finally {
          recorder.cancel();
          this.#runs.delete(prep.template.id);
        }
      })();
      this.#runs.set(prep.template.id, { abort: generation.abort, finished });
      if (prep.stream) return sseResponse(this.#tail(prep.template.id, -1, trace));
      return jsonResponse(initial);
    }

    this.#foreground.set(id, generation.abort);
    stopOnDisconnect(request, generation);
    trace.count(generation.done);
    if (prep.stream) {
      const body = responseSseStream(generation.chunks, pipeline, (events) => recorder.record(events));
      trace.streamsUntil(generation.done);
      return sseResponse(body);
    }
    try {
      const { response, events } = await collectResponse(generation.chunks, pipeline);
      recorder.record(events);
      if (!recorder.ended) recorder.cancel(response);
      if (response.status === "failed" && this.#shuttingDown) throw shuttingDown();
      return jsonResponse(response);
    } finally {
      recorder.cancel();
    }
  }

  /**
   * A streamed create whose events go to the caller as objects (WebSocket mode, responses_socket.ts) rather than as
   * SSE bytes. `previous` is consulted before the store for `previous_response_id`. The events are pulled, so a
   * consumer that stops reading holds the generation back exactly as a slow SSE client does; `stop()` is the
   * client going away (the response ends cancelled). `background` is refused by the caller before this.
   */
  async stream(
    body: Record<string, unknown>,
    previous: PreviousLookup,
    startedAt: number,
    trace: RequestTrace = new RequestTrace(),
  ): Promise<StreamedResponse> {
    const ctx: RequestContext = { ...this.#ctx, previous: (id) => previous(id) ?? this.#ctx.previous(id) };
    const { prep, recorder, generation, pipeline } = await this.#start(
      { ...body, stream: true },
      ctx,
      startedAt,
      trace,
    );
    const id = prep.template.id;
    this.#foreground.set(id, generation.abort);
    trace.count(generation.done);
    // A conversation's turn carries its whole history; a previous_response_id chain refers to it.
    const history = prep.conversation.version === 1
      ? prep.conversation.items
      : [...previousItems({ previous_response_id: prep.conversation.previous }, ctx), ...prep.inputItems];
    const reader = responseEventStream(generation.chunks, pipeline).getReader();
    return {
      id,
      history,
      async read() {
        const { done, value } = await reader.read();
        if (done) {
          recorder.cancel();
          return null;
        }
        recorder.record(value);
        return value;
      },
      stop() {
        generation.stop();
        reader.cancel().catch(() => {});
      },
      final: () => recorder.snapshot,
    };
  }

  /**
   * A response made in a conversation adds its input and output items to it when it ends `completed` or
   * `incomplete`, before its terminal event is sent (so the client's next turn sees them). A failed or cancelled
   * response adds nothing: the conversation stays as it was, and the turn can be retried. A conversation deleted
   * meanwhile is left deleted.
   */
  #appendTurn(conversationId: string, input: readonly Record<string, unknown>[], response: ResponseObject): void {
    if (response.status !== "completed" && response.status !== "incomplete") return;
    const output = response.output as unknown as readonly Record<string, unknown>[];
    try {
      this.#o.store.conversations.append(conversationId, [...input.map(asConversationItem), ...output], "skip");
    } catch (error) {
      this.#o.onError?.(error);
    }
  }

  /**
   * A stored response still marked queued/in_progress that no live generation owns (not one of this process, nor
   * one of another server whose lease is alive) was cut off by a server stop: it is failed once, atomically, with a
   * terminal event in its log, so polling and tails end. Another live server's running response is left alone.
   */
  #settleOrphan(id: string, stored: { response: Record<string, unknown> }): Record<string, unknown> {
    const status = stored.response.status;
    if ((status !== "queued" && status !== "in_progress") || this.#isLive(id)) return stored.response;
    const error = { code: "server_error", message: "The server stopped before this response finished" };
    return this.#o.store.failInFlight(id, error) ?? this.#o.store.get(id)?.response ?? stored.response;
  }

  /** A tail of a stored response's log, whose end the request's trace waits for. */
  #tail(id: string, startingAfter: number, trace: RequestTrace): ReadableStream<Uint8Array> {
    const { promise, resolve } = Promise.withResolvers<void>();
    trace.responseId = id;
    trace.streamsUntil(promise);
    return tailEvents(this.#o.store, id, startingAfter, this.#isLive, resolve);
  }

  retrieve(id: string, url: URL, trace: RequestTrace = new RequestTrace()): Response {
    // include_obfuscation: rill adds no obfuscation padding, which the spec lets a server omit.
    checkQuery(url, ["stream", "starting_after", "include", "include_obfuscation"]);
    const found = this.#o.store.get(id);
    if (found === undefined) throw notFound(`Response with id '${id}' not found.`);
    const stored = { ...found, response: this.#settleOrphan(id, found) };
    const stream = url.searchParams.get("stream");
    if (stream !== null && stream !== "true" && stream !== "false") {
      throw invalidRequest("'stream' must be true or false", "stream", "invalid_value");
    }
    const after = url.searchParams.get("starting_after");
    let startingAfter = -1;
    if (after !== null) {
      if (!/^-?\d+$/.test(after) || Number(after) < -1 || !Number.isSafeInteger(Number(after))) {
        throw invalidRequest("'starting_after' must be an integer ≥ -1", "starting_after", "invalid_value");
      }
      startingAfter = Number(after);
    }
    if (stream !== "true") {
      if (after !== null) throw invalidRequest("'starting_after' needs 'stream=true'", "starting_after");
      return jsonResponse(stored.response);
    }
    return sseResponse(this.#tail(id, startingAfter, trace));
  }

  /**
   * Deleting a running background response cancels it first, exactly like `POST /cancel`: the generation is
   * aborted and the response recorded as cancelled (which ends open tails: no cancellation event exists, so they
   * close after the last stored event) before its rows go.
   */
  async delete(id: string, url: URL): Promise<Response> {
    checkQuery(url, []);
    await this.#stopRun(id);
    if (!this.#o.store.delete(id)) throw notFound(`Response with id '${id}' not found.`);
    return jsonResponse({ id, object: "response", deleted: true });
  }

  /** Aborts the background run of `id`, if any, and waits until it recorded its end. */
  async #stopRun(id: string): Promise<void> {
    const run = this.#runs.get(id);
    if (run === undefined) return;
    run.abort.abort();
    await run.finished;
  }

  async cancel(id: string, url: URL): Promise<Response> {
    checkQuery(url, []);
    const { store } = this.#o;
    const stored = store.get(id);
    if (stored === undefined) throw notFound(`Response with id '${id}' not found.`);
    if (stored.response.background !== true) {
      throw invalidRequest("Only responses created with 'background: true' can be cancelled", null);
    }
    await this.#stopRun(id);
    const after = store.get(id);
    if (after === undefined) throw notFound(`Response with id '${id}' not found.`);
    return jsonResponse(this.#settleOrphan(id, after));
  }

  inputItems(id: string, url: URL): Response {
    checkQuery(url, ["limit", "order", "after", "include"]);
    const q = url.searchParams;
    const limitText = q.get("limit") ?? "20";
    const limit = Number(limitText);
    if (!/^\d+$/.test(limitText) || limit < 1 || limit > 100) {
      throw invalidRequest("'limit' must be an integer between 1 and 100", "limit", "invalid_value");
    }
    const order = q.get("order") ?? "desc";
    if (order !== "asc" && order !== "desc") {
      throw invalidRequest("'order' must be 'asc' or 'desc'", "order", "invalid_value");
    }
    const after = q.get("after");
    const page = this.#o.store.listInputItems(id, { limit, order, ...(after === null ? {} : { after }) });
    if (page === undefined) throw notFound(`Response with id '${id}' not found.`);
    return jsonResponse({ object: "list", ...page });
  }

  /** `POST /v1/responses/compact` (response_compaction.ts). Nothing is stored. */
  async compact(
    body: Record<string, unknown>,
    request: Request,
    startedAt: number,
    trace: RequestTrace = new RequestTrace(),
  ): Promise<Response> {
    const prep = await prepareResponse(summaryRequest(body), this.#ctx);
    const { engine, format } = this.#o;
    const id = prep.template.id;
    trace.responseId = id;
    const generation = startGeneration(engine, {
      id,
      promptTokens: prep.promptTokens,
      sampling: prep.sampling,
      metrics: this.#o.metrics,
      startedAt,
    });
    this.#foreground.set(id, generation.abort);
    stopOnDisconnect(request, generation);
    trace.count(generation.done);
    try {
      const { response } = await collectResponse(generation.chunks, {
        template: prep.template,
        tokenizer: engine.tokenizer,
        parser: format.createParser({ toolNames: [], toolChoice: "none" }),
        abortAs: this.#abortAs,
        ...(this.#o.ids === undefined ? {} : { ids: this.#o.ids }),
      });
      if (response.status === "failed" && this.#shuttingDown) throw shuttingDown();
      const summary = summaryText(response);
      const compaction = {
        id: this.#ctx.newId("cmp"),
        type: "compaction",
        encrypted_content: this.#o.seal.sealCompaction(summary),
      };
      return jsonResponse({
        id,
        object: "response.compaction",
        created_at: prep.template.createdAt,
        output: [...keptUserMessages(prep.items, () => this.#ctx.newId("msg")), compaction],
        usage: response.usage,
      });
    } finally {
      this.#foreground.delete(id);
    }
  }

  async inputTokens(body: Record<string, unknown>): Promise<Response> {
    const parsed = parseOrThrow(InputTokensSchema, body);
    if (parsed.model !== undefined && parsed.model !== this.#o.modelId) {
      throw modelNotFound(parsed.model, this.#o.modelId);
    }
    const prepared = await preparePrompt(parsed, this.#ctx);
    return jsonResponse({ object: "response.input_tokens", input_tokens: prepared.promptTokens.length });
  }
}
