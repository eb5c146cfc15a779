/**
 * One hand-built violating stream per checked invariant: each case starts from a valid stream, breaks exactly one
 * rule, and asserts that the rule's §5 number is reported.
 */
import assert from "node:assert/strict";
import { type ValidateOptions, validateSSE, validateStream } from "../../conformance/validator.ts";
import {
  clone,
  codeInterpreter,
  envelope,
  functionCall,
  goldenBackground,
  goldenFailed,
  goldenIncomplete,
  goldenReasoningFunctionCall,
  goldenReasoningMessage,
  goldenTextOnly,
  goldenTools,
  type Json,
  mcpCall,
  message,
  reasoning,
  response,
  sequence,
  toSSE,
  usage,
  webSearch,
} from "../../testing/validator_streams.ts";

interface Case {
  readonly invariant: number;
  readonly name: string;
  readonly build: () => Json[];
  readonly options?: ValidateOptions;
}

interface SSECase {
  readonly invariant: number;
  readonly name: string;
  readonly body: () => string;
}

/** Index of the nth event of `type`. */
function indexOf(events: Json[], type: string, nth = 0): number {
  let seen = 0;
  for (let i = 0; i < events.length; i++) {
    if (events[i]!["type"] === type && seen++ === nth) return i;
  }
  throw new Error(`no ${type} #${nth}`);
}

/** The nth event of `type`. */
function find(events: Json[], type: string, nth = 0): Json {
  return events[indexOf(events, type, nth)]!;
}

/** The terminal Response object. */
function final(events: Json[]): Json {
  return events.at(-1)!["response"] as Json;
}

/** Applies `edit` to the stream and renumbers it. */
function edit(events: Json[], change: (events: Json[]) => void): Json[] {
  change(events);
  return sequence(events);
}

function remove(events: Json[], type: string, nth = 0): void {
  events.splice(indexOf(events, type, nth), 1);
}

function doneItem(events: Json[], nth = 0): Json {
  return find(events, "response.output_item.done", nth)["item"] as Json;
}

function addedItem(events: Json[], nth = 0): Json {
  return find(events, "response.output_item.added", nth)["item"] as Json;
}

/** The item at `index` of the terminal `response.output`. */
function finalItem(events: Json[], index: number): Json {
  return (final(events)["output"] as Json[])[index]!;
}

/** A reasoning item with one summary part, built by hand (rill's parsers do not emit summaries). */
function summarised(): Json[] {
  const ref = { item_id: "rs_s1", output_index: 0, summary_index: 0 };
  const item = { id: "rs_s1", type: "reasoning", summary: [{ type: "summary_text", text: "Plan." }] };
  const built = {
    item,
    events: [
      { type: "response.output_item.added", output_index: 0, item: { id: "rs_s1", type: "reasoning", summary: [] } },
      { type: "response.reasoning_summary_part.added", ...ref, part: { type: "summary_text", text: "" } },
      { type: "response.reasoning_summary_text.delta", ...ref, delta: "Pl" },
      { type: "response.reasoning_summary_text.delta", ...ref, delta: "an." },
      { type: "response.reasoning_summary_text.done", ...ref, text: "Plan." },
      { type: "response.reasoning_summary_part.done", ...ref, part: { type: "summary_text", text: "Plan." } },
      { type: "response.output_item.done", output_index: 0, item: clone(item) },
    ],
  };
  return envelope([built], { usage: usage(5, 5, 2) });
}

/** A custom tool call, built by hand. */
function customTool(): Json[] {
  const ref = { item_id: "ctc_1", output_index: 0 };
  const item = { id: "ctc_1", type: "custom_tool_call", call_id: "call_c1", name: "patch", input: "a+b" };
  const built = {
    item,
    events: [
      { type: "response.output_item.added", output_index: 0, item: { ...item, input: "" } },
      { type: "response.custom_tool_call_input.delta", ...ref, delta: "a+" },
      { type: "response.custom_tool_call_input.delta", ...ref, delta: "b" },
      { type: "response.custom_tool_call_input.done", ...ref, input: "a+b" },
      { type: "response.output_item.done", output_index: 0, item: clone(item) },
    ],
  };
  return envelope([built], { over: { tools: [{ type: "custom", name: "patch" }] } });
}

/** A message whose deltas carry logprobs. */
function withLogprobs(): Json[] {
  const events = envelope([message(0, "msg_l1", [["a", "b"]])]);
  const entries = [{ token: "a", logprob: -0.5, top_logprobs: [] }, { token: "b", logprob: -1, top_logprobs: [] }];
  find(events, "response.output_text.delta", 0)["logprobs"] = [clone(entries[0])];
  find(events, "response.output_text.delta", 1)["logprobs"] = [clone(entries[1])];
  find(events, "response.output_text.done")["logprobs"] = clone(entries);
  const withBytes = entries.map((e) => ({ ...e, bytes: [...new TextEncoder().encode(e.token)] }));
  ((find(events, "response.content_part.done")["part"]) as Json)["logprobs"] = clone(withBytes);
  ((doneItem(events)["content"] as Json[])[0]!)["logprobs"] = clone(withBytes);
  (finalItem(events, 0)["content"] as Json[])[0]!["logprobs"] = clone(withBytes);
  return events;
}

