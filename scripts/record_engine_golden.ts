/**
 * Rewrites tests/fixtures/engine_golden/*.json from the current engine. Run only when a change is meant to alter
 * generated tokens (and say so in its commit): `deno run -A scripts/record_engine_golden.ts [greedy|seeded|all]`.
 * "seeded" keeps the recorded greedy runs and replaces only the seeded and hot ones.
 */
import {
  GOLDEN_DIR,
  GOLDEN_MAX_TOKENS,
  GOLDEN_MODELS,
  type GoldenFile,
  goldenPrompts,
  openGoldenEngine,
  runGolden,
} from "../tests/engine/engine_golden.ts";

const which = Deno.args[0] ?? "all";
if (!["greedy", "seeded", "all"].includes(which)) throw new Error(`expected greedy, seeded or all, got ${which}`);
await Deno.mkdir(GOLDEN_DIR, { recursive: true });
for (const name of GOLDEN_MODELS) {
  const { prompts, stopTokens } = await goldenPrompts(name);
  const engine = await openGoldenEngine(name);
  const runs = await runGolden(engine, prompts, stopTokens);
  await engine.close();
  const path = `${GOLDEN_DIR}/${name}.json`;
  let greedy = runs.greedy;
  let { seeded, hot } = runs;
  if (which !== "all") {
    const old = JSON.parse(await Deno.readTextFile(path)) as GoldenFile;
    if (which === "seeded") greedy = old.greedy;
    else ({ seeded, hot } = old);
  }
  const file: GoldenFile = { model: name, maxTokens: GOLDEN_MAX_TOKENS, prompts, greedy, seeded, hot };
  await Deno.writeTextFile(path, JSON.stringify(file, null, 2) + "\n");
  console.log(`${path}: ${prompts.length} prompts`);
}
