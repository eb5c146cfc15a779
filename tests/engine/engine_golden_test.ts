/**
 * The engine reproduces its recorded outputs on both bundled models (tests/fixtures/engine_golden): greedy tokens
 * are fixed forever by the model; seeded tokens are fixed by the sampling rule and the RNG (docs/random.md).
 */
import assert from "node:assert/strict";
import {
  GOLDEN_DIR,
  GOLDEN_MODELS,
  type GoldenFile,
  goldenPrompts,
  openGoldenEngine,
  runGolden,
} from "./engine_golden.ts";

for (const name of GOLDEN_MODELS) {
  Deno.test(`engine golden on ${name}: greedy and seeded outputs equal the recorded ones`, async () => {
    const golden = JSON.parse(await Deno.readTextFile(`${GOLDEN_DIR}/${name}.json`)) as GoldenFile;
    const { prompts, stopTokens } = await goldenPrompts(name);
    assert.deepEqual(prompts, golden.prompts, "the golden prompts are the ones recorded");
    assert.ok(prompts.length >= 20);
    const engine = await openGoldenEngine(name);
    try {
      const runs = await runGolden(engine, prompts, stopTokens);
      for (let i = 0; i < prompts.length; i++) {
        assert.deepEqual(runs.greedy[i], golden.greedy[i], `greedy, prompt ${i}`);
        assert.deepEqual(runs.seeded[i], golden.seeded[i], `seeded, prompt ${i}`);
        assert.deepEqual(runs.hot[i], golden.hot[i], `hot, prompt ${i}`);
      }
      // The hot runs must leave the greedy path somewhere, or they would test nothing the greedy ones do not.
      const differ = runs.hot.filter((r, i) => JSON.stringify(r) !== JSON.stringify(runs.greedy[i])).length;
      assert.ok(differ >= 4, `only ${differ} hot runs differ from greedy`);
    } finally {
      await engine.close();
    }
  });
}
