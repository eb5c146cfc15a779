import assert from "node:assert/strict";
import { ResponseEmitter } from "../../events/emitter_stage.ts";
import { CounterIds } from "../../events/ids.ts";
import type { ParsedChunk } from "../../events/parsed_chunk.ts";
import type { ResponseTemplate } from "../../events/response_template.ts";
import type { UnsequencedEvent } from "../../events/types.ts";
import type { Segment } from "../../parsers/segment.ts";
import { clock, finish, segs, template } from "../../testing/response_fixtures.ts";

function run(
  chunks: ParsedChunk[],
  t: ResponseTemplate = template,
): { events: UnsequencedEvent[]; emitter: ResponseEmitter } {
  const emitter = new ResponseEmitter({ template: t, ids: new CounterIds(), clock });
  const events = [...emitter.start()];
  for (const c of chunks) events.push(...emitter.push(c));
  return { events, emitter };
}

const types = (events: readonly UnsequencedEvent[]) => events.map((e) => e.type.replace(/^response\./, ""));

function byType<T extends UnsequencedEvent["type"]>(events: readonly UnsequencedEvent[], type: T) {
  return events.filter((e): e is Extract<UnsequencedEvent, { type: T }> => e.type === type);
}

Deno.test("emitter: text-only message has the reference shape, and output holds the done item itself", () => {
  const { events, emitter } = run([
    segs({ kind: "open", item: { type: "message" } }, { kind: "delta", text: "Hel" }),
    segs({ kind: "delta", text: "lo" }),
    segs({ kind: "close", reason: "end" }),
    finish("stop"),
  ]);
  assert.deepEqual(types(events), [
    "created",
    "in_progress",
    "output_item.added",
    "content_part.added",
    "output_text.delta",
    "output_text.delta",
    "output_text.done",
    "content_part.done",
    "output_item.done",
    "completed",
  ]);
  const added = byType(events, "response.output_item.added")[0]!;
  assert.deepEqual(added.item, {
    id: "msg_0001",
    type: "message",
    role: "assistant",
    status: "in_progress",
    content: [],
  });
  assert.deepEqual(byType(events, "response.content_part.added")[0]!.part, {
    type: "output_text",
    text: "",
    annotations: [],
    logprobs: [],
  });
  assert.equal(byType(events, "response.output_text.done")[0]!.text, "Hello");
  const done = byType(events, "response.output_item.done")[0]!;
  assert.deepEqual(done.item, {
    id: "msg_0001",
    type: "message",
    role: "assistant",
    status: "completed",
    content: [{ type: "output_text", text: "Hello", annotations: [], logprobs: [] }],
  });
  const completed = byType(events, "response.completed")[0]!.response;
  assert.equal(completed.status, "completed");
  assert.equal(completed.output[0], done.item, "terminal output must be the very object sent in output_item.done");
  assert.equal(completed.completed_at, 1_700_000_005);
  assert.deepEqual(completed.usage, {
    input_tokens: 3,
    input_tokens_details: { cached_tokens: 0, cache_write_tokens: 0 },
    output_tokens: 7,
    output_tokens_details: { reasoning_tokens: 0 },
    total_tokens: 10,
  });
  assert.equal(emitter.response, completed);
  const created = byType(events, "response.created")[0]!.response;
  assert.equal(created.status, "in_progress");
  assert.deepEqual(created.output, []);
  assert.equal(created.usage, null);
  assert.equal(created.error, null);
  assert.equal(created.completed_at, null);
});

Deno.test("emitter: deltas of one step merge into one event; empty deltas are never sent", () => {
  const { events } = run([
    segs(
      { kind: "open", item: { type: "message" } },
      { kind: "delta", text: "a" },
      { kind: "delta", text: "" },
      { kind: "delta", text: "b" },
    ),
    segs({ kind: "delta", text: "" }),
    segs({ kind: "delta", text: "c" }, { kind: "close", reason: "end" }),
    finish("stop"),
  ]);
  assert.deepEqual(byType(events, "response.output_text.delta").map((e) => e.delta), ["ab", "c"]);
});

