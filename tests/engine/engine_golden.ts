/**
 * Golden runs of the engine on the bundled models: greedy and seeded (temperature 0.8, fixed seeds) generations for
 * each model's held-out evaluation prompts plus the chat questions of the bundled-model test. The recorded outputs
 * live in tests/fixtures/engine_golden/<model>.json; `engine_golden_test.ts` compares the engine to them and
 * `scripts/record_engine_golden.ts` rewrites them (only when a change is meant to alter the outputs).
 */
import type { Engine, EngineChunk, SamplingParams } from "../../engine/engine.ts";
import { loadModel } from "../../prompt/load_model.ts";
import type { LlmEngine } from "../../engine/llm_engine.ts";
import { openEngine } from "../../engine/open_engine.ts";

export const GOLDEN_MODELS = ["rill-tiny-harmony", "rill-tiny-chatml"] as const;
const ROOT = new URL("../../", import.meta.url).pathname;
export const GOLDEN_DIR = `${ROOT}tests/fixtures/engine_golden`;

const QUESTIONS = [
  "Repeat the phrase 'good morning' 4 times.",
  "What is 17 + 25?",
  "What is the capital of Japan?",
  "Convert 3 kilometers to meters.",
  "Say hi there 3 times.",
  "What is 9 times 7?",
  "Which city is the capital of France?",
  "What is the weather in Paris?",
];

export const GOLDEN_MAX_TOKENS = 64;
export const SEEDED_TEMPERATURE = 0.8;

export interface GoldenRun {
  readonly tokens: number[];
  readonly reason: string;
}

export interface GoldenFile {
  readonly model: string;
  readonly maxTokens: number;
  readonly prompts: number[][];
  readonly greedy: GoldenRun[];
  /** Seeded runs: temperature 0.8, seed 1000 + prompt index. */
  readonly seeded: GoldenRun[];
  /** Seeded runs hot enough to leave the greedy path: temperature 2, top-k 40, top-p 0.98, seed 2000 + index. */
  readonly hot: GoldenRun[];
}

/** The day the goldens' harmony prompts were rendered on (`Current date:`); pinned so no run depends on the clock. */
export const GOLDEN_DATE = new Date("2026-11-24T12:00:00Z");

export async function goldenPrompts(name: string): Promise<{ prompts: number[][]; stopTokens: readonly number[] }> {
  const dir = `${ROOT}models/${name}`;
  const model = await loadModel(dir, { now: () => GOLDEN_DATE });
  const file = JSON.parse(await Deno.readTextFile(`${dir}/golden/prompts.json`)) as {
    cases: { input_ids: number[] }[];
  };
  const prompts = file.cases.map((c) => c.input_ids);
  for (const q of QUESTIONS) {
    prompts.push(model.format.render({ messages: [{ role: "user", content: q }], tools: [], toolChoice: "auto" }));
  }
  return { prompts, stopTokens: model.format.stopTokens };
}

export type GoldenMode = "greedy" | "seeded" | "hot";

export function goldenSampling(stopTokens: readonly number[], mode: GoldenMode, index: number): SamplingParams {
  const seeded = mode === "greedy" ? undefined : (mode === "seeded" ? 1000 : 2000) + index;
  return {
    temperature: mode === "greedy" ? 0 : mode === "seeded" ? SEEDED_TEMPERATURE : 2,
    topP: mode === "hot" ? 0.98 : 1,
    topK: mode === "hot" ? 40 : 0,
    maxTokens: GOLDEN_MAX_TOKENS,
    stopTokens,
    stopStrings: [],
    logprobs: -1,
    ...(seeded === undefined ? {} : { seed: seeded }),
  };
}

export async function collectRun(stream: ReadableStream<EngineChunk>): Promise<GoldenRun> {
  const tokens: number[] = [];
  let reason = "";
  for await (const c of stream) {
    if (c.type === "step") tokens.push(...c.tokens);
    else reason = c.reason;
  }
  return { tokens, reason };
}

/** Runs every prompt of one mode at once (one batch). */
export function runMode(
  engine: Engine,
  prompts: readonly number[][],
  stopTokens: readonly number[],
  mode: GoldenMode,
): Promise<GoldenRun[]> {
  return Promise.all(
    prompts.map((p, i) =>
      collectRun(engine.generate({ id: `${mode}${i}`, promptTokens: p, sampling: goldenSampling(stopTokens, mode, i) }))
    ),
  );
}

/** Greedy, seeded and hot runs, each mode one batch of every prompt. */
export async function runGolden(
  engine: Engine,
  prompts: readonly number[][],
  stopTokens: readonly number[],
): Promise<{ greedy: GoldenRun[]; seeded: GoldenRun[]; hot: GoldenRun[] }> {
  const greedy = await runMode(engine, prompts, stopTokens, "greedy");
  const seeded = await runMode(engine, prompts, stopTokens, "seeded");
  const hot = await runMode(engine, prompts, stopTokens, "hot");
  return { greedy, seeded, hot };
}

export interface GoldenEngineOptions {
  /** The backend (default onnx, the one the goldens were recorded on). */
  readonly kind?: "onnx" | "native";
  readonly speculative?: "ngram" | "draft" | "none";
  /** A bundled model's name: the draft model of `speculative: "draft"` (native only). */
  readonly draftModel?: string;
  readonly maxNumSeqs?: number;
  readonly maxNumBatchedTokens?: number;
  readonly numKvBlocks?: number;
  readonly maxModelLen?: number;
}

export async function openGoldenEngine(name: string, options: GoldenEngineOptions = {}): Promise<LlmEngine> {
  const { numKvBlocks, kind, draftModel, ...engine } = options;
  return await openEngine({
    modelDir: `${ROOT}models/${name}`,
    maxNumSeqs: 32,
    ...engine,
    backend: {
      ...(kind === undefined ? {} : { kind, device: "cpu" as const }),
      ...(numKvBlocks === undefined ? {} : { numKvBlocks }),
      ...(draftModel === undefined ? {} : { draftModelDir: `${ROOT}models/${draftModel}` }),
    },
  });
}
