import assert from "node:assert/strict";
import { NativeBackend } from "../../engine/backends/native_backend.ts";
import { argmax, prefillBatch, resultBuffers } from "./step_batches.ts";

const ROOT = new URL("../../", import.meta.url).pathname;
const BUNDLED = ["rill-tiny-harmony", "rill-tiny-chatml"];

interface GoldenCase {
  input_ids: number[];
  positions?: number[];
  logits: number[][];
}

for (const name of BUNDLED) {
  const dir = `${ROOT}models/${name}`;

  Deno.test(`native: ${name} logits through FFI match its golden logits within 1e-4`, async () => {
    const golden = JSON.parse(await Deno.readTextFile(`${dir}/golden/logits.json`)) as { cases: GoldenCase[] };
    assert.ok(golden.cases.length > 0);
    const backend = await NativeBackend.create(dir, { dtype: "fp32", threads: 2, maxSeqs: 4, maxBatchTokens: 512 });
    try {
      const V = backend.info.vocabSize;
      let worst = 0;
      for (const [k, c] of golden.cases.entries()) {
        const n = c.input_ids.length;
        const logits = await backend.forwardLogits(prefillBatch(backend.info, [{ seqId: k + 1, tokens: c.input_ids }]));
        assert.equal(logits.length, n * V);
        const positions = c.positions ?? [...Array(n).keys()];
        positions.forEach((p, r) => {
          const want = c.logits[r]!;
          assert.equal(want.length, V);
          for (let v = 0; v < V; v++) worst = Math.max(worst, Math.abs(logits[p * V + v]! - want[v]!));
        });
        backend.release(k + 1);
      }
      assert.ok(worst <= 1e-4, `max |native − golden| = ${worst}`);
    } finally {
      await backend.close();
    }
  });

  Deno.test(`native: ${name} greedy step samples the golden argmax, with its logprob, for every case in one batch`, async () => {
    const golden = JSON.parse(await Deno.readTextFile(`${dir}/golden/logits.json`)) as { cases: GoldenCase[] };
    const backend = await NativeBackend.create(dir, { dtype: "fp32", threads: 2, maxSeqs: 4, maxBatchTokens: 512 });
    try {
      const seqs = golden.cases.map((c, k) => ({ seqId: 10 + k, tokens: c.input_ids }));
      const batch = prefillBatch(backend.info, seqs);
      batch.sampling.logprobs.fill(2);
      const result = resultBuffers(backend.info, seqs.length);
      await backend.step(batch, result);
      const K1 = backend.info.maxDrafts + 1;
      const L = backend.info.maxTopLogprobs;
      golden.cases.forEach((c, k) => {
        const positions = c.positions ?? [...Array(c.input_ids.length).keys()];
        assert.equal(positions.at(-1), c.input_ids.length - 1, "the golden file holds the last position's logits");
        const last = c.logits.at(-1)!;
        const sorted = [...last].sort((a, b) => b - a);
        assert.ok(sorted[0]! - sorted[1]! > 1e-3, "golden top-2 are distinct");
        const max = sorted[0]!;
        const logZ = max + Math.log(last.reduce((s, x) => s + Math.exp(x - max), 0));
        assert.equal(result.counts[k], 1);
        assert.equal(result.tokens[k * K1], argmax(last));
        assert.ok(Math.abs(result.logprobs[k * K1]! - (max - logZ)) < 1e-4);
        assert.equal(result.topIds[k * K1 * L], argmax(last));
        assert.ok(Math.abs(result.topLogprobs[k * K1 * L + 1]! - (sorted[1]! - logZ)) < 1e-4);
      });
    } finally {
      await backend.close();
    }
  });
}