Deno.test("emitter: reasoning then message — content_index resets per item, ids and indices per item", () => {
  const { events } = run([
    segs(
      { kind: "open", item: { type: "reasoning" } },
      { kind: "delta", text: "think" },
      { kind: "close", reason: "end" },
      { kind: "open", item: { type: "message", phase: "final_answer" } },
      { kind: "delta", text: "answer" },
    ),
    segs({ kind: "close", reason: "return" }),
    finish("stop"),
  ]);
  assert.deepEqual(types(events).slice(2), [
    "output_item.added",
    "content_part.added",
    "reasoning_text.delta",
    "reasoning_text.done",
    "content_part.done",
    "output_item.done",
    "output_item.added",
    "content_part.added",
    "output_text.delta",
    "output_text.done",
    "content_part.done",
    "output_item.done",
    "completed",
  ]);
  const parts = byType(events, "response.content_part.added");
  assert.deepEqual(parts.map((p) => [p.item_id, p.output_index, p.content_index, p.part.type]), [
    ["rs_0001", 0, 0, "reasoning_text"],
    ["msg_0002", 1, 0, "output_text"],
  ]);
  const final = byType(events, "response.completed")[0]!.response;
  assert.deepEqual(final.output[0], {
    id: "rs_0001",
    type: "reasoning",
    status: "completed",
    summary: [],
    content: [{ type: "reasoning_text", text: "think" }],
  });
  assert.equal(final.output[1]?.type === "message" && final.output[1].phase, "final_answer");
});

Deno.test("emitter: function call — call_id minted once (or taken from the parser), arguments done carries name", () => {
  const { events } = run([
    segs(
      { kind: "open", item: { type: "function_call", name: "get_weather" } },
      { kind: "delta", text: '{"city":' },
    ),
    segs({ kind: "delta", text: '"Paris"}' }, { kind: "close", reason: "call" }),
    segs({ kind: "open", item: { type: "function_call", name: "noop", callId: "call_model" } }),
    segs({ kind: "close", reason: "call" }),
    finish("stop"),
  ]);
  const added = byType(events, "response.output_item.added").map((e) => e.item);
  assert.deepEqual(added[0], {
    id: "fc_0001",
    type: "function_call",
    status: "in_progress",
    call_id: "call_0002",
    name: "get_weather",
    arguments: "",
  });
  assert.equal(added[1]?.type === "function_call" && added[1].call_id, "call_model");
  const argsDone = byType(events, "response.function_call_arguments.done");
  assert.deepEqual(argsDone.map((e) => [e.item_id, e.arguments, e.name]), [
    ["fc_0001", '{"city":"Paris"}', "get_weather"],
    ["fc_0003", "", "noop"],
  ]);
  const final = byType(events, "response.completed")[0]!.response;
  assert.deepEqual(final.output.map((i) => i.type === "function_call" && [i.call_id, i.arguments, i.status]), [
    ["call_0002", '{"city":"Paris"}', "completed"],
    ["call_model", "", "completed"],
  ]);
});

Deno.test("emitter: an item that never gets a delta is still added and closed with empty text", () => {
  const { events } = run([segs({ kind: "open", item: { type: "message" } }), finish("stop")]);
  assert.deepEqual(types(events).slice(2), [
    "output_item.added",
    "content_part.added",
    "output_text.done",
    "content_part.done",
    "output_item.done",
    "completed",
  ]);
  assert.equal(byType(events, "response.output_text.done")[0]!.text, "");
});

Deno.test("emitter: length cuts the open item — item incomplete, response.incomplete with max_output_tokens", () => {
  const { events, emitter } = run([
    segs({ kind: "open", item: { type: "message" } }, { kind: "delta", text: "cut" }),
    segs({ kind: "close", reason: "implicit" }),
    finish("length"),
  ]);
  const done = byType(events, "response.output_item.done")[0]!;
  assert.equal(done.item.status, "incomplete");
  const terminal = events.at(-1)!;
  assert.equal(terminal.type, "response.incomplete");
  const r = emitter.response!;
  assert.equal(r.status, "incomplete");
  assert.deepEqual(r.incomplete_details, { reason: "max_output_tokens" });
  assert.equal(r.completed_at, null);
  assert.equal(r.output[0], done.item);
});

