/**
 * SSE framing of a Responses stream body (§5.1 invariants 2–6): every message is exactly one `event:` line and one
 * single-line `data:` JSON object, closed by a blank line, with the event name equal to `data.type`; no `id:`
 * field, no `data: [DONE]`, and the name `error` only on real error events.
 */
import { isRecord } from "./validator_json.ts";
import type { ViolationLog } from "./validator_report.ts";

/**
 * Splits `body` into messages and parses each `data` line. Returns the parsed events in order; a message whose data
 * is not a JSON object is reported and left out. Violation indices are the index the message's event has (or would
 * have) in the returned list.
 */
export function parseSSEFrames(body: string, log: ViolationLog): unknown[] {
  const events: unknown[] = [];
  const lines = body.split(/\r\n|\r|\n/);
  // The element after the last line break is either "" (body ends with a newline) or an unterminated line.
  const tail = lines.pop() ?? "";
  if (tail !== "") lines.push(tail);
  let message: string[] = [];
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!;
    if (line !== "") {
      message.push(line);
      continue;
    }
    if (message.length > 0) {
      readMessage(message, events, log);
      message = [];
    }
  }
  if (message.length > 0) {
    log.add(2, events.length, "last SSE message is not terminated by a blank line");
    readMessage(message, events, log);
  }
  return events;
}

function readMessage(lines: string[], events: unknown[], log: ViolationLog): void {
  const index = events.length;
  const names: string[] = [];
  const data: string[] = [];
  // A message of comments only (keep-alive) carries no event.
  if (lines.every((line) => line.startsWith(":"))) return;
  for (const line of lines) {
    if (line.startsWith(":")) continue;
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    switch (field) {
      case "event":
        names.push(value);
        break;
      case "data":
        data.push(value);
        break;
      case "id":
        log.add(4, index, "SSE message has an id: field");
        break;
      default:
        log.add(2, index, `unexpected SSE field ${JSON.stringify(field)}`);
    }
  }
  const text = data.join("\n");
  if (text === "[DONE]") {
    log.add(5, index, "data: [DONE] must not be sent");
    return;
  }
  if (names.length !== 1) log.add(2, index, `SSE message has ${names.length} event: lines, expected 1`);
  if (data.length === 0) {
    log.add(2, index, "SSE message has no data: line");
    return;
  }
  if (data.length > 1) log.add(3, index, `SSE message has ${data.length} data: lines; data must be one JSON line`);
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    log.add(3, index, "SSE data is not valid JSON");
    return;
  }
  if (!isRecord(parsed)) {
    log.add(3, index, "SSE data must be a JSON object");
    return;
  }
  const name = names[0];
  if (name !== undefined && name !== parsed["type"]) {
    log.add(2, index, `SSE event name ${JSON.stringify(name)} != data.type ${JSON.stringify(parsed["type"])}`);
    if (name === "error") log.add(6, index, "SSE event name error on an event that is not an error event");
  }
  events.push(parsed);
}
