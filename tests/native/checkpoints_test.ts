import assert from "node:assert/strict";
import { NativeBackend } from "../../engine/backends/native_backend.ts";
import { prefillBatch } from "./step_batches.ts";

const ROOT = new URL("../../", import.meta.url).pathname;
/** Written by scripts/make_checkpoints.py (its docstring describes the layout). */
const FIXTURES = `${ROOT}tests/fixtures/checkpoints`;

interface Manifest {
  checkpoints: { name: string; architecture: string; dtype: "fp32" | "bf16"; features: string[] }[];
}
interface GoldenCase {
  input_ids: number[];
  positions: number[];
  logits: number[][];
}

/** The bounds: max |native − torch| relative to the largest |torch logit| of the prompt. */
const TOLERANCE = { fp32: 1e-5, bf16: 1e-2 } as const;
/** int8 weights (per-row or per-block scales) against the fp32 reference; measured at most 3.3e-2 on these. */
const INT8_TOLERANCE = 5e-2;

const manifest = JSON.parse(Deno.readTextFileSync(`${FIXTURES}/manifest.json`)) as Manifest;

Deno.test("checkpoint fixtures cover every architecture and both dtypes", () => {
  const names = new Set(manifest.checkpoints.map((c) => c.name));
  for (const arch of ["llama3", "llama2", "mistral", "qwen2", "qwen3"]) {
    for (const dtype of ["fp32", "bf16"]) assert.ok(names.has(`${arch}-${dtype}`), `${arch}-${dtype}`);
  }
  assert.ok(names.has("gptoss-bf16"), "gpt-oss in the release layout (BF16 with MXFP4 experts)");
});

/** Worst relative error over the golden cases, each run alone as a prefill, and how often the argmax agrees. */
async function compare(
  dir: string,
  dtype: string | undefined,
  heldAs: string,
): Promise<{ worst: number; agree: number; rows: number }> {
  const golden = JSON.parse(await Deno.readTextFile(`${dir}/golden/logits.json`)) as { cases: GoldenCase[] };
  const backend = await NativeBackend.create(dir, {
    threads: 2,
    maxSeqs: 4,
    maxBatchTokens: 256,
    numBlocks: 64,
    ...(dtype === undefined ? {} : { dtype }),
  });
  let worstRelative = 0;
  let agree = 0;
  let rows = 0;
  try {
    const V = backend.info.vocabSize;
    for (const [k, c] of golden.cases.entries()) {
      const logits = await backend.forwardLogits(prefillBatch(backend.info, [{ seqId: k + 1, tokens: c.input_ids }]));
      let worst = 0;
      let scale = 0;
      c.positions.forEach((p, r) => {
        let want = 0;
        let got = 0;
        for (let v = 0; v < V; v++) {
          const ref = c.logits[r]![v]!;
          scale = Math.max(scale, Math.abs(ref));
          worst = Math.max(worst, Math.abs(logits[p * V + v]! - ref));
          if (ref > c.logits[r]![want]!) want = v;
          if (logits[p * V + v]! > logits[p * V + got]!) got = v;
        }
        rows++;
        if (want === got) agree++;
      });
      assert.ok(scale > 1, "logits are spread");
      worstRelative = Math.max(worstRelative, worst / scale);
      backend.release(k + 1);
    }
    assert.equal(backend.info.dtype, heldAs);
  } finally {
    await backend.close();
  }
  return { worst: worstRelative, agree, rows };
}

for (const ckpt of manifest.checkpoints) {
  Deno.test(`native: ${ckpt.name} (${ckpt.features.join(", ")}) logits match torch within ${TOLERANCE[ckpt.dtype]} relative`, async () => {
    const { worst } = await compare(`${FIXTURES}/${ckpt.name}`, undefined, ckpt.dtype); // the checkpoint's dtype is the default
    assert.ok(worst <= TOLERANCE[ckpt.dtype], `relative error ${worst}`);
  });
  if (ckpt.dtype !== "fp32") continue;
  Deno.test(`native: ${ckpt.name} loaded as int8 stays within ${INT8_TOLERANCE} relative of torch`, async () => {
    const { worst, agree, rows } = await compare(`${FIXTURES}/${ckpt.name}`, "int8", "int8");
    console.log(
      `${ckpt.name} int8: relative error ${
        worst.toExponential(2)
      }, greedy agrees with fp32 torch on ${agree}/${rows} positions`,
    );
    assert.ok(worst <= INT8_TOLERANCE, `relative error ${worst}`);
  });
}