/** Two function calls (parallel). */
function twoCalls(over: Json = {}): Json[] {
  return envelope([
    functionCall(0, "fc_p1", "call_p1", "a", ["{}"]),
    functionCall(1, "fc_p2", "call_p2", "b", ["{}"]),
  ], { over: { tools: [{ type: "function", name: "a" }, { type: "function", name: "b" }], ...over } });
}

/** Sets `key` on the Response object of every lifecycle event. */
function everyResponse(events: Json[], key: string, value: unknown): void {
  for (const event of events) {
    const r = event["response"];
    if (r !== undefined) (r as Json)[key] = clone(value);
  }
}

const CASES: Case[] = [
  {
    invariant: 6,
    name: "a delta event with a top-level error key",
    build: () => edit(goldenTextOnly(), (e) => find(e, "response.output_text.delta")["error"] = { message: "x" }),
  },
  {
    invariant: 7,
    name: "an unknown event type",
    build: () => edit(goldenTextOnly(), (e) => e.splice(2, 0, { type: "response.thinking" })),
  },
  {
    invariant: 8,
    name: "output_text.delta without logprobs",
    build: () => edit(goldenTextOnly(), (e) => delete find(e, "response.output_text.delta")["logprobs"]),
  },
  {
    invariant: 8,
    name: "an error event with an integer code",
    build: () => edit(goldenFailed(), (e) => find(e, "error")["code"] = 500),
  },
  {
    invariant: 8,
    name: "a message item without status",
    build: () => edit(goldenTextOnly(), (e) => delete doneItem(e)["status"]),
  },
  {
    invariant: 9,
    name: "a gap in sequence numbers",
    build: () => {
      const events = goldenTextOnly();
      events.forEach((event, i) => event["sequence_number"] = i < 5 ? i : i + 1);
      return events;
    },
  },
  {
    invariant: 9,
    name: "a duplicated sequence number",
    build: () => {
      const events = goldenTextOnly();
      events[4]!["sequence_number"] = 3;
      return events;
    },
  },
  {
    invariant: 10,
    name: "a top-level sequence_number of -1",
    build: () => {
      const events = goldenTextOnly();
      events[3]!["sequence_number"] = -1;
      return events;
    },
  },
  {
    invariant: 15,
    name: "in_progress before created",
    build: () => edit(goldenTextOnly(), (e) => e.unshift(e.splice(1, 1)[0]!)),
  },
  {
    invariant: 16,
    name: "created with status completed",
    build: () => edit(goldenTextOnly(), (e) => (e[0]!["response"] as Json)["status"] = "queued"),
  },
  {
    invariant: 16,
    name: "created with output already filled",
    build: () => edit(goldenTextOnly(), (e) => (e[0]!["response"] as Json)["output"] = [clone(doneItem(e))]),
  },
  {
    invariant: 17,
    name: "in_progress twice",
    build: () => edit(goldenTextOnly(), (e) => e.splice(2, 0, clone(e[1]!))),
  },
  {
    invariant: 17,
    name: "in_progress after the first item",
    build: () => edit(goldenTextOnly(), (e) => e.splice(3, 0, e.splice(1, 1)[0]!)),
  },
  {
    invariant: 18,
    name: "queued in a foreground response",
    build: () =>
      edit(goldenTextOnly(), (e) => e.splice(1, 0, { type: "response.queued", response: response("queued") })),
  },
  {
    invariant: 19,
    name: "no terminal event",
    build: () => edit(goldenTextOnly(), (e) => e.pop()),
  },
  {
    invariant: 19,
    name: "two terminal events",
    build: () => edit(goldenTextOnly(), (e) => e.push(clone(e.at(-1)!))),
  },
  {
    invariant: 20,
    name: "response.completed wrapping an incomplete response (vLLM #45386)",
    build: () => edit(goldenIncomplete(), (e) => e.at(-1)!["type"] = "response.completed"),
  },
  {
    invariant: 21,
    name: "model changes between lifecycle events",
    build: () => edit(goldenTextOnly(), (e) => (e[1]!["response"] as Json)["model"] = "other"),
  },
  {
    invariant: 22,
    name: "a lifecycle response without the error key (vLLM omits it)",
    build: () => edit(goldenTextOnly(), (e) => delete (e[1]!["response"] as Json)["error"]),
  },
  {
    invariant: 23,
    name: "an error event not followed by response.failed",
    build: () =>
      edit(goldenTextOnly(), (e) => {
        e.splice(indexOf(e, "response.output_text.delta", 1), 0, {
          type: "error",
          code: null,
          message: "x",
          param: null,
        });
      }),
  },
  {
    invariant: 24,
    name: "an event after the terminal event",
    build: () => edit(goldenTextOnly(), (e) => e.push(clone(find(e, "response.output_text.delta")))),
  },
  {
    invariant: 27,
    name: "output_index skips a slot",
    build: () =>
      edit(goldenReasoningMessage(), (e) => {
        for (const event of e.slice(indexOf(e, "response.output_item.added", 1))) {
          if (event["output_index"] === 1) event["output_index"] = 2;
        }
      }),
  },
  {
    invariant: 28,
    name: "the last item never gets output_item.done (vLLM #37071)",
    build: () => edit(goldenTextOnly(), (e) => remove(e, "response.output_item.done")),
  },
  {
    invariant: 28,
    name: "output_item.done sent twice",
    build: () => edit(goldenTextOnly(), (e) => e.splice(-1, 0, clone(find(e, "response.output_item.done")))),
  },
  {
    invariant: 29,
    name: "output_item.done for an index never added",
    build: () =>
      edit(goldenTextOnly(), (e) => {
        const extra = clone(find(e, "response.output_item.done"));
        extra["output_index"] = 5;
        e.splice(-1, 0, extra);
      }),
  },
  {
    invariant: 30,
    name: "items interleave",
    build: () =>
      edit(
        goldenReasoningMessage(),
        (e) =>
          e.splice(
            indexOf(e, "response.output_item.added", 1),
            0,
            e.splice(indexOf(e, "response.output_item.done", 0), 1)[0]!,
          ),
      ),
  },
  {
    invariant: 31,
    name: "done item changes type",
    build: () => edit(goldenReasoningMessage(), (e) => doneItem(e)["type"] = "message"),
  },
  {
    invariant: 32,
    name: "done item changes id",
    build: () =>
      edit(goldenTextOnly(), (e) => {
        doneItem(e)["id"] = "msg_other";
        finalItem(e, 0)["id"] = "msg_other";
      }),
  },
  {
    invariant: 32,
    name: "a function_call item without id",
    build: () =>
      edit(goldenReasoningFunctionCall(), (e) => {
        delete addedItem(e, 1)["id"];
        delete doneItem(e, 1)["id"];
        delete finalItem(e, 1)["id"];
      }),
  },
  {
    invariant: 33,
    name: "two items share an id",
    build: () => envelope([message(0, "msg_x", [["a"]]), message(1, "msg_x", [["b"]])]),
  },
  {
    invariant: 33,
    name: "two calls share a call_id",
    build: () =>
      envelope([functionCall(0, "fc_1", "call_x", "a", ["{}"]), functionCall(1, "fc_2", "call_x", "a", ["{}"])], {
        over: { tools: [{ type: "function", name: "a" }] },
      }),
  },
  {
    invariant: 34,
    name: "a reasoning item with a msg_ id (vLLM D6)",
    build: () => envelope([reasoning(0, "msg_r1", ["x"]), message(1, "msg_m1", [["y"]])], { usage: usage(1, 2, 1) }),
  },
  {
    invariant: 34,
    name: "a call_id without the call_ prefix",
    build: () =>
      envelope([functionCall(0, "fc_1", "chatcmpl-tool-1", "a", ["{}"])], { over: { tools: [{ type: "function" }] } }),
  },
  {
    invariant: 35,
    name: "call_id changes between added and done",
    build: () =>
      edit(goldenReasoningFunctionCall(), (e) => {
        doneItem(e, 1)["call_id"] = "call_other";
        finalItem(e, 1)["call_id"] = "call_other";
      }),
  },
  {
    invariant: 35,
    name: "a function_call added without call_id",
    build: () => edit(goldenReasoningFunctionCall(), (e) => addedItem(e, 1)["call_id"] = ""),
  },
  {
    invariant: 36,
    name: "an item added with status completed",
    build: () => edit(goldenTextOnly(), (e) => addedItem(e)["status"] = "completed"),
  },
  {
    invariant: 36,
    name: "an item done with status in_progress",
    build: () =>
      edit(goldenTextOnly(), (e) => {
        doneItem(e)["status"] = "in_progress";
        finalItem(e, 0)["status"] = "in_progress";
      }),
  },
  {
    invariant: 37,
    name: "an incomplete item in a completed response",
    build: () => envelope([message(0, "msg_1", [["a"]], "incomplete")]),
  },
  {
    invariant: 37,
    name: "an incomplete item that is not the last",
    build: () =>
      edit(
        envelope([message(0, "msg_1", [["a"]], "incomplete"), message(1, "msg_2", [["b"]])], {
          status: "incomplete",
        }),
        (e) => final(e)["incomplete_details"] = { reason: "max_output_tokens" },
      ),
  },
  {
    invariant: 39,
    name: "a message added with content",
    build: () =>
      edit(goldenTextOnly(), (e) => addedItem(e)["content"] = [{ type: "output_text", text: "", annotations: [] }]),
  },
  {
    invariant: 39,
    name: "a function_call added with arguments",
    build: () => edit(goldenReasoningFunctionCall(), (e) => addedItem(e, 1)["arguments"] = "{}"),
  },
  {
    invariant: 40,
    name: "a delta whose item_id is another item's",
    build: () => edit(goldenTextOnly(), (e) => find(e, "response.output_text.delta")["item_id"] = "msg_zzz"),
  },
  {
    invariant: 40,
    name: "function_call_arguments.delta on a message",
    build: () =>
      edit(goldenTextOnly(), (e) => {
        e.splice(indexOf(e, "response.output_text.done"), 0, {
          type: "response.function_call_arguments.delta",
          item_id: "msg_a1",
          output_index: 0,
          delta: "{",
        });
      }),
  },
  {
    invariant: 41,
    name: "a delta after output_item.done",
    build: () =>
      edit(goldenReasoningMessage(), (e) => {
        const delta = clone(find(e, "response.reasoning_text.delta"));
        e.splice(indexOf(e, "response.output_item.added", 1), 0, delta);
      }),
  },
  {
    invariant: 42,
    name: 'an item-scoped event with item_id "" (vLLM #23927)',
    build: () => edit(goldenTextOnly(), (e) => find(e, "response.output_text.delta")["item_id"] = ""),
  },
  {
    invariant: 42,
    name: "an event for an output_index never added",
    build: () => edit(goldenTextOnly(), (e) => find(e, "response.output_text.delta")["output_index"] = 3),
  },
  {
    invariant: 43,
    name: "content_index not reset after reasoning (vLLM #45742)",
    build: () =>
      edit(goldenReasoningMessage(), (e) => {
        for (const event of e.slice(indexOf(e, "response.output_item.added", 1))) {
          if (event["content_index"] === 0) event["content_index"] = 1;
        }
      }),
  },
  {
    invariant: 44,
    name: "a part never closed",
    build: () =>
      edit(goldenTextOnly(), (e) => {
        remove(e, "response.content_part.done");
      }),
  },
  {
    invariant: 44,
    name: "content_part.done without content_part.added",
    build: () =>
      edit(goldenTextOnly(), (e) => {
        const extra = clone(find(e, "response.content_part.done"));
        extra["content_index"] = 1;
        e.splice(indexOf(e, "response.output_item.done"), 0, extra);
      }),
  },
  {
    invariant: 45,
    name: "a second part opened before the first closed",
    build: () =>
      edit(envelope([message(0, "msg_1", [["a"], ["b"]])]), (e) => {
        const closing = e.splice(indexOf(e, "response.content_part.done", 0), 1)[0]!;
        e.splice(indexOf(e, "response.content_part.added", 1) + 1, 0, closing);
      }),
  },
  {
    invariant: 46,
    name: "a part added with text",
    build: () =>
      edit(goldenTextOnly(), (e) => ((find(e, "response.content_part.added")["part"]) as Json)["text"] = "Hel"),
  },
  {
    invariant: 47,
    name: "an output_text part on a reasoning item",
    build: () =>
      edit(goldenReasoningMessage(), (e) => {
        (find(e, "response.content_part.added")["part"] as Json)["type"] = "output_text";
      }),
  },
  {
    invariant: 47,
    name: "refusal.delta on an output_text part",
    build: () =>
      edit(goldenTextOnly(), (e) => {
        const delta = find(e, "response.output_text.delta");
        delta["type"] = "response.refusal.delta";
        delete delta["logprobs"];
      }),
  },
  {
    invariant: 48,
    name: "a delta carries the content_index of the previous part",
    build: () =>
      edit(envelope([message(0, "msg_1", [["a"], ["b"]])]), (e) => {
        find(e, "response.output_text.delta", 1)["content_index"] = 0;
      }),
  },
  {
    invariant: 49,
    name: "a part closed without output_text.done",
    build: () => edit(goldenTextOnly(), (e) => remove(e, "response.output_text.done")),
  },
  {
    invariant: 49,
    name: "two output_text.done for one part",
    build: () =>
      edit(
        goldenTextOnly(),
        (e) => e.splice(indexOf(e, "response.output_text.done"), 0, clone(find(e, "response.output_text.done"))),
      ),
  },
  {
    invariant: 50,
    name: "deltas do not add up to the done text (vLLM #30437)",
    build: () => edit(goldenTextOnly(), (e) => remove(e, "response.output_text.delta", 1)),
  },
  {
    invariant: 50,
    name: "content_part.done text differs from output_text.done",
    build: () =>
      edit(goldenTextOnly(), (e) => (find(e, "response.content_part.done")["part"] as Json)["text"] = "Hello"),
  },
  {
    invariant: 50,
    name: "output_item.done content differs from the streamed part",
    build: () =>
      edit(goldenTextOnly(), (e) => {
        ((doneItem(e)["content"] as Json[])[0]!)["text"] = "Hello, world!";
        (finalItem(e, 0)["content"] as Json[])[0]!["text"] = "Hello, world!";
      }),
  },
  {
    invariant: 52,
    name: "an empty delta",
    build: () => edit(goldenTextOnly(), (e) => find(e, "response.output_text.delta")["delta"] = ""),
  },
  {
    invariant: 53,
    name: "a delta that splits a surrogate pair",
    build: () => envelope([message(0, "msg_1", [["smile \uD83D", "\uDE00"]])]),
  },
  {
    invariant: 53,
    name: "text with U+FFFD from a split UTF-8 sequence",
    build: () => envelope([message(0, "msg_1", [["caf", "\uFFFD"]])]),
  },
  {
    invariant: 54,
    name: "a malformed logprob entry",
    build: () =>
      edit(withLogprobs(), (e) => ((find(e, "response.output_text.delta")["logprobs"] as Json[])[0]!)["logprob"] = 0.5),
  },
  {
    invariant: 54,
    name: "logprobs sent although not requested",
    build: withLogprobs,
    options: { logprobs: false },
  },
  {
    invariant: 54,
    name: "logprobs missing although requested",
    build: goldenTextOnly,
    options: { logprobs: true },
  },
  {
    invariant: 55,
    name: "output_text.done logprobs differ from the deltas'",
    build: () => edit(withLogprobs(), (e) => find(e, "response.output_text.done")["logprobs"] = []),
  },
  {
    invariant: 55,
    name: "the final part drops the logprobs the deltas carried (vLLM #56285)",
    build: () =>
      edit(withLogprobs(), (e) => {
        (find(e, "response.content_part.done")["part"] as Json)["logprobs"] = [];
      }),
  },
  {
    invariant: 56,
    name: "annotation_index out of order",
    build: () =>
      edit(goldenTextOnly(), (e) => {
        e.splice(indexOf(e, "response.output_text.done"), 0, {
          type: "response.output_text.annotation.added",
          item_id: "msg_a1",
          output_index: 0,
          content_index: 0,
          annotation_index: 1,
          annotation: { type: "url_citation", url: "https://x", title: "x", start_index: 0, end_index: 1 },
        });
      }),
  },
  {
    invariant: 56,
    name: "done part lacks the added annotation",
    build: () =>
      edit(goldenTextOnly(), (e) => {
        e.splice(indexOf(e, "response.output_text.done"), 0, {
          type: "response.output_text.annotation.added",
          item_id: "msg_a1",
          output_index: 0,
          content_index: 0,
          annotation_index: 0,
          annotation: { type: "url_citation", url: "https://x", title: "x", start_index: 0, end_index: 1 },
        });
      }),
  },
  {
    invariant: 57,
    name: "output_text does not aggregate the message text",
    build: () => edit(goldenTextOnly(), (e) => final(e)["output_text"] = "Hello"),
  },
  {
    invariant: 58,
    name: "harmony markup leaks into text",
    build: () => envelope([message(0, "msg_1", [["ok", "<|channel|>final"]])]),
  },
  {
    invariant: 58,
    name: "a tool_call tag leaks into text (vLLM #36435)",
    build: () => envelope([message(0, "msg_1", [["<tool_call>", '{"name":"a"}']])]),
  },
  {
    invariant: 59,
    name: "vLLM's response.reasoning_part.added",
    build: () =>
      edit(
        goldenReasoningMessage(),
        (e) => find(e, "response.content_part.added")["type"] = "response.reasoning_part.added",
      ),
  },
  {
    invariant: 60,
    name: "summary_index starts at 1",
    build: () =>
      edit(summarised(), (e) => {
        for (const event of e) if (event["summary_index"] === 0) event["summary_index"] = 1;
      }),
  },
  {
    invariant: 60,
    name: "summary deltas do not add up to the done text",
    build: () => edit(summarised(), (e) => remove(e, "response.reasoning_summary_text.delta", 1)),
  },
  {
    invariant: 60,
    name: "summary part never closed",
    build: () => edit(summarised(), (e) => remove(e, "response.reasoning_summary_part.done")),
  },
  {
    invariant: 65,
    name: "reasoning produced but reasoning_tokens is 0 (vLLM #23363)",
    build: () =>
      edit(goldenReasoningMessage(), (e) => {
        final(e)["usage"] = usage(20, 9, 0);
      }),
  },
  {
    invariant: 66,
    name: "reasoning deltas do not add up to the done text",
    build: () => edit(goldenReasoningMessage(), (e) => remove(e, "response.reasoning_text.delta", 0)),
  },
  {
    invariant: 66,
    name: "done reasoning item content differs from the streamed part",
    build: () =>
      edit(goldenReasoningMessage(), (e) => {
        ((doneItem(e)["content"] as Json[])[0]!)["text"] = "other";
        (finalItem(e, 0)["content"] as Json[])[0]!["text"] = "other";
      }),
  },
  {
    invariant: 67,
    name: "function_call_arguments.done omitted (vLLM D8)",
    build: () => edit(goldenReasoningFunctionCall(), (e) => remove(e, "response.function_call_arguments.done")),
  },
  {
    invariant: 67,
    name: "an arguments delta after the done event",
    build: () =>
      edit(goldenReasoningFunctionCall(), (e) => {
        const delta = clone(find(e, "response.function_call_arguments.delta"));
        e.splice(indexOf(e, "response.output_item.done", 1), 0, delta);
      }),
  },
  {
    invariant: 68,
    name: "arguments deltas do not add up (vLLM #42683)",
    build: () => edit(goldenReasoningFunctionCall(), (e) => remove(e, "response.function_call_arguments.delta", 0)),
  },
  {
    invariant: 68,
    name: "done item arguments differ from the streamed arguments",
    build: () =>
      edit(goldenReasoningFunctionCall(), (e) => {
        doneItem(e, 1)["arguments"] = "{}";
        finalItem(e, 1)["arguments"] = "{}";
      }),
  },
  {
    invariant: 69,
    name: "function_call_arguments.done carries another name",
    build: () =>
      edit(goldenReasoningFunctionCall(), (e) => find(e, "response.function_call_arguments.done")["name"] = "x"),
  },
  {
    invariant: 72,
    name: "two calls with parallel_tool_calls false",
    build: () => twoCalls({ parallel_tool_calls: false }),
  },
  {
    invariant: 73,
    name: "a call with tool_choice none",
    build: () => twoCalls({ tool_choice: "none" }),
  },
  {
    invariant: 73,
    name: "a call with no tools declared (vLLM #40314)",
    build: () => edit(goldenReasoningFunctionCall(), (e) => everyResponse(e, "tools", [])),
  },
  {
    invariant: 73,
    name: "tool_choice required but only text",
    build: () => edit(goldenTextOnly(), (e) => everyResponse(e, "tool_choice", "required")),
  },
  {
    invariant: 73,
    name: "a named tool_choice and a call to another function",
    build: () => twoCalls({ tool_choice: { type: "function", name: "a" } }),
  },
  {
    invariant: 74,
    name: "more built-in calls than max_tool_calls",
    build: () => edit(goldenTools(), (e) => everyResponse(e, "max_tool_calls", 2)),
  },
  {
    invariant: 75,
    name: "custom tool input deltas do not add up",
    build: () => edit(customTool(), (e) => remove(e, "response.custom_tool_call_input.delta", 1)),
  },
  {
    invariant: 75,
    name: "custom tool call closed without input done",
    build: () => edit(customTool(), (e) => remove(e, "response.custom_tool_call_input.done")),
  },
  {
    invariant: 76,
    name: "mcp_call without in_progress",
    build: () => edit(goldenTools(), (e) => remove(e, "response.mcp_call.in_progress")),
  },
  {
    invariant: 76,
    name: "mcp arguments deltas do not add up",
    build: () => edit(goldenTools(), (e) => remove(e, "response.mcp_call_arguments.delta", 0)),
  },
  {
    invariant: 76,
    name: "mcp_call closed before completed",
    build: () => edit(goldenTools(), (e) => remove(e, "response.mcp_call.completed")),
  },
  {
    invariant: 77,
    name: "code interpreter skips interpreting",
    build: () => edit(goldenTools(), (e) => remove(e, "response.code_interpreter_call.interpreting")),
  },
  {
    invariant: 77,
    name: "code interpreter with an empty container_id",
    build: () =>
      edit(goldenTools(), (e) => {
        addedItem(e, 1)["container_id"] = "";
        doneItem(e, 1)["container_id"] = "";
        finalItem(e, 1)["container_id"] = "";
      }),
  },
  {
    invariant: 77,
    name: "code deltas do not add up",
    build: () => edit(goldenTools(), (e) => remove(e, "response.code_interpreter_call_code.delta", 0)),
  },
  {
    invariant: 78,
    name: "web search skips searching",
    build: () => edit(goldenTools(), (e) => remove(e, "response.web_search_call.searching")),
  },
  {
    invariant: 78,
    name: "a browser call emits mcp_call events too (vLLM #52443)",
    build: () =>
      edit(goldenTools(), (e) => {
        e.splice(indexOf(e, "response.web_search_call.searching"), 0, {
          type: "response.mcp_call.in_progress",
          item_id: "ws_f1",
          output_index: 0,
        });
      }),
  },
  {
    invariant: 78,
    name: "web search done without a valid action",
    build: () =>
      edit(goldenTools(), (e) => {
        doneItem(e, 0)["action"] = { type: "browse" };
        finalItem(e, 0)["action"] = { type: "browse" };
      }),
  },
  {
    invariant: 79,
    name: "mcp_call.failed but the item says completed",
    build: () =>
      edit(envelope([mcpCall(0, "mcp_1", ["{}"], true)], { over: { tools: [{ type: "mcp" }] } }), (e) => {
        doneItem(e)["status"] = "completed";
        finalItem(e, 0)["status"] = "completed";
      }),
  },
  {
    invariant: 81,
    name: "response.output drops an item (vLLM #30237)",
    build: () => edit(goldenReasoningMessage(), (e) => (final(e)["output"] as Json[]).pop()),
  },
  {
    invariant: 82,
    name: "response.output item differs from the done item",
    build: () => edit(goldenTextOnly(), (e) => finalItem(e, 0)["status"] = "incomplete"),
  },
  {
    invariant: 84,
    name: "response.output holds an item never announced (vLLM D4)",
    build: () =>
      edit(goldenTextOnly(), (e) => (final(e)["output"] as Json[]).push(clone(message(1, "msg_new", [["x"]]).item))),
  },
  {
    invariant: 85,
    name: "completed with an error set",
    build: () => edit(goldenTextOnly(), (e) => final(e)["error"] = { code: "server_error", message: "x" }),
  },
  {
    invariant: 85,
    name: "incomplete without a reason",
    build: () => edit(goldenIncomplete(), (e) => final(e)["incomplete_details"] = null),
  },
  {
    invariant: 85,
    name: "failed with an HTTP status as error code",
    build: () => edit(goldenFailed(), (e) => final(e)["error"] = { code: "500", message: "x" }),
  },
  {
    invariant: 86,
    name: "completed without completed_at",
    build: () => edit(goldenTextOnly(), (e) => final(e)["completed_at"] = null),
  },
  {
    invariant: 86,
    name: "in_progress with completed_at",
    build: () => edit(goldenTextOnly(), (e) => (e[1]!["response"] as Json)["completed_at"] = 1_750_000_001),
  },
  {
    invariant: 87,
    name: "the terminal response echoes another temperature",
    build: () => edit(goldenTextOnly(), (e) => final(e)["temperature"] = 0.5),
  },
  {
    invariant: 87,
    name: "the terminal response drops the text config",
    build: () => edit(goldenTextOnly(), (e) => everyResponse(e, "text", null)),
  },
  {
    invariant: 88,
    name: "response id without resp_",
    build: () => edit(goldenTextOnly(), (e) => everyResponse(e, "id", "chatcmpl-1")),
  },
  {
    invariant: 88,
    name: "terminal response with another id",
    build: () => edit(goldenTextOnly(), (e) => final(e)["id"] = "resp_other"),
  },
  {
    invariant: 90,
    name: "usage in in_progress",
    build: () => edit(goldenTextOnly(), (e) => (e[1]!["response"] as Json)["usage"] = usage(1, 0)),
  },
  {
    invariant: 90,
    name: "completed without usage",
    build: () => edit(goldenTextOnly(), (e) => final(e)["usage"] = null),
  },
  {
    invariant: 91,
    name: "total_tokens is not input + output",
    build: () => edit(goldenTextOnly(), (e) => (final(e)["usage"] as Json)["total_tokens"] = 1),
  },
  {
    invariant: 91,
    name: "reasoning_tokens exceed output_tokens",
    build: () => edit(goldenReasoningMessage(), (e) => final(e)["usage"] = usage(20, 9, 10)),
  },
  {
    invariant: 91,
    name: "usage without cache_write_tokens",
    build: () =>
      edit(
        goldenTextOnly(),
        (e) => delete ((final(e)["usage"] as Json)["input_tokens_details"] as Json)["cache_write_tokens"],
      ),
  },
  {
    invariant: 92,
    name: "output_tokens exceed max_output_tokens",
    build: () => edit(goldenIncomplete(), (e) => final(e)["usage"] = usage(10, 3)),
  },
];