Deno.test("emitter: implicit close followed by stop completes the item; an explicit close stays completed on length", () => {
  const implicit = run([
    segs({ kind: "open", item: { type: "message" } }, { kind: "delta", text: "x" }, {
      kind: "close",
      reason: "implicit",
    }),
    finish("stop"),
  ]);
  assert.equal(byType(implicit.events, "response.output_item.done")[0]!.item.status, "completed");
  const explicit = run([
    segs({ kind: "open", item: { type: "message" } }, { kind: "delta", text: "x" }, { kind: "close", reason: "end" }),
    finish("length"),
  ]);
  assert.equal(byType(explicit.events, "response.output_item.done")[0]!.item.status, "completed");
  assert.equal(explicit.emitter.response!.status, "incomplete");
});

Deno.test("emitter: an implicit close before a new item completes the previous item", () => {
  const { events } = run([
    segs(
      { kind: "open", item: { type: "reasoning" } },
      { kind: "delta", text: "r" },
      { kind: "close", reason: "implicit" },
      { kind: "open", item: { type: "message" } },
      { kind: "delta", text: "m" },
      { kind: "close", reason: "implicit" },
    ),
    finish("length"),
  ]);
  assert.deepEqual(byType(events, "response.output_item.done").map((e) => [e.item.type, e.item.status]), [
    ["reasoning", "completed"],
    ["message", "incomplete"],
  ]);
});

Deno.test("emitter: error — error event then response.failed; the open item is left out of output", () => {
  const { events, emitter } = run([
    segs({ kind: "open", item: { type: "message" } }, { kind: "delta", text: "done" }, {
      kind: "close",
      reason: "end",
    }),
    segs({ kind: "open", item: { type: "message" } }, { kind: "delta", text: "half" }),
    finish("error", "backend died"),
  ]);
  assert.deepEqual(types(events).slice(-2), ["error", "failed"]);
  const err = byType(events, "error")[0]!;
  assert.deepEqual(err, { type: "error", code: "server_error", message: "backend died", param: null });
  const r = emitter.response!;
  assert.equal(r.status, "failed");
  assert.deepEqual(r.error, { code: "server_error", message: "backend died" });
  assert.equal(r.output.length, 1);
  assert.equal(byType(events, "response.output_item.done").length, 1);
});

Deno.test("emitter: abort — open item closed incomplete, no terminal event, response cancelled", () => {
  const { events, emitter } = run([
    segs({ kind: "open", item: { type: "message" } }, { kind: "delta", text: "part" }),
    finish("abort"),
  ]);
  assert.equal(events.at(-1)!.type, "response.output_item.done");
  assert.ok(!events.some((e) => e.type === "response.completed" || e.type === "response.failed"));
  assert.equal(emitter.response!.status, "cancelled");
  assert.equal(emitter.response!.output[0]!.status, "incomplete");
  assert.deepEqual(emitter.push(segs({ kind: "delta", text: "late" })), [], "nothing after the finish");
});

Deno.test("emitter: background — created (queued), queued, then in_progress on the first chunk", () => {
  const { events } = run([segs({ kind: "open", item: { type: "message" } }), finish("stop")], {
    ...template,
    background: true,
  });
  assert.deepEqual(types(events).slice(0, 4), ["created", "queued", "in_progress", "output_item.added"]);
  const created = byType(events, "response.created")[0]!.response;
  assert.equal(created.status, "queued");
  assert.equal(created.background, true);
  assert.equal(byType(events, "response.in_progress")[0]!.response.status, "in_progress");
});

Deno.test("emitter: a delta outside any item becomes a message; open while open closes the previous item", () => {
  const { events } = run([
    segs({ kind: "delta", text: "stray" }, { kind: "open", item: { type: "reasoning" } }, { kind: "delta", text: "r" }),
    finish("stop"),
  ]);
  assert.deepEqual(byType(events, "response.output_item.done").map((e) => [e.item.type, e.output_index]), [
    ["message", 0],
    ["reasoning", 1],
  ]);
  assert.equal(byType(events, "response.output_text.done")[0]!.text, "stray");
});

