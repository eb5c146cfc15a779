/**
 * The exporter's grouped-query attention (fewer KV heads than query heads) runs in ONNX Runtime and matches torch.
 * tests/fixtures/gqa-onnx/ is written by scripts/train/export_gqa_fixture.py with rill's exporter: a prefill, a 3-token
 * step on a real past and a 1-token decode, none with past + new length equal to the repeat factor (the lengths at
 * which the old repeat_interleave lowering happened to work).
 */
import assert from "node:assert/strict";
import { type Case, verifyOnnx } from "../../../scripts/train/verify_onnx.ts";

const FIXTURE = new URL("../../fixtures/gqa-onnx/", import.meta.url).pathname;

Deno.test("exporter: a GQA model's ONNX graph matches torch in ONNX Runtime (prefill, multi-token step, decode)", async () => {
  const { cases } = JSON.parse(await Deno.readTextFile(`${FIXTURE}verify.json`)) as { cases: Case[] };
  assert.equal(cases.length, 3);
  const kvHeads = (cases[0]!.feeds["past_key_values.0.key"] as { shape: number[] }).shape[1];
  assert.equal(kvHeads, 2, "2 KV heads for 4 query heads");
  const results = await verifyOnnx(`${FIXTURE}onnx/model.onnx`, cases);
  for (const [i, r] of results.entries()) {
    assert.ok(r.logits < 1e-4, `case ${i}: logits max |diff| ${r.logits}`);
    assert.ok(r.present0Key < 1e-4, `case ${i}: present.0.key max |diff| ${r.present0Key}`);
  }
  assert.deepEqual(results.map((r) => r.dims), [[2, 10, 64], [2, 3, 64], [2, 1, 64]]);
});
