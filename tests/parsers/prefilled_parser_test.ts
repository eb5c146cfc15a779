import assert from "node:assert/strict";
import { PrefilledParser } from "../../parsers/prefilled_parser.ts";
import type { OutputParser, Segment } from "../../parsers/segment.ts";

/** A parser scripted by token id: 1 opens reasoning, 2 opens a call, 3 closes, anything else is a delta of its id. */
class ScriptParser implements OutputParser {
  inReasoning = false;
  push(token: number): Segment[] {
    switch (token) {
      case 1:
        this.inReasoning = true;
        return [{ kind: "open", item: { type: "reasoning" } }];
      case 2:
        this.inReasoning = false;
        return [{ kind: "open", item: { type: "function_call", name: "f" } }];
      case 3:
        this.inReasoning = false;
        return [{ kind: "close", reason: "end" }];
      default:
        return [{ kind: "delta", text: String(token) }];
    }
  }
  flush(): Segment[] {
    return [];
  }
}

const CALL: Segment = { kind: "open", item: { type: "function_call", name: "f" } };

Deno.test("prefill segments go out once, ahead of the first token's, with empty prefill items dropped", () => {
  const parser = new PrefilledParser(new ScriptParser(), [1, 3, 2, 7]);
  assert.equal(parser.inReasoning, false);
  assert.deepEqual(parser.push(8), [CALL, { kind: "delta", text: "7" }, { kind: "delta", text: "8" }]);
  assert.deepEqual(parser.push(9), [{ kind: "delta", text: "9" }]);
  assert.deepEqual(parser.flush(), []);
});

Deno.test("a generation with no tokens still gets the prefill's segments at flush", () => {
  const parser = new PrefilledParser(new ScriptParser(), [2]);
  assert.deepEqual(parser.flush(), [CALL]);
});

Deno.test("an item the prefill opens and the model fills is kept", () => {
  const parser = new PrefilledParser(new ScriptParser(), [1]);
  assert.equal(parser.inReasoning, true);
  assert.deepEqual(parser.push(5), [{ kind: "open", item: { type: "reasoning" } }, { kind: "delta", text: "5" }]);
});
