/**
 * Content parts (message `output_text`/`refusal`, reasoning `reasoning_text`) and reasoning summary parts of one
 * item, with the text equality chain of each part: concat(deltas) == *.done text == content_part.done part text
 * (§5.5 invariants 43–58, §5.6 invariants 59–60 and 66).
 */
import { firstDifference, isRecord, type JsonRecord, show } from "./validator_json.ts";
import type { ViolationLog } from "./validator_report.ts";

/** The three content part types and the summary part. */
export type PartKind = "output_text" | "refusal" | "reasoning_text" | "summary_text";

/** One part while it streams and after it closed. */
export interface PartRecord {
  readonly kind: PartKind;
  readonly index: number;
  open: boolean;
  /** Concatenated deltas. */
  text: string;
  /** Text of the `*.done` event, once seen. */
  doneText: string | undefined;
  doneCount: number;
  annotations: unknown[];
  deltaLogprobs: unknown[];
  /** The part object of `content_part.done` / `reasoning_summary_part.done`. */
  donePart: JsonRecord | undefined;
}

/** Which field of the part object (and of the text done event) holds the text. */
export function textField(kind: PartKind): "text" | "refusal" {
  return kind === "refusal" ? "refusal" : "text";
}

/** Invariant reporting a broken text equality chain: 66 for reasoning text, 60 for summaries, else 50. */
export function chainInvariant(kind: PartKind): number {
  switch (kind) {
    case "output_text":
    case "refusal":
      return 50;
    case "reasoning_text":
      return 66;
    case "summary_text":
      return 60;
    default: {
      const unreachable: never = kind;
      return unreachable;
    }
  }
}

/** Text-level options of the validator that concern parts. */
export interface PartOptions {
  readonly logprobs: boolean | undefined;
  readonly allowMarkup: boolean;
  readonly allowReplacementChar: boolean;
}

// Harmony / ChatML special tokens and reasoning / tool-call tags never belong in visible text (invariant 58).
const MARKUP = /<\|[a-z_]+\|>|<\/?think>|<\/?tool_call>/;

/** Creates the record for a part announced by `content_part.added` / `reasoning_summary_part.added`. */
export function newPart(kind: PartKind, index: number): PartRecord {
  return {
    kind,
    index,
    open: true,
    text: "",
    doneText: undefined,
    doneCount: 0,
    annotations: [],
    deltaLogprobs: [],
    donePart: undefined,
  };
}

/** Invariant 46 (and 60 for summaries): a part is announced empty. */
export function checkEmptyPart(log: ViolationLog, index: number, kind: PartKind, part: JsonRecord): void {
  const field = textField(kind);
  const invariant = kind === "summary_text" ? 60 : 46;
  if (part[field] !== "") {
    log.add(invariant, index, `added ${kind} part must have ${field} "", got ${show(part[field])}`);
  }
  if (kind === "output_text") {
    const annotations = part["annotations"];
    if (!Array.isArray(annotations) || annotations.length > 0) {
      log.add(46, index, `added output_text part must have annotations [], got ${show(annotations)}`);
    }
    const logprobs = part["logprobs"];
    if (logprobs !== undefined && !(Array.isArray(logprobs) && logprobs.length === 0)) {
      log.add(46, index, `added output_text part must have logprobs [] or none, got ${show(logprobs)}`);
    }
  }
}

/** A text delta for an open part whose kind was already matched. */
export function applyDelta(
  log: ViolationLog,
  index: number,
  part: PartRecord,
  event: JsonRecord,
  options: PartOptions,
): void {
  const delta = event["delta"];
  if (typeof delta !== "string") return; // invariant 8 already reported
  if (part.doneCount > 0) {
    log.add(part.kind === "summary_text" ? 60 : 49, index, `${part.kind} delta after its done event`);
  }
  if (delta.length === 0) log.add(52, index, `empty ${part.kind} delta`);
  else if (!delta.isWellFormed()) log.add(53, index, `${part.kind} delta splits a UTF-16 surrogate pair`);
  part.text += delta;
  if (part.kind === "output_text") checkDeltaLogprobs(log, index, part, event["logprobs"], delta, options);
}

function checkDeltaLogprobs(
  log: ViolationLog,
  index: number,
  part: PartRecord,
  logprobs: unknown,
  delta: string,
  options: PartOptions,
): void {
  if (!Array.isArray(logprobs)) return; // invariant 8
  if (options.logprobs === false && logprobs.length > 0) {
    log.add(54, index, "output_text.delta carries logprobs although they were not requested");
  }
  if (options.logprobs === true && logprobs.length === 0 && delta.length > 0) {
    log.add(54, index, "output_text.delta has no logprobs although they were requested");
  }
  for (const entry of logprobs) {
    const ok = isRecord(entry) && typeof entry["token"] === "string" && typeof entry["logprob"] === "number" &&
      entry["logprob"] <= 0 && (entry["top_logprobs"] === undefined || Array.isArray(entry["top_logprobs"]));
    if (!ok) log.add(54, index, `malformed logprob entry ${show(entry)}`);
    part.deltaLogprobs.push(entry);
  }
}

