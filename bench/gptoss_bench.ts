/**
 * gpt-oss-20b on the native CPU device, side by side with llama.cpp on the same weights (`deno task bench gptoss`).
 *
 * 1. llama.cpp (bench/llama_cpp.ts: node-llama-cpp's bundled release and prebuilt CPU libraries, installed with npm
 *    into build/bench/llama/) and the GGUF converter (scripts/gptoss_to_gguf.py) are checked first: on the tests'
 *    small random checkpoint llama.cpp's logits on the conversion must agree with rill's (bench/gguf_logits_check.ts),
 *    or the bench stops there.
 * 2. A random checkpoint of the 20b shape in the release layout (testing/gptoss_checkpoint.ts: MXFP4 experts, BF16
 *    for the rest, the o200k_harmony vocabulary) is written once into build/bench/ (about 13.8 GB for 24 layers) and
 *    converted once to GGUF beside it (as much again); free disk and memory are checked first.
 * 3. Two pairs, each holding the same bytes on both sides: rill in bf16 against the BF16 conversion, and rill in int8
 *    (34-byte blocks of 32 weights) against the `--q8` conversion (Q8_0, the same blocks); the experts MXFP4 in all
 *    four. ffi/bench/bench_decode runs rill, then (never at the same time) bench/llama_decode.c runs llama.cpp, with the
 *    same thread count and the same fed tokens: load time, peak resident memory, prefill of 128 and (once: minutes)
 *    2048 tokens, decode at 1 stream and at 8 (8 sequences, one token each per step), medians of 3.
 * 4. Rooflines: the bytes a decode step reads ÷ the read bandwidth measured in that engine's own run (bench_decode and
 *    llama_decode both measure it, ffi/bench/read_bandwidth.h, before and after; the better counts). A step
 *    reads every layer's attention weights (bf16 or int8 blocks) and router (fp32), the MXFP4 weights (and fp32
 *    biases) of the experts it runs, the output head and each stream's keys and values (sliding layers: at most the
 *    window).
 *    At 1 stream that is 4 experts per layer; at 8 streams, the distinct experts selected across the step's 8 tokens,
 *    counted per layer from llama.cpp's routing of the same tokens (an untimed pass that reads its ffn_moe_topk
 *    tensors; rill routes the same fed tokens through the same router weights).
 *
 * The int8 pair runs RILL_BENCH_GPTOSS_ROUNDS times (default 2), the bf16 pair once between its first two runs, so
 * the shared machine's drift between minutes shows as a spread. Printed as one table per run with rill / llama.cpp
 * ratios (the roofline rows' ratio compares the engines at equal bandwidth) and the targets (issue #19): resident
 * memory ≤ 15 GB, decode ≥ 70% of the roofline at 1 and 8 streams, rill ≥ 1.2× llama.cpp at 1 stream and ≥ 1.5× at 8.
 *
 * RILL_BENCH_GPTOSS_LAYERS (default 24) writes and measures fewer layers of the same shape; RILL_BENCH_THREADS as for
 * the other benchmarks (default: all cores); RILL_BENCH_GPTOSS_PREPARE=1 stops once the files are written (they take
 * minutes to write; a later run reuses them).
 */
import { join } from "node:path";
import { type GptOssShape, writeGptOssCheckpoint } from "../testing/gptoss_checkpoint.ts";
import { buildNativeLibrary } from "./build_native_library.ts";
import { exec } from "./exec.ts";
import { exists } from "./exists.ts";
import { checkGgufConversion } from "./gguf_logits_check.ts";
import { llamaCpp } from "./llama_cpp.ts";
import { nativeToolArgs } from "./native_tool_args.ts";

const ROOT = new URL("../", import.meta.url).pathname;
const OUT = join(ROOT, "build/bench");
const THREADS = Number(Deno.env.get("RILL_BENCH_THREADS") ?? navigator.hardwareConcurrency);
const LAYERS = Number(Deno.env.get("RILL_BENCH_GPTOSS_LAYERS") ?? 24);
const PROMPT = 128, LONG_PROMPT = 2048, STEPS = 16;
/** Runs of the int8 pair (RILL_BENCH_GPTOSS_ROUNDS, default 2); the bf16 pair runs once. */
const ROUNDS = Math.max(1, Number(Deno.env.get("RILL_BENCH_GPTOSS_ROUNDS") ?? 2));

