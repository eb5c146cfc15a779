/**
 * The lifecycle envelope of one stream: where `response.created` / `queued` / `in_progress` / the terminal event /
 * `error` may stand (§5 invariants 15–19, 23, 24) and what each lifecycle event's Response object must say
 * (16, 20–22, 85–88, 90–92).
 */
import { firstDifference, isIndex, isNonEmptyString, isRecord, type JsonRecord, show } from "./validator_json.ts";
import type { ViolationLog } from "./validator_report.ts";
// The lifecycle event types (payload: a full Response object) and the three terminal ones (R4).
import type { LifecycleEventType as LifecycleType, TerminalEventType as TerminalType } from "../events/types.ts";

/** The terminal event once seen. */
export interface Terminal {
  readonly index: number;
  readonly type: TerminalType;
  readonly response: JsonRecord;
}

/** True for the three terminal event types. */
export function isTerminalType(type: string): type is TerminalType {
  return type === "response.completed" || type === "response.incomplete" || type === "response.failed";
}

/** [OAS] `Response.required` (invariant 22). */
const REQUIRED_RESPONSE_KEYS = [
  "id",
  "object",
  "created_at",
  "error",
  "incomplete_details",
  "instructions",
  "model",
  "tools",
  "output",
  "parallel_tool_calls",
  "metadata",
  "tool_choice",
  "temperature",
  "top_p",
] as const;

/**
 * Request settings every lifecycle Response echoes unchanged (invariant 87). `service_tier` is left out: the
 * created event may say `auto` and the terminal one the effective tier ([PRISM]).
 */
const ECHOED_KEYS = [
  "instructions",
  "tools",
  "tool_choice",
  "parallel_tool_calls",
  "temperature",
  "top_p",
  "top_logprobs",
  "max_output_tokens",
  "max_tool_calls",
  "previous_response_id",
  "reasoning",
  "text",
  "truncation",
  "metadata",
  "store",
  "background",
  "user",
  "safety_identifier",
  "prompt_cache_key",
] as const;

/** [OAS] `ResponseErrorCode` (invariant 85). */
const RESPONSE_ERROR_CODES: ReadonlySet<string> = new Set([
  "server_error",
  "rate_limit_exceeded",
  "invalid_prompt",
  "data_residency_mismatch",
  "bio_policy",
  "misalignment_policy_violation",
  "vector_store_timeout",
  "invalid_image",
  "invalid_image_format",
  "invalid_base64_image",
  "invalid_image_url",
  "image_too_large",
  "image_too_small",
  "image_parse_error",
  "image_content_policy_violation",
  "invalid_image_mode",
  "image_file_too_large",
  "unsupported_image_media_type",
  "empty_image_file",
  "failed_to_download_image",
  "image_file_not_found",
]);

const STATUS_OF: { readonly [K in Exclude<LifecycleType, "response.created">]: string } = {
  "response.queued": "queued",
  "response.in_progress": "in_progress",
  "response.completed": "completed",
  "response.incomplete": "incomplete",
  "response.failed": "failed",
};

/** Tracks the envelope while events stream past; one instance per stream. */
export class LifecycleTracker {
  readonly #log: ViolationLog;
  readonly #backgroundOption: boolean | undefined;
  #background = false;
  #first: JsonRecord | undefined;
  #terminal: Terminal | undefined;
  #afterTerminal = 0;
  #queuedAt = -1;
  #inProgressAt = -1;
  #pendingError = -1;

  constructor(log: ViolationLog, background: boolean | undefined) {
    this.#log = log;
    this.#backgroundOption = background;
  }

  /** The terminal event, once seen. */
  get terminal(): Terminal | undefined {
    return this.#terminal;
  }

