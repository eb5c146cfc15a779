/**
 * Checks an exported bundled model against torch: runs the cases that scripts/train/export.py wrote (a left-padded
 * prefill with an empty past, then a 2-token step on that past) through onnxruntime-node and compares logits and
 * present.0.key. Usage: deno run --allow-read --allow-ffi scripts/train/verify_onnx.ts <model dir> <verify.json>
 */
import * as ort from "onnxruntime-node";

interface Packed {
  readonly shape: number[];
  readonly data: number[];
}
export interface Case {
  readonly feeds: Record<string, number[][] | Packed>;
  readonly logits: Packed;
  readonly present0_key: number[];
}

function toTensor(name: string, v: number[][] | Packed): ort.Tensor {
  if (Array.isArray(v)) {
    const rows = v.length;
    const cols = v[0]?.length ?? 0;
    const flat = new BigInt64Array(rows * cols);
    v.forEach((row, i) => row.forEach((x, j) => (flat[i * cols + j] = BigInt(x))));
    return new ort.Tensor("int64", flat, [rows, cols]);
  }
  if (name.length === 0) throw new Error("unnamed tensor");
  return new ort.Tensor("float32", Float32Array.from(v.data), v.shape);
}

function maxDiff(a: ArrayLike<number>, b: readonly number[]): number {
  if (a.length !== b.length) throw new Error(`length ${a.length} != ${b.length}`);
  let m = 0;
  for (let i = 0; i < a.length; i++) m = Math.max(m, Math.abs((a[i] ?? NaN) - (b[i] ?? NaN)));
  return m;
}

/** Max |ORT − torch| of each case's logits and present.0.key. */
export async function verifyOnnx(
  modelPath: string,
  cases: readonly Case[],
): Promise<{ dims: readonly number[]; logits: number; present0Key: number }[]> {
  const session = await ort.InferenceSession.create(modelPath);
  try {
    const results = [];
    for (const c of cases) {
      const feeds: Record<string, ort.Tensor> = {};
      for (const [name, v] of Object.entries(c.feeds)) feeds[name] = toTensor(name, v);
      const out = await session.run(feeds);
      const logits = out["logits"];
      const present = out["present.0.key"];
      if (logits === undefined || present === undefined) throw new Error("missing outputs");
      results.push({
        dims: logits.dims,
        logits: maxDiff(logits.data as Float32Array, c.logits.data),
        present0Key: maxDiff(present.data as Float32Array, c.present0_key),
      });
    }
    return results;
  } finally {
    await session.release();
  }
}

if (import.meta.main) {
  const [dir, verifyPath] = Deno.args;
  if (dir === undefined || verifyPath === undefined) throw new Error("usage: verify_onnx.ts <model dir> <verify.json>");
  const { cases } = JSON.parse(await Deno.readTextFile(verifyPath)) as { cases: Case[] };
  let worst = 0;
  for (const [i, r] of (await verifyOnnx(`${dir}/onnx/model.onnx`, cases)).entries()) {
    console.log(
      `case ${i}: logits ${r.dims.join("x")} max|diff| ${r.logits.toExponential(2)}, present.0.key ${
        r.present0Key.toExponential(2)
      }`,
    );
    worst = Math.max(worst, r.logits, r.present0Key);
  }
  console.log(`worst ${worst.toExponential(2)}`);
  if (!(worst < 1e-4)) Deno.exit(1);
}
