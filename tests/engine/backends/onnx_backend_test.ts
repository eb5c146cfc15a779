import assert from "node:assert/strict";
import { onnxDims } from "../../../engine/backends/create_backend.ts";
import { readModelDir } from "../../../checkpoint/model_dir.ts";
import { OnnxBackend } from "../../../engine/backends/onnx_backend.ts";
import { packBatch, type PackEntry, rowsOf } from "../../../testing/pack_batch.ts";

const ROOT = new URL("../../../", import.meta.url).pathname;
const FIXTURE = `${ROOT}tests/fixtures/tiny-random`;
const BUNDLED = ["rill-tiny-harmony", "rill-tiny-chatml"].map((m) => `${ROOT}models/${m}`);

interface GoldenCase {
  input_ids: number[];
  positions?: number[];
  logits: number[][];
}

async function load(dir: string): Promise<OnnxBackend> {
  const m = await readModelDir(dir);
  return await OnnxBackend.create(m.weights.onnxPath!, {}, onnxDims(m.config));
}

/** One forward of packed entries; row i of the answer holds entry i's logitsCount rows. */
async function run(backend: OnnxBackend, entries: readonly PackEntry[]): Promise<{ logits(i: number): Float32Array }> {
  const rows = rowsOf(await backend.forward(packBatch(entries)), entries, backend.vocabSize);
  return { logits: (i: number) => rows[i]! };
}

/** Max |ORT − golden| over every stored position of every case; each case runs as its own prefill. */
async function goldenError(dir: string): Promise<number> {
  const golden = JSON.parse(await Deno.readTextFile(`${dir}/golden/logits.json`)) as { cases: GoldenCase[] };
  assert.ok(golden.cases.length > 0, `${dir}: golden file has no cases`);
  const backend = await load(dir);
  const V = backend.vocabSize;
  let worst = 0;
  let seqId = 1;
  try {
    for (const c of golden.cases) {
      const n = c.input_ids.length;
      const positions = c.positions ?? [...Array(n).keys()];
      const out = await run(backend, [{ seqId, tokens: c.input_ids, cachedLength: 0, logitsCount: n }]);
      const all = out.logits(0);
      positions.forEach((p, k) => {
        const want = c.logits[k]!;
        assert.equal(want.length, V, `${dir}: golden row width`);
        for (let v = 0; v < V; v++) worst = Math.max(worst, Math.abs(all[p * V + v]! - want[v]!));
      });
      backend.release(seqId++);
    }
  } finally {
    await backend.close();
  }
  return worst;
}

Deno.test("onnx: fixture logits match torch's golden logits within 1e-4", async () => {
  const err = await goldenError(FIXTURE);
  assert.ok(err < 1e-4, `max |diff| ${err}`);
});

for (const dir of BUNDLED) {
  Deno.test(`onnx: ${dir.split("/").at(-1)} logits match its golden logits within 1e-4`, async () => {
    const err = await goldenError(dir);
    assert.ok(err < 1e-4, `max |diff| ${err}`);
  });
}

/** Reference: logits of the last `count` positions of `ids`, computed by a lone prefill. */
async function alone(backend: OnnxBackend, ids: number[], count: number, seqId: number): Promise<Float32Array> {
  const out = await run(backend, [{ seqId, tokens: ids, cachedLength: 0, logitsCount: count }]);
  const rows = out.logits(0).slice();
  backend.release(seqId);
  return rows;
}

function maxDiff(a: Float32Array, b: Float32Array): number {
  assert.equal(a.length, b.length);
  let m = 0;
  for (let i = 0; i < a.length; i++) m = Math.max(m, Math.abs(a[i]! - b[i]!));
  return m;
}

