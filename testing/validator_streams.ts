/**
 * Hand-built wire streams for the validator tests: the golden shapes of responses-streaming.md §5.13 and small
 * builders to compose others. Everything is plain JSON, built independently of rill's emitter.
 */

export type Json = Record<string, unknown>;

/** A built item: its events (without sequence numbers) and the final item object. */
export interface BuiltItem {
  events: Json[];
  item: Json;
}

/** A full Response object as lifecycle events carry it. */
export function response(status: string, over: Json = {}): Json {
  return {
    id: "resp_0123456789abcdef",
    object: "response",
    created_at: 1_750_000_000,
    status,
    completed_at: status === "completed" ? 1_750_000_005 : null,
    error: null,
    incomplete_details: null,
    instructions: null,
    max_output_tokens: null,
    max_tool_calls: null,
    model: "gpt-oss-20b",
    output: [],
    parallel_tool_calls: true,
    previous_response_id: null,
    reasoning: { effort: null, summary: null },
    service_tier: "default",
    store: true,
    background: false,
    temperature: 1,
    text: { format: { type: "text" } },
    tool_choice: "auto",
    tools: [],
    top_logprobs: null,
    top_p: 1,
    truncation: "disabled",
    usage: null,
    user: null,
    metadata: {},
    ...over,
  };
}

/** A usage object with consistent totals. */
export function usage(input: number, output: number, reasoning = 0): Json {
  return {
    input_tokens: input,
    input_tokens_details: { cached_tokens: 0, cache_write_tokens: 0 },
    output_tokens: output,
    output_tokens_details: { reasoning_tokens: reasoning },
    total_tokens: input + output,
  };
}

/** Assigns sequence numbers 0, 1, 2, … in place (after a mutation) and returns the list. */
export function sequence(events: Json[]): Json[] {
  events.forEach((event, i) => {
    event["sequence_number"] = i;
  });
  return events;
}

/** Deep copy, so that done items and the terminal output never share objects. */
export function clone<T>(value: T): T {
  return structuredClone(value);
}

function textPartEvents(
  itemId: string,
  outputIndex: number,
  contentIndex: number,
  kind: "output_text" | "reasoning_text",
  deltas: readonly string[],
): { events: Json[]; part: Json } {
  const ref = { item_id: itemId, output_index: outputIndex, content_index: contentIndex };
  const text = deltas.join("");
  const empty = kind === "output_text"
    ? { type: "output_text", text: "", annotations: [], logprobs: [] }
    : { type: "reasoning_text", text: "" };
  const part = kind === "output_text"
    ? { type: "output_text", text, annotations: [], logprobs: [] }
    : { type: "reasoning_text", text };
  const prefix = kind === "output_text" ? "response.output_text" : "response.reasoning_text";
  const extra = kind === "output_text" ? { logprobs: [] } : {};
  return {
    events: [
      { type: "response.content_part.added", ...ref, part: empty },
      ...deltas.map((delta) => ({ type: `${prefix}.delta`, ...ref, delta, ...extra })),
      { type: `${prefix}.done`, ...ref, text, ...extra },
      { type: "response.content_part.done", ...ref, part: clone(part) },
    ],
    part,
  };
}

/** A message item with one output_text part per delta list. */
export function message(
  outputIndex: number,
  id: string,
  parts: readonly (readonly string[])[],
  status = "completed",
): BuiltItem {
  const added = { id, type: "message", role: "assistant", status: "in_progress", content: [] };
  const events: Json[] = [{ type: "response.output_item.added", output_index: outputIndex, item: added }];
  const content: Json[] = [];
  parts.forEach((deltas, k) => {
    const built = textPartEvents(id, outputIndex, k, "output_text", deltas);
    events.push(...built.events);
    content.push(built.part);
  });
  const item = { id, type: "message", role: "assistant", status, content };
  events.push({ type: "response.output_item.done", output_index: outputIndex, item: clone(item) });
  return { events, item };
}