/** openai/gpt-oss-20b's config.json, layer count aside. */
const SHAPE_20B: GptOssShape = {
  hidden: 2880,
  intermediate: 2880,
  layers: LAYERS,
  heads: 64,
  kvHeads: 8,
  headDim: 64,
  experts: 32,
  perToken: 4,
  slidingWindow: 128,
};
const VOCAB = 201088;

/** Bytes of the checkpoint: MXFP4 experts (17 bytes per 32 weights), everything else BF16. */
function checkpointBytes(s: GptOssShape): number {
  const H = s.hidden, I = s.intermediate, E = s.experts, QD = s.heads * s.headDim, KD = s.kvHeads * s.headDim;
  const attention = 2 * (QD * H + 2 * KD * H + H * QD + QD + 2 * KD + H + s.heads);
  const experts = E * ((2 * I * H + H * I) / 32) * 17 + 2 * E * (2 * I + H);
  return s.layers * (attention + 2 * (E * H + E) + experts + 4 * H) + 2 * 2 * VOCAB * H + 2 * H;
}

/** Bytes of weights a decode step reads when each layer runs `experts` distinct experts; `perWeight`: bytes per weight
 * of the attention matrices and the head (2 in bf16, 34 / 32 in int8). */
function weightBytesPerStep(s: GptOssShape, experts: number, perWeight: number): number {
  const H = s.hidden, I = s.intermediate, QD = s.heads * s.headDim, KD = s.kvHeads * s.headDim;
  const attention = perWeight * (QD * H + 2 * KD * H + H * QD) + 4 * (QD + 2 * KD + H);
  const router = 4 * (s.experts * H + s.experts);
  const expert = ((2 * I * H + H * I) / 32) * 17 + 4 * (2 * I + H);
  return s.layers * (attention + router + experts * expert) + perWeight * VOCAB * H;
}

/** One side-by-side pair: rill at `dtype`, llama.cpp on the conversion holding the same bytes. */
interface Pair {
  readonly dtype: "bf16" | "int8";
  readonly gguf: string;
  readonly llamaTypes: string;
  readonly perWeight: number;
}

/** Bytes of keys and values a decode step reads for streams at these context lengths (even layers slide). */
function kvBytesPerStep(s: GptOssShape, contexts: readonly number[], bytesPerValue: number): number {
  let positions = 0;
  for (let l = 0; l < s.layers; l++) {
    for (const c of contexts) positions += l % 2 === 0 ? Math.min(c, s.slidingWindow) : c;
  }
  return positions * 2 * s.kvHeads * s.headDim * bytesPerValue;
}

async function freeBytes(dir: string): Promise<number> {
  const out = await exec("df", ["-k", "--output=avail", dir]);
  return Number(out.trim().split("\n").at(-1)) * 1024;
}

async function meminfo(key: string): Promise<number> {
  const m = new RegExp(`^${key}:\\s+(\\d+) kB`, "m").exec(await Deno.readTextFile("/proc/meminfo"));
  return m === null ? NaN : Number(m[1]) * 1024;
}

function num(text: string, re: RegExp): number {
  return Number(re.exec(text)?.[1] ?? NaN);
}

const gb = (bytes: number) => `${(bytes / 1e9).toFixed(1)} GB`;
const fixed = (v: number, digits = 1) => Number.isFinite(v) ? v.toFixed(digits) : "-";

function table(rows: readonly (readonly string[])[]): string {
  const widths = rows[0]!.map((_, c) => Math.max(...rows.map((r) => r[c]!.length)));
  return rows.map((r) => "  " + r.map((cell, c) => cell.padEnd(widths[c]!)).join("  ").trimEnd()).join("\n");
}

