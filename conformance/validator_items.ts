/**
 * Output items of one stream: indices and identities (§5.4 invariants 27–42), the per-type event grammars and
 * argument/code equality chains of tool items (§5.7 invariants 67–69, 75–79), and routing of part events to their
 * part (validator_parts.ts). Items are keyed by their claimed `output_index` so a single bad index does not cascade.
 */
import { checkItemShape } from "./validator_item_shape.ts";
import {
  firstDifference,
  isIndex,
  isNonEmptyString,
  isRecord,
  type JsonRecord,
  show,
  valueAt,
} from "./validator_json.ts";
import {
  applyAnnotation,
  applyDelta,
  applyPartDone,
  applyTextDone,
  chainInvariant,
  checkEmptyPart,
  newPart,
  type PartKind,
  type PartOptions,
  type PartRecord,
} from "./validator_parts.ts";
import type { ViolationLog } from "./validator_report.ts";
import { GrammarCursor, toolGrammar } from "./validator_tool_grammar.ts";

/** One output item from `output_item.added` on. */
export interface ItemRecord {
  readonly outputIndex: number;
  readonly addedAt: number;
  readonly type: string;
  readonly id: unknown;
  readonly callId: unknown;
  readonly name: unknown;
  open: boolean;
  doneItem: JsonRecord | undefined;
  parts: PartRecord[];
  summaries: PartRecord[];
  /** Streamed function arguments / custom tool input / mcp arguments / code. */
  payload: string;
  payloadDone: string | undefined;
  payloadDoneCount: number;
  grammar: GrammarCursor | undefined;
  /** The last `*.completed` / `*.failed` status event of a hosted tool item. */
  statusEvent: "completed" | "failed" | undefined;
}

/** Streamed-payload families: the delta/done events of one item type and the field that holds the payload. */
interface PayloadFamily {
  readonly itemType: string;
  readonly field: "arguments" | "input" | "code";
  readonly invariant: number;
}
const FUNCTION_ARGS: PayloadFamily = { itemType: "function_call", field: "arguments", invariant: 68 };
const CUSTOM_INPUT: PayloadFamily = { itemType: "custom_tool_call", field: "input", invariant: 75 };
const MCP_ARGS: PayloadFamily = { itemType: "mcp_call", field: "arguments", invariant: 76 };
const CODE: PayloadFamily = { itemType: "code_interpreter_call", field: "code", invariant: 77 };

/** The payload family of a `*.delta` / `*.done` event type, if it is one. */
export function payloadFamily(type: string): PayloadFamily | undefined {
  switch (type) {
    case "response.function_call_arguments.delta":
    case "response.function_call_arguments.done":
      return FUNCTION_ARGS;
    case "response.custom_tool_call_input.delta":
    case "response.custom_tool_call_input.done":
      return CUSTOM_INPUT;
    case "response.mcp_call_arguments.delta":
    case "response.mcp_call_arguments.done":
      return MCP_ARGS;
    case "response.code_interpreter_call_code.delta":
    case "response.code_interpreter_call_code.done":
      return CODE;
    default:
      return undefined;
  }
}

/** A list of parts inside an item: content parts (43–45) or reasoning summary parts (all invariant 60). */
interface PartList {
  readonly indexField: "content_index" | "summary_index";
  /** Index runs 0, 1, 2… per item. */
  readonly contiguous: number;
  /** The previous part is done before the next is added. */
  readonly sequential: number;
  /** A part done matches a part added. */
  readonly matched: number;
}
const CONTENT_PARTS: PartList = { indexField: "content_index", contiguous: 43, sequential: 45, matched: 44 };
const SUMMARY_PARTS: PartList = { indexField: "summary_index", contiguous: 60, sequential: 60, matched: 60 };

const CALL_TYPES: ReadonlySet<string> = new Set(["function_call", "custom_tool_call"]);
const WEB_SEARCH_ACTIONS: ReadonlySet<string> = new Set(["search", "open_page", "find", "find_in_page"]);

/** Tracks every item of one stream. */
export class ItemTracker {
  readonly items = new Map<number, ItemRecord>();
  readonly #log: ViolationLog;
  readonly #options: PartOptions;
  #addedCount = 0;
  #open: ItemRecord | undefined;
  readonly #ids = new Set<string>();
  readonly #callIds = new Set<string>();

  constructor(log: ViolationLog, options: PartOptions) {
    this.#log = log;
    this.#options = options;
  }

  /** Number of `output_item.added` events seen. */
  get addedCount(): number {
    return this.#addedCount;
  }

