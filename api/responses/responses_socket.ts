/**
 * WebSocket mode of `/v1/responses` (OpenAI's Responses WebSocket protocol) for one connection:
 * - the client sends `response.create` messages: the body of `POST /v1/responses` plus `type`, and optionally the
 *   `stream_id` lane, which every event of that response echoes. `stream` is implied; `background` is refused.
 * - each response's events are the SSE stream's events, one JSON text message each, with the same sequence numbers
 *   and lifecycle: they come from the same pipeline (ResponsesService.stream).
 * - one response runs at a time per connection; a `response.create` sent while one runs waits its turn (requests
 *   are processed first in, first out, as the protocol's lanes are). At most `maxPending` may wait.
 * - `previous_response_id` continues from this connection's recent responses (RecentResponses) even with
 *   `store: false`, and otherwise from the store, as over HTTP.
 * - a turn that fails (its message refused, or its response ending `failed`) evicts the `previous_response_id` it
 *   named from the connection's responses, as the protocol requires: a client must not keep continuing from state
 *   that just failed, so with `store: false` continuing from it again is `previous_response_not_found`.
 * - a message that cannot start a response (not JSON, schema errors, an unknown previous response, a full queue) is
 *   answered with an `error` event `{type:"error", status, error:{type, code, message, param}}` and the connection
 *   stays usable; failures once a response started are that stream's own `error` + `response.failed`.
 * - closing the connection stops the running response (it ends "cancelled", as when an SSE client disconnects) and
 *   drops the waiting ones.
 * - backpressure: a step's events are read only once the socket's send buffer is under `highWaterBytes`, so a client
 *   that reads slowly holds its generation back instead of growing the buffer.
 */
import { ApiError, invalidRequest, toApiError, unsupportedParameter } from "../../prompt/errors.ts";
import { checkBodyDepth } from "../json_limits.ts";
import type { PreviousLookup } from "./responses_request.ts";
import type { StreamedResponse } from "./responses_service.ts";
import { RecentResponses } from "./recent_responses.ts";
import { RequestTrace } from "../request_trace.ts";

/** The part of a WebSocket this handler uses (Deno's server-side WebSocket, or a test double). */
export interface SocketLike {
  readonly readyState: number;
  readonly bufferedAmount: number;
  send(data: string): void;
  close(code?: number, reason?: string): void;
  addEventListener(type: "message", listener: (event: MessageEvent) => void): void;
  addEventListener(type: "close", listener: () => void): void;
}

/** Starts one streamed response; `previous` is this connection's own recent responses. */
export type StartResponse = (
  body: Record<string, unknown>,
  previous: PreviousLookup,
  startedAt: number,
  trace: RequestTrace,
) => Promise<StreamedResponse>;

/** What the access log hears about each response (or refused message) of a connection. */
export interface SocketResponseLog {
  /** 200 for a response that started; the error's status for a message refused before it did. */
  readonly status: number;
  readonly ms: number;
  readonly id?: string;
  readonly input_tokens?: number;
  readonly output_tokens?: number;
  readonly reason?: string;
}

export interface ResponsesSocketOptions {
  readonly start: StartResponse;
  /** Largest message accepted, in UTF-16 code units of its text (the HTTP body limit in characters). */
  readonly maxMessageChars: number;
  /** `response.create` messages that may wait behind the running one. */
  readonly maxPending?: number;
  /** Responses kept for `previous_response_id` with `store: false`. */
  readonly recent?: number;
  /** Send-buffer bytes above which no further events are read. */
  readonly highWaterBytes?: number;
  /** An error that is not the client's (logged; the client sees a generic server_error). */
  readonly onError?: (error: unknown) => void;
  readonly onResponse?: (entry: SocketResponseLog) => void;
  /** Refuses new responses (the server is draining); returns the error to send, or null to go ahead. */
  readonly refuse?: () => ApiError | null;
}

const OPEN = 1;

interface Pending {
  readonly body: Record<string, unknown>;
  readonly streamId: string | undefined;
  readonly receivedAt: number;
}

export class ResponsesSocket {
  readonly #socket: SocketLike;
  readonly #o: ResponsesSocketOptions;
  readonly #recent: RecentResponses;
  readonly #queue: Pending[] = [];
  #running: StreamedResponse | null = null;
  #working = false;
  #closed = false;
  readonly #closedSignal = Promise.withResolvers<void>();
  readonly #finished = Promise.withResolvers<void>();

