/**
 * The engine reproduces its recorded outputs on both bundled models (tests/fixtures/engine_golden): greedy tokens
 * are fixed forever by the model; seeded tokens are fixed by the sampling rule and the RNG (docs/random.md).
 */
import assert from "node:assert/strict";
import type { EngineChunk } from "../../engine/engine.ts";
import {
  GOLDEN_DIR,
  GOLDEN_MODELS,
  type GoldenFile,
  goldenPrompts,
  type GoldenRun,
  goldenSampling,
  openGoldenEngine,
  runGolden,
  runMode,
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
      // The prompts share their system prefix: later ones read it from the prefix cache, and still match.
      assert.ok((engine.stats().prefixCacheHitTokens ?? 0) > 0, "prefix-cache hits");
      // The hot runs must leave the greedy path somewhere, or they would test nothing the greedy ones do not.
      const differ = runs.hot.filter((r, i) => JSON.stringify(r) !== JSON.stringify(runs.greedy[i])).length;
      assert.ok(differ >= 4, `only ${differ} hot runs differ from greedy`);
    } finally {
      await engine.close();
    }
  });
}

for (const name of GOLDEN_MODELS) {
  Deno.test(`engine golden on ${name}: same outputs alone, with speculation, in 64-token prefill chunks, and preempted`, async () => {
    const golden = JSON.parse(await Deno.readTextFile(`${GOLDEN_DIR}/${name}.json`)) as GoldenFile;
    const { prompts, stopTokens } = await goldenPrompts(name);
    const check = (label: string, mode: "greedy" | "seeded" | "hot", runs: readonly GoldenRun[]) =>
      runs.forEach((r, i) => assert.deepEqual(r, golden[mode][i], `${label}, ${mode}, prompt ${i}`));

    // One request at a time (seeded; greedy alone vs batched is engine_bundled_test's).
    const plain = await openGoldenEngine(name);
    try {
      for (const mode of ["hot"] as const) {
        const alone: GoldenRun[] = [];
        for (const [i, p] of prompts.entries()) {
          const sampling = goldenSampling(stopTokens, mode, i);
          alone.push(await collectOne(plain.generate({ id: `a${i}`, promptTokens: p, sampling })));
        }
        check("alone", mode, alone);
      }
    } finally {
      await plain.close();
    }

    // N-gram speculation: drafts are verified by sampling each row as plain decoding would, so nothing changes.
    const spec = await openGoldenEngine(name, { speculative: "ngram" });
    try {
      for (const mode of ["greedy", "seeded", "hot"] as const) {
        check("speculative", mode, await runMode(spec, prompts, stopTokens, mode));
      }
      assert.ok(spec.metrics().acceptedDrafts > 0, "drafts were accepted");
    } finally {
      await spec.close();
    }

    // Prompts fed 64 tokens per step beside running decodes, and a KV pool of one 512-token context (32 blocks of
    // 16), so sequences are preempted and recomputed: the outputs stay the recorded ones.
    const tight = await openGoldenEngine(name, { maxNumBatchedTokens: 64, numKvBlocks: 32, maxModelLen: 512 });
    try {
      for (const mode of ["greedy", "hot"] as const) {
        check("chunked + preempted", mode, await runMode(tight, prompts, stopTokens, mode));
      }
      assert.ok(tight.metrics().preemptions > 0, "the small pool preempted");
    } finally {
      await tight.close();
    }
  });
}

async function collectOne(stream: ReadableStream<EngineChunk>): Promise<GoldenRun> {
  const tokens: number[] = [];
  let reason = "";
  for await (const c of stream) {
    if (c.type === "step") tokens.push(...c.tokens);
    else reason = c.reason;
  }
  return { tokens, reason };
}