const SSE_CASES: SSECase[] = [
  {
    invariant: 2,
    name: "event name differs from data.type",
    body: () => toSSE(goldenTextOnly()).replace("event: response.output_text.delta", "event: response.text.delta"),
  },
  {
    invariant: 2,
    name: "the last message is not terminated",
    body: () => toSSE(goldenTextOnly()).slice(0, -1),
  },
  {
    invariant: 2,
    name: "a message without an event line",
    body: () => toSSE(goldenTextOnly()).replace("event: response.in_progress\n", ""),
  },
  {
    invariant: 3,
    name: "pretty-printed data split over lines",
    body: () => {
      const events = goldenTextOnly();
      const pretty = `event: ${events[1]!["type"]}\n${
        JSON.stringify(events[1], null, 2).split("\n").map((line) => `data: ${line}`).join("\n")
      }\n\n`;
      return toSSE(events.slice(0, 1)) + pretty + toSSE(events.slice(2));
    },
  },
  {
    invariant: 3,
    name: "data that is not JSON",
    body: () => toSSE(goldenTextOnly()) + "event: response.completed\ndata: {oops\n\n",
  },
  {
    invariant: 4,
    name: "an id: field",
    body: () =>
      toSSE(goldenTextOnly()).replace("event: response.in_progress\n", "id: 1\nevent: response.in_progress\n"),
  },
  {
    invariant: 5,
    name: "data: [DONE] after the terminal event",
    body: () => toSSE(goldenTextOnly()) + "data: [DONE]\n\n",
  },
  {
    invariant: 6,
    name: "SSE event name error on a non-error event",
    body: () => toSSE(goldenTextOnly()).replace("event: response.in_progress", "event: error"),
  },
];

