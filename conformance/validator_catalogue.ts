/**
 * The wire event catalogue the validator judges against: the 58 members of [OAS] `ResponseStreamEvent`
 * (responses-streaming.md §1.2) and, per type, the required fields with their JSON types (§5 invariants 7 and 8).
 */
import { type FieldKind, hasKind, isRecord, type JsonRecord, kindName } from "./validator_json.ts";
import type { ViolationLog } from "./validator_report.ts";

/** Every `type` of the [OAS] `ResponseStreamEvent` union (58 members). */
export const WIRE_EVENT_TYPES = [
  "response.audio.delta",
  "response.audio.done",
  "response.audio.transcript.delta",
  "response.audio.transcript.done",
  "response.code_interpreter_call_code.delta",
  "response.code_interpreter_call_code.done",
  "response.code_interpreter_call.completed",
  "response.code_interpreter_call.in_progress",
  "response.code_interpreter_call.interpreting",
  "response.completed",
  "response.content_part.added",
  "response.content_part.done",
  "response.created",
  "error",
  "response.file_search_call.completed",
  "response.file_search_call.in_progress",
  "response.file_search_call.searching",
  "response.function_call_arguments.delta",
  "response.function_call_arguments.done",
  "response.in_progress",
  "response.failed",
  "response.incomplete",
  "response.output_item.added",
  "response.output_item.done",
  "response.reasoning_summary_part.added",
  "response.reasoning_summary_part.done",
  "response.reasoning_summary_text.delta",
  "response.reasoning_summary_text.done",
  "response.reasoning_text.delta",
  "response.reasoning_text.done",
  "response.refusal.delta",
  "response.refusal.done",
  "response.output_text.delta",
  "response.output_text.done",
  "response.web_search_call.completed",
  "response.web_search_call.in_progress",
  "response.web_search_call.searching",
  "response.image_generation_call.completed",
  "response.image_generation_call.generating",
  "response.image_generation_call.in_progress",
  "response.image_generation_call.partial_image",
  "response.mcp_call_arguments.delta",
  "response.mcp_call_arguments.done",
  "response.mcp_call.completed",
  "response.mcp_call.failed",
  "response.mcp_call.in_progress",
  "response.mcp_list_tools.completed",
  "response.mcp_list_tools.failed",
  "response.mcp_list_tools.in_progress",
  "response.output_text.annotation.added",
  "response.queued",
  "response.custom_tool_call_input.delta",
  "response.custom_tool_call_input.done",
  "response.shell_call_command.added",
  "response.shell_call_command.delta",
  "response.shell_call_command.done",
  "response.shell_call_output_content.delta",
  "response.shell_call_output_content.done",
] as const;

/** A member of the wire event union. */
export type WireEventType = typeof WIRE_EVENT_TYPES[number];

const KNOWN_TYPES: ReadonlySet<string> = new Set(WIRE_EVENT_TYPES);

/** True when `type` is one of the 58 union members. */
export function isWireEventType(type: string): type is WireEventType {
  return KNOWN_TYPES.has(type);
}

/** [OR] "Extending streaming events": vendor extensions carry a `vendor:` prefix and are not judged further. */
export function isVendorEventType(type: string): boolean {
  return /^[A-Za-z0-9_-]+:/.test(type);
}

type FieldSpec = readonly [name: string, kind: FieldKind];

const ITEM_REF: readonly FieldSpec[] = [["item_id", "string"], ["output_index", "index"]];
const PART_REF: readonly FieldSpec[] = [...ITEM_REF, ["content_index", "index"]];
const SUMMARY_REF: readonly FieldSpec[] = [...ITEM_REF, ["summary_index", "index"]];
const DELTA: FieldSpec = ["delta", "string"];
const RESPONSE: readonly FieldSpec[] = [["response", "object"]];
const COMMAND_REF: readonly FieldSpec[] = [["output_index", "index"], ["command_index", "index"]];

