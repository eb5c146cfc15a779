/**
 * The one place where a failure becomes an HTTP response.
 *
 * Every non-2xx answer of the server has the OpenAI error shape `{"error":{"message","type","param","code"}}` with all
 * four keys present (`param`/`code` may be null; `code` is a string, never the HTTP status). Anything that is not an
 * `ApiError` (or an engine error with a meaning for the client: a full queue, a chat template refusing the conversation)
 * is answered 500 with a fixed message: internal details (stack traces, paths) never reach the client.
 */
import { QueueFullError } from "../engine/engine.ts";
import { TemplateFormatError } from "./template_format.ts";

export type ErrorType =
  | "invalid_request_error"
  | "authentication_error"
  | "not_found_error"
  | "rate_limit_error"
  | "server_error";

export interface ApiErrorInit {
  readonly status: number;
  readonly type: ErrorType;
  readonly message: string;
  readonly param?: string | null;
  readonly code?: string | null;
  /** Extra response headers (e.g. `Allow`, `Retry-After`, `WWW-Authenticate`). */
  readonly headers?: Readonly<Record<string, string>>;
}

/** An error the client is meant to see, with its HTTP status. */
export class ApiError extends Error {
  override readonly name = "ApiError";
  readonly status: number;
  readonly type: ErrorType;
  readonly param: string | null;
  readonly code: string | null;
  readonly headers: Readonly<Record<string, string>>;

  constructor(init: ApiErrorInit) {
    super(init.message);
    this.status = init.status;
    this.type = init.type;
    this.param = init.param ?? null;
    this.code = init.code ?? null;
    this.headers = init.headers ?? {};
  }

  /** The wire body `{"error":{…}}`. */
  toJSON(): { error: { message: string; type: string; param: string | null; code: string | null } } {
    return { error: { message: this.message, type: this.type, param: this.param, code: this.code } };
  }
}

/**
 * The client went away before its request was read (a disconnect mid-upload). Nobody is left to answer: it is
 * counted as a client abort (status 499 in logs and metrics, as nginx does), never as a server error.
 */
export class ClientGone extends Error {
  override readonly name = "ClientGone";
  constructor(cause: unknown) {
    super("The client closed the connection before the request body was read", { cause });
  }
}

/** Status recorded for a request whose client went away before it was answered (nginx's convention). */
export const CLIENT_CLOSED_REQUEST = 499;

/** 400: the request is malformed or asks for something rill cannot honour; `param` names the offending field. */
export function invalidRequest(message: string, param: string | null, code: string | null = null): ApiError {
  return new ApiError({ status: 400, type: "invalid_request_error", message, param, code });
}

/** 400 for a parameter (or value) that is valid OpenAI but that rill does not support. */
export function unsupportedParameter(param: string, message: string): ApiError {
  return new ApiError({ status: 400, type: "invalid_request_error", message, param, code: "unsupported_parameter" });
}

export function notFound(message: string, param: string | null = null): ApiError {
  return new ApiError({ status: 404, type: "invalid_request_error", message, param, code: "not_found" });
}

/** 404 for a `model` this server does not serve. */
export function modelNotFound(model: string, served: string): ApiError {
  return new ApiError({
    status: 404,
    type: "invalid_request_error",
    message: `The model '${model}' does not exist; this server serves '${served}'`,
    param: "model",
    code: "model_not_found",
  });
}

/**
 * 400 when the prompt leaves no room to generate; `param` names the field that holds the conversation. `atLeast`: the
 * count stopped once the prompt could not fit, so it is a lower bound.
 */
export function contextLengthExceeded(
  promptTokens: number,
  maxModelLen: number,
  param: string,
  atLeast = false,
): ApiError {
  return new ApiError({
    status: 400,
    type: "invalid_request_error",
    message: `The prompt is ${
      atLeast ? "at least " : ""
    }${promptTokens} tokens; this model's context is ${maxModelLen} tokens`,
    param,
    code: "context_length_exceeded",
  });
}

export function methodNotAllowed(method: string, allow: readonly string[]): ApiError {
  return new ApiError({
    status: 405,
    type: "invalid_request_error",
    message: `Method ${method} is not allowed here; allowed: ${allow.join(", ")}`,
    code: "method_not_allowed",
    headers: { allow: allow.join(", ") },
  });
}

export function unauthorized(message: string): ApiError {
  return new ApiError({
    status: 401,
    type: "authentication_error",
    message,
    code: "invalid_api_key",
    headers: { "www-authenticate": 'Bearer realm="rill"' },
  });
}

export function payloadTooLarge(limit: number): ApiError {
  return new ApiError({
    status: 413,
    type: "invalid_request_error",
    message: `Request body is larger than ${limit} bytes`,
    code: "request_too_large",
  });
}

export function unsupportedMediaType(contentType: string | null): ApiError {
  return new ApiError({
    status: 415,
    type: "invalid_request_error",
    message: `Content-Type must be application/json, got ${
      contentType === null ? "none" : JSON.stringify(contentType)
    }`,
    code: "unsupported_media_type",
  });
}

/** Seconds a client is told to wait when the engine queue is full. */
export const RETRY_AFTER_SECONDS = 1;

export function rateLimited(message: string): ApiError {
  return new ApiError({
    status: 429,
    type: "rate_limit_error",
    message,
    code: "rate_limit_exceeded",
    headers: { "retry-after": String(RETRY_AFTER_SECONDS) },
  });
}

export function serverError(message = "The server had an error while processing your request"): ApiError {
  return new ApiError({ status: 500, type: "server_error", message, code: "server_error" });
}

/** 503 while the server drains for shutdown. */
export function unavailable(message: string): ApiError {
  return new ApiError({
    status: 503,
    type: "server_error",
    message,
    code: "service_unavailable",
    headers: { "retry-after": String(RETRY_AFTER_SECONDS) },
  });
}

/** 503 for a request the server stopped at the end of its shutdown grace period; the client may retry elsewhere. */
export function shuttingDown(): ApiError {
  return new ApiError({
    status: 503,
    type: "server_error",
    message: "The server shut down before this response finished; retry the request",
    code: "server_shutting_down",
    headers: { "retry-after": String(RETRY_AFTER_SECONDS) },
  });
}

/** Maps any thrown value to an ApiError; unknown errors become a generic 500 (the caller logs the original). */
export function toApiError(error: unknown): ApiError {
  if (error instanceof ApiError) return error;
  if (error instanceof ClientGone) {
    return new ApiError({
      status: CLIENT_CLOSED_REQUEST,
      type: "invalid_request_error",
      message: error.message,
      code: "client_closed_request",
    });
  }
  if (error instanceof QueueFullError) {
    return rateLimited(`The server is at capacity; try again in ${RETRY_AFTER_SECONDS}s`);
  }
  // Templates are compiled at load time, so at request time this is the template refusing the conversation (a
  // Hugging Face `raise_exception`, e.g. roles that do not alternate): the client's to fix, in the template's words.
  if (error instanceof TemplateFormatError) return invalidRequest(`The model's ${error.message}`, null);
  return serverError();
}

/** The HTTP response for any thrown value. */
export function errorResponse(error: unknown): Response {
  const api = toApiError(error);
  return new Response(JSON.stringify(api.toJSON()), {
    status: api.status,
    headers: { "content-type": "application/json", ...api.headers },
  });
}
