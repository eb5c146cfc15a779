/**
 * Type-level guarantee (responses-streaming.md §5.2 #14): only events/sequencer_stage.ts can make a `ResponseStreamEvent`.
 * `deno test` type-checks this file, so an `@ts-expect-error` that stops being an error fails the run.
 */
import assert from "node:assert/strict";
import * as b from "../../events/builders.ts";
import { Sequencer } from "../../events/sequencer_stage.ts";
import type { ResponseStreamEvent, UnsequencedEvent } from "../../events/types.ts";

const ref = { itemId: "msg_1", outputIndex: 0, contentIndex: 0 };

Deno.test("a numbered event cannot be built outside the sequencer, and builders cannot number one", () => {
  const delta: UnsequencedEvent = b.outputTextDelta(ref, "a", []);
  // @ts-expect-error an event with a hand-written sequence_number lacks the sequencer's brand
  const forged: ResponseStreamEvent = { ...delta, sequence_number: 0 };
  // @ts-expect-error builders return unsequenced events
  const unnumbered: ResponseStreamEvent = b.outputTextDelta(ref, "a", []);
  // @ts-expect-error an unsequenced event has no sequence_number to read
  const _n: number = delta.sequence_number;
  const [stamped] = new Sequencer().stamp([delta]);
  assert.equal(stamped?.sequence_number, 0);
  // The brand is type-level only: the wire object is the event plus its number, nothing else.
  assert.deepEqual(JSON.parse(JSON.stringify(stamped)), JSON.parse(JSON.stringify(forged)));
  assert.ok(!("sequence_number" in unnumbered));
});
