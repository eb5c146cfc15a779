import assert from "node:assert/strict";
import { ChatmlParser } from "../../parsers/chatml_parser.ts";
import { collectItems, runParser, summary } from "../../testing/collect_items.ts";
import { ScriptTokenizer } from "../../testing/script_tokenizer.ts";

function parse(
  text: string,
  opts: { reasoningStart?: string; reasoningEnd?: string; startInReasoning?: boolean; specials?: string[] } = {},
) {
  const tok = new ScriptTokenizer([
    { text: "<|im_end|>", control: true },
    ...(opts.specials ?? []).map((t) => ({ text: t, control: true })),
  ]);
  const { specials: _s, ...rest } = opts;
  const parser = new ChatmlParser(tok, { toolNames: [], ...rest });
  const ids = tok.encode(text);
  const segments: ReturnType<typeof runParser> = [];
  const states: boolean[] = [];
  for (const id of ids) {
    segments.push(...parser.push(id));
    states.push(parser.inReasoning);
  }
  segments.push(...parser.flush());
  return { items: collectItems(segments), states, parser };
}

Deno.test("configurable markers, as control tokens or as text", () => {
  const opts = { reasoningStart: "[THINK]", reasoningEnd: "[/THINK]" };
  const text = "[THINK]\nabc\n[/THINK]\nanswer";
  const expected = [["reasoning", "abc"], ["message", "answer"]];
  assert.deepEqual(summary(parse(text, opts).items), expected);
  assert.deepEqual(summary(parse(text, { ...opts, specials: ["[THINK]", "[/THINK]"] }).items), expected);
  // The default markers are plain text under other markers.
  assert.deepEqual(summary(parse("<think>x</think>", opts).items), [["message", "<think>x</think>"]]);
});

Deno.test("inReasoning follows the markers token by token", () => {
  const { states, items } = parse("a<think>b</think>c", { specials: ["<think>", "</think>"] });
  // tokens: a, <think>, b, </think>, c
  assert.deepEqual(states, [false, true, true, false, false]);
  assert.deepEqual(summary(items), [["message", "a"], ["reasoning", "b"], ["message", "c"]]);
});

Deno.test("startInReasoning: inReasoning is true before any token; no item when nothing was generated", () => {
  const tok = new ScriptTokenizer([{ text: "<|im_end|>", control: true }]);
  const p = new ChatmlParser(tok, { toolNames: [], startInReasoning: true });
  assert.equal(p.inReasoning, true);
  assert.deepEqual(p.push(tok.specialId("<|im_end|>")!), []);
  assert.deepEqual(p.flush(), []);
  assert.equal(p.inReasoning, false);
});

Deno.test("newline rule: exactly one newline is dropped after <think> and before </think>", () => {
  assert.deepEqual(summary(parse("<think>\n\nx\n\n</think>").items), [["reasoning", "\nx\n"]]);
  assert.deepEqual(summary(parse("<think>x</think>y").items), [["reasoning", "x"], ["message", "y"]]);
  assert.deepEqual(summary(parse("<think>\n\n</think>\n\nHi").items), [["reasoning", ""], ["message", "Hi"]]);
  // A repeated opening marker before any thought is dropped; after some thought it is text.
  assert.deepEqual(summary(parse("<think>\nA <think> B</think>", { startInReasoning: true }).items), [
    ["reasoning", "A <think> B"],
  ]);
});

Deno.test("empty thinking with startInReasoning gives an empty reasoning item", () => {
  const { items } = parse("</think>\n\nHello", { startInReasoning: true });
  assert.deepEqual(summary(items), [["reasoning", ""], ["message", "Hello"]]);
  assert.deepEqual(items.map((i) => i.reason), ["end", "implicit"]);
});

Deno.test("reasoning cut by the end of output closes implicitly and keeps held text", () => {
  const { items } = parse("<think>\nstill thinking\n</thi");
  assert.deepEqual(summary(items), [["reasoning", "still thinking\n</thi"]]);
  assert.equal(items[0]?.reason, "implicit");
});

Deno.test("a stray </think> in text ends the message and is not shown", () => {
  assert.deepEqual(summary(parse("leaked thought</think>\n\nAnswer").items), [
    ["message", "leaked thought"],
    ["message", "Answer"],
  ]);
});

Deno.test("reasoning text may contain tool-call markup: it stays reasoning", () => {
  const tok = new ScriptTokenizer([]);
  const p = new ChatmlParser(tok, { toolNames: ["f"] });
  const text = '<think>maybe <tool_call>{"name": "f"}</tool_call>?</think>ok';
  assert.deepEqual(summary(collectItems(runParser(p, tok.encodeOrdinary(text)))), [
    ["reasoning", 'maybe <tool_call>{"name": "f"}</tool_call>?'],
    ["message", "ok"],
  ]);
});