for (const c of CASES) {
  Deno.test(`validateStream reports invariant ${c.invariant}: ${c.name}`, () => {
    const violations = validateStream(c.build(), c.options);
    const numbers = violations.map((v) => v.invariant);
    assert.ok(numbers.includes(c.invariant), `expected ${c.invariant}, got ${JSON.stringify(violations, null, 1)}`);
  });
}

for (const c of SSE_CASES) {
  Deno.test(`validateSSE reports invariant ${c.invariant}: ${c.name}`, () => {
    const { violations } = validateSSE(c.body());
    const numbers = violations.map((v) => v.invariant);
    assert.ok(numbers.includes(c.invariant), `expected ${c.invariant}, got ${JSON.stringify(violations, null, 1)}`);
  });
}

Deno.test("every checked invariant has a violating case", () => {
  const checked = [
    2,
    3,
    4,
    5,
    6,
    7,
    8,
    9,
    10,
    15,
    16,
    17,
    18,
    19,
    20,
    21,
    22,
    23,
    24,
    27,
    28,
    29,
    30,
    31,
    32,
    33,
    34,
    35,
    36,
    37,
    39,
    40,
    41,
    42,
    43,
    44,
    45,
    46,
    47,
    48,
    49,
    50,
    52,
    53,
    54,
    55,
    56,
    57,
    58,
    59,
    60,
    65,
    66,
    67,
    68,
    69,
    72,
    73,
    74,
    75,
    76,
    77,
    78,
    79,
    81,
    82,
    84,
    85,
    86,
    87,
    88,
    90,
    91,
    92,
  ];
  const covered = new Set([...CASES, ...SSE_CASES].map((c) => c.invariant));
  assert.deepEqual(checked.filter((n) => !covered.has(n)), []);
});