export async function run(): Promise<void> {
  await Deno.mkdir(join(OUT, "bin"), { recursive: true });
  if (!(await buildNativeLibrary())) throw new Error("gptoss: build/ffi/librill.so did not build");
  const cc = Deno.env.get("CC") || "cc";
  const benchDecode = join(OUT, "bin", "bench_decode"), promptLogits = join(OUT, "bin", "prompt_logits");
  await exec(cc, nativeToolArgs("bench_decode.c", benchDecode));
  await exec(cc, nativeToolArgs("prompt_logits.c", promptLogits));

  const llama = await llamaCpp(OUT);
  if (typeof llama === "string") console.log(`gptoss: llama.cpp unavailable (${llama}); rill alone`);
  else {
    for (const q8 of [false, true]) {
      const a = await checkGgufConversion(OUT, llama, promptLogits, THREADS, q8);
      console.log(
        `gptoss: ${q8 ? "Q8_0" : "BF16"} GGUF conversion checked on the small checkpoint: llama.cpp ${llama.release} ` +
          `vs rill ${q8 ? "int8" : "bf16"}, largest logit difference ${a.worst.toFixed(4)} of the largest logit over ` +
          `${a.positions} positions, greedy token equal at ${a.sameArgmax}`,
      );
    }
  }

  const dir = join(OUT, `gpt-oss-20b-shape-${LAYERS}-layers`);
  const pairs: Pair[] = [
    { dtype: "bf16", gguf: join(OUT, `gpt-oss-20b-shape-${LAYERS}-layers.gguf`), llamaTypes: "BF16", perWeight: 2 },
    {
      dtype: "int8",
      gguf: join(OUT, `gpt-oss-20b-shape-${LAYERS}-layers-q8.gguf`),
      llamaTypes: "Q8_0",
      perWeight: 34 / 32,
    },
  ];
  const size = checkpointBytes(SHAPE_20B);
  let needs = await exists(join(dir, "complete")) ? 0 : size * 1.1;
  for (const p of pairs) needs += typeof llama !== "string" && !(await exists(p.gguf)) ? size * 1.1 : 0;
  const free = await freeBytes(OUT);
  if (free < needs) {
    console.log(`gptoss: ${gb(needs)} of disk needed in ${OUT}, ${gb(free)} free; skipped`);
    return;
  }
  const available = await meminfo("MemAvailable");
  if (available < size + 1e9) {
    console.log(`gptoss: the weights need ${gb(size)} of memory, ${gb(available)} available; skipped`);
    return;
  }
  if (!(await exists(join(dir, "complete")))) {
    console.log(`gptoss: writing a ${LAYERS}-layer gpt-oss-20b-shaped checkpoint (${gb(size)})`);
    await Deno.mkdir(dir, { recursive: true });
    await writeGptOssCheckpoint(dir, SHAPE_20B, 20);
    await Deno.writeTextFile(join(dir, "complete"), "");
  }
  for (const p of pairs) {
    if (typeof llama !== "string" && !(await exists(p.gguf))) {
      console.log(`gptoss: converting it to GGUF, ${p.llamaTypes} beside the MXFP4 experts (${p.gguf})`);
      await exec("python3", [
        join(ROOT, "scripts/gptoss_to_gguf.py"),
        ...(p.dtype === "int8" ? ["--q8"] : []),
        dir,
        p.gguf,
      ]);
    }
  }

  if (Deno.env.get("RILL_BENCH_GPTOSS_PREPARE") === "1") {
    console.log(`gptoss: ${dir} and its GGUF conversion are ready; not measured (RILL_BENCH_GPTOSS_PREPARE=1)`);
    return;
  }
  const common = ["--threads", String(THREADS), "--prompt", String(PROMPT), "--steps", String(STEPS)];
  const cpu = /^model name\s*:\s*(.*)$/m.exec(await Deno.readTextFile("/proc/cpuinfo"))?.[1] ?? "?";
  // The int8 pair (rill's fast path, the one the targets are read on) runs ROUNDS times, the bf16 pair once after its
  // first round: minutes apart, so a change in the shared machine's bandwidth shows as a spread between rounds.
  const [bf16Pair, int8Pair] = pairs as [Pair, Pair];
  const schedule = [int8Pair, bf16Pair, ...Array.from({ length: ROUNDS - 1 }, () => int8Pair)];
  const summary: string[] = [];
  for (const [n, p] of schedule.entries()) {
    const rill = await exec(benchDecode, [dir, "--dtype", p.dtype, "--long", String(LONG_PROMPT), ...common]);
    const other = typeof llama === "string"
      ? ""
      : await exec(llama.tool, [p.gguf, llama.libdir, "--long", String(LONG_PROMPT), ...common]);

    // Each side's roofline is taken at the bandwidth measured in its own run (the better of before and after).
    const bandwidth = (text: string) =>
      Math.max(num(text, /read bandwidth ([\d.]+) GB\/s/), num(text, /\(([\d.]+) after\)/)) * 1e9;
    const bw = bandwidth(rill), bwOther = bandwidth(other);
    const kvBytes = /kv bf16/.test(rill) ? 2 : 4;
    const union = num(other, /x8 experts read ([\d.]+) per layer/);
    const step1 = weightBytesPerStep(SHAPE_20B, SHAPE_20B.perToken, p.perWeight) +
      kvBytesPerStep(SHAPE_20B, [PROMPT + STEPS / 2], kvBytes);
    const step8 = weightBytesPerStep(SHAPE_20B, union, p.perWeight) +
      kvBytesPerStep(SHAPE_20B, Array.from({ length: 8 }, (_, i) => 16 + i + STEPS / 2), kvBytes);
    const figures = (text: string) => ({
      load: num(text, /load ([\d.]+) s/),
      rss: num(text, /peak rss ([\d.]+) GB/),
      pf: num(text, /prefill 128: ([\d.]+) tok\/s/),
      pl: num(text, /prefill 2048: ([\d.]+) tok\/s/),
      x1: num(text, /decode x1: ([\d.]+) tok\/s/),
      x8: num(text, /decode x8: ([\d.]+) tok\/s/),
    });
    const r = figures(rill), l = figures(other);
    const huge = /([\d.]+)% in huge pages/.exec(rill)?.[1] ?? "?";
    const ratio = (a: number, b: number) => Number.isFinite(a / b) ? `${(a / b).toFixed(2)}x` : "-";
    const pct = (v: number, roof: number) => Number.isFinite(v / roof) ? `${(100 * v / roof).toFixed(0)}%` : "-";
    // Fractions of each side's own roofline, so their ratio compares the engines at equal bandwidth.
    const r1 = r.x1 * step1 / bw,
      l1 = l.x1 * step1 / bwOther,
      r8 = r.x8 * step8 / (8 * bw),
      l8 = l.x8 * step8 / (8 * bwOther);
    console.log(
      `gptoss: 20b shape, ${LAYERS} layers, ${THREADS} threads, ${cpu}, ${gb(await meminfo("MemTotal"))} RAM, ` +
        `${new Date().toISOString().slice(0, 16)}Z; rill ${p.dtype} + MXFP4 experts (${
          /isa (\w+)/.exec(rill)?.[1]
        }, kv ${kvBytes === 2 ? "bf16" : "fp32"}, weights ${huge}% in huge pages); llama.cpp ${
          typeof llama === "string" ? "-" : llama.release
        } on the GGUF conversion (${p.llamaTypes} + MXFP4 experts, kv f16)`,
    );
    console.log(table([
      ["", `rill ${p.dtype}`, `llama.cpp ${p.llamaTypes}`, "rill/llama.cpp", "target"],
      ["load (s)", fixed(r.load, 1), fixed(l.load, 1), "", ""],
      ["peak resident (GB)", fixed(r.rss, 2), fixed(l.rss, 2), "", "rill <= 15"],
      ["read bandwidth in its run (GB/s)", fixed(bw / 1e9, 1), fixed(bwOther / 1e9, 1), ratio(bw, bwOther), ""],
      [`prefill ${PROMPT} (tok/s)`, fixed(r.pf), fixed(l.pf), ratio(r.pf, l.pf), ""],
      [`prefill ${LONG_PROMPT} (tok/s)`, fixed(r.pl), fixed(l.pl), ratio(r.pl, l.pl), ""],
      ["decode x1 (tok/s)", fixed(r.x1, 2), fixed(l.x1, 2), ratio(r.x1, l.x1), ">= 1.2x"],
      [`  of its roofline (${(step1 / 1e6).toFixed(0)} MB/step)`, pct(r1, 1), pct(l1, 1), ratio(r1, l1), ">= 70%"],
      ["decode x8 (tok/s)", fixed(r.x8, 2), fixed(l.x8, 2), ratio(r.x8, l.x8), ">= 1.5x"],
      [
        `  of its roofline (${(step8 / 1e6).toFixed(0)} MB/step, ${fixed(union, 1)} experts/layer)`,
        pct(r8, 1),
        pct(l8, 1),
        ratio(r8, l8),
        ">= 70%",
      ],
    ]));
    summary.push(
      `${p.dtype} (run ${n + 1}): x1 ${ratio(r.x1, l.x1)} (${pct(r1, 1)} / ${pct(l1, 1)} of roofline), x8 ${
        ratio(r.x8, l.x8)
      } (${pct(r8, 1)} / ${pct(l8, 1)}), bandwidth ${fixed(bw / 1e9, 1)} / ${fixed(bwOther / 1e9, 1)} GB/s`,
    );
  }
  console.log(
    `gptoss: rill / llama.cpp per run, rill's and llama.cpp's roofline fractions:\n  ${summary.join("\n  ")}`,
  );
}
