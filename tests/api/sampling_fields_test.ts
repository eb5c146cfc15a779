/**
 * The request sampling fields → the engine's parameters: vLLM's top_k -1 means off, a request without top_k keeps the
 * model's default, logit_bias keys become token ids (zeros dropped, ids past the vocabulary a 400 naming
 * `logit_bias`), and per-choice seeds are deterministic, distinct, and keep the request's seed for choice 0.
 */
import assert from "node:assert/strict";
import { ApiError } from "../../prompt/errors.ts";
import { z } from "zod";
import { choiceSeed, LogitBias, requestName, samplingFields, SamplingFieldShape } from "../../api/sampling_fields.ts";
import { OPTIONAL_SAMPLING_KEYS, SAMPLING_FIELDS } from "../../engine/sampling_fields.ts";

Deno.test("samplingFields: defaults, vLLM extras and logit_bias", () => {
  assert.deepEqual(samplingFields({}, 40, 100), { topK: 40 });
  assert.deepEqual(samplingFields({ top_k: -1 }, 40, 100), { topK: 0 });
  const all = samplingFields(
    {
      top_k: 5,
      min_p: 0.1,
      presence_penalty: 0.5,
      frequency_penalty: -1,
      repetition_penalty: 1.2,
      logit_bias: { "7": -100, "0": 0, "99": 2.5 },
    },
    0,
    100,
  );
  assert.equal(all.topK, 5);
  assert.equal(all.minP, 0.1);
  assert.equal(all.presencePenalty, 0.5);
  assert.equal(all.frequencyPenalty, -1);
  assert.equal(all.repetitionPenalty, 1.2);
  assert.deepEqual([...all.logitBias!], [[7, -100], [99, 2.5]]);
  assert.throws(
    () => samplingFields({ logit_bias: { "100": 1 } }, 0, 100),
    (e: unknown) => e instanceof ApiError && e.status === 400 && e.param === "logit_bias",
  );
});

Deno.test("LogitBias: keys must be token ids, values within -100..100", () => {
  assert.ok(LogitBias.safeParse({ "0": -100, "123": 100 }).success);
  for (const bad of [{ "-1": 1 }, { "01": 1 }, { "1.5": 1 }, { x: 1 }, { "1": 100.5 }, { "1": -101 }]) {
    assert.ok(!LogitBias.safeParse(bad).success, JSON.stringify(bad));
  }
});

Deno.test("choiceSeed: choice 0 keeps the seed; the others are fixed, distinct, safe integers", () => {
  assert.equal(choiceSeed(42, 0), 42);
  const seeds = Array.from({ length: 16 }, (_, i) => choiceSeed(42, i));
  assert.equal(new Set(seeds).size, 16);
  assert.deepEqual(seeds, Array.from({ length: 16 }, (_, i) => choiceSeed(42, i)));
  for (const s of seeds) assert.ok(Number.isSafeInteger(s) && s >= 0 || s === 42);
  assert.notEqual(choiceSeed(43, 1), choiceSeed(42, 1));
  assert.ok(Number.isSafeInteger(choiceSeed(-5, 3)) && choiceSeed(-5, 3) >= 0);
});

Deno.test("SamplingFieldShape: every optional engine sampling field is a request field, bounded by the engine's limits", () => {
  const schema = z.strictObject(SamplingFieldShape);
  for (const key of OPTIONAL_SAMPLING_KEYS) {
    const name = requestName(key);
    assert.ok(name in SamplingFieldShape, `${key} has no request field`);
    const neutral = Number(SAMPLING_FIELDS[key].neutral);
    assert.deepEqual(samplingFields(schema.parse({ [name]: neutral }), 0, 10), { topK: 0, [key]: neutral });
    assert.equal(schema.safeParse({ [name]: null }).success, true);
  }
  assert.equal(requestName("repetitionPenalty"), "repetition_penalty");
  // The engine's limits reach the API where it names none tighter (min_p in 0..1, repetition_penalty > 0).
  assert.match(schema.safeParse({ min_p: 1.5 }).error?.issues[0]?.message ?? "", /outside 0\.\.1/);
  assert.equal(schema.safeParse({ min_p: -0.1 }).success, false);
  assert.equal(schema.safeParse({ repetition_penalty: 0 }).success, false);
  assert.equal(schema.safeParse({ presence_penalty: 2.5 }).success, false);
});
