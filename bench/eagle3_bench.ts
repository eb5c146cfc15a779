/**
 * EAGLE-3 speculation on the bundled models with their trained heads (models/<name>-eagle3, scripts/train/eagle3.py)
 * beside n-gram drafts and a layer-skip draft model (the target's first 2 of 4 layers,
 * scripts/bench/make_draft_checkpoint.py, written once into build/bench/), in one run, through the whole engine on the
 * native CPU device, greedy:
 *
 * - prompts: eight questions of the skills the models were trained on, written here (not drawn from the training
 *   generators), rendered with each model's own chat format;
 * - batch 1 (the eight one after another, one sequence per step) and batch 8 (all eight at once);
 * - per case: mean accepted tokens per decode step (a sequence's tokens after its prefill ÷ its decode steps), end-to-
 *   end tokens/s and decode tokens/s (batch 1: summed over requests after each prefill step; batch 8: all decode
 *   tokens over the wall time from the last prefill to the last token) against speculation off in the same run, and
 *   whether the output is token for token the same as with speculation off.
 *
 * Before the engine runs, ffi/bench/bench_eagle3_step.c times single `rill_step` calls (fed 1..4 tokens, with and
 * without 3 proposals), the costs that bound any speedup on a model.
 *
 * Each case alternates passes (the eight prompts twice) with speculation off on its own engine, and keeps the best of
 * five after a warm-up, so the shared machine's load hits both sides alike. Environment: RILL_BENCH_THREADS (default:
 * all cores).
 */
import { join } from "node:path";
import { loadModel } from "../prompt/load_model.ts";
import { openEngine } from "../engine/open_engine.ts";
import { contextLength } from "../checkpoint/model_dir.ts";
import { buildNativeLibrary } from "./build_native_library.ts";
import { exists } from "./exists.ts";
import { nativeToolArgs } from "./native_tool_args.ts";
import { readSteps, type StepStream } from "./step_stream.ts";

const ROOT = new URL("../", import.meta.url).pathname;
const OUT = join(ROOT, "build/bench");
const THREADS = Number(Deno.env.get("RILL_BENCH_THREADS") ?? navigator.hardwareConcurrency);
const MODELS = ["rill-tiny-harmony", "rill-tiny-chatml"] as const;
const QUESTIONS = [
  "What is 47 + 38?",
  "Compute 91 - 56.",
  "What is 7 times 8?",
  "Convert 6 km to m.",
  "What is the capital of Peru?",
  "Repeat the phrase 'blue sky' 4 times.",
  "How many grams is 3 kg?",
  "What is 64 km in miles?",
];
const PASSES = 15;
const ROUNDS_PER_PASS = 2;

type Method =
  | { readonly kind: "none" }
  | { readonly kind: "ngram"; readonly k: number }
  | { readonly kind: "draft"; readonly k: number; readonly layers: number }
  | { readonly kind: "eagle3"; readonly k: number };

const METHODS: readonly Method[] = [
  { kind: "ngram", k: 3 },
  { kind: "draft", k: 3, layers: 2 },
  { kind: "eagle3", k: 2 },
  { kind: "eagle3", k: 3 },
  { kind: "eagle3", k: 4 },
];

function methodName(m: Method): string {
  switch (m.kind) {
    case "none":
      return "off";
    case "ngram":
      return "n-gram";
    case "draft":
      return `draft: first ${m.layers} of 4 layers`;
    case "eagle3":
      return "EAGLE-3 head";
  }
}

interface Wave {
  readonly tokensPerS: number;
  readonly decodePerS: number;
  /** Decode tokens ÷ decode steps, per sequence, summed over sequences. */
  readonly perStep: number;
  readonly outputs: readonly (readonly number[])[];
}

