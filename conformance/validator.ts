/**
 * Conformance validator for one Responses event stream, judged on the parsed wire JSON (never on rill's own types,
 * so it sees exactly what a client sees). Invariant numbers are those of §5 of `responses-streaming.md`.
 *
 * Checked from one event list (`validateStream`):
 *   6 (top-level `error` key), 7, 8 (event fields and item/part fields with JSON types), 9, 10,
 *   15–24, 27–37, 39–50, 52–60, 65–69, 72–79, 81, 82, 84–88, 90–92.
 * Checked from the SSE body as well (`validateSSE`): 2, 3, 4, 5, 6 (SSE event name `error`).
 *
 * Not checked here, and why:
 *   1        HTTP status and Content-Type: needs the HTTP response.
 *   11–13    replay and `starting_after`: need a second, resumed stream.
 *   14       how numbers are assigned is a design rule; its observable part is 9 and 10.
 *   25, 26   client disconnect and non-stream parity: need HTTP and a second request.
 *   38       whether generation stopped inside an item is engine knowledge; the observable part is 36, 37, 82.
 *   51, 61   permissions, not prohibitions (empty parts, part-less reasoning items are legal; golden tests pin them).
 *   62       channel accuracy needs the model's tokens.
 *   63, 64   need the request's reasoning configuration (`include_reasoning`, `reasoning.summary`).
 *   70, 71   need the tool's strictness and the model output; distinct call ids are checked by 33.
 *   80       needs the model output; markup in text is checked by 58.
 *   83       the SDK fold of a stream whose items are all closed equals the `output_item.done` items, so it is
 *            exactly 28 + 81 + 82.
 *   89       reduces to 36 + 37 + 82 plus engine knowledge (38).
 *   93–111, 113, 114  caching, parity, determinism, token accounting, stored responses and HTTP endpoints: need
 *            the engine, the tokens or more than one request.
 *   112      covered by 8 (error event shape), 9 (next sequence number), 23 (followed by response.failed) and
 *            85 (response.error set).
 *   115      covered by 19 (a terminal event exists).
 */
import { checkRequiredFields, isVendorEventType, isWireEventType, type WireEventType } from "./validator_catalogue.ts";
import { ItemTracker, payloadFamily } from "./validator_items.ts";
import { isRecord, type JsonRecord } from "./validator_json.ts";
import { LifecycleTracker } from "./validator_lifecycle.ts";
import { type Violation, ViolationLog } from "./validator_report.ts";
import { parseSSEFrames } from "./validator_sse.ts";
import { checkTerminal } from "./validator_terminal.ts";

export type { Violation } from "./validator_report.ts";

/** Options of `validateStream` / `validateSSE`. */
export interface ValidateOptions {
  /** The request was `background: true` (allows `queued`). Defaults to the first event's `response.background`. */
  background?: boolean;
  /** Logprobs were requested (true) or not (false); undefined checks only the shape of logprobs sent (54). */
  logprobs?: boolean;
  /** Skip invariant 58 (model markup in visible text), for models without the corresponding parsers. */
  allowMarkup?: boolean;
  /**
   * The model output itself may hold invalid UTF-8 (random token scripts), so U+FFFD in text is legitimate and only
   * the surrogate-splitting half of invariant 53 is checked.
   */
  allowReplacementChar?: boolean;
  /**
   * The response was cancelled (§5 105): the spec has no cancel event, so the stream may stop after the last event
   * already emitted, without a terminal event and with its last item open. A terminal event, if sent, is judged.
   */
  cancelled?: boolean;
}

