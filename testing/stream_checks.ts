/**
 * Structural checks on one event list, for the property tests: sequence numbers, lifecycle envelope, sequential
 * items with matching added/done, the text equality chain, and terminal output == the done items. A subset of the
 * validator's invariants, kept here so the properties do not depend on a single implementation of them.
 */
import type { OutputItem, ResponseStreamEvent } from "../events/types.ts";

/** Returns the list of problems found (empty when the stream is well-formed). */
export function structuralProblems(events: readonly ResponseStreamEvent[]): string[] {
  const problems: string[] = [];
  const fail = (i: number, m: string) => problems.push(`#${i} ${events[i]?.type}: ${m}`);
  events.forEach((e, i) => {
    if (e.sequence_number !== i) fail(i, `sequence_number ${e.sequence_number}`);
  });
  if (events[0]?.type !== "response.created") fail(0, "first event is not response.created");
  const terminals = events.filter((e) =>
    e.type === "response.completed" || e.type === "response.incomplete" || e.type === "response.failed"
  );
  const cancelled = terminals.length === 0;
  if (terminals.length > 1) fail(events.length - 1, `${terminals.length} terminal events`);
  if (!cancelled && terminals[0] !== events.at(-1)) fail(events.length - 1, "terminal event is not last");

  const done: OutputItem[] = [];
  let open: { index: number; id: string; type: string; text: string; partOpen: boolean } | null = null;
  let added = 0;
  events.forEach((e, i) => {
    switch (e.type) {
      case "response.output_item.added":
        if (open !== null) fail(i, "item added while another is open");
        if (e.output_index !== added) fail(i, `output_index ${e.output_index}, expected ${added}`);
        added++;
        open = { index: e.output_index, id: e.item.id, type: e.item.type, text: "", partOpen: false };
        break;
      case "response.output_item.done":
        if (open === null || open.index !== e.output_index || open.id !== e.item.id || open.type !== e.item.type) {
          fail(i, "done does not match the open item");
        }
        if (e.item.type === "message" && e.item.content[0]?.type === "output_text") {
          if (e.item.content[0].text !== open?.text) fail(i, "message text differs from its deltas");
        }
        if (e.item.type === "reasoning" && e.item.content[0]?.text !== open?.text) {
          fail(i, "reasoning text differs from its deltas");
        }
        if (e.item.type === "function_call" && e.item.arguments !== open?.text) fail(i, "arguments differ from deltas");
        done.push(e.item);
        open = null;
        break;
      case "response.content_part.added":
        if (open === null || e.item_id !== open.id || e.content_index !== 0) fail(i, "part outside its item");
        else open.partOpen = true;
        break;
      case "response.content_part.done":
        if (open === null || e.item_id !== open.id || !open.partOpen) fail(i, "part done without part");
        else open.partOpen = false;
        break;
      case "response.output_text.delta":
      case "response.reasoning_text.delta":
      case "response.function_call_arguments.delta":
      case "response.mcp_call_arguments.delta":
      case "response.code_interpreter_call_code.delta":
        if (open === null || e.item_id !== open.id || e.output_index !== open.index) fail(i, "delta outside its item");
        else open.text += e.delta;
        if (e.delta === "") fail(i, "empty delta");
        break;
      case "response.output_text.done":
      case "response.reasoning_text.done":
        if (open === null || e.text !== open.text) fail(i, "done text differs from deltas");
        break;
      default:
        break;
    }
  });
  if (open !== null && !cancelled && terminals[0]?.type !== "response.failed") fail(events.length, "item left open");
  const terminal = terminals[0];
  if (terminal !== undefined && terminal.type !== "response.failed") {
    const output = terminal.response.output;
    if (output.length !== done.length || output.some((item, k) => item !== done[k])) {
      fail(events.indexOf(terminal), "terminal output is not the done items");
    }
  }
  if (events.some((e) => JSON.stringify(e).includes('"sequence_number":-1'))) fail(-1, "sequence_number -1 somewhere");
  return problems;
}

/** Events with delta runs of one item merged and sequence numbers dropped: equal iff streams differ only in delta boundaries. */
export function modDeltaBoundaries(events: readonly ResponseStreamEvent[]): unknown[] {
  const out: Record<string, unknown>[] = [];
  for (const e of events) {
    const { sequence_number: _, ...rest } = e;
    const prev = out.at(-1);
    if ("delta" in rest && prev !== undefined && prev.type === rest.type && prev.item_id === rest.item_id) {
      prev.delta = String(prev.delta) + rest.delta;
      if ("logprobs" in rest) prev.logprobs = [...(prev.logprobs as unknown[]), ...rest.logprobs];
      continue;
    }
    out.push({ ...rest });
  }
  return out;
}