  added(index: number, event: JsonRecord): void {
    const log = this.#log;
    const outputIndex = event["output_index"];
    const item = event["item"];
    if (!isIndex(outputIndex) || !isRecord(item)) return; // invariant 8
    if (outputIndex !== this.#addedCount) {
      log.add(27, index, `output_item.added has output_index ${outputIndex}, expected ${this.#addedCount}`);
    }
    this.#addedCount++;
    if (this.items.has(outputIndex)) return;
    if (this.#open !== undefined) {
      log.add(30, index, `item ${outputIndex} added while item ${this.#open.outputIndex} is still open`);
    }
    checkItemShape(log, index, item, "added");
    const type = typeof item["type"] === "string" ? item["type"] : "";
    const id = item["id"];
    if (typeof id === "string" && id !== "") {
      if (this.#ids.has(id)) log.add(33, index, `duplicate item id ${show(id)}`);
      this.#ids.add(id);
    }
    const callId = item["call_id"];
    if (CALL_TYPES.has(type)) {
      if (!isNonEmptyString(callId)) {
        log.add(35, index, `${type} must be added with a non-empty call_id, got ${show(callId)}`);
      } else {
        if (this.#callIds.has(callId)) log.add(33, index, `duplicate call_id ${show(callId)}`);
        this.#callIds.add(callId);
      }
    }
    if (type === "code_interpreter_call" && !isNonEmptyString(item["container_id"])) {
      log.add(77, index, "code_interpreter_call must have a non-empty container_id");
    }
    const grammar = toolGrammar(type);
    const record: ItemRecord = {
      outputIndex,
      addedAt: index,
      type,
      id,
      callId,
      name: item["name"],
      open: true,
      doneItem: undefined,
      parts: [],
      summaries: [],
      payload: "",
      payloadDone: undefined,
      payloadDoneCount: 0,
      grammar: grammar === undefined ? undefined : new GrammarCursor(grammar),
      statusEvent: undefined,
    };
    this.items.set(outputIndex, record);
    this.#open = record;
  }

  done(index: number, event: JsonRecord): void {
    const log = this.#log;
    const outputIndex = event["output_index"];
    const item = event["item"];
    if (!isIndex(outputIndex) || !isRecord(item)) return; // invariant 8
    const record = this.items.get(outputIndex);
    if (record === undefined) {
      log.add(29, index, `output_item.done for output_index ${outputIndex}, which was never added`);
      return;
    }
    if (!record.open) {
      log.add(28, index, `second output_item.done for output_index ${outputIndex}`);
      return;
    }
    record.open = false;
    record.doneItem = item;
    if (this.#open === record) this.#open = undefined;
    checkItemShape(log, index, item, "done");
    if (item["type"] !== record.type) {
      log.add(31, index, `item type changed from ${show(record.type)} to ${show(item["type"])}`);
      return;
    }
    if (item["id"] !== record.id) log.add(32, index, `item id changed from ${show(record.id)} to ${show(item["id"])}`);
    if (CALL_TYPES.has(record.type) && item["call_id"] !== record.callId) {
      log.add(35, index, `call_id changed from ${show(record.callId)} to ${show(item["call_id"])}`);
    }
    this.#checkPartsAtDone(index, record, item);
    this.#checkToolAtDone(index, record, item);
  }

  contentPartAdded(index: number, event: JsonRecord): void {
    const part = event["part"];
    if (!isRecord(part)) return; // invariant 8
    const kind = part["type"];
    if (kind !== "output_text" && kind !== "refusal" && kind !== "reasoning_text") {
      this.#log.add(47, index, `content_part.added with unknown part type ${show(kind)}`);
      return;
    }
    const record = this.#resolve(index, event, kind === "reasoning_text" ? "reasoning" : "message", 47);
    if (record === undefined) return;
    this.#openPart(index, record.parts, event, CONTENT_PARTS, kind, part);
  }

  contentPartDone(index: number, event: JsonRecord): void {
    const part = event["part"];
    if (!isRecord(part)) return;
    const record = this.#resolve(index, event, part["type"] === "reasoning_text" ? "reasoning" : "message", 47);
    if (record === undefined) return;
    this.#closePart(index, record.parts, event, CONTENT_PARTS, part);
  }

  /** `*_part.added`: the index continues the item's list (43/60), the previous part is closed (45/60), and it is empty. */
  #openPart(
    index: number,
    parts: PartRecord[],
    event: JsonRecord,
    list: PartList,
    kind: PartRecord["kind"],
    part: JsonRecord,
  ): void {
    const at = event[list.indexField];
    if (at !== parts.length) {
      this.#log.add(list.contiguous, index, `${list.indexField} ${show(at)} must be ${parts.length} for this item`);
    }
    const previous = parts.at(-1);
    if (previous !== undefined && previous.open) {
      this.#log.add(list.sequential, index, `part ${previous.index} of this item is still open`);
    }
    checkEmptyPart(this.#log, index, kind, part);
    parts.push(newPart(kind, isIndex(at) ? at : parts.length));
  }

  /** `*_part.done`: closes a part that was added (44/60) and checks its final text. */
  #closePart(index: number, parts: PartRecord[], event: JsonRecord, list: PartList, part: JsonRecord): void {
    const target = findPart(parts, event[list.indexField]);
    if (target === undefined) {
      this.#log.add(
        list.matched,
        index,
        `part done for ${list.indexField} ${show(event[list.indexField])}, never added`,
      );
      return;
    }
    applyPartDone(this.#log, index, target, part);
  }

  /** `output_text.*`, `refusal.*` and `reasoning_text.*` delta and done events. */
  text(index: number, event: JsonRecord, kind: "output_text" | "refusal" | "reasoning_text", isDone: boolean): void {
    const record = this.#resolve(index, event, kind === "reasoning_text" ? "reasoning" : "message", 40);
    if (record === undefined) return;
    const part = this.#targetPart(index, record.parts, event["content_index"], kind);
    if (part === undefined) return;
    if (isDone) applyTextDone(this.#log, index, part, event, this.#options);
    else applyDelta(this.#log, index, part, event, this.#options);
  }

  annotation(index: number, event: JsonRecord): void {
    const record = this.#resolve(index, event, "message", 40);
    if (record === undefined) return;
    const part = this.#targetPart(index, record.parts, event["content_index"], "output_text");
    if (part !== undefined) applyAnnotation(this.#log, index, part, event);
  }

  summaryPartAdded(index: number, event: JsonRecord): void {
    const part = event["part"];
    if (!isRecord(part)) return;
    const record = this.#resolve(index, event, "reasoning", 40);
    if (record === undefined) return;
    if (part["type"] !== "summary_text") {
      this.#log.add(60, index, `summary part type must be "summary_text", got ${show(part["type"])}`);
    }
    this.#openPart(index, record.summaries, event, SUMMARY_PARTS, "summary_text", part);
  }

  summaryPartDone(index: number, event: JsonRecord): void {
    const part = event["part"];
    if (!isRecord(part)) return;
    const record = this.#resolve(index, event, "reasoning", 40);
    if (record === undefined) return;
    this.#closePart(index, record.summaries, event, SUMMARY_PARTS, part);
  }

  summaryText(index: number, event: JsonRecord, isDone: boolean): void {
    const record = this.#resolve(index, event, "reasoning", 40);
    if (record === undefined) return;
    const part = findPart(record.summaries, event["summary_index"]);
    if (part === undefined || !part.open) {
      this.#log.add(60, index, `summary text event for summary_index ${show(event["summary_index"])}, not open`);
      return;
    }
    if (isDone) applyTextDone(this.#log, index, part, event, this.#options);
    else applyDelta(this.#log, index, part, event, this.#options);
  }

  /** Delta/done of function arguments, custom tool input, mcp arguments and code. */
  payload(index: number, type: string, event: JsonRecord, family: PayloadFamily, isDone: boolean): void {
    const log = this.#log;
    const record = this.#resolve(index, event, family.itemType, 40);
    if (record === undefined) return;
    this.#advanceGrammar(index, record, type);
    const doneInvariant = family === FUNCTION_ARGS ? 67 : family.invariant;
    if (!isDone) {
      const delta = event["delta"];
      if (typeof delta !== "string") return;
      if (record.payloadDoneCount > 0) log.add(doneInvariant, index, `${type} after the ${family.field} done event`);
      if (delta.length === 0) log.add(52, index, `empty ${type}`);
      record.payload += delta;
      return;
    }
    const value = event[family.field];
    if (typeof value !== "string") return;
    record.payloadDoneCount++;
    if (record.payloadDoneCount > 1) {
      log.add(doneInvariant, index, `second ${type} for one item`);
      return;
    }
    record.payloadDone = value;
    if (value !== record.payload) {
      log.add(
        family.invariant,
        index,
        `${type}.${family.field} ${show(value)} != concatenated deltas ${show(record.payload)}`,
      );
    }
    if (family === FUNCTION_ARGS && event["name"] !== record.name) {
      log.add(69, index, `function_call_arguments.done.name ${show(event["name"])} != added name ${show(record.name)}`);
    }
  }

  /** Hosted-tool status events (`*.in_progress`, `*.searching`, `*.completed`, …). */
  status(index: number, type: string, event: JsonRecord, itemType: string): void {
    const record = this.#resolve(index, event, itemType, 40);
    if (record === undefined) return;
    this.#advanceGrammar(index, record, type);
    if (type.endsWith(".completed")) record.statusEvent = "completed";
    else if (type.endsWith(".failed")) record.statusEvent = "failed";
  }

  /** Item-scoped events of families rill never emits: only their item reference is checked. */
  reference(index: number, event: JsonRecord, itemType: string | undefined): void {
    this.#resolve(index, event, itemType, 40);
  }

  /** `shell_call_command.*` carry only an output_index (invariant 42). */
  indexOnly(index: number, type: string, event: JsonRecord): void {
    const outputIndex = event["output_index"];
    if (isIndex(outputIndex) && !this.items.has(outputIndex)) {
      this.#log.add(42, index, `${type} refers to output_index ${outputIndex}, which was never added`);
    }
  }

  /** End of stream: items left open (28). A failed response may leave items open if R.output omits them. */
  finish(terminalType: string | undefined, failedOutputLength: number): void {
    for (const record of this.items.values()) {
      if (!record.open) continue;
      if (terminalType === "response.failed" && record.outputIndex >= failedOutputLength) continue;
      this.#log.add(28, record.addedAt, `item ${record.outputIndex} (${record.type}) never got output_item.done`);
      const part = record.parts.at(-1);
      if (part !== undefined && part.open) {
        this.#log.add(44, record.addedAt, `content part ${part.index} of item ${record.outputIndex} never closed`);
      }
    }
  }

  #resolve(index: number, event: JsonRecord, itemType: string | undefined, familyInvariant: number) {
    const log = this.#log;
    const type = String(event["type"]);
    const outputIndex = event["output_index"];
    if (!isIndex(outputIndex)) return undefined; // invariant 8
    const record = this.items.get(outputIndex);
    if (record === undefined) {
      log.add(42, index, `${type} refers to output_index ${outputIndex}, which was never added`);
      return undefined;
    }
    const itemId = event["item_id"];
    if (itemId === "") log.add(42, index, `${type} has an empty item_id`);
    // An item without a string id was already reported (32); every reference to it would repeat that.
    else if (typeof itemId === "string" && typeof record.id === "string" && itemId !== record.id) {
      log.add(40, index, `${type}.item_id ${show(itemId)} != output[${outputIndex}].id ${show(record.id)}`);
    }
    if (!record.open) {
      log.add(41, index, `${type} for item ${outputIndex} after its output_item.done`);
      return undefined;
    }
    if (itemType !== undefined && record.type !== itemType) {
      const invariant = record.type === "web_search_call" ? 78 : familyInvariant;
      log.add(invariant, index, `${type} targets a ${record.type} item, expected ${itemType}`);
      return undefined;
    }
    return record;
  }

  /** The open part of the right kind a delta/done/annotation event addresses (47, 48). */
  #targetPart(index: number, parts: PartRecord[], contentIndex: unknown, kind: PartKind): PartRecord | undefined {
    const log = this.#log;
    const open = parts.at(-1);
    const part = findPart(parts, contentIndex);
    if (part === undefined || (!part.open && open?.open === true)) {
      if (open !== undefined && open.open) {
        log.add(48, index, `content_index ${show(contentIndex)} does not match the open part ${open.index}`);
      } else {
        log.add(47, index, `${kind} event targets content_index ${show(contentIndex)}, which is not an open part`);
      }
      return undefined;
    }
    if (part.kind !== kind) {
      log.add(47, index, `${kind} event targets a ${part.kind} part`);
      return undefined;
    }
    if (!part.open) {
      log.add(49, index, `${kind} event after content_part.done of part ${part.index}`);
      return undefined;
    }
    return part;
  }

  #advanceGrammar(index: number, record: ItemRecord, type: string): void {
    const grammar = record.grammar;
    if (grammar === undefined) return;
    const expected = grammar.expected();
    if (!grammar.accept(type)) {
      this.#log.add(grammar.grammar.invariant, index, `${type} out of order for ${record.type}; expected ${expected}`);
    }
  }

  /** Parts are closed and the done item's content/summary equals the closed parts (44, 50, 60, 66). */
  #checkPartsAtDone(index: number, record: ItemRecord, item: JsonRecord): void {
    const log = this.#log;
    for (const part of record.parts) {
      if (part.open) log.add(44, index, `content part ${part.index} never got content_part.done`);
    }
    for (const part of record.summaries) {
      if (part.open) log.add(60, index, `summary part ${part.index} never got reasoning_summary_part.done`);
    }
    if (record.type === "message" || (record.type === "reasoning" && record.parts.length > 0)) {
      this.#compareParts(index, record.parts, item["content"], "content");
    }
    if (record.type === "reasoning") this.#compareParts(index, record.summaries, item["summary"], "summary");
  }

  #compareParts(index: number, parts: PartRecord[], final: unknown, field: string): void {
    if (!Array.isArray(final)) return; // invariant 8 (message content, reasoning summary)
    const invariant = (part: PartRecord | undefined) =>
      part === undefined ? (field === "summary" ? 60 : 50) : chainInvariant(part.kind);
    if (final.length !== parts.length) {
      this.#log.add(
        invariant(parts[0]),
        index,
        `done item ${field} has ${final.length} part(s), ${parts.length} streamed`,
      );
      return;
    }
    for (let k = 0; k < parts.length; k++) {
      const part = parts[k]!;
      if (part.donePart === undefined) continue;
      const diff = firstDifference(final[k], part.donePart);
      if (diff !== undefined) {
        this.#log.add(
          invariant(part),
          index,
          `done item ${field}[${k}]${diff} ${show(valueAt(final[k], diff))} != streamed ${
            show(valueAt(part.donePart, diff))
          }`,
        );
      }
    }
  }