/** The `*.done` text event of a part: exactly one, equal to the concatenated deltas. */
export function applyTextDone(
  log: ViolationLog,
  index: number,
  part: PartRecord,
  event: JsonRecord,
  options: PartOptions,
): void {
  const text = event[part.kind === "refusal" ? "refusal" : "text"];
  if (typeof text !== "string") return; // invariant 8
  part.doneCount++;
  const invariant = chainInvariant(part.kind);
  if (part.doneCount > 1) {
    log.add(part.kind === "summary_text" ? 60 : 49, index, `second ${part.kind} done event for one part`);
    return;
  }
  part.doneText = text;
  if (text !== part.text) {
    log.add(invariant, index, `${part.kind} done text ${show(text)} != concatenated deltas ${show(part.text)}`);
  }
  if (!options.allowReplacementChar && text.includes("\uFFFD")) {
    log.add(53, index, `${part.kind} text contains U+FFFD (a split UTF-8 sequence)`);
  }
  if (part.kind === "output_text") {
    if (!options.allowMarkup) {
      const markup = MARKUP.exec(text);
      if (markup !== null) log.add(58, index, `output_text contains model markup ${show(markup[0])}`);
    }
    const logprobs = event["logprobs"];
    if (Array.isArray(logprobs)) {
      const diff = firstDifference(logprobs, part.deltaLogprobs);
      if (diff !== undefined) {
        log.add(
          55,
          index,
          `output_text.done.logprobs differ from the concatenated delta logprobs at ${diff || "root"}`,
        );
      }
    }
  }
}

/** `output_text.annotation.added`: appended in order, before the part's text is done (56). */
export function applyAnnotation(log: ViolationLog, index: number, part: PartRecord, event: JsonRecord): void {
  const annotationIndex = event["annotation_index"];
  if (part.doneCount > 0) log.add(56, index, "annotation added after output_text.done");
  if (annotationIndex !== part.annotations.length) {
    log.add(56, index, `annotation_index ${show(annotationIndex)} must be ${part.annotations.length}`);
  }
  part.annotations.push(event["annotation"]);
}

/** `content_part.done` / `reasoning_summary_part.done`: closes the part and checks the final part object. */
export function applyPartDone(log: ViolationLog, index: number, part: PartRecord, donePart: JsonRecord): void {
  const summary = part.kind === "summary_text";
  if (!part.open) {
    log.add(summary ? 60 : 44, index, `second done event for ${part.kind} part ${part.index}`);
    return;
  }
  part.open = false;
  part.donePart = donePart;
  if (donePart["type"] !== part.kind) {
    log.add(summary ? 60 : 47, index, `part type changed from ${part.kind} to ${show(donePart["type"])}`);
  }
  if (part.doneCount !== 1) {
    log.add(summary ? 60 : 49, index, `${part.kind} part ${part.index} closed without its text done event`);
  }
  const field = textField(part.kind);
  const text = donePart[field];
  if (typeof text !== "string") {
    log.add(8, index, `done ${part.kind} part.${field} must be a string`);
  } else if (part.doneText !== undefined && text !== part.doneText) {
    log.add(chainInvariant(part.kind), index, `part ${field} ${show(text)} != done text ${show(part.doneText)}`);
  }
  if (part.kind !== "output_text") return;
  const annotations = donePart["annotations"];
  if (!Array.isArray(annotations)) {
    log.add(8, index, "done output_text part.annotations must be an array");
  } else if (firstDifference(annotations, part.annotations) !== undefined) {
    log.add(56, index, "done part.annotations differ from the added annotations");
  }
  checkPartLogprobs(log, index, part, donePart["logprobs"]);
}

/** Invariant 55: the final part's logprobs cover the streamed tokens in order (they may add `bytes`). */
function checkPartLogprobs(log: ViolationLog, index: number, part: PartRecord, logprobs: unknown): void {
  if (logprobs === undefined) return;
  if (!Array.isArray(logprobs)) {
    log.add(8, index, "done output_text part.logprobs must be an array");
    return;
  }
  const streamed = part.deltaLogprobs;
  if (logprobs.length !== streamed.length) {
    log.add(55, index, `part has ${logprobs.length} logprobs, the deltas carried ${streamed.length}`);
    return;
  }
  for (let i = 0; i < streamed.length; i++) {
    const a = logprobs[i];
    const b = streamed[i];
    if (!isRecord(a) || !isRecord(b) || a["token"] !== b["token"] || a["logprob"] !== b["logprob"]) {
      log.add(55, index, `part logprob ${i} ${show(a)} != streamed ${show(b)}`);
      return;
    }
  }
}
