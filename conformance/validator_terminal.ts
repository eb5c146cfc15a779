/**
 * The terminal Response against the stream that preceded it (§5.8 invariants 37, 57, 81, 82, 84; §5.9 65) and
 * against the request settings it echoes (§5.7 72–74).
 */
import type { ItemTracker } from "./validator_items.ts";
import { firstDifference, isRecord, show, valueAt } from "./validator_json.ts";
import type { Terminal } from "./validator_lifecycle.ts";
import type { ViolationLog } from "./validator_report.ts";

const NON_TOOL_ITEMS: ReadonlySet<string> = new Set(["message", "reasoning"]);
const BUILT_IN_TOOL_ITEMS: ReadonlySet<string> = new Set([
  "web_search_call",
  "file_search_call",
  "code_interpreter_call",
  "mcp_call",
  "image_generation_call",
]);

/** Checks the terminal response; `items` has seen the whole stream. */
export function checkTerminal(log: ViolationLog, terminal: Terminal, items: ItemTracker): void {
  const r = terminal.response;
  const at = terminal.index;
  const output = r["output"];
  if (!Array.isArray(output)) return; // invariant 22
  const failed = terminal.type === "response.failed";
  if (!failed && output.length !== items.addedCount) {
    log.add(81, at, `response.output has ${output.length} item(s), the stream added ${items.addedCount}`);
  }
  for (let i = 0; i < output.length; i++) {
    const record = items.items.get(i);
    if (record === undefined) continue; // unannounced: reported below (84)
    if (record.doneItem === undefined) {
      if (failed) log.add(28, at, `response.output[${i}] is an item that never got output_item.done`);
      continue;
    }
    const diff = firstDifference(output[i], record.doneItem);
    if (diff !== undefined) {
      log.add(
        82,
        at,
        `response.output[${i}]${diff} ${show(valueAt(output[i], diff))} != output_item.done item ${
          show(valueAt(record.doneItem, diff))
        }`,
      );
    }
  }
  checkIdentities(log, at, output, items);
  checkIncompleteItems(log, at, r["status"], items);
  checkOutputText(log, at, r["output_text"], output);
  checkReasoningUsage(log, at, r["usage"], items);
  checkToolSettings(log, terminal, items);
}

/** Invariant 84: R.output holds exactly the announced (and closed) items, by id. */
function checkIdentities(log: ViolationLog, at: number, output: unknown[], items: ItemTracker): void {
  const announced = new Set<unknown>();
  for (const record of items.items.values()) announced.add(record.id);
  const present = new Set<unknown>();
  output.forEach((item, i) => {
    const id = isRecord(item) ? item["id"] : undefined;
    present.add(id);
    if (!announced.has(id)) log.add(84, at, `response.output[${i}] (id ${show(id)}) was never announced`);
  });
  for (const record of items.items.values()) {
    if (record.doneItem !== undefined && !present.has(record.id)) {
      log.add(84, at, `item ${show(record.id)} was streamed but is missing from response.output`);
    }
  }
}

/** Invariant 37: at most one incomplete item, the last one, and only in an incomplete response. */
function checkIncompleteItems(log: ViolationLog, at: number, status: unknown, items: ItemTracker): void {
  const incomplete = [...items.items.values()].filter((record) => record.doneItem?.["status"] === "incomplete");
  if (incomplete.length === 0) return;
  if (incomplete.length > 1) log.add(37, at, `${incomplete.length} items ended incomplete; at most one may`);
  const last = incomplete.at(-1)!;
  if (last.outputIndex !== items.addedCount - 1) {
    log.add(37, at, `incomplete item ${last.outputIndex} is not the last item`);
  }
  if (status !== "incomplete") log.add(37, at, `an item ended incomplete but the response status is ${show(status)}`);
}

/** Invariant 57: `output_text`, when sent, aggregates the message text in output order. */
function checkOutputText(log: ViolationLog, at: number, outputText: unknown, output: unknown[]): void {
  if (outputText === undefined) return;
  let expected = "";
  for (const item of output) {
    if (!isRecord(item) || item["type"] !== "message" || !Array.isArray(item["content"])) continue;
    for (const part of item["content"]) {
      if (isRecord(part) && part["type"] === "output_text" && typeof part["text"] === "string") {
        expected += part["text"];
      }
    }
  }
  if (outputText !== expected) {
    log.add(57, at, `response.output_text ${show(outputText)} != aggregated message text ${show(expected)}`);
  }
}

/** Invariant 65: reasoning text was produced, so reasoning tokens were counted. */
function checkReasoningUsage(log: ViolationLog, at: number, usage: unknown, items: ItemTracker): void {
  if (!isRecord(usage)) return;
  const details = usage["output_tokens_details"];
  if (!isRecord(details) || details["reasoning_tokens"] !== 0) return;
  for (const record of items.items.values()) {
    if (record.type !== "reasoning") continue;
    const produced = record.parts.some((part) => part.text.length > 0) ||
      record.summaries.some((part) => part.text.length > 0);
    if (produced) {
      log.add(65, at, `reasoning item ${show(record.id)} has text but reasoning_tokens is 0`);
      return;
    }
  }
}

/** Invariants 72–74 against the settings the response echoes. */
function checkToolSettings(log: ViolationLog, terminal: Terminal, items: ItemTracker): void {
  const r = terminal.response;
  const at = terminal.index;
  const records = [...items.items.values()];
  const calls = records.filter((record) => record.type === "function_call");
  const tools = records.filter((record) => !NON_TOOL_ITEMS.has(record.type));
  if (r["parallel_tool_calls"] === false && calls.length > 1) {
    log.add(72, at, `parallel_tool_calls is false but ${calls.length} function calls were made`);
  }
  const choice = r["tool_choice"];
  const declared = r["tools"];
  if ((choice === "none" || (Array.isArray(declared) && declared.length === 0)) && tools.length > 0) {
    log.add(73, at, `tool items were produced although tool_choice is ${show(choice)} and tools ${show(declared)}`);
  }
  if (choice === "required" && terminal.type === "response.completed" && tools.length === 0) {
    log.add(73, at, `tool_choice is "required" but no tool item was produced`);
  }
  if (isRecord(choice) && choice["type"] === "function") {
    for (const call of calls) {
      if (call.name !== choice["name"]) {
        log.add(73, at, `tool_choice names ${show(choice["name"])} but a call to ${show(call.name)} was made`);
      }
    }
  }
  const max = r["max_tool_calls"];
  const builtIn = records.filter((record) => BUILT_IN_TOOL_ITEMS.has(record.type)).length;
  if (typeof max === "number" && builtIn > max) {
    log.add(74, at, `${builtIn} built-in tool calls exceed max_tool_calls ${max}`);
  }
}
