import type { Logprob } from "../../parsers/logprob.ts";
import assert from "node:assert/strict";
import { ChatmlParser } from "../../parsers/chatml_parser.ts";
import type { Segment } from "../../parsers/segment.ts";
import { collectItems, runParser, summary } from "../../testing/collect_items.ts";
import { ScriptTokenizer } from "../../testing/script_tokenizer.ts";

function tok(): ScriptTokenizer {
  return new ScriptTokenizer([
    { text: "<|im_end|>", control: true },
    { text: "<think>", control: false },
    { text: "</think>", control: false },
    { text: "<tool_call>", control: false },
    { text: "</tool_call>", control: false },
  ]);
}

function lp(token: string): Logprob {
  return { token, bytes: [...new TextEncoder().encode(token)], logprob: -0.5, top_logprobs: [] };
}

Deno.test("emoji and CJK split across tokens never produce U+FFFD and arrive whole", () => {
  const t = tok();
  const text = "你好😀!";
  const p = new ChatmlParser(t, { toolNames: [] });
  const perToken = [...new TextEncoder().encode(text)].map((b) => p.push(b));
  perToken.push(p.flush());
  const deltas = perToken.flat().filter((s) => s.kind === "delta").map((s) => (s.kind === "delta" ? s.text : ""));
  assert.deepEqual(deltas, ["你", "好", "😀", "!"]);
});

Deno.test("arguments stream as they arrive, before the call closes", () => {
  const t = tok();
  const p = new ChatmlParser(t, { toolNames: ["get_weather"] });
  const pieces = [
    "<tool_call>",
    '\n{"name": "get_',
    'weather", "argu',
    'ments": {"ci',
    'ty": "Pa',
    'ris"}}\n',
    "</tool_call>",
  ];
  const steps = pieces.map((s) => p.push(s === "<tool_call>" || s === "</tool_call>" ? t.specialId(s)! : t.piece(s)));
  steps.push(p.flush());
  assert.deepEqual(steps, [
    [],
    [],
    [{ kind: "open", item: { type: "function_call", name: "get_weather" } }],
    [{ kind: "delta", text: '{"ci' }],
    [{ kind: "delta", text: 'ty": "Pa' }],
    [{ kind: "delta", text: 'ris"}' }],
    [{ kind: "close", reason: "end" }],
    [],
  ]);
});

Deno.test("a partial marker is held back minimally, then released as text when it does not complete", () => {
  const t = tok();
  const p = new ChatmlParser(t, { toolNames: ["f"] });
  assert.deepEqual(p.push(t.piece("Hi <")), [{ kind: "open", item: { type: "message" } }, {
    kind: "delta",
    text: "Hi",
  }]);
  assert.deepEqual(p.push(t.piece("tool")), []);
  assert.deepEqual(p.push(t.piece("box>")), [{ kind: "delta", text: " <toolbox>" }]);
});

Deno.test("logprobs ride with the message delta that carries the token's text; markup and reasoning carry none", () => {
  const t = tok();
  const p = new ChatmlParser(t, { toolNames: [] });
  const pieces = ["<think>", "\nhm", "</thi", "nk>\n\nA", "</", "b", "\n", "<|im_end|>"];
  const segs: Segment[] = [];
  for (const s of pieces) {
    const id = s === "<think>" || s === "<|im_end|>" ? t.specialId(s)! : t.piece(s);
    segs.push(...p.push(id, lp(s)));
  }
  segs.push(...p.flush());
  const items = collectItems(segs);
  assert.deepEqual(summary(items), [["reasoning", "hm"], ["message", "A</b\n"]]);
  // Reasoning text has no logprobs on the wire, so its tokens attach to nothing.
  assert.deepEqual(items[0]?.logprobs.map((l) => l.token), []);
  // "</thi" was markup only; "nk>\n\nA" ends the marker and carries "A" (listed as the part shown); "</" was held
  // then released with "b".
  assert.deepEqual(items[1]?.logprobs.map((l) => l.token), ["A", "</", "b", "\n"]);
  assert.equal(items[1]?.logprobs.map((l) => l.token).join(""), items[1]?.text);
});

Deno.test("logprob of a token that only starts a character goes with the character", () => {
  const t = tok();
  const p = new ChatmlParser(t, { toolNames: [] });
  const bytes = [...new TextEncoder().encode("é")];
  const segs = runParser(p, bytes, bytes.map((b) => lp(String(b))));
  const items = collectItems(segs);
  assert.deepEqual(items[0]?.logprobs.map((l) => l.token), bytes.map(String));
});