/** Checks every single-stream invariant of §5 on a list of parsed events; returns all violations found. */
export function validateStream(events: readonly unknown[], options: ValidateOptions = {}): Violation[] {
  const log = new ViolationLog();
  const lifecycle = new LifecycleTracker(log, options.background);
  const items = new ItemTracker(log, {
    logprobs: options.logprobs,
    allowMarkup: options.allowMarkup ?? false,
    allowReplacementChar: options.allowReplacementChar ?? false,
  });
  if (events.length === 0) log.add(15, -1, "stream has no events");
  let previousSequence: number | undefined;
  for (let index = 0; index < events.length; index++) {
    const event = events[index];
    if (!isRecord(event)) {
      log.add(8, index, "event must be a JSON object");
      previousSequence = undefined;
      continue;
    }
    const type = event["type"];
    if (typeof type !== "string") {
      log.add(8, index, "event.type must be a string");
      previousSequence = undefined;
      continue;
    }
    if (index === 0) lifecycle.checkFirst(type);
    lifecycle.beforeEvent(index, type);
    previousSequence = checkSequence(log, index, event, previousSequence);
    if (type !== "error" && Object.hasOwn(event, "error")) {
      log.add(6, index, `${type} has a top-level "error" key; the SDK treats it as a stream error`);
    }
    if (!isWireEventType(type)) {
      if (isVendorEventType(type)) continue;
      log.add(7, index, `${JSON.stringify(type)} is not a ResponseStreamEvent type`);
      if (type.startsWith("response.reasoning_part.")) {
        log.add(59, index, `${type} is not a spec event; reasoning text parts use content_part.*`);
      }
      continue;
    }
    checkRequiredFields(log, index, type, event);
    dispatch(index, type, event, lifecycle, items);
  }
  const terminal = lifecycle.terminal;
  const cancelledEarly = terminal === undefined && options.cancelled === true;
  if (!cancelledEarly) {
    lifecycle.finish();
    const terminalOutput = terminal?.response["output"];
    items.finish(terminal?.type, Array.isArray(terminalOutput) ? terminalOutput.length : 0);
  }
  if (terminal !== undefined) checkTerminal(log, terminal, items);
  return log.violations;
}

/** Parses an SSE body, checks its framing, then validates the events it carried. */
export function validateSSE(
  body: string,
  options: ValidateOptions = {},
): { events: unknown[]; violations: Violation[] } {
  const log = new ViolationLog();
  const events = parseSSEFrames(body, log);
  const violations = [...log.violations, ...validateStream(events, options)];
  // Stable sort by event index; stream-wide violations (-1) go last.
  const key = (v: Violation) => (v.index < 0 ? Number.MAX_SAFE_INTEGER : v.index);
  violations.sort((a, b) => key(a) - key(b));
  return { events, violations };
}

/**
 * Invariants 9 and 10 for one event. A broken run is reported once at the discontinuity, not on every later event,
 * so one lost event produces one violation.
 */
function checkSequence(
  log: ViolationLog,
  index: number,
  event: JsonRecord,
  previous: number | undefined,
): number | undefined {
  const sequence = event["sequence_number"];
  if (typeof sequence !== "number" || !Number.isInteger(sequence)) {
    log.add(8, index, "sequence_number must be an integer");
    return undefined;
  }
  if (sequence === -1) log.add(10, index, "sequence_number is -1 (a placeholder that was never assigned)");
  if (sequence !== index && (previous === undefined || sequence !== previous + 1)) {
    const got = previous === undefined ? `${sequence}` : `${sequence} after ${previous}`;
    log.add(9, index, `sequence_number must be ${index} (0, 1, 2, … with no gaps), got ${got}`);
  }
  for (const key in event) {
    if (key === "sequence_number") continue;
    const value = event[key];
    if (typeof value === "object" && value !== null) {
      const path = nestedSequenceNumber(value, key);
      if (path !== undefined) log.add(10, index, `nested ${path} must not exist`);
    }
  }
  return sequence;
}

/** The path of a `sequence_number` key anywhere inside `value`, if there is one. */
function nestedSequenceNumber(value: object, path: string): string | undefined {
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const element: unknown = value[i];
      if (typeof element === "object" && element !== null) {
        const found = nestedSequenceNumber(element, `${path}[${i}]`);
        if (found !== undefined) return found;
      }
    }
    return undefined;
  }
  const record = value as JsonRecord;
  for (const key in record) {
    if (key === "sequence_number") return `${path}.sequence_number`;
    const child = record[key];
    if (typeof child === "object" && child !== null) {
      const found = nestedSequenceNumber(child, `${path}.${key}`);
      if (found !== undefined) return found;
    }
  }
  return undefined;
}