  /** Runs before every event's own checks: ordering relative to `error` (23) and to the terminal event (24). */
  beforeEvent(index: number, type: string): void {
    if (this.#pendingError >= 0) {
      if (type !== "response.failed") {
        this.#log.add(
          23,
          index,
          `error event at index ${this.#pendingError} must be followed immediately by response.failed, got ${type}`,
        );
      }
      this.#pendingError = -1;
    }
    if (this.#terminal !== undefined) {
      if (isTerminalType(type)) {
        this.#log.add(19, index, `second terminal event ${type}; the first was at index ${this.#terminal.index}`);
      } else if (this.#afterTerminal === 0) {
        this.#log.add(24, index, `${type} sent after the terminal event at index ${this.#terminal.index}`);
      }
      this.#afterTerminal++;
    }
  }

  /** The first event must be `response.created` (15). */
  checkFirst(type: string): void {
    if (type !== "response.created") {
      this.#log.add(15, 0, `first event must be response.created, got ${type}`);
    }
  }

  /** An `error` event: remembered so the next event can be checked (23). */
  onError(index: number): void {
    this.#pendingError = index;
  }

  /** A lifecycle event carrying a Response object (already known to be an object, invariant 8). */
  onLifecycle(index: number, type: LifecycleType, response: JsonRecord): void {
    const log = this.#log;
    if (this.#first === undefined) {
      this.#first = response;
      this.#background = this.#backgroundOption ?? response["background"] === true;
    }
    this.#checkResponse(index, type, response);
    switch (type) {
      case "response.created":
        if (index !== 0) log.add(15, index, "response.created must appear only as the first event");
        this.#checkCreated(index, response);
        return;
      case "response.queued":
        if (!this.#background) {
          log.add(18, index, "response.queued in a response that is not background");
        } else if (index !== 1 || this.#queuedAt >= 0) {
          log.add(18, index, "response.queued must come once, right after response.created");
        }
        if (this.#queuedAt < 0) this.#queuedAt = index;
        return;
      case "response.in_progress": {
        const expected = this.#queuedAt === 1 ? 2 : 1;
        if (this.#inProgressAt >= 0) {
          log.add(17, index, `second response.in_progress (the first was at index ${this.#inProgressAt})`);
        } else if (index !== expected) {
          log.add(17, index, `response.in_progress must be event ${expected}, found at ${index}`);
        }
        if (this.#inProgressAt < 0) this.#inProgressAt = index;
        return;
      }
      case "response.completed":
      case "response.incomplete":
      case "response.failed":
        if (this.#terminal === undefined) this.#terminal = { index, type, response };
        return;
      default: {
        const unreachable: never = type;
        return unreachable;
      }
    }
  }

  /** End of stream: exactly one terminal event must have been sent (19). */
  finish(): void {
    if (this.#terminal === undefined) {
      this.#log.add(
        19,
        -1,
        "stream has no terminal event (response.completed, response.incomplete or response.failed)",
      );
    }
  }

  #checkCreated(index: number, response: JsonRecord): void {
    const status = response["status"];
    const allowed = this.#background ? status === "queued" || status === "in_progress" : status === "in_progress";
    if (!allowed) {
      const expected = this.#background ? `"queued" or "in_progress"` : `"in_progress"`;
      this.#log.add(16, index, `response.created must carry status ${expected}, got ${show(status)}`);
    }
    const output = response["output"];
    if (Array.isArray(output) && output.length > 0) {
      this.#log.add(16, index, `response.created must carry output [], got ${output.length} item(s)`);
    }
  }

  #checkResponse(index: number, type: LifecycleType, r: JsonRecord): void {
    const log = this.#log;
    for (const key of REQUIRED_RESPONSE_KEYS) {
      if (!Object.hasOwn(r, key)) log.add(22, index, `${type}: response.${key} is required (use null when empty)`);
    }
    if (Object.hasOwn(r, "output") && !Array.isArray(r["output"])) {
      log.add(22, index, `${type}: response.output must be an array`);
    }
    const terminal = isTerminalType(type);
    const first = this.#first;
    const id = r["id"];
    if (typeof id !== "string" || !id.startsWith("resp_")) {
      log.add(88, index, `${type}: response.id must start with "resp_", got ${show(id)}`);
    }
    if (r["object"] !== "response") log.add(21, index, `${type}: response.object must be "response"`);
    if (first !== undefined && first !== r) {
      if (id !== first["id"]) {
        log.add(terminal ? 88 : 21, index, `${type}: response.id ${show(id)} differs from the first event's`);
      }
      for (const key of ["created_at", "model", "object"] as const) {
        if (firstDifference(r[key], first[key]) !== undefined) {
          log.add(21, index, `${type}: response.${key} ${show(r[key])} differs from the first event's`);
        }
      }
      for (const key of ECHOED_KEYS) {
        if (firstDifference(r[key], first[key]) !== undefined) {
          log.add(87, index, `${type}: echoed response.${key} changed from ${show(first[key])} to ${show(r[key])}`);
        }
      }
    }
    if (typeof r["created_at"] !== "number") log.add(22, index, `${type}: response.created_at must be a number`);
    if (terminal && !isRecord(r["text"])) {
      log.add(87, index, `${type}: response.text must echo the text config (default {format:{type:"text"}})`);
    }
    const status = r["status"];
    if (type !== "response.created" && status !== STATUS_OF[type]) {
      log.add(20, index, `${type} must carry status "${STATUS_OF[type]}", got ${show(status)}`);
    }
    this.#checkStatusDetails(index, type, r);
    this.#checkUsage(index, type, r);
  }

  /** Invariants 85 and 86: status, incomplete_details, error and completed_at agree. */
  #checkStatusDetails(index: number, type: LifecycleType, r: JsonRecord): void {
    const log = this.#log;
    const status = r["status"];
    const details = r["incomplete_details"];
    const error = r["error"];
    if (status === "incomplete") {
      const reason = isRecord(details) ? details["reason"] : undefined;
      if (reason !== "max_output_tokens" && reason !== "content_filter") {
        log.add(85, index, `${type}: incomplete response needs incomplete_details.reason, got ${show(details)}`);
      }
    } else if (details !== null && details !== undefined) {
      log.add(85, index, `${type}: incomplete_details must be null when status is ${show(status)}`);
    }
    if (status === "failed") {
      const code = isRecord(error) ? error["code"] : undefined;
      const message = isRecord(error) ? error["message"] : undefined;
      if (typeof code !== "string" || !RESPONSE_ERROR_CODES.has(code) || !isNonEmptyString(message)) {
        log.add(
          85,
          index,
          `${type}: failed response needs error {code: ResponseErrorCode, message}, got ${show(error)}`,
        );
      }
    } else if (error !== null && error !== undefined) {
      log.add(85, index, `${type}: error must be null when status is ${show(status)}`);
    }
    const completedAt = r["completed_at"];
    if (status === "completed") {
      const createdAt = r["created_at"];
      if (typeof completedAt !== "number" || (typeof createdAt === "number" && completedAt < createdAt)) {
        log.add(86, index, `${type}: completed_at must be a number >= created_at, got ${show(completedAt)}`);
      }
    } else if (completedAt !== null && completedAt !== undefined) {
      log.add(86, index, `${type}: completed_at must be null or absent when status is ${show(status)}`);
    }
  }

  /** Invariants 90–92: usage presence and arithmetic. */
  #checkUsage(index: number, type: LifecycleType, r: JsonRecord): void {
    const log = this.#log;
    const usage = r["usage"];
    const nonTerminal = type === "response.created" || type === "response.queued" || type === "response.in_progress";
    if (nonTerminal) {
      if (usage !== null && usage !== undefined) log.add(90, index, `${type}: usage must be null before the end`);
      return;
    }
    if (usage === null || usage === undefined) {
      if (type !== "response.failed") log.add(90, index, `${type}: usage must be populated`);
      return;
    }
    if (!isRecord(usage)) {
      log.add(91, index, `${type}: usage must be an object`);
      return;
    }
    const input = usage["input_tokens"];
    const output = usage["output_tokens"];
    const total = usage["total_tokens"];
    const inDetails = usage["input_tokens_details"];
    const outDetails = usage["output_tokens_details"];
    const cached = isRecord(inDetails) ? inDetails["cached_tokens"] : undefined;
    const cacheWrite = isRecord(inDetails) ? inDetails["cache_write_tokens"] : undefined;
    const reasoning = isRecord(outDetails) ? outDetails["reasoning_tokens"] : undefined;
    const counts = { input_tokens: input, output_tokens: output, total_tokens: total };
    const details = { cached_tokens: cached, cache_write_tokens: cacheWrite, reasoning_tokens: reasoning };
    for (const [name, value] of Object.entries({ ...counts, ...details })) {
      if (!isIndex(value)) log.add(91, index, `${type}: usage ${name} must be a non-negative integer`);
    }
    if (isIndex(input) && isIndex(output) && isIndex(total) && total !== input + output) {
      log.add(91, index, `${type}: usage.total_tokens ${total} != input_tokens ${input} + output_tokens ${output}`);
    }
    if (isIndex(cached) && isIndex(input) && cached > input) {
      log.add(91, index, `${type}: cached_tokens ${cached} > input_tokens ${input}`);
    }
    if (isIndex(reasoning) && isIndex(output) && reasoning > output) {
      log.add(91, index, `${type}: reasoning_tokens ${reasoning} > output_tokens ${output}`);
    }
    const max = r["max_output_tokens"];
    if (typeof max === "number" && isIndex(output) && output > max) {
      log.add(92, index, `${type}: output_tokens ${output} > max_output_tokens ${max}`);
    }
  }
}