function summarise(gens: readonly StepStream[], batch: number): Wave {
  const tokens = gens.reduce((a, g) => a + g.tokens.length, 0);
  const decodeTokens = gens.reduce((a, g) => a + g.tokens.length - g.firstTokens, 0);
  const decodeSteps = gens.reduce((a, g) => a + g.steps - 1, 0);
  let seconds: number, decodeSeconds: number;
  if (batch === 1) {
    seconds = gens.reduce((a, g) => a + g.end - g.start, 0) / 1000;
    decodeSeconds = gens.reduce((a, g) => a + g.end - g.first, 0) / 1000;
  } else {
    const end = Math.max(...gens.map((g) => g.end));
    seconds = (end - Math.min(...gens.map((g) => g.start))) / 1000;
    decodeSeconds = (end - Math.max(...gens.map((g) => g.first))) / 1000;
  }
  return {
    tokensPerS: tokens / seconds,
    decodePerS: decodeTokens / decodeSeconds,
    perStep: decodeTokens / Math.max(1, decodeSteps),
    outputs: gens.map((g) => g.tokens),
  };
}

/** The target's first `layers` layers with its embeddings, final norm and head, written once into build/bench/. */
async function layerSkipDraft(target: string, label: string, layers: number): Promise<string> {
  const dir = join(OUT, `${label}-draft-${layers}l`);
  const done = join(dir, "complete");
  const stale = !(await exists(done)) ||
    (await Deno.stat(done)).mtime! < (await Deno.stat(join(target, "model.safetensors"))).mtime!;
  if (stale) {
    const out = await new Deno.Command("/usr/bin/python3", {
      args: [join(ROOT, "scripts/bench/make_draft_checkpoint.py"), target, dir, "--layers", String(layers)],
      stdout: "piped",
      stderr: "piped",
    }).output();
    if (!out.success) throw new Error(new TextDecoder().decode(out.stderr).trim().split("\n").at(-1));
  }
  return dir;
}

interface Row {
  readonly model: string;
  readonly batch: number;
  readonly method: Method;
  readonly off: Wave;
  readonly on: Wave;
}

function same(a: Wave, b: Wave): boolean {
  return a.outputs.length === b.outputs.length &&
    a.outputs.every((o, i) => o.length === b.outputs[i]!.length && o.every((x, j) => x === b.outputs[i]![j]));
}

const fmt = (x: number, digits = 1) =>
  Number.isFinite(x)
    ? x.toLocaleString("en-US", { maximumFractionDigits: digits, minimumFractionDigits: digits })
    : "—";

async function measure(name: string): Promise<Row[]> {
  const dir = join(ROOT, "models", name);
  const head = join(ROOT, "models", `${name}-eagle3`);
  if (!(await exists(join(head, "model.safetensors")))) {
    console.log(`eagle3 ${name}: no trained head at ${head} (scripts/train/eagle3.py), skipped`);
    return [];
  }
  const model = await loadModel(dir);
  const prompts = QUESTIONS.map((q) =>
    model.format.render({ messages: [{ role: "user", content: q }], tools: [], toolChoice: "auto" })
  );
  const open = async (method: Method, batch: number) => {
    let draftModelDir: string | undefined;
    if (method.kind === "draft") draftModelDir = await layerSkipDraft(dir, name, method.layers);
    if (method.kind === "eagle3") draftModelDir = head;
    return await openEngine({
      modelDir: dir,
      model,
      modelId: "bench",
      maxModelLen: Math.min(512, contextLength(model)),
      backend: {
        kind: "native",
        threads: THREADS,
        ...(draftModelDir === undefined
          ? {}
          : { draftModelDir, draftKind: method.kind === "eagle3" ? "eagle3" as const : "model" as const }),
      },
      maxNumSeqs: batch,
      speculative: method.kind,
      ...(method.kind === "none" ? {} : { numSpeculativeTokens: method.k }),
    });
  };
  /** One pass: the prompts ROUNDS_PER_PASS times over, one at a time (batch 1) or all at once (batch 8). */
  const pass = async (engine: Awaited<ReturnType<typeof open>>, batch: number, tag: string): Promise<Wave> => {
    const one = (promptTokens: number[], i: number) =>
      readSteps(engine.generate({
        id: `${tag}-${i}`,
        promptTokens,
        sampling: {
          temperature: 0,
          topP: 1,
          topK: 0,
          maxTokens: 160,
          stopTokens: model.format.stopTokens,
          stopStrings: [],
          logprobs: -1,
        },
      }));
    const gens: StepStream[] = [];
    for (let r = 0; r < ROUNDS_PER_PASS; r++) {
      if (batch === 1) {
        for (const [i, p] of prompts.entries()) gens.push(await one(p, r * prompts.length + i));
      } else {
        gens.push(...await Promise.all(prompts.map((p, i) => one(p, r * prompts.length + i))));
      }
    }
    return summarise(gens, batch);
  };
  const rows: Row[] = [];
  for (const batch of [1, 8]) {
    for (const method of METHODS) {
      // Off and on alternate pass by pass, so a burst of other work on the shared machine hits both alike; the best
      // pass of each after a warm-up counts.
      let off: Wave | undefined, on: Wave | undefined;
      const engines = await Promise.all([open({ kind: "none" }, batch), open(method, batch)]).catch((e) => {
        console.log(`eagle3 ${name} x${batch} ${methodName(method)}: ${e instanceof Error ? e.message : e}`);
        return undefined;
      });
      if (engines === undefined) continue;
      try {
        for (let p = 0; p <= PASSES; p++) {
          const a = await pass(engines[0], batch, `off-${p}`);
          const b = await pass(engines[1], batch, `on-${p}`);
          if (p === 0) continue;
          if (off === undefined || a.tokensPerS > off.tokensPerS) off = a;
          if (on === undefined || b.tokensPerS > on.tokensPerS) on = b;
        }
      } finally {
        await Promise.all(engines.map((e) => e.close()));
      }
      const row = { model: name, batch, method, off: off!, on: on! };
      console.log(`eagle3 ${name} x${batch}: ${line(row)}`);
      rows.push(row);
    }
  }
  return rows;
}