function dispatch(
  index: number,
  type: WireEventType,
  event: JsonRecord,
  lifecycle: LifecycleTracker,
  items: ItemTracker,
): void {
  switch (type) {
    case "response.created":
    case "response.queued":
    case "response.in_progress":
    case "response.completed":
    case "response.incomplete":
    case "response.failed": {
      const response = event["response"];
      if (isRecord(response)) lifecycle.onLifecycle(index, type, response);
      return;
    }
    case "error":
      lifecycle.onError(index);
      return;
    case "response.output_item.added":
      items.added(index, event);
      return;
    case "response.output_item.done":
      items.done(index, event);
      return;
    case "response.content_part.added":
      items.contentPartAdded(index, event);
      return;
    case "response.content_part.done":
      items.contentPartDone(index, event);
      return;
    case "response.output_text.delta":
      items.text(index, event, "output_text", false);
      return;
    case "response.output_text.done":
      items.text(index, event, "output_text", true);
      return;
    case "response.refusal.delta":
      items.text(index, event, "refusal", false);
      return;
    case "response.refusal.done":
      items.text(index, event, "refusal", true);
      return;
    case "response.reasoning_text.delta":
      items.text(index, event, "reasoning_text", false);
      return;
    case "response.reasoning_text.done":
      items.text(index, event, "reasoning_text", true);
      return;
    case "response.output_text.annotation.added":
      items.annotation(index, event);
      return;
    case "response.reasoning_summary_part.added":
      items.summaryPartAdded(index, event);
      return;
    case "response.reasoning_summary_part.done":
      items.summaryPartDone(index, event);
      return;
    case "response.reasoning_summary_text.delta":
      items.summaryText(index, event, false);
      return;
    case "response.reasoning_summary_text.done":
      items.summaryText(index, event, true);
      return;
    case "response.function_call_arguments.delta":
    case "response.custom_tool_call_input.delta":
    case "response.mcp_call_arguments.delta":
    case "response.code_interpreter_call_code.delta":
    case "response.function_call_arguments.done":
    case "response.custom_tool_call_input.done":
    case "response.mcp_call_arguments.done":
    case "response.code_interpreter_call_code.done": {
      const family = payloadFamily(type);
      if (family !== undefined) items.payload(index, type, event, family, type.endsWith(".done"));
      return;
    }
    case "response.mcp_call.in_progress":
    case "response.mcp_call.completed":
    case "response.mcp_call.failed":
      items.status(index, type, event, "mcp_call");
      return;
    case "response.mcp_list_tools.in_progress":
    case "response.mcp_list_tools.completed":
    case "response.mcp_list_tools.failed":
      items.status(index, type, event, "mcp_list_tools");
      return;
    case "response.code_interpreter_call.in_progress":
    case "response.code_interpreter_call.interpreting":
    case "response.code_interpreter_call.completed":
      items.status(index, type, event, "code_interpreter_call");
      return;
    case "response.web_search_call.in_progress":
    case "response.web_search_call.searching":
    case "response.web_search_call.completed":
      items.status(index, type, event, "web_search_call");
      return;
    case "response.file_search_call.in_progress":
    case "response.file_search_call.searching":
    case "response.file_search_call.completed":
      items.reference(index, event, "file_search_call");
      return;
    case "response.image_generation_call.in_progress":
    case "response.image_generation_call.generating":
    case "response.image_generation_call.partial_image":
    case "response.image_generation_call.completed":
      items.reference(index, event, "image_generation_call");
      return;
    case "response.shell_call_output_content.delta":
    case "response.shell_call_output_content.done":
      items.reference(index, event, undefined);
      return;
    case "response.shell_call_command.added":
    case "response.shell_call_command.delta":
    case "response.shell_call_command.done":
      items.indexOnly(index, type, event);
      return;
    case "response.audio.delta":
    case "response.audio.done":
    case "response.audio.transcript.delta":
    case "response.audio.transcript.done":
      return;
    default: {
      const unreachable: never = type;
      return unreachable;
    }
  }
}
