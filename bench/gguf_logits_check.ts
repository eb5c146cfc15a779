/**
 * Whether scripts/gptoss_to_gguf.py converts right, checked before llama.cpp is timed on a conversion: on the small
 * random gpt-oss checkpoint of the tests (testing/gptoss_checkpoint.ts, 2 layers, the full vocabulary), with YaRN's
 * ramp bounds rounded (truncate: true, the only rope llama.cpp has), llama.cpp's logits on the GGUF file must agree
 * with rill's (ffi/bench/prompt_logits.c) at every position of a 40-token prompt, longer than the fixture's sliding
 * window: the BF16 conversion against rill in bf16, and the `--q8` one (Q8_0 matrices) against rill in int8 (its own
 * 34-byte blocks). llama.cpp computes in mixed precision (activations quantized to 8 bits for MXFP4 and Q8_0, to bf16
 * for BF16 matrices, an f16 KV cache), so the two differ by about 1e-2 of the largest logit; a wrong nibble order,
 * scale, gate/up split or layout differs by more than 0.3.
 */
import { join } from "node:path";
import { SMALL_GPTOSS, writeGptOssCheckpoint } from "../testing/gptoss_checkpoint.ts";
import { exec } from "./exec.ts";
import type { LlamaCpp } from "./llama_cpp.ts";

const ROOT = new URL("../", import.meta.url).pathname;
/** Largest |llama.cpp − rill| over the largest |rill| logit, at any position, that still counts as agreement. */
export const TOLERANCE = 0.05;

export interface LogitsAgreement {
  readonly worst: number; // largest relative difference over the positions
  readonly positions: number;
  readonly sameArgmax: number; // positions whose greedy token agrees
}

function rows(bytes: Uint8Array, vocab: number): Float32Array[] {
  const all = new Float32Array(bytes.buffer, bytes.byteOffset, bytes.byteLength / 4);
  const out: Float32Array[] = [];
  for (let at = 0; at + vocab <= all.length; at += vocab) out.push(all.subarray(at, at + vocab));
  return out;
}

function argmax(v: Float32Array): number {
  let best = 0;
  for (let i = 1; i < v.length; i++) if (v[i]! > v[best]!) best = i;
  return best;
}

/** Compares rill's logits (the reference) with llama.cpp's, position by position. */
export function compareLogits(rill: Float32Array[], llama: Float32Array[]): LogitsAgreement {
  if (rill.length !== llama.length || rill.length === 0) {
    throw new Error(`logits for ${rill.length} positions from rill, ${llama.length} from llama.cpp`);
  }
  let worst = 0, sameArgmax = 0;
  rill.forEach((r, p) => {
    const l = llama[p]!;
    let scale = 0, diff = 0;
    for (let i = 0; i < r.length; i++) {
      scale = Math.max(scale, Math.abs(r[i]!));
      diff = Math.max(diff, Math.abs(r[i]! - l[i]!));
    }
    worst = Math.max(worst, Number.isFinite(diff) ? diff / scale : Infinity);
    if (argmax(r) === argmax(l)) sameArgmax++;
  });
  return { worst, positions: rill.length, sameArgmax };
}

/** Writes the fixture, converts it (q8: with `--q8`, against rill in int8), runs both and compares; throws when they
 * disagree. */
export async function checkGgufConversion(
  out: string,
  llama: LlamaCpp,
  promptLogits: string,
  threads: number,
  q8 = false,
): Promise<LogitsAgreement> {
  const dir = join(out, "gptoss-gguf-check");
  await Deno.remove(dir, { recursive: true }).catch(() => {});
  await Deno.mkdir(dir, { recursive: true });
  await writeGptOssCheckpoint(dir, SMALL_GPTOSS, 7);
  const configPath = join(dir, "config.json");
  const config = JSON.parse(await Deno.readTextFile(configPath)) as { rope_scaling: Record<string, unknown> };
  config.rope_scaling.truncate = true;
  await Deno.writeTextFile(configPath, JSON.stringify(config, null, 2));
  const gguf = join(dir, "model.gguf");
  await exec("python3", [join(ROOT, "scripts/gptoss_to_gguf.py"), ...(q8 ? ["--q8"] : []), dir, gguf]);

  const vocab = 201088;
  const prompt = Array.from({ length: 40 }, (_, i) => String((i * 7919 + 3) % vocab));
  const rillOut = join(dir, "rill.f32"), llamaOut = join(dir, "llama.f32");
  await exec(promptLogits, [dir, q8 ? "int8" : "bf16", String(threads), rillOut, ...prompt]);
  await exec(llama.tool, [gguf, llama.libdir, "--threads", String(threads), "--logits", llamaOut, ...prompt]);
  const agreement = compareLogits(
    rows(await Deno.readFile(rillOut), vocab),
    rows(await Deno.readFile(llamaOut), vocab),
  );
  if (!(agreement.worst <= TOLERANCE)) {
    throw new Error(
      `gptoss: llama.cpp on the ${q8 ? "Q8_0" : "BF16"} GGUF conversion disagrees with rill on the small checkpoint: ` +
        `largest logit ` +
        `difference ${agreement.worst.toFixed(4)} of the largest logit (tolerance ${TOLERANCE}), greedy token equal ` +
        `at ${agreement.sameArgmax}/${agreement.positions} positions; scripts/gptoss_to_gguf.py is wrong`,
    );
  }
  await Deno.remove(dir, { recursive: true });
  return agreement;
}
