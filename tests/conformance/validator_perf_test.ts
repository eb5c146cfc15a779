/** The validator runs inside property tests over thousands of streams, so it must stay linear and cheap. */
import assert from "node:assert/strict";
import { validateSSE, validateStream } from "../../conformance/validator.ts";
import { envelope, functionCall, message, reasoning, toSSE, usage } from "../../testing/validator_streams.ts";

function bigStream() {
  const words = Array.from({ length: 3_340 }, (_, i) => ` w${i}`);
  return envelope([
    reasoning(0, "rs_big", words),
    message(1, "msg_big", [words]),
    functionCall(2, "fc_big", "call_big", "f", words.map((w) => w.trim())),
  ], { usage: usage(100, 10_020, 3_340), over: { tools: [{ type: "function", name: "f" }] } });
}

function bestOf(runs: number, f: () => void): number {
  let best = Infinity;
  for (let i = 0; i < runs; i++) {
    const start = performance.now();
    f();
    best = Math.min(best, performance.now() - start);
  }
  return best;
}

Deno.test("validateStream checks a 10,000-event stream in well under 100 ms", () => {
  const events = bigStream();
  assert.ok(events.length >= 10_000, `${events.length} events`);
  assert.deepEqual(validateStream(events), []);
  const ms = bestOf(5, () => validateStream(events));
  assert.ok(ms < 100, `validateStream took ${ms.toFixed(1)} ms`);
});

Deno.test("validateSSE parses and checks a 10,000-event body in well under 100 ms", () => {
  const body = toSSE(bigStream());
  assert.deepEqual(validateSSE(body).violations, []);
  const ms = bestOf(5, () => validateSSE(body));
  assert.ok(ms < 100, `validateSSE took ${ms.toFixed(1)} ms`);
});
