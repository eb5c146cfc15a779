/**
 * The shape of one output item object as it appears in `output_item.added` / `output_item.done`: required fields
 * (§1.3, reported as invariant 8), non-empty id (32), OpenAI id prefixes (34), status values (36) and the zero
 * values of a freshly added item (39).
 */
import { type FieldKind, hasKind, isNonEmptyString, type JsonRecord, show } from "./validator_json.ts";
import type { ViolationLog } from "./validator_report.ts";

/** Required fields per item type beyond `type` and `id` ([OAS]/[SDK], §1.3). */
const ITEM_FIELDS: Readonly<Record<string, readonly (readonly [string, FieldKind])[]>> = {
  message: [["role", "string"], ["content", "array"], ["status", "string"]],
  reasoning: [["summary", "array"]],
  function_call: [["call_id", "string"], ["name", "string"], ["arguments", "string"]],
  custom_tool_call: [["call_id", "string"], ["name", "string"], ["input", "string"]],
  mcp_call: [["server_label", "string"], ["name", "string"], ["arguments", "string"]],
  mcp_list_tools: [["server_label", "string"], ["tools", "array"]],
  code_interpreter_call: [["status", "string"], ["container_id", "string"], ["code", "stringOrNull"], [
    "outputs",
    "arrayOrNull",
  ]],
  web_search_call: [["status", "string"], ["action", "object"]],
  file_search_call: [["status", "string"], ["queries", "array"]],
  image_generation_call: [["status", "string"], ["result", "stringOrNull"]],
};

/** Item id prefixes clients dispatch on (invariant 34). */
const ID_PREFIX: Readonly<Record<string, string>> = {
  message: "msg_",
  reasoning: "rs_",
  function_call: "fc_",
  web_search_call: "ws_",
  file_search_call: "fs_",
  code_interpreter_call: "ci_",
  mcp_call: "mcp_",
  mcp_list_tools: "mcpl_",
  custom_tool_call: "ctc_",
};

/** Statuses an item may end with (invariant 36); types not listed may end completed, incomplete or failed. */
const DONE_STATUSES: Readonly<Record<string, readonly string[]>> = {
  message: ["completed", "incomplete"],
  reasoning: ["completed", "incomplete"],
  function_call: ["completed", "incomplete"],
  mcp_call: ["completed", "failed", "incomplete"],
  web_search_call: ["completed", "failed"],
};
const DEFAULT_DONE_STATUSES = ["completed", "incomplete", "failed"];

/** The statuses `item` may carry in its `output_item.done`. */
export function doneStatuses(type: string): readonly string[] {
  return DONE_STATUSES[type] ?? DEFAULT_DONE_STATUSES;
}

/** Checks one item object; `phase` says whether it came in `output_item.added` or `output_item.done`. */
export function checkItemShape(
  log: ViolationLog,
  index: number,
  item: JsonRecord,
  phase: "added" | "done",
): void {
  const type = item["type"];
  const where = `output_item.${phase}.item`;
  if (typeof type !== "string") {
    log.add(8, index, `${where}.type must be a string`);
    return;
  }
  for (const [name, kind] of ITEM_FIELDS[type] ?? []) {
    if (!hasKind(item[name], kind)) log.add(8, index, `${where}.${name} is required for a ${type} item`);
  }
  const id = item["id"];
  if (!isNonEmptyString(id)) {
    log.add(32, index, `${where}.id must be a non-empty string, got ${show(id)}`);
  } else {
    const prefix = ID_PREFIX[type];
    if (prefix !== undefined && !id.startsWith(prefix)) {
      log.add(34, index, `${type} item id ${show(id)} must start with "${prefix}"`);
    }
  }
  if (type === "function_call") {
    const callId = item["call_id"];
    if (typeof callId === "string" && callId.length > 0 && !callId.startsWith("call_")) {
      log.add(34, index, `function_call call_id ${show(callId)} must start with "call_"`);
    }
  }
  if (type === "message" && item["role"] !== "assistant") {
    log.add(8, index, `${where}.role must be "assistant", got ${show(item["role"])}`);
  }
  const status = item["status"];
  if (phase === "added") {
    if (status !== undefined && status !== "in_progress") {
      log.add(36, index, `${type} item must be added with status "in_progress", got ${show(status)}`);
    }
    checkZeroValues(log, index, type, item);
  } else if (status !== undefined && !doneStatuses(type).includes(status as string)) {
    log.add(36, index, `${type} item done with status ${show(status)}; expected ${doneStatuses(type).join("|")}`);
  }
}

/** Invariant 39: an added item has zero values for every field that is streamed afterwards. */
function checkZeroValues(log: ViolationLog, index: number, type: string, item: JsonRecord): void {
  const fail = (field: string, expected: string) =>
    log.add(39, index, `added ${type} item must have ${field} ${expected}, got ${show(item[field])}`);
  const isEmptyArray = (value: unknown) => Array.isArray(value) && value.length === 0;
  switch (type) {
    case "message":
      if (!isEmptyArray(item["content"])) fail("content", "[]");
      return;
    case "reasoning":
      if (!isEmptyArray(item["summary"])) fail("summary", "[]");
      if (item["content"] !== undefined && !isEmptyArray(item["content"])) fail("content", "[] or absent");
      return;
    case "function_call":
    case "mcp_call":
      if (item["arguments"] !== "") fail("arguments", `""`);
      return;
    case "custom_tool_call":
      if (item["input"] !== "") fail("input", `""`);
      return;
    case "code_interpreter_call":
      if (item["code"] !== "" && item["code"] !== null) fail("code", `"" or null`);
      if (item["outputs"] !== null) fail("outputs", "null");
      return;
    default:
      return;
  }
}