Deno.test("emitter: hosted tool items follow their grammars", () => {
  const { events, emitter } = run([
    segs({ kind: "open", item: { type: "web_search_call", action: "search" } }, {
      kind: "delta",
      text: '{"query":"rill"}',
    }),
    segs({ kind: "close", reason: "call" }),
    segs({ kind: "open", item: { type: "code_interpreter_call" } }, { kind: "delta", text: "print(1)" }),
    segs({ kind: "close", reason: "call" }),
    segs({ kind: "open", item: { type: "mcp_call", serverLabel: "repo", name: "list" } }, {
      kind: "delta",
      text: "{}",
    }),
    segs({ kind: "close", reason: "call" }),
    finish("stop"),
  ]);
  assert.deepEqual(types(events).slice(2, -1), [
    "output_item.added",
    "web_search_call.in_progress",
    "web_search_call.searching",
    "web_search_call.completed",
    "output_item.done",
    "output_item.added",
    "code_interpreter_call.in_progress",
    "code_interpreter_call_code.delta",
    "code_interpreter_call_code.done",
    "code_interpreter_call.interpreting",
    "code_interpreter_call.completed",
    "output_item.done",
    "output_item.added",
    "mcp_call.in_progress",
    "mcp_call_arguments.delta",
    "mcp_call_arguments.done",
    "mcp_call.completed",
    "output_item.done",
  ]);
  assert.deepEqual(emitter.response!.output, [
    { id: "ws_0001", type: "web_search_call", status: "completed", action: { type: "search", query: "rill" } },
    {
      id: "ci_0002",
      type: "code_interpreter_call",
      status: "completed",
      container_id: "cntr_0003",
      code: "print(1)",
      outputs: null,
    },
    { id: "mcp_0004", type: "mcp_call", status: "completed", server_label: "repo", name: "list", arguments: "{}" },
  ]);
});

Deno.test("emitter: logprobs attach to their delta, and done/part logprobs are their concatenation", () => {
  const lp = (token: string, logprob: number) => ({
    token,
    bytes: [...new TextEncoder().encode(token)],
    logprob,
    top_logprobs: [{ token: "z", bytes: [122], logprob: logprob - 1 }],
  });
  const { events } = run([
    segs({ kind: "open", item: { type: "message" } }, { kind: "delta", text: "a", logprobs: [lp("a", -0.5)] }),
    segs({ kind: "delta", text: "b", logprobs: [lp("b", -1)] }, { kind: "close", reason: "end" }),
    finish("stop"),
  ]);
  const deltas = byType(events, "response.output_text.delta");
  assert.deepEqual(deltas.map((d) => d.logprobs.map((l) => l.token)), [["a"], ["b"]]);
  assert.deepEqual(deltas[0]!.logprobs[0], {
    token: "a",
    bytes: [97],
    logprob: -0.5,
    top_logprobs: [{ token: "z", bytes: [122], logprob: -1.5 }],
  });
  const done = byType(events, "response.output_text.done")[0]!;
  assert.deepEqual(done.logprobs, deltas.flatMap((d) => d.logprobs));
  const part = byType(events, "response.content_part.done")[0]!.part;
  assert.deepEqual(part.type === "output_text" && part.logprobs, done.logprobs);
});

Deno.test("emitter: pushSegments reads only the first count segments of a reused buffer, appending to out", () => {
  const steps: Segment[][] = [
    [{ kind: "open", item: { type: "message" } }, { kind: "delta", text: "Hel" }, { kind: "delta", text: "lo" }],
    [{ kind: "delta", text: "!" }],
    [],
    [{ kind: "close", reason: "end" }],
  ];
  const reference = run([...steps.map((s) => segs(...s)), finish("stop")]).events;
  const emitter = new ResponseEmitter({ template, ids: new CounterIds(), clock });
  const out: UnsequencedEvent[] = [];
  emitter.startInto(out);
  // One buffer for every step, as the fused pipeline uses it: entries past a step's count are stale.
  const buffer: Segment[] = [];
  for (const step of steps) {
    step.forEach((s, i) => buffer[i] = s);
    emitter.pushSegments(buffer, step.length, out);
  }
  emitter.pushInto(finish("stop"), out);
  assert.deepEqual(out, reference);
  assert.deepEqual(types(out).filter((t) => t === "output_text.delta").length, 2);
});
