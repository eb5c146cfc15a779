/**
 * The SSE encoder writes delta frames straight to bytes; those bytes must be exactly the UTF-8 of its text, which
 * tests/events/pipeline_test.ts pins to `JSON.stringify`.
 */
import assert from "node:assert/strict";
import fc from "fast-check";
import * as b from "../../events/builders.ts";
import { Sequencer } from "../../events/sequencer_stage.ts";
import { SseEncoder } from "../../events/sse_encoder.ts";
import type { UnsequencedEvent } from "../../events/types.ts";

const utf8 = new TextEncoder();

/** A string of the characters JSON.stringify treats differently: controls, quotes, non-ASCII, lone surrogates. */
const tricky = fc.array(
  fc.oneof(
    fc.constantFrom('"', "\\", "\n", "\r", "\t", "\b", "\f", "\u0000", "\u001f", "\u007f", "\u2028", "/"),
    fc.constantFrom("\ud800", "\udfff", "\ud83d\ude00", "\u00e9", "\u20ac", "\uffff", "a"),
    fc.string({ unit: "binary" }),
    fc.string(),
  ),
  { maxLength: 6 },
).map((parts) => parts.join(""));

const refs = [
  { itemId: "msg_1", outputIndex: 0, contentIndex: 0 },
  { itemId: 'fc_"q"\u00e9', outputIndex: 12, contentIndex: 0 },
];

const deltaEvent = fc.tuple(fc.nat({ max: 5 }), fc.nat({ max: 1 }), tricky, fc.boolean()).map(
  ([kind, r, text, withLogprobs]): UnsequencedEvent => {
    const ref = refs[r]!;
    switch (kind) {
      case 0:
        return b.outputTextDelta(
          ref,
          text,
          withLogprobs ? [{ token: text, bytes: [1], logprob: -1, top_logprobs: [] }] : [],
        );
      case 1:
        return b.reasoningTextDelta(ref, text);
      case 2:
        return b.functionCallArgumentsDelta(ref, text);
      case 3:
        return b.mcpCallArgumentsDelta(ref, text);
      case 4:
        return b.codeInterpreterCallCodeDelta(ref, text);
      default:
        return b.outputTextDone(ref, text, []);
    }
  },
);

Deno.test("SSE encoder: encode is the UTF-8 of text for any deltas, steps and sequence numbers", () => {
  fc.assert(
    fc.property(
      fc.array(fc.array(deltaEvent, { maxLength: 4 }), { maxLength: 6 }),
      fc.nat({ max: 1_000_000 }),
      (steps, skip) => {
        const seq = new Sequencer();
        seq.stamp(Array.from({ length: skip % 1200 }, () => b.reasoningTextDelta(refs[0]!, "")));
        const encoder = new SseEncoder();
        const reference = new SseEncoder();
        for (const step of steps) {
          const events = seq.stamp(step);
          const bytes = encoder.encode(events);
          assert.deepEqual(bytes, utf8.encode(reference.text(events)));
          const plain = events.map((e) => `event: ${e.type}\ndata: ${JSON.stringify(e)}\n\n`).join("");
          assert.equal(new TextDecoder().decode(bytes), plain);
        }
      },
    ),
    { numRuns: 300 },
  );
});

Deno.test("SSE encoder: each encode returns its own bytes (nothing is reused under a sent chunk)", () => {
  const seq = new Sequencer();
  const encoder = new SseEncoder();
  const first = encoder.encode(seq.stamp([b.outputTextDelta(refs[0]!, "one", [])]));
  const copy = first.slice();
  encoder.encode(seq.stamp([b.outputTextDelta(refs[0]!, "two", [])]));
  assert.deepEqual(first, copy);
});

Deno.test("sequencer: numbering an event twice throws", () => {
  const seq = new Sequencer();
  const [event] = seq.stamp([b.outputTextDelta(refs[0]!, "a", [])]);
  assert.throws(() => new Sequencer().stamp([event as unknown as UnsequencedEvent]), /already/);
});