Deno.test("validateStream reports violations with event indices and the failing invariant only", () => {
  const events = edit(goldenTextOnly(), (e) => find(e, "response.output_text.delta")["item_id"] = "");
  const at = indexOf(events, "response.output_text.delta");
  assert.deepEqual(validateStream(events), [
    { invariant: 42, index: at, message: "response.output_text.delta has an empty item_id" },
  ]);
});

Deno.test("validateStream accepts empty text parts, part-less reasoning and legal extras", () => {
  const events = envelope([
    reasoning(0, "rs_1"),
    message(1, "msg_1", [[]]),
    codeInterpreter(2, "ci_1", []),
    webSearch(3, "ws_1", "q"),
    functionCall(4, "fc_1", "call_1", "f", []),
  ], { over: { tools: [{ type: "function", name: "f" }] } });
  // Vendor-prefixed events and SSE comments are allowed.
  events.splice(3, 0, { type: "acme:trace", note: "x" });
  sequence(events);
  assert.deepEqual(validateStream(events), []);
  assert.deepEqual(validateSSE(`: keep-alive\n\n${toSSE(events)}`).violations, []);
});

Deno.test("validateStream accepts a failed stream that leaves its open item out of the output", () => {
  const events = goldenFailed();
  const cut = envelope([message(0, "msg_1", [["a"]]), message(1, "msg_2", [["b", "c"]])]);
  // Drop item 1's closing events: the failure happened mid-item.
  const open = cut.slice(0, indexOf(cut, "response.output_text.done", 1));
  const failed = events.slice(-2).map((e) => clone(e));
  (failed[1]!["response"] as Json)["output"] = [clone(message(0, "msg_1", [["a"]]).item)];
  assert.deepEqual(validateStream(sequence([...open, ...failed])), []);
});