  constructor(socket: SocketLike, options: ResponsesSocketOptions) {
    this.#socket = socket;
    this.#o = options;
    this.#recent = new RecentResponses(options.recent ?? 16);
    socket.addEventListener("message", (event) => this.#onMessage(event.data));
    socket.addEventListener("close", () => {
      this.#closed = true;
      this.#queue.length = 0;
      this.#running?.stop();
      this.#closedSignal.resolve();
      if (!this.#working) this.#finished.resolve();
    });
  }

  /** Resolves once the connection closed and its running response has stopped. */
  get finished(): Promise<void> {
    return this.#finished.promise;
  }

  /** Closes the connection (e.g. at shutdown); the running response is stopped by the close. */
  close(code: number, reason: string): void {
    try {
      this.#socket.close(code, reason);
    } catch { /* already closing */ }
  }

  #onMessage(data: unknown): void {
    if (this.#closed) return;
    const receivedAt = performance.now();
    let message: unknown;
    let body: Record<string, unknown>;
    let streamId: string | undefined;
    try {
      message = this.#read(data);
      ({ body, streamId } = this.#parse(message));
      const refused = this.#o.refuse?.() ?? null;
      if (refused !== null) throw refused;
      if (this.#queue.length >= (this.#o.maxPending ?? 8)) {
        throw invalidRequest(
          `Too many response.create messages are waiting on this connection (at most ${this.#o.maxPending ?? 8})`,
          null,
          "too_many_pending_requests",
        );
      }
    } catch (error) {
      this.#refuse(error, streamId, receivedAt, isCreate(message) ? previousIdOf(message) : undefined);
      return;
    }
    this.#queue.push({ body, streamId, receivedAt });
    if (!this.#working) this.#work();
  }

  /** The message's JSON value; throws the ApiError the client is told. */
  #read(data: unknown): unknown {
    if (typeof data !== "string") {
      throw invalidRequest("Messages must be JSON text frames; binary frames are not accepted", null, "invalid_json");
    }
    if (data.length > this.#o.maxMessageChars) {
      throw invalidRequest(
        `The message is larger than the limit of ${this.#o.maxMessageChars} characters`,
        null,
        "payload_too_large",
      );
    }
    let value: unknown;
    try {
      value = JSON.parse(data);
    } catch {
      throw invalidRequest("We could not parse the JSON of your message.", null, "invalid_json");
    }
    return value;
  }

  /** The message as a create body and its lane; throws the ApiError the client is told. */
  #parse(value: unknown): { body: Record<string, unknown>; streamId: string | undefined } {
    if (typeof value !== "object" || value === null || Array.isArray(value)) {
      throw invalidRequest("A message must be a JSON object", null, "invalid_type");
    }
    checkBodyDepth(value);
    const { type, stream_id: streamId, stream, background, ...body } = value as Record<string, unknown>;
    const lane = typeof streamId === "string" ? streamId : undefined;
    if (streamId !== undefined && lane === undefined) {
      throw invalidRequest("'stream_id' must be a string", "stream_id", "invalid_type");
    }
    if (type === "response.steer") {
      throw unsupportedParameter("type", "'response.steer' is not supported by rill; send a new response.create");
    }
    if (type !== "response.create") {
      throw invalidRequest(
        `Unknown message type ${JSON.stringify(type)}; expected 'response.create'`,
        "type",
        "invalid_value",
      );
    }
    if (background === true) {
      throw unsupportedParameter("background", "'background' is not supported in WebSocket mode");
    }
    if (stream === false) {
      throw invalidRequest("Responses are always streamed in WebSocket mode; leave out 'stream'", "stream");
    }
    return { body, streamId: lane };
  }

  /** Answers a message that could not start a response; the previous response it named is evicted. */
  #refuse(error: unknown, streamId: string | undefined, receivedAt: number, previousId: string | undefined): void {
    if (previousId !== undefined) this.#recent.forget(previousId);
    const api = toApiError(error);
    if (!(error instanceof ApiError) && api.status === 500) this.#o.onError?.(error);
    const { error: detail } = api.toJSON();
    // The code WebSocket clients look for to restart a chain with full context.
    if (api.status === 404 && api.param === "previous_response_id") detail.code = "previous_response_not_found";
    this.#send({
      type: "error",
      status: api.status,
      error: detail,
      ...(streamId === undefined ? {} : { stream_id: streamId }),
    });
    this.#o.onResponse?.({
      status: api.status,
      ms: performance.now() - receivedAt,
      reason: api.code === null ? api.message : `${api.code}: ${api.message}`,
    });
  }

  #send(event: unknown): void {
    if (this.#closed || this.#socket.readyState !== OPEN) return;
    try {
      this.#socket.send(JSON.stringify(event));
    } catch {
      // The connection is closing; its close event stops the response.
    }
  }

  /** Runs the queued requests one after another until the queue is empty or the connection closed. */
  async #work(): Promise<void> {
    this.#working = true;
    try {
      for (let next = this.#queue.shift(); next !== undefined && !this.#closed; next = this.#queue.shift()) {
        await this.#run(next);
      }
    } finally {
      this.#working = false;
      if (this.#closed) this.#finished.resolve();
    }
  }

  async #run(pending: Pending): Promise<void> {
    const trace = new RequestTrace();
    let run: StreamedResponse;
    try {
      run = await this.#o.start(pending.body, this.#recent.lookup, pending.receivedAt, trace);
    } catch (error) {
      this.#refuse(error, pending.streamId, pending.receivedAt, previousIdOf(pending.body));
      return;
    }
    this.#running = run;
    // The connection may have closed while the request was being prepared.
    if (this.#closed) run.stop();
    const lane = pending.streamId;
    try {
      for (let batch = await run.read(); batch !== null; batch = await run.read()) {
        if (this.#closed) continue;
        for (const event of batch) this.#send(socketEvent(event, lane));
        await this.#drained();
      }
    } catch (error) {
      // The pipeline turns engine failures into events; anything thrown here is a bug: stop, and say so.
      this.#o.onError?.(error);
      run.stop();
    } finally {
      this.#running = null;
    }
    const final = run.final();
    if (final.status !== "in_progress" && final.status !== "queued") {
      this.#recent.remember(final as unknown as Record<string, unknown>, run.history);
    }
    if (final.status === "failed") {
      const previousId = previousIdOf(pending.body);
      if (previousId !== undefined) this.#recent.forget(previousId);
    }
    this.#o.onResponse?.({
      status: 200,
      ms: performance.now() - pending.receivedAt,
      id: run.id,
      ...(trace.inputTokens === null ? {} : { input_tokens: trace.inputTokens }),
      ...(trace.outputTokens === null ? {} : { output_tokens: trace.outputTokens }),
    });
  }

  /**
   * Waits, once the send buffer is over the high-water mark, until it is down to a quarter of it (WebSocket has no
   * drain event: it is polled). Waiting for a quarter rather than just under the mark lets a reader that keeps up
   * get many steps per poll, not one.
   */
  async #drained(): Promise<void> {
    const high = this.#o.highWaterBytes ?? 1 << 20;
    if (this.#socket.bufferedAmount <= high) return;
    while (!this.#closed && this.#socket.bufferedAmount > high / 4) {
      await Promise.race([new Promise((resolve) => setTimeout(resolve, 5)), this.#closedSignal.promise]);
    }
  }
}

function isCreate(message: unknown): message is Record<string, unknown> {
  return typeof message === "object" && message !== null && (message as Record<string, unknown>)["type"] ===
      "response.create";
}

/** The `previous_response_id` a create body names, if a string. */
function previousIdOf(body: Record<string, unknown>): string | undefined {
  const id = body["previous_response_id"];
  return typeof id === "string" ? id : undefined;
}

/**
 * A stream event as sent over the socket: with its lane, and an `error` event (a failure after the response started)
 * also carries the nested `error` object of the protocol's error event (ResponseWsError), next to the SSE fields it
 * already has, so WebSocket clients and SSE-shaped readers both find the message.
 */
export function socketEvent(event: object, lane: string | undefined): Record<string, unknown> {
  const e = event as Record<string, unknown>;
  const withLane = lane === undefined ? e : { ...e, stream_id: lane };
  if (e["type"] !== "error") return withLane;
  const code = typeof e["code"] === "string" ? e["code"] : null;
  return {
    ...withLane,
    error: {
      type: "server_error",
      code,
      message: typeof e["message"] === "string" ? e["message"] : "The response failed",
      param: typeof e["param"] === "string" ? e["param"] : null,
    },
  };
}
