/**
 * gpt-oss-20b on the native CPU device (`deno task bench gptoss`): a random checkpoint of the 20b shape in the release
 * layout (testing/gptoss_checkpoint.ts: MXFP4 experts, BF16 for the rest, the o200k_harmony vocabulary) written once
 * into build/bench/ (about 13.8 GB for 24 layers; the free disk is checked first), then ffi/bench/bench_decode on it
 * in bf16: load time, prefill of a 128-token prompt, greedy decode at 1 and 8 streams, and decode at 1 stream as a
 * fraction of the roofline — the bytes a token actually reads (attention, router, the 4 experts it is routed to, the
 * output head) ÷ the read bandwidth bench_decode measures in the same run.
 *
 * RILL_BENCH_GPTOSS_LAYERS (default 24) writes and measures fewer layers of the same shape, for machines that cannot
 * hold the whole model; RILL_BENCH_THREADS as for the other benchmarks. Not measured here: resident memory, 2k-token
 * prefill, the 8-stream roofline (which experts a step reads depends on its routing) and llama.cpp side by side.
 */
import { join } from "node:path";
import { type GptOssShape, writeGptOssCheckpoint } from "../testing/gptoss_checkpoint.ts";
import { exec } from "./exec.ts";
import { exists } from "./exists.ts";
import { nativeToolArgs } from "./native_tool_args.ts";

const ROOT = new URL("../", import.meta.url).pathname;
const OUT = join(ROOT, "build/bench");
const THREADS = Number(Deno.env.get("RILL_BENCH_THREADS") ?? navigator.hardwareConcurrency);
const LAYERS = Number(Deno.env.get("RILL_BENCH_GPTOSS_LAYERS") ?? 24);

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

/** Bytes one decoded token reads: attention weights (bf16), the router (held in fp32), its experts, the head. */
function bytesPerToken(s: GptOssShape): number {
  const H = s.hidden, I = s.intermediate, QD = s.heads * s.headDim, KD = s.kvHeads * s.headDim;
  const attention = 2 * (QD * H + 2 * KD * H + H * QD);
  const experts = s.perToken * ((2 * I * H + H * I) / 32) * 17;
  return s.layers * (attention + 4 * s.experts * H + experts) + 2 * VOCAB * H;
}

async function freeBytes(dir: string): Promise<number> {
  const out = await exec("df", ["-k", "--output=avail", dir]);
  return Number(out.trim().split("\n").at(-1)) * 1024;
}

export async function run(): Promise<void> {
  const dir = join(OUT, `gpt-oss-20b-shape-${LAYERS}-layers`);
  await Deno.mkdir(OUT, { recursive: true });
  const size = checkpointBytes(SHAPE_20B);
  if (!(await exists(join(dir, "complete")))) {
    const free = await freeBytes(OUT);
    if (free < size * 1.1) {
      console.log(
        `gptoss: ${(size / 1e9).toFixed(1)} GB needed for ${dir}, ${(free / 1e9).toFixed(1)} GB free; skipped`,
      );
      return;
    }
    console.log(`gptoss: writing a ${LAYERS}-layer gpt-oss-20b-shaped checkpoint (${(size / 1e9).toFixed(1)} GB)`);
    await Deno.mkdir(dir, { recursive: true });
    await writeGptOssCheckpoint(dir, SHAPE_20B, 20);
    await Deno.writeTextFile(join(dir, "complete"), "");
  }
  const tool = join(OUT, "bin", "bench_decode");
  await Deno.mkdir(join(OUT, "bin"), { recursive: true });
  const cc = Deno.env.get("CC") || "cc";
  await exec(cc, nativeToolArgs("bench_decode.c", tool));
  const out = await exec(tool, [dir, "--dtype", "bf16", "--threads", String(THREADS), "--prompt", "128"]);
  const num = (re: RegExp) => Number(re.exec(out)?.[1] ?? NaN);
  const load = num(/load ([\d.]+) s/), prefill = num(/prefill 128: ([\d.]+) tok\/s/);
  const x1 = num(/decode x1: ([\d.]+) tok\/s/), x8 = num(/decode x8: ([\d.]+) tok\/s/);
  const bw = num(/read bandwidth ([\d.]+) GB\/s/) * 1e9;
  const per = bytesPerToken(SHAPE_20B), roofline = bw / per;
  console.log(
    `gptoss: 20b shape, ${LAYERS} layers, bf16 + MXFP4 experts, ${THREADS} threads | load ${load} s | prefill 128: ` +
      `${prefill} tok/s | decode x1: ${x1} tok/s = ${(100 * x1 / roofline).toFixed(0)}% of the roofline ` +
      `(${(per / 1e6).toFixed(0)} MB a token at ${(bw / 1e9).toFixed(1)} GB/s: ${roofline.toFixed(1)} tok/s) | ` +
      `decode x8: ${x8} tok/s`,
  );
}