Deno.test("onnx: ragged batches (mixed past lengths, 1..K+1 new tokens, joins, leaves, rollback) match lone prefills", async () => {
  const backend = await load(FIXTURE);
  try {
    const prompts = [[1, 2, 3, 4, 5, 6, 7], [40, 41], [100, 101, 102, 103], [7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7]];
    const hist = prompts.map((p) => [...p]);
    const first = await run(
      backend,
      prompts.slice(0, 3).map((p, i) => ({ seqId: i + 1, tokens: p, cachedLength: 0, logitsCount: 1 })),
    );
    for (let i = 0; i < 3; i++) {
      assert.ok(maxDiff(first.logits(i), await alone(backend, hist[i]!, 1, 100 + i)) < 1e-4);
    }
    let step = 0;
    const feed = (i: number, tokens: number[], keep = tokens.length): PackEntry & { keep: number } => ({
      seqId: i + 1,
      tokens,
      cachedLength: hist[i]!.length,
      logitsCount: tokens.length,
      keep,
    });
    // Each round: which sequences run, what they feed, how many fed tokens survive (the rest are "rejected drafts").
    const rounds: [number, number[], number][][] = [
      [[0, [8], 1], [1, [42, 43, 44, 45], 2], [2, [104, 105], 2]],
      [[0, [9, 10, 11], 1], [1, [46], 1], [2, [106, 107, 108], 3]],
      [[0, [12], 1], [2, [109, 110], 1]], // sequence 1 left
      [[0, [13, 14], 2], [2, [111], 1]],
    ];
    for (const round of rounds) {
      const entries = round.map(([i, toks, keep]) => feed(i, toks, keep));
      if (step === 2) {
        backend.release(2);
      }
      const out = await run(backend, entries);
      for (let e = 0; e < entries.length; e++) {
        const entry = entries[e]!;
        const i = entry.seqId - 1;
        const full = [...hist[i]!, ...entry.tokens];
        const want = await alone(backend, full, entry.tokens.length, 200 + step * 10 + e);
        assert.ok(maxDiff(out.logits(e), want) < 1e-4, `round ${step} seq ${entry.seqId}`);
      }
      for (const entry of entries) {
        const i = entry.seqId - 1;
        // Every fed token is cached; the rejected ones are dropped by the next step's shorter context (implicit
        // rollback), which the lone-prefill comparison of that step checks.
        assert.equal(backend.cachedLength(entry.seqId), hist[i]!.length + entry.tokens.length);
        hist[i]!.push(...entry.tokens.slice(0, entry.keep));
      }
      step++;
    }
    // A newcomer prefilled while others decode, then merged into the running batch.
    const mixed = await run(backend, [feed(0, [15], 1), feed(2, [112], 1), {
      seqId: 4,
      tokens: prompts[3]!,
      cachedLength: 0,
      logitsCount: 1,
    }]);
    assert.ok(maxDiff(mixed.logits(2), await alone(backend, prompts[3]!, 1, 300)) < 1e-4);
    hist[0]!.push(15);
    hist[2]!.push(112);
    const merged = await run(backend, [feed(0, [16], 1), feed(2, [113, 114], 2), feed(3, [8, 9], 2)]);
    assert.ok(maxDiff(merged.logits(0), await alone(backend, [...hist[0]!, 16], 1, 301)) < 1e-4);
    assert.ok(maxDiff(merged.logits(1), await alone(backend, [...hist[2]!, 113, 114], 2, 302)) < 1e-4);
    assert.ok(maxDiff(merged.logits(2), await alone(backend, [...hist[3]!, 8, 9], 2, 303)) < 1e-4);
    backend.release(1);
    backend.release(3);
    backend.release(4);
    assert.equal(backend.liveSequences, 0);
  } finally {
    await backend.close();
  }
});

Deno.test("onnx: protocol errors are reported, not silently mis-batched", async () => {
  const backend = await load(FIXTURE);
  try {
    await assert.rejects(run(backend, [{ seqId: 1, tokens: [1], cachedLength: 3, logitsCount: 1 }]), /holds 0/);
    await run(backend, [{ seqId: 1, tokens: [1, 2], cachedLength: 0, logitsCount: 1 }]);
    await assert.rejects(run(backend, [{ seqId: 1, tokens: [3], cachedLength: 5, logitsCount: 1 }]), /holds 2/);
    await assert.rejects(run(backend, [{ seqId: 2, tokens: [3], cachedLength: 0, logitsCount: 2 }]), /draftCounts/);
    await assert.rejects(
      run(backend, [{ seqId: 1, tokens: [3], cachedLength: 2, logitsCount: 1 }, {
        seqId: 1,
        tokens: [4],
        cachedLength: 2,
        logitsCount: 1,
      }]),
      /twice/,
    );
    const tooLong = Array.from({ length: backend.maxPositions + 1 }, () => 5);
    await assert.rejects(run(backend, [{ seqId: 3, tokens: tooLong, cachedLength: 0, logitsCount: 1 }]), /context/);
  } finally {
    await backend.close();
  }
});

Deno.test("onnx: a sequence skipped for a few steps keeps its cache while the others reuse the slabs", async () => {
  const backend = await load(FIXTURE);
  try {
    const hist = [[3, 4, 5], [6, 7, 8, 9], [10, 11]];
    await run(backend, hist.map((p, i) => ({ seqId: i + 1, tokens: p, cachedLength: 0, logitsCount: 1 })));
    const stepSome = async (which: number[], round: number) => {
      const entries = which.map((i) => ({
        seqId: i + 1,
        tokens: [20 + round],
        cachedLength: hist[i]!.length,
        logitsCount: 1,
      }));
      const out = await run(backend, entries);
      for (let e = 0; e < which.length; e++) {
        const i = which[e]!;
        const want = await alone(backend, [...hist[i]!, 20 + round], 1, 500 + round * 10 + e);
        assert.ok(maxDiff(out.logits(e), want) < 1e-4, `round ${round} seq ${i + 1}`);
      }
      for (const i of which) hist[i]!.push(20 + round);
    };
    await stepSome([0, 1, 2], 0);
    await stepSome([0, 1], 1); // 3 skipped: its rows stay behind in the other slab
    await stepSome([0, 1], 2); // this write reuses that slab
    await stepSome([0, 1], 3);
    await stepSome([2, 0, 1], 4); // 3 comes back, in a new order
  } finally {
    await backend.close();
  }
});
