/**
 * The native CPU device (`--backend native`) against the ONNX backend on the same weights, in one run:
 *
 * - models: the bundled rill-tiny-harmony, and a random-initialised Qwen2.5-0.5B-shaped checkpoint (Llama layout,
 *   tied embeddings) that scripts/bench/make_bench_checkpoint.py writes once into build/bench/ (ignored, reused by
 *   later runs) as safetensors for the native library and as an ONNX graph for ONNX Runtime;
 * - figures per backend and weight type: prefill tokens/s (one 128-token prompt), greedy decode tokens/s at 1 and 8
 *   streams, sampled decode at 8 streams (temperature 1, the API's defaults: every row exponentiates the whole
 *   vocabulary), and batch-1 decode as a fraction of the memory-bandwidth roofline: bytes of weights read per token
 *   ÷ the read bandwidth `bench_decode --bandwidth` measures right before each row (the shared machine's bandwidth
 *   drifts, so each row gets its own);
 * - the sampling stage on its own, serial vs over the thread pool (ffi/bench/bench_sample.c, alternated);
 * - speculation at batch 1 on a repetitive task (the bundled model's "repeat the phrase" prompts, greedy) through the
 *   whole engine on the native device, each case against the same engine with speculation off, output checked token
 *   for token: n-gram drafts, and draft models that scripts/bench/make_draft_checkpoint.py makes once from the target's
 *   own weights (build/bench/*-draft*): the bundled model's first layers ("layer skip"), and the 0.5B shape in bf16.
 *
 * Steps are timed at the backend seam (engine/step_batch.ts), where the engine drives both backends, so ONNX pays its
 * host sampler and the native device its FFI call, as when serving. Prints one line per measurement and then a table.
 * Environment: RILL_BENCH_THREADS (default: all cores), RILL_BENCH_NATIVE_SMALL=1 (bundled model only).
 */
import { basename, join } from "node:path";
import { createBackend } from "../engine/backends/create_backend.ts";
import { contextLength, readModelDir } from "../checkpoint/model_dir.ts";
import type { ModelConfig } from "../checkpoint/model_dir.ts";
import type { Backend, StepBatch, StepResult } from "../engine/step_batch.ts";
import type { EngineChunk } from "../engine/engine.ts";
import { loadModel } from "../prompt/load_model.ts";
import { openEngine, type OpenEngineOptions } from "../engine/open_engine.ts";
import { neutralStepFields } from "../testing/neutral_step_fields.ts";
import { exec } from "./exec.ts";
import { buildNativeLibrary } from "./build_native_library.ts";
import { exists } from "./exists.ts";
import { nativeToolArgs } from "./native_tool_args.ts";
import { readSteps } from "./step_stream.ts";

const ROOT = new URL("../", import.meta.url).pathname;
const OUT = join(ROOT, "build/bench");
const CHECKPOINT = join(OUT, "qwen2.5-0.5b-shape");
const BUNDLED = join(ROOT, "models/rill-tiny-harmony");
const THREADS = Number(Deno.env.get("RILL_BENCH_THREADS") ?? navigator.hardwareConcurrency);

const PROMPT = 128;
/** Below this, a model's weights stay in the caches and DRAM bandwidth is no bound: no roofline figure. */
const ROOFLINE_MIN_BYTES = 64e6;
const BLOCK = 16;
const CONTEXT = 512;

type Dtype = "fp32" | "bf16" | "int8";

/** One row of the table: a backend and the weight type it holds. ONNX runs the exported graph's fp32. */
interface BackendCase {
  readonly backend: "onnx" | "native";
  readonly dtype: Dtype;
}

const BACKEND_CASES: readonly BackendCase[] = [
  { backend: "onnx", dtype: "fp32" },
  { backend: "native", dtype: "fp32" },
  { backend: "native", dtype: "bf16" },
  { backend: "native", dtype: "int8" },
];