Deno.test("malformed JSON after the call opened: the call keeps what streamed, the rest is text", () => {
  const t = tok();
  const p = new ChatmlParser(t, { toolNames: ["f"] });
  const items = collectItems(
    runParser(p, t.encodeOrdinary('<tool_call>{"name": "f", "arguments": {"a": 1]} x</tool_call> ok')),
  );
  assert.deepEqual(summary(items), [["function_call:f", '{"a": 1'], ["message", "]} x</tool_call> ok"]]);
});

Deno.test("junk after a complete call object becomes text; the closing marker stays hidden", () => {
  const t = tok();
  const p = new ChatmlParser(t, { toolNames: ["f"] });
  const items = collectItems(
    runParser(p, t.encodeOrdinary('<tool_call>{"name": "f", "arguments": {}} and more</tool_call>')),
  );
  assert.deepEqual(summary(items), [["function_call:f", "{}"], ["message", "and more"]]);
});

Deno.test("text before a degraded call keeps its whitespace", () => {
  const t = tok();
  const p = new ChatmlParser(t, { toolNames: ["f"] });
  const items = collectItems(runParser(p, t.encodeOrdinary("Hi\n\n<tool_call>nope")));
  assert.deepEqual(summary(items), [["message", "Hi\n\n<tool_call>nope"]]);
});

Deno.test("a message delta that ends inside a token waits for the rest of that token's text", () => {
  const t = tok();
  const run = (pieces: readonly (string | Uint8Array)[]) => {
    const p = new ChatmlParser(t, { toolNames: ["f"] });
    const segs: Segment[] = [];
    pieces.forEach((piece, i) => {
      const id = piece === "<|im_end|>" || piece === "<think>" ? t.specialId(piece)! : t.piece(piece);
      segs.push(...p.push(id, lp(String(i))));
    });
    segs.push(...p.flush());
    return segs.flatMap((s) => s.kind === "delta" ? [[s.text, (s.logprobs ?? []).map((l) => l.token)]] : []);
  };
  // Trailing whitespace kept at the end of output goes out with the token that also made the ".".
  assert.deepEqual(run(["Done", ".\n\n", "<|im_end|>"]), [["Done", ["0"]], [".\n\n", ["1"]]]);
  // ...and is dropped before a marker, the "." still carrying its token.
  assert.deepEqual(run(["Done", ".\n\n", "<think>", "x"]), [["Done", ["0"]], [".", ["1"]], ["x", []]]);
  // A held-back marker prefix released at the end stays with its token.
  assert.deepEqual(run(["x<", "<|im_end|>"]), [["x<", ["0"]]]);
  // A character cut off at the end (U+FFFD) leaves with the token that began it; a completed one with both tokens.
  const aHalfEmoji = Uint8Array.of(0x61, 0xf0, 0x9f);
  assert.deepEqual(run(["Hi", aHalfEmoji]), [["Hi", ["0"]], ["a\uFFFD", ["1"]]]);
  assert.deepEqual(run(["Hi", aHalfEmoji, Uint8Array.of(0x92, 0x96, 0x20)]), [["Hi", ["0"]], ["a💖 ", ["1", "2"]]]);
  // A token whose text spans the end of reasoning and the start of the message belongs to the message.
  assert.deepEqual(run(["<think>", "hm</think>\n\nA", "<|im_end|>"]), [["hm", []], ["A", ["1"]]]);
});

Deno.test("edge whitespace is trimmed in the text and in the logprob tokens alike", () => {
  const t = tok();
  const run = (pieces: readonly string[], tools: readonly string[] = []) => {
    const p = new ChatmlParser(t, { toolNames: tools });
    const segs: Segment[] = [];
    for (const piece of pieces) {
      const id = piece === "<|im_end|>" || piece === "<think>" || piece === "</think>"
        ? t.specialId(piece)!
        : t.piece(piece);
      segs.push(...p.push(id, lp(piece)));
    }
    segs.push(...p.flush());
    return collectItems(segs).filter((i) => i.item.type === "message").map((i) => [
      i.text,
      i.logprobs.map((l) => l.token).join(""),
      i.logprobs.map((l) => l.bytes.length),
    ]);
  };
  // A leading space trimmed from the first token of a message is trimmed from its logprob too.
  assert.deepEqual(run(["<think>", "hm", "</think>", " is", " available", ".", "<|im_end|>"]), [
    ["is available.", "is available.", [2, 10, 1]],
  ]);
  // Whitespace dropped before a marker leaves the token that also made the "." listed as ".".
  assert.deepEqual(run(["Done", ".\n\n", "<think>", "x"]), [["Done.", "Done.", [4, 1]]]);
  // The same before a tool call.
  assert.deepEqual(run(["Hi", ".\n", "<tool_call>", '{"name": "f"}', "</tool_call>"], ["f"]).slice(0, 1), [
    ["Hi.", "Hi.", [2, 1]],
  ]);
});