Deno.test("validateStream accepts a background stream and honours the background option", () => {
  assert.deepEqual(validateStream(goldenBackground(), { background: true }), []);
  const numbers = validateStream(goldenBackground(), { background: false }).map((v) => v.invariant);
  assert.ok(numbers.includes(18) && numbers.includes(16));
});

Deno.test("validateStream lets a cancelled stream end without a terminal event, and only then", () => {
  const events = goldenTextOnly();
  const cut = sequence(events.slice(0, indexOf(events, "response.output_text.done")));
  assert.deepEqual(validateStream(cut, { cancelled: true }), []);
  assert.deepEqual(validateStream(cut).map((v) => v.invariant).sort(), [19, 28, 44]);
});

Deno.test("validateStream options relax exactly the checks they name", () => {
  const replacement = envelope([message(0, "msg_1", [["caf", "\uFFFD"]])]);
  assert.deepEqual(validateStream(replacement, { allowReplacementChar: true }), []);
  const split = envelope([message(0, "msg_1", [["smile \uD83D", "\uDE00"]])]);
  assert.deepEqual(validateStream(split, { allowReplacementChar: true }).map((v) => v.invariant), [53, 53]);
  const markup = envelope([message(0, "msg_1", [["<think>", "x"]])]);
  assert.deepEqual(validateStream(markup, { allowMarkup: true }), []);
});

