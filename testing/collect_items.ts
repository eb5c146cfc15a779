/**
 * Folds a parser's segments into items (kind + concatenated text) and checks the segment grammar on the way:
 * open → delta* → close, never nested, never a delta outside an item.
 */
import type { Logprob } from "../parsers/logprob.ts";
import type { CloseReason, ItemKind, OutputParser, Segment } from "../parsers/segment.ts";

export interface CollectedItem {
  readonly item: ItemKind;
  text: string;
  reason?: CloseReason;
  logprobs: Logprob[];
  deltas: number;
}

export function collectItems(segments: readonly Segment[]): CollectedItem[] {
  const items: CollectedItem[] = [];
  let open: CollectedItem | undefined;
  for (const s of segments) {
    switch (s.kind) {
      case "open":
        if (open) throw new Error(`open ${JSON.stringify(s.item)} while ${JSON.stringify(open.item)} is open`);
        open = { item: s.item, text: "", logprobs: [], deltas: 0 };
        items.push(open);
        break;
      case "delta":
        if (!open) throw new Error(`delta ${JSON.stringify(s.text)} outside an item`);
        if (s.text.length === 0) throw new Error("empty delta");
        open.text += s.text;
        open.deltas++;
        if (s.logprobs) open.logprobs.push(...s.logprobs);
        break;
      case "close":
        if (!open) throw new Error("close without open");
        open.reason = s.reason;
        open = undefined;
        break;
      default: {
        const never: never = s;
        throw new Error(`unknown segment ${JSON.stringify(never)}`);
      }
    }
  }
  if (open) throw new Error("item left open after flush");
  return items;
}

/** Pushes every token (one at a time) then flushes; returns all segments. */
export function runParser(
  parser: OutputParser,
  ids: readonly number[],
  logprobs?: readonly Logprob[],
): Segment[] {
  const out: Segment[] = [];
  ids.forEach((id, i) => out.push(...parser.push(id, logprobs?.[i])));
  out.push(...parser.flush());
  return out;
}

/** Compact view for assertions: `type[:name]` and text. */
export function summary(items: readonly CollectedItem[]): [string, string][] {
  return items.map((
    it,
  ) => [it.item.type === "function_call" ? `function_call:${it.item.name}` : it.item.type, it.text]);
}
