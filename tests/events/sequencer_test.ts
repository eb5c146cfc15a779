import assert from "node:assert/strict";
import { Sequencer } from "../../events/sequencer_stage.ts";
import * as b from "../../events/builders.ts";

Deno.test("sequencer: continuing a stored log numbers from the given first number", () => {
  const ref = { itemId: "msg_1", outputIndex: 0, contentIndex: 0 };
  const events = new Sequencer(7).stamp([b.outputTextDelta(ref, "a", []), b.outputTextDelta(ref, "b", [])]);
  assert.deepEqual(events.map((e) => e.sequence_number), [7, 8]);
  assert.throws(() => new Sequencer(-1), RangeError);
  assert.throws(() => new Sequencer(1.5), RangeError);
});