function line(r: Row): string {
  const k = r.method.kind === "none" ? 0 : r.method.k;
  return `${methodName(r.method)} K=${k}: ${fmt(r.on.perStep, 2)} tokens/step, ${fmt(r.off.tokensPerS)} → ${
    fmt(r.on.tokensPerS)
  } tok/s (${fmt(r.on.tokensPerS / r.off.tokensPerS, 2)}×), decode ${fmt(r.off.decodePerS)} → ${
    fmt(r.on.decodePerS)
  } (${fmt(r.on.decodePerS / r.off.decodePerS, 2)}×), ${same(r.off, r.on) ? "identical to" : "DIFFERENT from"} off`;
}

export async function run(): Promise<void> {
  if (!(await buildNativeLibrary())) {
    console.log("eagle3: the native library is not built (no C compiler?), nothing to measure");
    return;
  }
  console.log(`eagle3: threads ${THREADS}`);
  const tool = join(OUT, "bin", "bench_eagle3_step");
  await Deno.mkdir(join(OUT, "bin"), { recursive: true });
  const cc = await new Deno.Command(Deno.env.get("CC") || "cc", {
    args: nativeToolArgs("bench_eagle3_step.c", tool),
  }).output();
  const rows: Row[] = [];
  for (const name of MODELS) {
    const head = join(ROOT, "models", `${name}-eagle3`);
    if (cc.success && await exists(join(head, "model.safetensors"))) {
      const out = await new Deno.Command(tool, {
        args: [join(ROOT, "models", name), head, "--threads", String(THREADS)],
      }).output();
      for (const l of new TextDecoder().decode(out.stdout).trim().split("\n")) console.log(`eagle3 ${name} step: ${l}`);
    }
    rows.push(...await measure(name));
  }
  console.log(
    "\n| model | batch | speculation | K | tokens/step | off → on tok/s | speedup | decode off → on tok/s | decode speedup | output |",
  );
  console.log("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |");
  for (const r of rows) {
    console.log(
      `| ${r.model} | ${r.batch} | ${methodName(r.method)} | ${r.method.kind === "none" ? 0 : r.method.k} | ${
        fmt(r.on.perStep, 2)
      } | ${fmt(r.off.tokensPerS, 0)} → ${fmt(r.on.tokensPerS, 0)} | ${fmt(r.on.tokensPerS / r.off.tokensPerS, 2)}× | ${
        fmt(r.off.decodePerS, 0)
      } → ${fmt(r.on.decodePerS, 0)} | ${fmt(r.on.decodePerS / r.off.decodePerS, 2)}× | ${
        same(r.off, r.on) ? "identical" : "DIFFERENT"
      } |`,
    );
  }
}
