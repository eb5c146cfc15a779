import assert from "node:assert/strict";
import { validateSSE, validateStream } from "../../conformance/validator.ts";
import {
  goldenBackground,
  goldenFailed,
  goldenIncomplete,
  goldenReasoningFunctionCall,
  goldenReasoningMessage,
  goldenTextOnly,
  goldenTools,
  type Json,
  toSSE,
} from "../../testing/validator_streams.ts";

const GOLDEN: Record<string, () => Json[]> = {
  "text only": goldenTextOnly,
  "reasoning + function call": goldenReasoningFunctionCall,
  "visible reasoning + message": goldenReasoningMessage,
  "incomplete": goldenIncomplete,
  "failed with error event": goldenFailed,
  "background with queued": goldenBackground,
  "hosted tools": goldenTools,
};

for (const [name, build] of Object.entries(GOLDEN)) {
  Deno.test(`validateStream accepts the golden shape: ${name}`, () => {
    assert.deepEqual(validateStream(build()), []);
  });
  Deno.test(`validateSSE accepts the golden shape as SSE: ${name}`, () => {
    const events = build();
    const result = validateSSE(toSSE(events));
    assert.deepEqual(result.violations, []);
    assert.deepEqual(result.events, events);
  });
}