/** A reasoning item; `deltas` undefined gives an opaque item with neither summary nor content (R15). */
export function reasoning(outputIndex: number, id: string, deltas?: readonly string[]): BuiltItem {
  const added = { id, type: "reasoning", summary: [] };
  const events: Json[] = [{ type: "response.output_item.added", output_index: outputIndex, item: added }];
  const item: Json = { id, type: "reasoning", summary: [] };
  if (deltas !== undefined) {
    const built = textPartEvents(id, outputIndex, 0, "reasoning_text", deltas);
    events.push(...built.events);
    item["content"] = [built.part];
  }
  events.push({ type: "response.output_item.done", output_index: outputIndex, item: clone(item) });
  return { events, item };
}

/** A function_call item streaming its arguments in `deltas`. */
export function functionCall(
  outputIndex: number,
  id: string,
  callId: string,
  name: string,
  deltas: readonly string[],
  status = "completed",
): BuiltItem {
  const ref = { item_id: id, output_index: outputIndex };
  const args = deltas.join("");
  const added = { id, type: "function_call", call_id: callId, name, arguments: "", status: "in_progress" };
  const item = { id, type: "function_call", call_id: callId, name, arguments: args, status };
  return {
    events: [
      { type: "response.output_item.added", output_index: outputIndex, item: added },
      ...deltas.map((delta) => ({ type: "response.function_call_arguments.delta", ...ref, delta })),
      { type: "response.function_call_arguments.done", ...ref, arguments: args, name },
      { type: "response.output_item.done", output_index: outputIndex, item: clone(item) },
    ],
    item,
  };
}

/** A web_search_call item (emitted all at once, as rill does for harmony `browser.*`). */
export function webSearch(outputIndex: number, id: string, query: string): BuiltItem {
  const ref = { item_id: id, output_index: outputIndex };
  const action = { type: "search", query };
  const item = { id, type: "web_search_call", status: "completed", action };
  return {
    events: [
      {
        type: "response.output_item.added",
        output_index: outputIndex,
        item: { id, type: "web_search_call", status: "in_progress", action: clone(action) },
      },
      { type: "response.web_search_call.in_progress", ...ref },
      { type: "response.web_search_call.searching", ...ref },
      { type: "response.web_search_call.completed", ...ref },
      { type: "response.output_item.done", output_index: outputIndex, item: clone(item) },
    ],
    item,
  };
}

/** A code_interpreter_call item streaming its code. */
export function codeInterpreter(outputIndex: number, id: string, deltas: readonly string[]): BuiltItem {
  const ref = { item_id: id, output_index: outputIndex };
  const code = deltas.join("");
  const item = { id, type: "code_interpreter_call", status: "completed", container_id: "cntr_1", code, outputs: [] };
  return {
    events: [
      {
        type: "response.output_item.added",
        output_index: outputIndex,
        item: { ...item, status: "in_progress", code: "", outputs: null },
      },
      { type: "response.code_interpreter_call.in_progress", ...ref },
      ...deltas.map((delta) => ({ type: "response.code_interpreter_call_code.delta", ...ref, delta })),
      { type: "response.code_interpreter_call_code.done", ...ref, code },
      { type: "response.code_interpreter_call.interpreting", ...ref },
      { type: "response.code_interpreter_call.completed", ...ref },
      { type: "response.output_item.done", output_index: outputIndex, item: clone(item) },
    ],
    item,
  };
}

/** An mcp_call item streaming its arguments. */
export function mcpCall(outputIndex: number, id: string, deltas: readonly string[], failed = false): BuiltItem {
  const ref = { item_id: id, output_index: outputIndex };
  const args = deltas.join("");
  const status = failed ? "failed" : "completed";
  const item = { id, type: "mcp_call", server_label: "repo_browser", name: "list", arguments: args, status };
  return {
    events: [
      {
        type: "response.output_item.added",
        output_index: outputIndex,
        item: { ...item, arguments: "", status: "in_progress" },
      },
      { type: "response.mcp_call.in_progress", ...ref },
      ...deltas.map((delta) => ({ type: "response.mcp_call_arguments.delta", ...ref, delta })),
      { type: "response.mcp_call_arguments.done", ...ref, arguments: args },
      { type: failed ? "response.mcp_call.failed" : "response.mcp_call.completed", ...ref },
      { type: "response.output_item.done", output_index: outputIndex, item: clone(item) },
    ],
    item,
  };
}

