/**
 * The stream bugs rill grew from (docs/responses-streaming.md §4; vLLM PRs #37071, #38227/#47916, #23741/#23927, #45742, #30437),
 * rebuilt as wire streams: the validator must name each by its §5 invariant.
 */
import assert from "node:assert/strict";
import { validateStream } from "../../conformance/validator.ts";
import {
  clone,
  envelope,
  functionCall,
  type Json,
  message,
  reasoning,
  sequence,
  usage,
} from "../../testing/validator_streams.ts";

function invariants(events: Json[]): number[] {
  return [...new Set(validateStream(events).map((v) => v.invariant))].sort((a, b) => a - b);
}

Deno.test("seed 000 bug 2: the final message never gets its done events, though completed has the text", () => {
  const events = envelope([message(0, "msg_1", [["2 + 2", " equals"]])]);
  const terminal = events.pop()!;
  // Streaming stopped after the deltas: no output_text.done, content_part.done, output_item.done.
  while (events.at(-1)!["type"] !== "response.output_text.delta") events.pop();
  const output = (terminal["response"] as Json)["output"] as Json[];
  ((output[0]!["content"] as Json[])[0]!)["text"] = "2 + 2 equals 4.";
  events.push(terminal);
  const violations = validateStream(sequence(events));
  const missingDone = violations.find((v) => v.invariant === 28);
  assert.ok(missingDone !== undefined, JSON.stringify(violations));
  assert.equal(missingDone.index, 2, "reported at the item's output_item.added");
  assert.ok(violations.some((v) => v.invariant === 44), "the open part is reported too");
});

Deno.test("seed 000 bug 3: a nested sequence_number of -1 inside output_item.done.item", () => {
  const events = envelope([functionCall(0, "fc_1", "call_1", "f", ["{}"])], {
    over: { tools: [{ type: "function", name: "f" }] },
  });
  const done = events.find((e) => e["type"] === "response.output_item.done")!;
  (done["item"] as Json)["sequence_number"] = -1;
  const violations = validateStream(events);
  const nested = violations.find((v) => v.invariant === 10);
  assert.ok(nested !== undefined, JSON.stringify(violations));
  assert.equal(nested.index, events.indexOf(done));
  assert.match(nested.message, /item\.sequence_number/);
});

Deno.test("seed 001 / vLLM #47916: call_id differs between the stream and response.completed", () => {
  const events = envelope([functionCall(0, "fc_1", "call_streamed", "f", ['{"a":1}'])], {
    over: { tools: [{ type: "function", name: "f" }], tool_choice: "required" },
  });
  const output = (events.at(-1)!["response"] as Json)["output"] as Json[];
  output[0]!["call_id"] = "chatcmpl-tool-9f2";
  const violations = validateStream(events);
  const mismatch = violations.find((v) => v.invariant === 82);
  assert.ok(mismatch !== undefined, JSON.stringify(violations));
  assert.match(mismatch.message, /call_id/);
  assert.equal(mismatch.index, events.length - 1);
});

Deno.test("seed 004 / vLLM #23741 sample: empty item ids, an output_text part on reasoning, a shifted output_index", () => {
  const built = reasoning(0, "rs_x", ["User", " wants"]);
  for (const event of built.events) {
    if (event["item_id"] !== undefined) event["item_id"] = "";
    const item = event["item"] as Json | undefined;
    if (item !== undefined) item["id"] = "";
  }
  built.item["id"] = "";
  const part = built.events.find((e) => e["type"] === "response.content_part.added")!;
  part["part"] = { type: "output_text", text: "", annotations: [], logprobs: [] };
  const textDone = built.events.find((e) => e["type"] === "response.reasoning_text.done")!;
  textDone["output_index"] = 1;
  const found = invariants(envelope([built], { usage: usage(5, 5, 2) }));
  for (const n of [32, 42, 47]) assert.ok(found.includes(n), `expected ${n} in ${found}`);
});

Deno.test("vLLM #45742: the message after reasoning starts at content_index 1", () => {
  const events = envelope([reasoning(0, "rs_1", ["hmm"]), message(1, "msg_1", [["Hi"]])], { usage: usage(5, 2, 1) });
  for (const event of events) {
    if (event["output_index"] === 1 && event["content_index"] === 0) event["content_index"] = 1;
  }
  const violations = validateStream(events);
  const wrong = violations.find((v) => v.invariant === 43);
  assert.ok(wrong !== undefined, JSON.stringify(violations));
  assert.equal(events[wrong.index]!["type"], "response.content_part.added");
});

Deno.test("seed 002 / vLLM #30437: a multi-token step loses all but its last token's text", () => {
  // The engine yielded "say something" as two tokens in one step; only the last token's delta was streamed.
  const full = message(0, "msg_1", [["say", " something", " long"]]);
  const events = envelope([full]);
  const lost = events.findIndex((e) => e["type"] === "response.output_text.delta" && e["delta"] === "say");
  events.splice(lost, 1);
  const violations = validateStream(sequence(events));
  const chain = violations.find((v) => v.invariant === 50);
  assert.ok(chain !== undefined, JSON.stringify(violations));
  assert.equal(events[chain.index]!["type"], "response.output_text.done");
});

Deno.test("vLLM D4: a zero-delta item skips its lifecycle but still appears in the terminal output", () => {
  const first = message(0, "msg_1", [["a"]]);
  const silent = message(1, "msg_2", [[]]);
  const events = envelope([first]);
  ((events.at(-1)!["response"] as Json)["output"] as Json[]).push(clone(silent.item));
  const found = invariants(events);
  assert.ok(found.includes(81) && found.includes(84), `got ${found}`);
});
