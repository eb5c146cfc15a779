/**
 * The backend conformance suite: what every Backend (engine/step_batch.ts) must do, checked through its `step` alone.
 * `backendConformance(name, factory)` registers one Deno test per property; a backend file calls it with a factory
 * (ONNX behind the host sampler, sharded ONNX, the native devices). The greedy reference is independent of rill:
 * the next-token logits torch recorded for the model (golden/logits.json next to the model).
 */
import assert from "node:assert/strict";
import { neutralRow } from "../../engine/sampling_fields.ts";
import { StepBatchBuilder, type StepEntry } from "../../engine/step_batch_builder.ts";
import type { Backend, StepBatch } from "../../engine/step_batch.ts";

export interface ConformanceTarget {
  /** A fresh backend with room for at least 8 sequences of 256 tokens, 4 drafts and 5 top logprobs. */
  readonly create: () => Promise<Backend>;
  /** The model directory whose golden/logits.json is the greedy reference. */
  readonly modelDir: string;
  /** Largest |logprob difference| accepted between the backend and torch (default 1e-3). */
  readonly logprobTolerance?: number;
}

interface GoldenCase {
  readonly input_ids: number[];
  readonly positions: number[];
  readonly logits: number[][];
}

/** What one sequence asks of a step. */
interface Feed {
  readonly seqId: number;
  /** Known tokens; the step feeds known[from .. to) then drafts. */
  readonly known: readonly number[];
  readonly from: number;
  readonly to?: number;
  readonly drafts?: readonly number[];
  readonly sample?: boolean;
  readonly temperature?: number;
  readonly seed?: bigint;
  readonly logprobs?: number;
  /** Block table to use instead of the sequence's own blocks. */
  readonly blocks?: readonly number[];
}

interface Out {
  readonly tokens: number[];
  readonly logprobs: number[];
  readonly top: { id: number; logprob: number }[][];
}

const MAX_CONTEXT = 256;

/** Drives a backend with packed batches; sequence i of the suite owns blocks i·perSeq .. (i+1)·perSeq - 1. */
class Driver {
  readonly builder: StepBatchBuilder;
  readonly perSeq: number;

  constructor(readonly backend: Backend) {
    this.builder = new StepBatchBuilder(backend.info, MAX_CONTEXT);
    this.perSeq = Math.ceil(MAX_CONTEXT / backend.info.blockSize);
  }

  blocks(seqId: number, contextLen: number): number[] {
    const n = Math.ceil(contextLen / this.backend.info.blockSize);
    return Array.from({ length: n }, (_, j) => (seqId % 8) * this.perSeq + j);
  }

  entry(f: Feed): StepEntry {
    const to = f.to ?? f.known.length;
    const drafts = f.drafts ?? [];
    return {
      seqId: f.seqId,
      tokens: Int32Array.from(f.known),
      from: f.from,
      to,
      drafts,
      sample: f.sample ?? true,
      blocks: f.blocks ?? this.blocks(f.seqId, to + drafts.length),
      ...neutralRow(),
      temperature: f.temperature ?? 0,
      seeds: f.seed ?? 0n,
      logprobs: f.logprobs ?? -1,
      promptLength: to,
    };
  }

  /** Packs the feeds as one step and returns each sequence's accepted tokens (with logprobs when asked). */
  async step(feeds: readonly Feed[]): Promise<Out[]> {
    const b = this.builder;
    b.reset();
    for (const f of feeds) b.add(this.entry(f));
    await this.backend.step(b.batch(), b.result);
    return this.read(feeds);
  }

