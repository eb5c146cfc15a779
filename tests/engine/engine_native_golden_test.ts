/**
 * The native library's CPU device under the engine gives the outputs recorded on ONNX Runtime
 * (tests/fixtures/engine_golden): greedy tokens on each bundled model's held-out prompts, seeded tokens (the same
 * sampling rule and Philox stream on both sides), with n-gram speculation, and under chunked prefill with preemption
 * in a small KV pool.
 */
import assert from "node:assert/strict";
import {
  GOLDEN_DIR,
  GOLDEN_MODELS,
  type GoldenFile,
  goldenPrompts,
  type GoldenRun,
  openGoldenEngine,
  runMode,
} from "./engine_golden.ts";

for (const name of GOLDEN_MODELS) {
  Deno.test(`native engine on ${name}: greedy and seeded outputs equal ONNX's recorded ones`, async () => {
    const golden = JSON.parse(await Deno.readTextFile(`${GOLDEN_DIR}/${name}.json`)) as GoldenFile;
    const { prompts, stopTokens } = await goldenPrompts(name);
    const check = (label: string, mode: "greedy" | "seeded" | "hot", runs: readonly GoldenRun[]) =>
      runs.forEach((r, i) => assert.deepEqual(r, golden[mode][i], `${label}, ${mode}, prompt ${i}`));
    const variants = [
      { label: "batched", options: {} },
      { label: "speculative", options: { speculative: "ngram" as const } },
      { label: "chunked + preempted", options: { maxNumBatchedTokens: 64, numKvBlocks: 32, maxModelLen: 512 } },
    ];
    for (const { label, options } of variants) {
      const engine = await openGoldenEngine(name, { kind: "native", ...options });
      try {
        for (const mode of ["greedy", "seeded", "hot"] as const) {
          check(label, mode, await runMode(engine, prompts, stopTokens, mode));
        }
        if (label === "speculative") assert.ok(engine.metrics().acceptedDrafts > 0, "drafts were accepted");
        if (label.includes("preempted")) assert.ok(engine.metrics().preemptions > 0, "the small pool preempted");
      } finally {
        await engine.close();
      }
    }
  });
}