/** Required fields per type beyond `type` and `sequence_number` (§1.2 tables, [OAS] `required`). */
const REQUIRED: { readonly [K in Exclude<WireEventType, "error">]: readonly FieldSpec[] } = {
  "response.audio.delta": [DELTA],
  "response.audio.done": [],
  "response.audio.transcript.delta": [DELTA],
  "response.audio.transcript.done": [],
  "response.code_interpreter_call_code.delta": [...ITEM_REF, DELTA],
  "response.code_interpreter_call_code.done": [...ITEM_REF, ["code", "string"]],
  "response.code_interpreter_call.completed": ITEM_REF,
  "response.code_interpreter_call.in_progress": ITEM_REF,
  "response.code_interpreter_call.interpreting": ITEM_REF,
  "response.completed": RESPONSE,
  "response.content_part.added": [...PART_REF, ["part", "object"]],
  "response.content_part.done": [...PART_REF, ["part", "object"]],
  "response.created": RESPONSE,
  "response.file_search_call.completed": ITEM_REF,
  "response.file_search_call.in_progress": ITEM_REF,
  "response.file_search_call.searching": ITEM_REF,
  "response.function_call_arguments.delta": [...ITEM_REF, DELTA],
  "response.function_call_arguments.done": [...ITEM_REF, ["arguments", "string"], ["name", "string"]],
  "response.in_progress": RESPONSE,
  "response.failed": RESPONSE,
  "response.incomplete": RESPONSE,
  "response.output_item.added": [["output_index", "index"], ["item", "object"]],
  "response.output_item.done": [["output_index", "index"], ["item", "object"]],
  "response.reasoning_summary_part.added": [...SUMMARY_REF, ["part", "object"]],
  "response.reasoning_summary_part.done": [...SUMMARY_REF, ["part", "object"]],
  "response.reasoning_summary_text.delta": [...SUMMARY_REF, DELTA],
  "response.reasoning_summary_text.done": [...SUMMARY_REF, ["text", "string"]],
  "response.reasoning_text.delta": [...PART_REF, DELTA],
  "response.reasoning_text.done": [...PART_REF, ["text", "string"]],
  "response.refusal.delta": [...PART_REF, DELTA],
  "response.refusal.done": [...PART_REF, ["refusal", "string"]],
  "response.output_text.delta": [...PART_REF, DELTA, ["logprobs", "array"]],
  "response.output_text.done": [...PART_REF, ["text", "string"], ["logprobs", "array"]],
  "response.web_search_call.completed": ITEM_REF,
  "response.web_search_call.in_progress": ITEM_REF,
  "response.web_search_call.searching": ITEM_REF,
  "response.image_generation_call.completed": ITEM_REF,
  "response.image_generation_call.generating": ITEM_REF,
  "response.image_generation_call.in_progress": ITEM_REF,
  "response.image_generation_call.partial_image": [
    ...ITEM_REF,
    ["partial_image_index", "index"],
    ["partial_image_b64", "string"],
  ],
  "response.mcp_call_arguments.delta": [...ITEM_REF, DELTA],
  "response.mcp_call_arguments.done": [...ITEM_REF, ["arguments", "string"]],
  "response.mcp_call.completed": ITEM_REF,
  "response.mcp_call.failed": ITEM_REF,
  "response.mcp_call.in_progress": ITEM_REF,
  "response.mcp_list_tools.completed": ITEM_REF,
  "response.mcp_list_tools.failed": ITEM_REF,
  "response.mcp_list_tools.in_progress": ITEM_REF,
  "response.output_text.annotation.added": [...PART_REF, ["annotation_index", "index"], ["annotation", "object"]],
  "response.queued": RESPONSE,
  "response.custom_tool_call_input.delta": [...ITEM_REF, DELTA],
  "response.custom_tool_call_input.done": [...ITEM_REF, ["input", "string"]],
  "response.shell_call_command.added": [...COMMAND_REF, ["command", "string"]],
  "response.shell_call_command.delta": [...COMMAND_REF, DELTA],
  "response.shell_call_command.done": [...COMMAND_REF, ["command", "string"]],
  "response.shell_call_output_content.delta": [["item_id", "string"], ...COMMAND_REF, DELTA],
  "response.shell_call_output_content.done": [["item_id", "string"], ...COMMAND_REF, ["output", "present"]],
};

function checkFields(
  log: ViolationLog,
  index: number,
  where: string,
  record: JsonRecord,
  fields: readonly FieldSpec[],
): void {
  for (const [name, kind] of fields) {
    if (!hasKind(record[name], kind)) {
      log.add(8, index, `${where}.${name} must be ${kindName(kind)}`);
    }
  }
}

/**
 * Invariant 8 for one event of a known type. The `error` event has two accepted shapes (§1.1): flat
 * `{code, message, param}` and nested `{error: {code, message, …}}`.
 */
export function checkRequiredFields(log: ViolationLog, index: number, type: WireEventType, event: JsonRecord): void {
  if (type === "error") {
    const nested = event["error"];
    if (isRecord(nested)) {
      checkFields(log, index, "error.error", nested, [["message", "string"], ["code", "stringOrNull"]]);
    } else {
      checkFields(log, index, "error", event, [["message", "string"], ["code", "stringOrNull"], [
        "param",
        "stringOrNull",
      ]]);
    }
    return;
  }
  checkFields(log, index, type, event, REQUIRED[type]);
}