/** A complete foreground stream: created, in_progress, the items, and the terminal event. */
export function envelope(
  items: readonly BuiltItem[],
  terminal: { type?: string; status?: string; usage?: Json; over?: Json } = {},
): Json[] {
  const status = terminal.status ?? "completed";
  const over = terminal.over ?? {};
  const start = response("in_progress", over);
  const final = response(status, {
    ...over,
    output: items.map((built) => clone(built.item)),
    usage: terminal.usage ?? usage(12, 34),
  });
  return sequence([
    { type: "response.created", response: clone(start) },
    { type: "response.in_progress", response: clone(start) },
    ...items.flatMap((built) => clone(built.events)),
    { type: terminal.type ?? `response.${status}`, response: final },
  ]);
}

/** §5.13 text only. */
export function goldenTextOnly(): Json[] {
  return envelope([message(0, "msg_a1", [["Hel", "lo", ", world"]])]);
}

/** §5.13 opaque reasoning + function call (reasoning_tokens counted although no text streamed). */
export function goldenReasoningFunctionCall(): Json[] {
  return envelope(
    [
      reasoning(0, "rs_a1"),
      functionCall(1, "fc_a1", "call_a1", "get_weather", ['{"loc', 'ation":', '"Paris"}']),
    ],
    { usage: usage(80, 720, 704), over: { tools: [{ type: "function", name: "get_weather" }] } },
  );
}

/** §5.13 visible reasoning + message. */
export function goldenReasoningMessage(): Json[] {
  return envelope(
    [reasoning(0, "rs_b1", ["The user", " greets."]), message(1, "msg_b1", [["Hi", "!"]])],
    { usage: usage(20, 9, 5) },
  );
}

/** Cut by max_output_tokens inside the message. */
export function goldenIncomplete(): Json[] {
  return envelope([message(0, "msg_c1", [["Once", " upon"]], "incomplete")], {
    status: "incomplete",
    usage: usage(10, 2),
    over: { max_output_tokens: 2 },
  }).map((event) => {
    const r = event["response"] as Json | undefined;
    if (r !== undefined && r["status"] === "incomplete") r["incomplete_details"] = { reason: "max_output_tokens" };
    return event;
  });
}

/** An engine error after one finished item: error event, then response.failed with the error set. */
export function goldenFailed(): Json[] {
  const events = envelope([message(0, "msg_d1", [["partial"]])], { status: "failed" });
  const failed = events.at(-1)!;
  (failed["response"] as Json)["error"] = { code: "server_error", message: "engine died" };
  events.splice(events.length - 1, 0, { type: "error", code: "server_error", message: "engine died", param: null });
  return sequence(events);
}

/** background: created (queued), queued, in_progress, a message, completed. */
export function goldenBackground(): Json[] {
  const events = envelope([message(0, "msg_e1", [["done"]])], { over: { background: true } });
  const queued = response("queued", { background: true });
  (events[0]!["response"] as Json)["status"] = "queued";
  events.splice(1, 0, { type: "response.queued", response: queued });
  return sequence(events);
}

/** All hosted tool kinds rill emits, in one stream. */
export function goldenTools(): Json[] {
  return envelope([
    webSearch(0, "ws_f1", "weather paris"),
    codeInterpreter(1, "ci_f1", ["print(", "1)"]),
    mcpCall(2, "mcp_f1", ['{"path":', '"/"}']),
    message(3, "msg_f1", [["ok"]]),
  ], { over: { tools: [{ type: "web_search" }, { type: "code_interpreter", container: "auto" }] } });
}

/** Serialises events as rill's SSE stage does. */
export function toSSE(events: readonly Json[]): string {
  return events.map((event) => `event: ${event["type"]}\ndata: ${JSON.stringify(event)}\n\n`).join("");
}