/** llama.cpp on this machine, Qwen2.5-0.5B-shaped weights, medians (the issue's reference; f16 for bf16, Q8_0). */
const LLAMA_CPP: Readonly<Record<Dtype, { x1: number; x8?: number }>> = {
  fp32: { x1: 14.8 },
  bf16: { x1: 30.0 },
  int8: { x1: 45.4, x8: 101 },
};

interface ModelCase {
  readonly label: string;
  readonly dir: string;
  /** Steps timed per decode measurement, and repetitions (medians are reported). */
  readonly steps: number;
  readonly reps: number;
}

interface Row {
  readonly model: string;
  readonly c: BackendCase;
  readonly prefill: number;
  readonly decode1: number;
  readonly decode8: number;
  readonly sampled8: number;
  readonly bandwidth: number;
  readonly bytesPerToken: number;
}

function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

function fmt(x: number, digits = 1): string {
  return Number.isFinite(x) ? x.toFixed(digits) : "—";
}

/** The C helpers: the bandwidth probe (bench_decode --bandwidth) and the sampling-stage timer. */
async function buildTools(): Promise<{ decode: string; sample: string }> {
  const bin = join(OUT, "bin");
  await Deno.mkdir(bin, { recursive: true });
  const cc = Deno.env.get("CC") || "cc";
  const flags = ["-std=c17", "-O2", "-Wall", "-Wextra", "-Werror", "-pthread", `-I${ROOT}ffi/include`];
  const decode = join(bin, "bench_decode");
  await exec(cc, nativeToolArgs("bench_decode.c", decode));
  const sample = join(bin, "bench_sample");
  const src = ["sample.c", "thread_pool.c", "fail.c"].map((f) => `${ROOT}ffi/src/${f}`);
  await exec(cc, [...flags, `-I${ROOT}ffi/src`, `${ROOT}ffi/bench/bench_sample.c`, ...src, "-lm", "-o", sample]);
  return { decode, sample };
}

async function bandwidth(tool: string): Promise<number> {
  const out = await exec(tool, ["--bandwidth", "--threads", String(THREADS)]);
  const m = /read bandwidth ([\d.]+) GB\/s/.exec(out);
  if (m === null) throw new Error(`bench_decode --bandwidth: unexpected output ${out}`);
  return Number(m[1]) * 1e9;
}

/** The generated checkpoint, made on first use (Debian's torch); undefined when it cannot be made here. */
async function checkpoint(): Promise<string | undefined> {
  if (!(await exists(join(CHECKPOINT, "complete")))) {
    console.log(`native: writing the Qwen2.5-0.5B-shaped checkpoint to ${CHECKPOINT} (once; about 2.5 + 2 GB)`);
    try {
      await exec("/usr/bin/python3", [join(ROOT, "scripts/bench/make_bench_checkpoint.py"), CHECKPOINT]);
    } catch (e) {
      console.log(`native: no 0.5B checkpoint (${e instanceof Error ? e.message.split("\n")[0] : e}); bundled only`);
      return undefined;
    }
  }
  // readModelDir wants a tokenizer; the bench feeds token ids, so any tokenizer within the vocabulary does.
  for (const f of ["tokenizer.json", "tokenizer_config.json"]) {
    if (!(await exists(join(CHECKPOINT, f)))) {
      await Deno.copyFile(join(ROOT, "models/rill-tiny-chatml", f), join(CHECKPOINT, f));
    }
  }
  return CHECKPOINT;
}

/** Bytes of weights one decoded token reads: every layer matrix and the output head (the tied embedding or lm_head). */
function bytesPerToken(c: ModelConfig, dtype: Dtype): number {
  const H = c.hiddenSize, D = c.headDim, q = c.numAttentionHeads * D, kv = c.numKeyValueHeads * D;
  const I = Number(c.raw["intermediate_size"]);
  // [rows, cols] of each matrix one token reads: q/k/v, o, gate/up, down per layer, then the output head.
  const layer: [number, number][] = [[q + 2 * kv, H], [H, q], [2 * I, H], [H, I]];
  const mats: [number, number][] = [...Array(c.numHiddenLayers).fill(layer).flat(), [c.vocabSize, H]];
  // int8 rows (ffi/devices/cpu/kernels.h rill_q8_row_bytes): 32-weight blocks of 32 quants and an fp16 scale, each row
  // padded to whole 64-byte lines.
  const rowBytes = (cols: number) =>
    dtype === "fp32" ? 4 * cols : dtype === "bf16" ? 2 * cols : Math.ceil(Math.ceil(cols / 32) * 34 / 64) * 64;
  return mats.reduce((sum, [rows, cols]) => sum + rows * rowBytes(cols), 0);
}

