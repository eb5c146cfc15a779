import assert from "node:assert/strict";
import { CallLimitParser } from "../../parsers/call_limit_parser.ts";
import { ChatmlParser } from "../../parsers/chatml_parser.ts";
import { collectItems, runParser, summary } from "../../testing/collect_items.ts";
import { ScriptTokenizer } from "../../testing/script_tokenizer.ts";

const TEXT = '<think>\nplan\n</think>\n\n<tool_call>{"name": "f", "arguments": {"a": 1}}</tool_call>\n' +
  '<tool_call>{"name": "f", "arguments": {"a": 2}}</tool_call>\nafter';

function run(max: number) {
  const tok = new ScriptTokenizer([{ text: "<|im_end|>", control: true }]);
  const parser = new CallLimitParser(new ChatmlParser(tok, { toolNames: ["f"] }), max);
  return { parser, items: collectItems(runParser(parser, tok.encodeOrdinary(TEXT))) };
}

Deno.test("CallLimitParser ends the output when the last allowed call closes", () => {
  const one = run(1);
  assert.deepEqual(summary(one.items), [["reasoning", "plan"], ["function_call:f", '{"a": 1}']]);
  assert.equal(one.parser.ended, true);
  assert.equal(one.parser.inReasoning, false);
  assert.deepEqual(summary(run(2).items), [
    ["reasoning", "plan"],
    ["function_call:f", '{"a": 1}'],
    ["function_call:f", '{"a": 2}'],
  ]);
  const many = run(3);
  assert.equal(many.items.length, 4);
  assert.equal(many.parser.ended, false);
});

Deno.test("CallLimitParser with no call allowed ends before the first call opens", () => {
  const zero = run(0);
  assert.deepEqual(summary(zero.items), [["reasoning", "plan"]]);
  assert.equal(zero.parser.ended, true);
});