Deno.test("the unmutated base streams of the cases above are valid", () => {
  assert.deepEqual(validateStream(summarised()), []);
  assert.deepEqual(validateStream(customTool()), []);
  assert.deepEqual(validateStream(withLogprobs(), { logprobs: true }), []);
  assert.deepEqual(validateStream(twoCalls()), []);
  assert.deepEqual(validateStream(envelope([message(0, "msg_1", [["a"], ["b"]])])), []);
  assert.deepEqual(
    validateStream(envelope([mcpCall(0, "mcp_1", ["{}"], true)], { over: { tools: [{ type: "mcp" }] } })),
    [],
  );
});

Deno.test("validateStream accepts refusal parts and annotations carried into the final part", () => {
  const annotation = { type: "url_citation", url: "https://x", title: "x", start_index: 0, end_index: 1 };
  const events = envelope([message(0, "msg_1", [["See", " x"]])]);
  events.splice(indexOf(events, "response.output_text.done"), 0, {
    type: "response.output_text.annotation.added",
    item_id: "msg_1",
    output_index: 0,
    content_index: 0,
    annotation_index: 0,
    annotation,
  });
  (find(events, "response.content_part.done")["part"] as Json)["annotations"] = [clone(annotation)];
  ((doneItem(events)["content"] as Json[])[0]!)["annotations"] = [clone(annotation)];
  (finalItem(events, 0)["content"] as Json[])[0]!["annotations"] = [clone(annotation)];
  assert.deepEqual(validateStream(sequence(events)), []);

  const ref = { item_id: "msg_r", output_index: 0, content_index: 0 };
  const refusal = { type: "refusal", refusal: "No." };
  const item = { id: "msg_r", type: "message", role: "assistant", status: "completed", content: [refusal] };
  const refused = envelope([{
    item,
    events: [
      {
        type: "response.output_item.added",
        output_index: 0,
        item: { ...item, status: "in_progress", content: [] },
      },
      { type: "response.content_part.added", ...ref, part: { type: "refusal", refusal: "" } },
      { type: "response.refusal.delta", ...ref, delta: "No" },
      { type: "response.refusal.delta", ...ref, delta: "." },
      { type: "response.refusal.done", ...ref, refusal: "No." },
      { type: "response.content_part.done", ...ref, part: clone(refusal) },
      { type: "response.output_item.done", output_index: 0, item: clone(item) },
    ],
  }]);
  assert.deepEqual(validateStream(refused), []);
  const broken = edit(refused, (e) => find(e, "response.refusal.done")["refusal"] = "No!");
  assert.ok(validateStream(broken).some((v) => v.invariant === 50));
});