  /** Tool items: payload chain (67, 68, 75–77), grammar completion (76–78), status agreement (79). */
  #checkToolAtDone(index: number, record: ItemRecord, item: JsonRecord): void {
    const log = this.#log;
    const status = item["status"];
    switch (record.type) {
      case "function_call":
        this.#checkPayloadAtDone(index, record, item, FUNCTION_ARGS, 67);
        if (item["name"] !== record.name) {
          log.add(69, index, `function_call name changed from ${show(record.name)} to ${show(item["name"])}`);
        }
        return;
      case "custom_tool_call":
        this.#checkPayloadAtDone(index, record, item, CUSTOM_INPUT, 75);
        return;
      case "mcp_call":
        this.#checkPayloadAtDone(index, record, item, MCP_ARGS, 76);
        break;
      case "code_interpreter_call":
        if (record.payloadDone !== undefined && item["code"] !== record.payloadDone) {
          log.add(77, index, `done item code ${show(item["code"])} != code.done ${show(record.payloadDone)}`);
        }
        if (!isNonEmptyString(item["container_id"])) log.add(77, index, "done item container_id must be non-empty");
        break;
      case "web_search_call": {
        const action = item["action"];
        const actionType = isRecord(action) ? action["type"] : undefined;
        if (typeof actionType !== "string" || !WEB_SEARCH_ACTIONS.has(actionType)) {
          log.add(78, index, `web_search_call action must be search|open_page|find, got ${show(action)}`);
        }
        break;
      }
      default:
        return;
    }
    const grammar = record.grammar;
    if (grammar !== undefined && status !== "incomplete") {
      const missing = grammar.missing();
      if (missing.length > 0) {
        log.add(grammar.grammar.invariant, index, `${record.type} closed before ${missing.join(", ")}`);
      }
    }
    if (record.statusEvent !== undefined && status !== record.statusEvent) {
      log.add(79, index, `${record.type} streamed ${record.statusEvent} but the done item says ${show(status)}`);
    }
  }

  #checkPayloadAtDone(
    index: number,
    record: ItemRecord,
    item: JsonRecord,
    family: PayloadFamily,
    missingInvariant: number,
  ): void {
    if (record.payloadDoneCount === 0) {
      this.#log.add(missingInvariant, index, `${record.type} closed without its ${family.field} done event`);
      return;
    }
    const value = item[family.field];
    if (value !== record.payloadDone) {
      this.#log.add(
        family.invariant,
        index,
        `done item ${family.field} ${show(value)} != streamed ${show(record.payloadDone)}`,
      );
    }
  }
}

function findPart(parts: PartRecord[], contentIndex: unknown): PartRecord | undefined {
  // Parts are few per item and the last one is the usual target, so search from the end.
  for (let k = parts.length - 1; k >= 0; k--) {
    const part = parts[k]!;
    if (part.index === contentIndex) return part;
  }
  return undefined;
}
