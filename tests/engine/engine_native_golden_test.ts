/**
 * The native library's CPU device under the engine gives the outputs recorded on ONNX Runtime
 * (tests/fixtures/engine_golden): greedy tokens on each bundled model's held-out prompts, seeded tokens (the same
 * sampling rule and Philox stream on both sides), with n-gram speculation, with draft-model speculation (the model
 * drafting for itself: every draft accepted; the other bundled model, same vocabulary: some), and under chunked
 * prefill with preemption in a small KV pool, with and without a draft model (whose lookahead slots then compete for
 * the pool). Sampled runs match too: a draft is accepted only where plain decoding's own draw picks it.
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
  const other = GOLDEN_MODELS.find((m) => m !== name)!;
  Deno.test(`native engine on ${name}: greedy and seeded outputs equal ONNX's recorded ones`, async () => {
    const golden = JSON.parse(await Deno.readTextFile(`${GOLDEN_DIR}/${name}.json`)) as GoldenFile;
    const { prompts, stopTokens } = await goldenPrompts(name);
    const check = (label: string, mode: "greedy" | "seeded" | "hot", runs: readonly GoldenRun[]) =>
      runs.forEach((r, i) => assert.deepEqual(r, golden[mode][i], `${label}, ${mode}, prompt ${i}`));
    const variants = [
      { label: "batched", options: {} },
      { label: "speculative", options: { speculative: "ngram" as const } },
      { label: "chunked + preempted", options: { maxNumBatchedTokens: 64, numKvBlocks: 32, maxModelLen: 512 } },
      { label: "draft model itself", options: { speculative: "draft" as const, draftModel: name } },
      { label: "draft model other", options: { speculative: "draft" as const, draftModel: other } },
      {
        label: "draft model other + chunked + preempted",
        options: {
          speculative: "draft" as const,
          draftModel: other,
          maxNumBatchedTokens: 64,
          numKvBlocks: 32,
          maxModelLen: 512,
        },
      },
    ];
    for (const { label, options } of variants) {
      const engine = await openGoldenEngine(name, { kind: "native", ...options });
      try {
        let greedy = engine.metrics();
        for (const mode of ["greedy", "seeded", "hot"] as const) {
          check(label, mode, await runMode(engine, prompts, stopTokens, mode));
          if (mode === "greedy") greedy = engine.metrics();
        }
        const m = engine.metrics();
        if (label === "speculative") assert.ok(m.acceptedDrafts > 0, "drafts were accepted");
        if (label === "draft model itself") {
          // Greedy proposals of the target itself are its greedy tokens; sampled runs reject some.
          assert.ok(
            greedy.draftedTokens > 0 && greedy.acceptedDrafts === greedy.draftedTokens,
            `${label}: every greedy draft accepted (${greedy.acceptedDrafts} of ${greedy.draftedTokens})`,
          );
          assert.ok(m.acceptedDrafts > greedy.acceptedDrafts, `${label}: sampled runs accept drafts too`);
        }
        if (label.startsWith("draft model other")) {
          assert.ok(m.acceptedDrafts > 0 && m.acceptedDrafts < m.draftedTokens, `${label}: some drafts accepted`);
        }
        if (label.includes("preempted")) assert.ok(engine.metrics().preemptions > 0, "the small pool preempted");
      } finally {
        await engine.close();
      }
    }
  });
}
