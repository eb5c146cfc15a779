/** What `createServer` is given, and the access-log entry it reports for each answered request. */
import type { Engine } from "../engine/engine.ts";
import type { IdSource } from "../events/ids.ts";
import type { ChatFormat } from "../prompt/chat_format.ts";
import type { ResponseStore } from "../api/store/response_store.ts";
import type { SamplingDefaults } from "../api/sampling_defaults.ts";
import type { GateEvent } from "./connection_gate.ts";

export interface ServerOptions {
  readonly engine: Engine;
  readonly format: ChatFormat;
  /** The name clients use in `model` (--served-model-name). */
  readonly modelId: string;
  readonly store: ResponseStore;
  readonly apiKey?: string;
  /** 0 picks a free port. Default 8000. */
  readonly port?: number;
  /** Default 127.0.0.1. */
  readonly hostname?: string;
  readonly maxBodyBytes?: number;
  readonly defaults?: SamplingDefaults;
  /** Output item ids (tests: deterministic). */
  readonly ids?: IdSource;
  /** Called once per request after it was answered (structured access log). */
  readonly onRequest?: (entry: AccessLogEntry) => void;
  /** Called with internal errors that became a 500 (their details never reach the client). */
  readonly onError?: (error: unknown) => void;
  /** Unix seconds the model was loaded, for /v1/models. */
  readonly createdAt?: number;
  /** Connections open at once; more are answered 503. Default 512. */
  readonly maxConnections?: number;
  /** A request's head must arrive within this of its first byte (slowloris). Default 10 s. */
  readonly headerTimeoutMs?: number;
  /** A request's body must arrive within this of its head. Default 60 s. */
  readonly bodyTimeoutMs?: number;
  /** A connection with no request in progress is closed after this. Default 60 s. */
  readonly idleTimeoutMs?: number;
  /** Connection-level events (accept errors, refusals, timeouts, broken framing). */
  readonly onConnectionEvent?: (event: GateEvent) => void;
  /** Origins browsers may call from (cors.ts); `*` for any. Default none. */
  readonly allowedOrigins?: readonly string[];
  /** Serve /metrics without the API key. */
  readonly metricsPublic?: boolean;
  /** 32 bytes sealing `encrypted_content` (reasoning_key.ts). Default: random, valid for this server's life. */
  readonly reasoningKey?: Uint8Array;
}

export interface AccessLogEntry {
  readonly method: string;
  readonly route: string;
  readonly status: number;
  /** Until the response was complete: for a streamed body, until its last byte was produced. */
  readonly ms: number;
  /** The response (or chat completion) id, when the request has one. */
  readonly id?: string;
  readonly input_tokens?: number;
  readonly output_tokens?: number;
  /** Why a request failed (4xx/5xx): the error's code and message. */
  readonly reason?: string;
  readonly streamed?: boolean;
  /** The request's `x-request-id` (request_id.ts). */
  readonly requestId?: string;
}