  read(feeds: readonly Feed[]): Out[] {
    const { maxDrafts, maxTopLogprobs } = this.backend.info;
    const W = maxDrafts + 1;
    const r = this.builder.result;
    return feeds.map((f, i) => {
      const n = r.counts[i]!;
      const out: Out = { tokens: [], logprobs: [], top: [] };
      for (let k = 0; k < n; k++) {
        const slot = i * W + k;
        out.tokens.push(r.tokens[slot]!);
        out.logprobs.push(r.logprobs[slot]!);
        const top = [];
        for (let j = 0; j < Math.max(0, f.logprobs ?? -1); j++) {
          top.push({ id: r.topIds[slot * maxTopLogprobs + j]!, logprob: r.topLogprobs[slot * maxTopLogprobs + j]! });
        }
        out.top.push(top);
      }
      return out;
    });
  }

  /** Prefills `prompt` in one step, then decodes `n - 1` more tokens one step at a time; returns the n tokens. */
  async decode(
    seqId: number,
    prompt: readonly number[],
    n: number,
    opts: Partial<Feed> = {},
  ): Promise<{ tokens: number[]; logprobs: number[] }> {
    const known = [...prompt];
    const tokens: number[] = [];
    const logprobs: number[] = [];
    let from = 0;
    while (tokens.length < n) {
      const [out] = await this.step([{ seqId, known, from, logprobs: 0, ...opts }]);
      from = known.length;
      known.push(out!.tokens[0]!);
      tokens.push(out!.tokens[0]!);
      logprobs.push(out!.logprobs[0]!);
    }
    this.backend.release(seqId);
    return { tokens, logprobs };
  }
}

function argmax(row: readonly number[]): number {
  let best = 0;
  for (let i = 1; i < row.length; i++) if (row[i]! > row[best]!) best = i;
  return best;
}

function logSoftmaxAt(row: readonly number[], t: number): number {
  const m = Math.max(...row);
  return row[t]! - m - Math.log(row.reduce((s, x) => s + Math.exp(x - m), 0));
}

function prompts(vocab: number): number[][] {
  return Array.from(
    { length: 4 },
    (_, i) => Array.from({ length: 9 + 7 * i }, (_, j) => (i * 37 + j * 11 + 3) % vocab),
  );
}