/** Sequences with fixed block runs (sequence slot s owns blocks s·perSeq ..), fed deterministic token ids. */
class Streams {
  readonly #perSeq = Math.ceil(CONTEXT / BLOCK);
  readonly #ctx: number[] = [];
  readonly #ids: number[] = [];
  #nextId = 1;

  constructor(readonly backend: Backend, readonly count: number) {
    for (let i = 0; i < count; i++) {
      this.#ctx.push(0);
      this.#ids.push(this.#nextId++);
    }
  }

  /** One step: sequence i feeds fed[i] tokens and samples its next one. Resolves with the step's seconds. */
  async step(fed: readonly number[], temperature = 0): Promise<number> {
    const B = this.count, vocab = this.backend.info.vocabSize;
    const T = fed.reduce((a, b) => a + b, 0);
    const stride = this.#perSeq;
    const b: StepBatch = {
      numSeqs: B,
      numTokens: T,
      seqIds: new Int32Array(this.#ids),
      tokens: new Int32Array(T),
      positions: new Int32Array(T),
      queryStart: new Int32Array(B + 1),
      contextLens: new Int32Array(B),
      blockTables: new Int32Array(B * stride).fill(-1),
      blockTableStride: stride,
      ...neutralStepFields(B),
    };
    b.sampling.temperature.fill(temperature);
    let t = 0;
    for (let i = 0; i < B; i++) {
      b.queryStart[i] = t;
      const start = this.#ctx[i]!;
      for (let j = 0; j < fed[i]!; j++, t++) {
        b.tokens[t] = ((start + j) * 7919 + i * 104729) % vocab;
        b.positions[t] = start + j;
      }
      const ctx = start + fed[i]!;
      if (ctx > CONTEXT) throw new Error(`bench: context ${ctx} over ${CONTEXT}`);
      this.#ctx[i] = ctx;
      b.contextLens[i] = ctx;
      for (let j = 0; j < Math.ceil(ctx / BLOCK); j++) b.blockTables[i * stride + j] = i * stride + j;
    }
    b.queryStart[B] = t;
    const K1 = this.backend.info.maxDrafts + 1, L = this.backend.info.maxTopLogprobs;
    const r: StepResult = {
      counts: new Int32Array(B),
      tokens: new Int32Array(B * K1),
      logprobs: new Float32Array(B * K1),
      topIds: new Int32Array(B * K1 * L),
      topLogprobs: new Float32Array(B * K1 * L),
    };
    const t0 = performance.now();
    await this.backend.step(b, r);
    return (performance.now() - t0) / 1000;
  }

  /** Forgets every sequence (the next step starts them anew at position 0, with new ids). */
  reset(): void {
    for (let i = 0; i < this.count; i++) {
      this.backend.release(this.#ids[i]!);
      this.#ids[i] = this.#nextId++;
      this.#ctx[i] = 0;
    }
  }
}

async function measureBackend(m: ModelCase, c: BackendCase, probe: string): Promise<Row | undefined> {
  const dir = await readModelDir(m.dir);
  let backend: Backend;
  try {
    backend = await createBackend({ dir: m.dir, config: dir.config, weights: dir.weights }, {
      kind: c.backend,
      ...(c.backend === "native" ? { dtype: c.dtype } : {}),
      threads: THREADS,
      maxNumSeqs: 8,
      maxModelLen: CONTEXT,
      maxNumBatchedTokens: 512,
      numKvBlocks: 8 * Math.ceil(CONTEXT / BLOCK),
      maxDrafts: 1,
      prefixCache: false,
    });
  } catch (e) {
    console.log(`native ${m.label} ${c.backend} ${c.dtype}: not run (${e instanceof Error ? e.message : e})`);
    return undefined;
  }
  try {
    const one = new Streams(backend, 1);
    const eight = new Streams(backend, 8);
    // Warm-up: first steps page in weights and size ONNX Runtime's arenas.
    await one.step([PROMPT]);
    await one.step([1]);
    one.reset();
    const bw = await bandwidth(probe);
    const prefill: number[] = [], d1: number[] = [], d8: number[] = [], s8: number[] = [];
    for (let rep = 0; rep < m.reps; rep++) {
      prefill.push(PROMPT / await one.step([PROMPT]));
      let s = 0;
      for (let k = 0; k < m.steps; k++) s += await one.step([1]);
      d1.push(m.steps / s);
      one.reset();
      await eight.step(Array.from({ length: 8 }, (_, i) => 16 + i));
      s = 0;
      for (let k = 0; k < m.steps; k++) s += await eight.step(Array(8).fill(1));
      d8.push(8 * m.steps / s);
      s = 0;
      for (let k = 0; k < m.steps; k++) s += await eight.step(Array(8).fill(1), 1);
      s8.push(8 * m.steps / s);
      eight.reset();
    }
    const row: Row = {
      model: m.label,
      c,
      prefill: median(prefill),
      decode1: median(d1),
      decode8: median(d8),
      sampled8: median(s8),
      bandwidth: bw,
      bytesPerToken: bytesPerToken(dir.config, c.dtype),
    };
    const roof = row.bandwidth / row.bytesPerToken;
    console.log(
      `native ${m.label} ${c.backend} ${c.dtype}: prefill ${PROMPT} ${fmt(row.prefill)} tok/s, decode x1 ${
        fmt(row.decode1, 2)
      } tok/s (${fmt(100 * row.decode1 / roof, 0)}% of ${fmt(roof, 2)} at ${fmt(bw / 1e9, 2)} GB/s, ${
        fmt(row.bytesPerToken / 1e6, 0)
      } MB/token), decode x8 ${fmt(row.decode8)} tok/s, sampled x8 ${fmt(row.sampled8)} tok/s (medians of ${m.reps})`,
    );
    return row;
  } finally {
    await backend.close();
  }
}

interface Generation {
  readonly tokens: number[];
  readonly steps: number;
  /** Seconds from the request to its last chunk, and from its first step (the prefill's token) to its last chunk. */
  readonly seconds: number;
  readonly decodeSeconds: number;
  /** Tokens of the first step (the prefill's one token). */
  readonly firstTokens: number;
}

async function generate(stream: ReadableStream<EngineChunk>): Promise<Generation> {
  const { tokens, steps, firstTokens, start, first, end } = await readSteps(stream);
  return { tokens, steps, seconds: (end - start) / 1000, decodeSeconds: (end - first) / 1000, firstTokens };
}

/** A draft model made from the target's own weights by scripts/bench/make_draft_checkpoint.py. */
interface DraftSpec {
  /** The first N of the target's layers (all when absent). */
  readonly layers?: number;
  /** Stored as bf16, so beside an fp32 target it reads half the bytes per token. */
  readonly bf16?: boolean;
}

interface SpeculationCase {
  readonly name: string;
  readonly k: number;
  /** Absent: n-gram (prompt lookup) drafts. */
  readonly draft?: DraftSpec;
}

/** A target for the batch-1 speculation rows: the repeat task's prompts, greedy, through the engine (native). */
interface SpeculationTarget {
  readonly label: string;
  readonly dir: string;
  readonly prompts: number;
  readonly maxTokens: number;
  /** Timed repetitions after one warm-up (best kept); 0: one timed pass, no warm-up. */
  readonly reps: number;
  readonly cases: readonly SpeculationCase[];
}

/**
 * The bundled model is trained, so a draft of its first layers ("layer skip") often picks the full model's token on
 * this task. The random 0.5B shape's greedy token is set by its deep layers, so a draft of its first layers is never
 * accepted (README, Measured figures); its draft is its own weights in bf16 beside the fp32 target instead: always
 * accepted, each pass reading half the target's bytes.
 */
const BUNDLED_SPECULATION: readonly SpeculationCase[] = [
  { name: "n-gram", k: 4 },
  { name: "n-gram", k: 8 },
  { name: "draft: first 1 of 4 layers", k: 2, draft: { layers: 1 } },
  { name: "draft: first 1 of 4 layers", k: 4, draft: { layers: 1 } },
  { name: "draft: first 2 of 4 layers", k: 2, draft: { layers: 2 } },
  { name: "draft: first 2 of 4 layers", k: 4, draft: { layers: 2 } },
];

const BIG_SPECULATION: readonly SpeculationCase[] = [
  { name: "n-gram", k: 4 },
  { name: "draft: itself in bf16", k: 2, draft: { bf16: true } },
  { name: "draft: itself in bf16", k: 4, draft: { bf16: true } },
];

interface SpeculationRow {
  readonly target: string;
  readonly c: SpeculationCase;
  readonly off: Wave;
  readonly on: Wave;
}

interface Wave {
  readonly tokensPerS: number;
  readonly decodePerS: number;
  readonly tokensPerStep: number;
  /** Accepted ÷ proposed drafts (NaN without speculation). */
  readonly acceptance: number;
  readonly outputs: readonly (readonly number[])[];
}

/** The draft checkpoint for `spec` next to build/bench's others, written once per target checkpoint. */
async function draftCheckpoint(targetDir: string, label: string, spec: DraftSpec): Promise<string> {
  const name = `${label}-draft${spec.layers === undefined ? "" : `-${spec.layers}l`}${spec.bf16 ? "-bf16" : ""}`;
  const dir = join(OUT, name);
  const done = join(dir, "complete");
  const stale = !(await exists(done)) ||
    (await Deno.stat(done)).mtime! < (await Deno.stat(join(targetDir, "model.safetensors"))).mtime!;
  if (stale) {
    const args = [join(ROOT, "scripts/bench/make_draft_checkpoint.py"), targetDir, dir];
    if (spec.layers !== undefined) args.push("--layers", String(spec.layers));
    if (spec.bf16) args.push("--bf16");
    await exec("/usr/bin/python3", args);
  }
  return dir;
}

/** Batch-1 speculation on the repeat task through the whole engine on the native device, each case against off. */
async function speculation(targets: readonly SpeculationTarget[]): Promise<SpeculationRow[]> {
  const bundled = await loadModel(BUNDLED);
  const phrases = ["one more time", "good morning", "hello world", "happy day", "thank you", "go team"];
  const allPrompts = phrases.map((p) =>
    bundled.format.render({
      messages: [{ role: "user", content: `Repeat the phrase '${p}' 6 times.` }],
      tools: [],
      toolChoice: "auto",
    })
  );
  const rows: SpeculationRow[] = [];
  for (const t of targets) {
    const model = t.dir === BUNDLED ? bundled : await readModelDir(t.dir);
    const prompts = allPrompts.slice(0, t.prompts);
    const wave = async (options: Partial<OpenEngineOptions>, draftModelDir?: string): Promise<Wave> => {
      const engine = await openEngine({
        modelDir: t.dir,
        model,
        modelId: "bench",
        maxModelLen: Math.min(CONTEXT, contextLength(model)),
        // The checkpoint's own dtype for target and draft alike (fp32 targets here; a bf16 draft stays bf16).
        backend: { kind: "native", threads: THREADS, ...(draftModelDir === undefined ? {} : { draftModelDir }) },
        maxNumSeqs: 1,
        ...options,
      });
      try {
        let best: Generation[] | undefined;
        const total = (gs: readonly Generation[]) => gs.reduce((a, g) => a + g.seconds, 0);
        const passes = t.reps === 0 ? 1 : t.reps + 1;
        for (let rep = 0; rep < passes; rep++) {
          const gens: Generation[] = [];
          for (const [i, promptTokens] of prompts.entries()) {
            gens.push(
              await generate(engine.generate({
                id: `spec-${rep}-${i}`,
                promptTokens,
                sampling: {
                  temperature: 0,
                  topP: 1,
                  topK: 0,
                  maxTokens: t.maxTokens,
                  stopTokens: bundled.format.stopTokens,
                  stopStrings: [],
                  logprobs: -1,
                },
              })),
            );
          }
          const timed = t.reps === 0 || rep > 0;
          if (timed && (best === undefined || total(gens) < total(best))) best = gens;
        }
        const gens = best!;
        const tokens = gens.reduce((a, g) => a + g.tokens.length, 0);
        const steps = gens.reduce((a, g) => a + g.steps, 0);
        const firsts = gens.reduce((a, g) => a + g.firstTokens, 0);
        const m = engine.metrics();
        return {
          tokensPerS: tokens / total(gens),
          // Past each request's first step (its prefill, which yields one token).
          decodePerS: (tokens - firsts) / gens.reduce((a, g) => a + g.decodeSeconds, 0),
          tokensPerStep: tokens / steps,
          acceptance: m.draftedTokens > 0 ? m.acceptedDrafts / m.draftedTokens : NaN,
          outputs: gens.map((g) => g.tokens),
        };
      } finally {
        await engine.close();
      }
    };
    const off = await wave({ speculative: "none" });
    for (const c of t.cases) {
      let on: Wave;
      if (c.draft === undefined) {
        on = await wave({ speculative: "ngram", numSpeculativeTokens: c.k });
      } else {
        let draftDir: string;
        try {
          draftDir = await draftCheckpoint(t.dir, t.dir === BUNDLED ? "rill-tiny-harmony" : basename(t.dir), c.draft);
        } catch (e) {
          console.log(
            `native speculation x1 ${t.label}: ${c.name}: no draft model (${
              e instanceof Error ? e.message.split("\n")[0] : e
            })`,
          );
          continue;
        }
        on = await wave({ speculative: "draft", numSpeculativeTokens: c.k }, draftDir);
      }
      const row = { target: t.label, c, off, on };
      console.log(`native speculation x1 ${t.label}: ${speculationLine(row)}`);
      rows.push(row);
    }
  }
  return rows;
}

function sameOutputs(a: Wave, b: Wave): boolean {
  return a.outputs.length === b.outputs.length &&
    a.outputs.every((o, i) => o.length === b.outputs[i]!.length && o.every((x, j) => x === b.outputs[i]![j]));
}

function speculationLine(r: SpeculationRow): string {
  const tokens = r.on.outputs.reduce((a, o) => a + o.length, 0);
  return `${r.c.name} K=${r.c.k}: ${fmt(r.off.tokensPerS, 1)} → ${fmt(r.on.tokensPerS, 1)} tok/s (${
    fmt(r.on.tokensPerS / r.off.tokensPerS, 2)
  }×; decode ${fmt(r.off.decodePerS, 1)} → ${fmt(r.on.decodePerS, 1)}, ${
    fmt(r.on.decodePerS / r.off.decodePerS, 2)
  }×), ${fmt(100 * r.on.acceptance, 0)}% of drafts accepted, ${
    fmt(r.on.tokensPerStep, 2)
  } tokens/step; ${tokens} tokens, ${sameOutputs(r.off, r.on) ? "identical to" : "DIFFERENT from"} speculation off`;
}

function loadAverage(): string {
  try {
    return Deno.readTextFileSync("/proc/loadavg").split(" ").slice(0, 3).join(" ");
  } catch {
    return "unknown";
  }
}

export async function run(): Promise<void> {
  const t0 = performance.now();
  if (!(await buildNativeLibrary())) {
    console.log("native: the native library is not built (no C compiler?), nothing to measure");
    return;
  }
  const tools = await buildTools();
  console.log(`native: threads ${THREADS}, load average ${loadAverage()} at start`);
  const models: ModelCase[] = [{ label: "rill-tiny-harmony", dir: BUNDLED, steps: 64, reps: 5 }];
  if (Deno.env.get("RILL_BENCH_NATIVE_SMALL") !== "1") {
    const big = await checkpoint();
    if (big !== undefined) models.push({ label: "Qwen2.5-0.5B shape", dir: big, steps: 32, reps: 3 });
  }
  const rows: Row[] = [];
  for (const m of models) {
    for (const c of BACKEND_CASES) {
      const row = await measureBackend(m, c, tools.decode);
      if (row !== undefined) rows.push(row);
    }
  }
  const sampling = await exec(tools.sample, ["--threads", String(THREADS), "--seqs", "8"]);
  console.log(`native ${sampling.trim()}`);
  const specTargets: SpeculationTarget[] = [
    { label: "rill-tiny-harmony", dir: BUNDLED, prompts: 6, maxTokens: 200, reps: 3, cases: BUNDLED_SPECULATION },
  ];
  const big = models.find((m) => m.dir !== BUNDLED);
  if (big !== undefined) {
    specTargets.push({
      label: "Qwen2.5-0.5B shape fp32",
      dir: big.dir,
      prompts: 2,
      maxTokens: 32,
      reps: 0,
      cases: BIG_SPECULATION,
    });
  }
  const spec = await speculation(specTargets);

  // The table: ratios within a model are from the same run, so the machine's load hits every row alike.
  console.log(
    `\nnative summary (load average ${loadAverage()} at the end, ${fmt((performance.now() - t0) / 1000, 0)} s)`,
  );
  console.log(
    "| model | backend | weights | prefill tok/s | decode x1 tok/s | % roofline x1 | decode x8 tok/s | sampled x8 tok/s | vs ONNX x1 / x8 | vs llama.cpp x1 |",
  );
  console.log("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |");
  for (const r of rows) {
    const onnx = rows.find((o) => o.model === r.model && o.c.backend === "onnx");
    const roof = r.bytesPerToken < ROOFLINE_MIN_BYTES ? NaN : r.bandwidth / r.bytesPerToken;
    const llama = r.model.startsWith("Qwen") ? LLAMA_CPP[r.c.dtype] : undefined;
    console.log(
      `| ${r.model} | ${r.c.backend} | ${r.c.dtype} | ${fmt(r.prefill, 0)} | ${fmt(r.decode1, 2)} | ${
        Number.isNaN(roof) ? "— (in cache)" : `${fmt(100 * r.decode1 / roof, 0)}%`
      } | ${fmt(r.decode8, 1)} | ${fmt(r.sampled8, 1)} | ${
        onnx === undefined || r.c.backend === "onnx"
          ? "—"
          : `${fmt(r.decode1 / onnx.decode1, 2)}× / ${fmt(r.decode8 / onnx.decode8, 2)}×`
      } | ${
        llama === undefined
          ? "—"
          : `${fmt(r.decode1 / llama.x1, 2)}×${llama.x8 === undefined ? "" : ` (x8 ${fmt(r.decode8 / llama.x8, 2)}×)`}`
      } |`,
    );
  }
  console.log(`sampling stage: ${sampling.trim()}`);
  console.log(
    "\n| target | speculation | K | off tok/s | on tok/s | speedup | decode off → on tok/s | decode speedup | drafts accepted | tokens/step | output |",
  );
  console.log("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |");
  for (const r of spec) {
    console.log(
      `| ${r.target} | ${r.c.name} | ${r.c.k} | ${fmt(r.off.tokensPerS, 1)} | ${fmt(r.on.tokensPerS, 1)} | ${
        fmt(r.on.tokensPerS / r.off.tokensPerS, 2)
      }× | ${fmt(r.off.decodePerS, 1)} → ${fmt(r.on.decodePerS, 1)} | ${
        fmt(r.on.decodePerS / r.off.decodePerS, 2)
      }× | ${fmt(100 * r.on.acceptance, 0)}% | ${fmt(r.on.tokensPerStep, 2)} | ${
        sameOutputs(r.off, r.on) ? "identical" : "DIFFERENT"
      } |`,
    );
  }
}