/** How an error may name a batch field: as in StepBatch, or as the C ABI spells it (`sampling.topP` → `top_p`). */
function fieldNames(field: string): string[] {
  const last = field.split(".").at(-1)!;
  return [field, last.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`)];
}

export function backendConformance(name: string, target: ConformanceTarget): void {
  const tol = target.logprobTolerance ?? 1e-3;
  const withBackend = (title: string, fn: (d: Driver) => Promise<void>) =>
    Deno.test(`backend conformance (${name}): ${title}`, async () => {
      const backend = await target.create();
      try {
        await fn(new Driver(backend));
      } finally {
        await backend.close();
      }
    });

  withBackend("info is sane and leaves room for the suite", async (d) => {
    const i = d.backend.info;
    for (const [k, v] of Object.entries(i)) {
      if (typeof v === "number") assert.ok(Number.isInteger(v) && v >= 0, `${k} = ${v}`);
    }
    assert.ok(i.vocabSize > 0 && i.blockSize > 0 && i.maxPositions >= MAX_CONTEXT);
    assert.ok(i.maxSeqs >= 8 && i.maxBatchTokens >= i.maxSeqs && i.maxDrafts >= 4 && i.maxTopLogprobs >= 5);
    assert.ok(i.numBlocks >= 8 * Math.ceil(MAX_CONTEXT / i.blockSize));
    assert.equal(typeof i.sharesPrefixBlocks, "boolean");
    await Promise.resolve();
  });

  withBackend("greedy next tokens and their logprobs equal torch's recorded logits", async (d) => {
    const golden = JSON.parse(await Deno.readTextFile(`${target.modelDir}/golden/logits.json`)) as {
      cases: GoldenCase[];
    };
    let seqId = 100;
    let checked = 0;
    for (const c of golden.cases) {
      for (const [k, p] of c.positions.entries()) {
        const row = c.logits[k]!;
        const [out] = await d.step([{ seqId, known: c.input_ids.slice(0, p + 1), from: 0, logprobs: 5 }]);
        d.backend.release(seqId++);
        const want = argmax(row);
        assert.equal(out!.tokens[0], want, `case of ${c.input_ids.length} tokens, position ${p}`);
        assert.ok(Math.abs(out!.logprobs[0]! - logSoftmaxAt(row, want)) < tol, "logprob of the greedy token");
        for (const t of out!.top[0]!) assert.ok(Math.abs(t.logprob - logSoftmaxAt(row, t.id)) < tol, `top ${t.id}`);
        checked++;
      }
    }
    assert.ok(checked > 0);
  });

  withBackend("logprobs are consistent: ≤ 0, top list descending, greedy token first, mass ≤ 1", async (d) => {
    const [p] = prompts(d.backend.info.vocabSize);
    const [out] = await d.step([{ seqId: 1, known: p!, from: 0, logprobs: 5 }]);
    const top = out!.top[0]!;
    assert.equal(top.length, 5);
    assert.equal(top[0]!.id, out!.tokens[0]);
    assert.ok(Math.abs(top[0]!.logprob - out!.logprobs[0]!) < 1e-6);
    for (let j = 1; j < top.length; j++) assert.ok(top[j]!.logprob <= top[j - 1]!.logprob);
    assert.equal(new Set(top.map((t) => t.id)).size, 5);
    assert.ok(top.reduce((s, t) => s + Math.exp(t.logprob), 0) <= 1 + 1e-5);
    for (const t of top) assert.ok(t.logprob <= 0);
    // Sampled at a temperature, the reported logprob is still the raw temperature-1 one.
    const [hot] = await d.step([{ seqId: 2, known: p!, from: 0, logprobs: 5, temperature: 1.7, seed: 3n }]);
    const listed = top.find((t) => t.id === hot!.tokens[0]);
    if (listed !== undefined) assert.ok(Math.abs(listed.logprob - hot!.logprobs[0]!) < 1e-6);
  });

  withBackend("batch invariance: four sequences together decode what each does alone", async (d) => {
    const ps = prompts(d.backend.info.vocabSize);
    const alone: number[][] = [];
    for (const [i, p] of ps.entries()) alone.push((await d.decode(10 + i, p, 12)).tokens);
    const known = ps.map((p) => [...p]);
    const from = ps.map(() => 0);
    const got: number[][] = ps.map(() => []);
    for (let s = 0; s < 12; s++) {
      // Staggered: sequence i joins at step i, so prefills and decodes share steps.
      const live = ps.map((_, i) => i).filter((i) => i <= s && got[i]!.length < 12);
      const outs = await d.step(live.map((i) => ({ seqId: 20 + i, known: known[i]!, from: from[i]! })));
      live.forEach((i, j) => {
        from[i] = known[i]!.length;
        known[i]!.push(outs[j]!.tokens[0]!);
        got[i]!.push(outs[j]!.tokens[0]!);
      });
    }
    while (got.some((g) => g.length < 12)) {
      const live = ps.map((_, i) => i).filter((i) => got[i]!.length < 12);
      const outs = await d.step(live.map((i) => ({ seqId: 20 + i, known: known[i]!, from: from[i]! })));
      live.forEach((i, j) => {
        from[i] = known[i]!.length;
        known[i]!.push(outs[j]!.tokens[0]!);
        got[i]!.push(outs[j]!.tokens[0]!);
      });
    }
    assert.deepEqual(got, alone);
  });

  withBackend("chunked prefill (intermediate chunks sample nothing) equals one-shot prefill", async (d) => {
    for (const [i, p] of prompts(d.backend.info.vocabSize).entries()) {
      const [one] = await d.step([{ seqId: 40 + i, known: p, from: 0, logprobs: 3 }]);
      let from = 0;
      let last: Out | undefined;
      while (from < p.length) {
        const to = Math.min(p.length, from + 4);
        [last] = await d.step([{ seqId: 50 + i, known: p, from, to, sample: to === p.length, logprobs: 3 }]);
        if (to < p.length) assert.equal(last!.tokens.length, 0, "an intermediate chunk samples nothing");
        from = to;
      }
      assert.deepEqual(last!.tokens, one!.tokens);
      assert.ok(Math.abs(last!.logprobs[0]! - one!.logprobs[0]!) < 1e-4);
    }
  });

  withBackend("drafts: right ones are all accepted, wrong ones cut the row, and rollback is implicit", async (d) => {
    const [p] = prompts(d.backend.info.vocabSize);
    const { tokens: plain } = await d.decode(60, p!, 12);
    const V = d.backend.info.vocabSize;
    const known = [...p!, plain[0]!];
    // Right drafts: the next three greedy tokens; all accepted plus the bonus token.
    let [out] = await d.step([{ seqId: 61, known: p!, from: 0 }]);
    assert.equal(out!.tokens[0], plain[0]);
    [out] = await d.step([{ seqId: 61, known, from: p!.length, drafts: plain.slice(1, 4) }]);
    assert.deepEqual(out!.tokens, plain.slice(1, 5));
    known.push(...out!.tokens);
    // Wrong drafts: the first is rejected, so only the target's own token comes back; the KV past it is garbage
    // that the next step's context length drops.
    const wrong = [(plain[5]! + 1) % V, plain[6]!, plain[7]!];
    [out] = await d.step([{ seqId: 61, known, from: known.length - 1, drafts: wrong }]);
    assert.deepEqual(out!.tokens, [plain[5]]);
    known.push(plain[5]!);
    // Half right: accepted up to the mismatch.
    const half = [plain[6]!, (plain[7]! + 1) % V];
    [out] = await d.step([{ seqId: 61, known, from: known.length - 1, drafts: half }]);
    assert.deepEqual(out!.tokens, plain.slice(6, 8));
    known.push(...out!.tokens);
    while (known.length < p!.length + 12) {
      [out] = await d.step([{ seqId: 61, known, from: known.length - 1 }]);
      known.push(out!.tokens[0]!);
    }
    assert.deepEqual(known.slice(p!.length), plain);
  });

  withBackend("seeded sampling: the same tokens alone, batched, and with drafts", async (d) => {
    const ps = prompts(d.backend.info.vocabSize);
    const opts = (i: number): Partial<Feed> => ({ temperature: 1.3, seed: BigInt(1000 + i) });
    const alone: number[][] = [];
    for (const [i, p] of ps.entries()) alone.push((await d.decode(70 + i, p, 10, opts(i))).tokens);
    assert.ok(new Set(alone.map((a) => a.join())).size > 1, "different seeds differ");
    // Batched, with each sequence verifying drafts: half right (from the alone run), then wrong ones.
    const known = ps.map((p) => [...p]);
    const from = ps.map(() => 0);
    let round = 0;
    while (known.some((k, i) => k.length < ps[i]!.length + 10)) {
      const live = ps.map((_, i) => i).filter((i) => known[i]!.length < ps[i]!.length + 10);
      const feeds = live.map((i) => {
        const done = known[i]!.length - ps[i]!.length;
        const room = Math.min(3, ps[i]!.length + 10 - known[i]!.length - 1);
        const drafts = from[i] === 0 || room <= 0
          ? []
          : (round + i) % 2 === 0
          ? alone[i]!.slice(done, done + room)
          : alone[i]!.slice(done, done + room).map((t) => (t + 1) % d.backend.info.vocabSize);
        return { seqId: 80 + i, known: known[i]!, from: from[i]!, drafts, ...opts(i) };
      });
      const outs = await d.step(feeds);
      live.forEach((i, j) => {
        from[i] = known[i]!.length;
        known[i]!.push(...outs[j]!.tokens.slice(0, ps[i]!.length + 10 - known[i]!.length));
      });
      round++;
    }
    ps.forEach((p, i) => assert.deepEqual(known[i]!.slice(p.length), alone[i], `sequence ${i}`));
  });

  withBackend(
    "prefix blocks: a sequence starting from another's full blocks continues exactly as it would",
    async (d) => {
      const bs = d.backend.info.blockSize;
      const V = d.backend.info.vocabSize;
      const prompt = Array.from({ length: 2 * bs + 5 }, (_, j) => (j * 13 + 5) % V);
      const other = [...prompt.slice(0, 2 * bs), ...Array.from({ length: 7 }, (_, j) => (j * 3 + 1) % V)];
      if (!d.backend.info.sharesPrefixBlocks) {
        // A backend that keeps caches apart must refuse a sequence that starts from blocks it did not compute.
        await d.step([{ seqId: 1, known: prompt, from: 0 }]);
        await assert.rejects(
          d.step([{
            seqId: 2,
            known: other,
            from: 2 * bs,
            blocks: d.blocks(1, 2 * bs).concat(d.blocks(2, 3 * bs)[2]!),
          }]),
          (e: unknown) => e instanceof Error && /contextLens|blockTables/.test(e.message),
        );
        return;
      }
      const own = await d.decode(1, other, 6);
      // Sequence 2 computes the shared prefix (its first two blocks); sequence 3 lists those two blocks and feeds only
      // its own tail, then decodes.
      const [a] = await d.step([{ seqId: 2, known: prompt, from: 0 }]);
      assert.equal(a!.tokens.length, 1);
      const shared = d.blocks(2, 2 * bs);
      const tail = d.blocks(3, 3 * bs).slice(2);
      const known = [...other];
      const got: number[] = [];
      let from = 2 * bs;
      while (got.length < 6) {
        const blocks = [...shared, ...tail, ...d.blocks(3, known.length + 1).slice(3)];
        const [out] = await d.step([{ seqId: 3, known, from, blocks, logprobs: 0 }]);
        from = known.length;
        known.push(out!.tokens[0]!);
        got.push(out!.tokens[0]!);
      }
      assert.deepEqual(got, own.tokens);
    },
  );

  withBackend(
    "malformed batches are rejected with an Error naming the field, and the backend keeps working",
    async (d) => {
      const info = d.backend.info;
      const [p] = prompts(info.vocabSize);
      const good = () => {
        d.builder.reset();
        d.builder.add(d.entry({ seqId: 90, known: p!, from: 0 }));
        return d.builder.batch();
      };
      const bad: [string, (b: StepBatch) => StepBatch][] = [
        ["tokens", (b) => (b.tokens[2] = info.vocabSize, b)],
        ["tokens", (b) => (b.tokens[0] = -1, b)],
        ["blockTables", (b) => (b.blockTables[0] = info.numBlocks, b)],
        ["queryStart", (b) => (b.queryStart[1] = 0, b)],
        ["draftCounts", (b) => (b.draftCounts[0] = info.maxDrafts + 1, b)],
        ["numTokens", (b) => ({ ...b, numTokens: info.maxBatchTokens + 1 })],
        ["numSeqs", (b) => ({ ...b, numSeqs: 0 })],
        ["contextLens", (b) => (b.contextLens[0] = info.maxPositions + 1, b)],
        ["positions", (b) => (b.positions[1] = 7, b)],
        ["sampleFlags", (b) => (b.sampleFlags[0] = 2, b)],
        ["sampling.temperature", (b) => (b.sampling.temperature[0] = -1, b)],
        ["sampling.logprobs", (b) => (b.sampling.logprobs[0] = info.maxTopLogprobs + 1, b)],
        ["maskRowStart", (b) => (b.maskRowStart[0] = 5, b)],
      ];
      for (const [field, corrupt] of bad) {
        await assert.rejects(
          d.backend.step(corrupt(good()), d.builder.result),
          (e: unknown) => e instanceof Error && fieldNames(field).some((n) => e.message.includes(n)),
          field,
        );
      }
      const [ok] = await d.step([{ seqId: 91, known: p!, from: 0 }]);
      assert.equal(ok!.tokens.length, 1);
    },
  );
}
