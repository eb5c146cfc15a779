/**
 * Engine throughput on the bundled model (models/rill-tiny-harmony) or, until it exists, the tiny random fixture:
 * - a bare onnxruntime-node greedy loop (present fed back as past, argmax in JS) at batch 1 and 32: the floor;
 * - rill single stream and 1/8/32 concurrent streams (decode tokens/s per stream and aggregate), no speculation,
 *   also with intraOpNumThreads 2 and with 2 shards (main-thread session + one Web Worker session);
 * - rill's step overhead versus the bare loop on identical work;
 * - a repetitive task ("repeat the phrase N times") with and without n-gram speculation: acceptance rate, tokens per
 *   step and speedup.
 * Throughput runs ignore stop tokens so every request decodes exactly `maxTokens`; the speculation run keeps them
 * (the model's natural answer). Prints one line per figure, prefixed `engine`. Environment: RILL_BENCH_MODEL (a model
 * directory to use instead), RILL_BENCH_THREADS (ORT intra-op threads, default 1).
 */
import * as ort from "onnxruntime-node";
import type { EngineChunk, GenerateRequest, SamplingParams } from "../engine/engine.ts";
import type { LlmEngine } from "../engine/llm_engine.ts";
import { loadModel } from "../prompt/load_model.ts";
import { openEngine } from "../engine/open_engine.ts";

const ROOT = new URL("../", import.meta.url).pathname;
const THREADS = Number(Deno.env.get("RILL_BENCH_THREADS") ?? "1");

function modelDir(): string {
  const chosen = Deno.env.get("RILL_BENCH_MODEL");
  if (chosen !== undefined) return chosen;
  const bundled = `${ROOT}models/rill-tiny-harmony`;
  try {
    if (Deno.statSync(`${bundled}/onnx/model.onnx`).isFile) return bundled;
  } catch {
    // not trained yet
  }
  return `${ROOT}tests/fixtures/tiny-random`;
}

function sampling(p: Partial<SamplingParams>): SamplingParams {
  return { temperature: 0, topP: 1, topK: 0, maxTokens: 64, stopTokens: [], stopStrings: [], logprobs: -1, ...p };
}

interface StreamStats {
  tokens: number;
  /** Tokens after the first step chunk (the first comes from prefill). */
  decodeTokens: number;
  /** ms from the first step chunk to the finish. */
  decodeMs: number;
  steps: number;
}

async function consume(stream: ReadableStream<EngineChunk>): Promise<StreamStats> {
  let first = 0;
  let tokens = 0;
  let steps = 0;
  let decodeTokens = 0;
  for await (const c of stream) {
    if (c.type === "step") {
      if (first === 0) first = performance.now();
      else decodeTokens += c.tokens.length;
      tokens += c.tokens.length;
      steps++;
    }
  }
  const decodeMs = performance.now() - first;
  return { tokens, decodeTokens, decodeMs: decodeTokens > 0 ? decodeMs : NaN, steps };
}

/** A bare ORT greedy loop: the same model with nothing around it (present fed back as past, argmax in JS). */
class BareLoop {
  readonly #session: ort.InferenceSession;
  readonly #layers: number;
  readonly #heads: number;
  readonly #headDim: number;

  private constructor(session: ort.InferenceSession) {
    this.#session = session;
    this.#layers = session.inputNames.filter((n) => n.startsWith("past_key_values.") && n.endsWith(".key")).length;
    const meta = session.inputMetadata.find((m) => m.name === "past_key_values.0.key");
    const shape = meta !== undefined && meta.isTensor ? meta.shape : [];
    this.#heads = shape[1] as number;
    this.#headDim = shape[3] as number;
  }

  static async open(onnxPath: string): Promise<BareLoop> {
    return new BareLoop(
      await ort.InferenceSession.create(onnxPath, {
        intraOpNumThreads: THREADS,
        interOpNumThreads: 1,
        executionMode: "sequential",
        graphOptimizationLevel: "all",
      }),
    );
  }

  /** Prefills `batch` copies of `prompt`, then decodes `steps` tokens; returns mean ms per decode step. */
  async run(prompt: readonly number[], batch: number, steps: number): Promise<number> {
    const layers = this.#layers;
    const n = prompt.length;
    let past: ort.Tensor[] = [];
    for (let i = 0; i < 2 * layers; i++) {
      past.push(new ort.Tensor("float32", new Float32Array(0), [batch, this.#heads, 0, this.#headDim]));
    }
    let ids = new BigInt64Array(batch * n);
    let pos = new BigInt64Array(batch * n);
    for (let b = 0; b < batch; b++) {
      for (let j = 0; j < n; j++) {
        ids[b * n + j] = BigInt(prompt[j]!);
        pos[b * n + j] = BigInt(j);
      }
    }
    let seq = n;
    let total = n;
    let started = 0;
    for (let s = 0; s <= steps; s++) {
      if (s === 1) started = performance.now();
      const feeds: Record<string, ort.Tensor> = {
        input_ids: new ort.Tensor("int64", ids, [batch, seq]),
        position_ids: new ort.Tensor("int64", pos, [batch, seq]),
        attention_mask: new ort.Tensor("int64", new BigInt64Array(batch * total).fill(1n), [batch, total]),
      };
      for (let i = 0; i < layers; i++) {
        feeds[`past_key_values.${i}.key`] = past[2 * i]!;
        feeds[`past_key_values.${i}.value`] = past[2 * i + 1]!;
      }
      const out = await this.#session.run(feeds);
      const logits = out["logits"]!.data as Float32Array;
      const V = logits.length / (batch * seq);
      past = [];
      for (let i = 0; i < layers; i++) past.push(out[`present.${i}.key`]!, out[`present.${i}.value`]!);
      const next = new BigInt64Array(batch);
      for (let b = 0; b < batch; b++) {
        const row = logits.subarray(((b + 1) * seq - 1) * V, (b + 1) * seq * V);
        let best = 0;
        for (let v = 1; v < V; v++) if (row[v]! > row[best]!) best = v;
        next[b] = BigInt(best);
      }
      ids = next;
      pos = new BigInt64Array(batch).fill(BigInt(total));
      seq = 1;
      total++;
    }
    return (performance.now() - started) / steps;
  }

  close(): Promise<void> {
    return this.#session.release();
  }
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
}

function fmt(x: number, digits = 0): string {
  return Number.isFinite(x) ? x.toFixed(digits) : "n/a";
}

async function concurrent(engine: LlmEngine, requests: GenerateRequest[]) {
  const before = engine.metrics();
  const t0 = performance.now();
  const results = await Promise.all(requests.map((r) => consume(engine.generate(r))));
  const wallMs = performance.now() - t0;
  const after = engine.metrics();
  const tokens = results.reduce((s, r) => s + r.tokens, 0);
  const perStream = results.map((r) => (r.tokens - 1) / (r.decodeMs / 1000)).filter(Number.isFinite);
  return {
    tokens,
    wallMs,
    aggregate: tokens / (wallMs / 1000),
    perStream: perStream.reduce((a, b) => a + b, 0) / perStream.length,
    engineSteps: after.steps - before.steps,
    stepMs: (after.stepSeconds - before.stepSeconds) * 1000 / (after.steps - before.steps),
    drafted: after.draftedTokens - before.draftedTokens,
    accepted: after.acceptedDrafts - before.acceptedDrafts,
    verifies: after.verifySteps - before.verifySteps,
    streamSteps: results.reduce((s, r) => s + r.steps, 0),
    decodeTokens: results.reduce((s, r) => s + r.decodeTokens, 0),
    decodeMs: results.reduce((s, r) => s + (Number.isFinite(r.decodeMs) ? r.decodeMs : 0), 0),
  };
}

export async function run(): Promise<void> {
  const dir = modelDir();
  await admission(dir);
  const model = await loadModel(dir);
  const name = dir.split("/").at(-1)!;
  console.log(`engine model ${name} (intraOpNumThreads ${THREADS})`);
  const render = (text: string) =>
    model.format.render({ messages: [{ role: "user", content: text }], tools: [], toolChoice: "auto" });
  const questions = [
    "What is 17 + 25?",
    "Convert 12 kilometers to meters.",
    "What is the capital of Japan?",
    "Repeat the phrase 'good morning' 3 times.",
    "What is the weather in Paris?",
    "What is 9 times 7?",
    "What is the capital of Canada?",
    "Convert 3 hours to minutes.",
  ];
  const make = (spec: "ngram" | "none", maxNumSeqs: number, threads = THREADS, k = 4, shards = 1) =>
    openEngine({
      modelDir: dir,
      model,
      modelId: name,
      maxModelLen: model.maxModelLen,
      eosTokenIds: [],
      backend: { threads, shards },
      maxNumSeqs,
      speculative: spec,
      numSpeculativeTokens: k,
    });

  const decodeTokens = 128;
  const overheadPrompt = render(questions[0]!);
  const bare = await BareLoop.open(`${model.dir}/onnx/model.onnx`);
  const engine = await make("none", 32);
  try {
    // Bare loop and rill alternate on identical work (same prompt, greedy, same token count) so machine noise
    // hits both alike; medians of 7. The first round of each is a warm-up.
    const same = (batch: number, n: number) =>
      Array.from({ length: batch }, (_, i) => ({
        id: `o${batch}-${i}`,
        promptTokens: overheadPrompt,
        sampling: sampling({ maxTokens: n + 1 }),
      }));
    for (const [batch, steps] of [[1, decodeTokens], [32, 48]] as const) {
      const bareMs: number[] = [];
      const rillMs: number[] = [];
      for (let rep = 0; rep < 8; rep++) {
        const b = await bare.run(overheadPrompt, batch, steps);
        const r = await concurrent(engine, same(batch, steps));
        if (rep === 0) continue;
        bareMs.push(b);
        rillMs.push(1000 / r.perStream);
      }
      const b = median(bareMs);
      const r = median(rillMs);
      const bMin = Math.min(...bareMs);
      const rMin = Math.min(...rillMs);
      console.log(
        `engine overhead batch ${batch}: rill ${fmt(r, 3)} ms/step vs bare ORT loop ${fmt(b, 3)} ms/step ` +
          `(${fmt(1000 * batch / b)} tokens/s) → ratio ${fmt(r / b, 3)}, overhead ${fmt(100 * (1 - b / r), 1)}% ` +
          `of step time (medians of 7; best runs: ${fmt(rMin, 3)} vs ${fmt(bMin, 3)} ms, ratio ${fmt(rMin / bMin, 3)})`,
      );
    }
    await bare.close();

    const runConcurrency = async (e: LlmEngine, c: number, label: string) => {
      const reqs = Array.from({ length: c }, (_, i) => ({
        id: `c${c}-${i}`,
        promptTokens: render(questions[i % questions.length]!),
        sampling: sampling({ maxTokens: decodeTokens }),
      }));
      let best: Awaited<ReturnType<typeof concurrent>> | undefined;
      for (let rep = 0; rep < 3; rep++) {
        const r = await concurrent(e, reqs);
        if (best === undefined || r.aggregate > best.aggregate) best = r;
      }
      const r = best!;
      console.log(
        `engine concurrency ${c}${label}: ${fmt(r.perStream)} tokens/s per stream (decode), ` +
          `${fmt(r.aggregate)} tokens/s aggregate (${r.tokens} tokens in ${fmt(r.wallMs)} ms incl. prefill, ` +
          `${fmt(r.stepMs, 3)} ms/step; best of 3)`,
      );
    };
    for (const c of [1, 8, 32]) await runConcurrency(engine, c, "");
    if (THREADS === 1) {
      const two = await make("none", 32, 2);
      try {
        for (const c of [1, 32]) await runConcurrency(two, c, " (intraOpNumThreads 2)");
      } finally {
        await two.close();
      }
      const sharded = await make("none", 32, 1, 4, 2);
      try {
        // 2 shards is what `rill serve` runs by default (--shards auto with --max-num-seqs 32 on 2+ cores).
        for (const c of [1, 8, 32]) await runConcurrency(sharded, c, " (2 shards: main thread + 1 worker)");
      } finally {
        await sharded.close();
      }
    }
  } finally {
    await engine.close();
  }

  // Repetitive task with the model's own stop tokens: speculation on vs off, greedy, single stream and 8 streams.
  // In-domain for the bundled models (scripts/train/data.py: phrases from its table, 2 <= N <= 6).
  const phrases = [
    "one more time",
    "good morning",
    "hello world",
    "happy day",
    "thank you",
    "go team",
    "hi there",
    "tick tock",
  ];
  const repeatRequest = (i: number) => ({
    id: `rep-${i}`,
    promptTokens: render(`Repeat the phrase '${phrases[i % phrases.length]}' 6 times.`),
    sampling: sampling({ maxTokens: 200, stopTokens: model.format.stopTokens }),
  });
  type Run = Awaited<ReturnType<typeof concurrent>>;
  /** x1: the 8 prompts one after another (single stream); x8: all 8 at once. Sums over the wave. */
  const wave = async (e: LlmEngine, streams: number) => {
    const runs: Run[] = streams === 1
      ? await phrases.reduce<Promise<Run[]>>(
        async (acc, _, i) => [...(await acc), await concurrent(e, [repeatRequest(i)])],
        Promise.resolve([]),
      )
      : [await concurrent(e, phrases.map((_, i) => repeatRequest(i)))];
    const sum = (f: (r: Run) => number) => runs.reduce((t, r) => t + f(r), 0);
    return {
      tokens: sum((r) => r.tokens),
      wallMs: sum((r) => r.wallMs),
      decodeTokens: sum((r) => r.decodeTokens),
      decodeMs: sum((r) => r.decodeMs),
      streamSteps: sum((r) => r.streamSteps),
      drafted: sum((r) => r.drafted),
      accepted: sum((r) => r.accepted),
    };
  };
  for (const streams of [1, 8]) {
    const measure = async (spec: "ngram" | "none", k: number) => {
      const e = await make(spec, 32, THREADS, k);
      try {
        await wave(e, streams); // warm-up
        let best: Awaited<ReturnType<typeof wave>> | undefined;
        for (let rep = 0; rep < 3; rep++) {
          const r = await wave(e, streams);
          if (best === undefined || r.wallMs < best.wallMs) best = r;
        }
        return best!;
      } finally {
        await e.close();
      }
    };
    const off = await measure("none", 4);
    const offRate = off.tokens / (off.wallMs / 1000);
    const offDecode = off.decodeTokens / (off.decodeMs / 1000);
    for (const k of [4, 8]) {
      const on = await measure("ngram", k);
      const onRate = on.tokens / (on.wallMs / 1000);
      const onDecode = on.decodeTokens / (on.decodeMs / 1000);
      const acceptance = on.drafted > 0 ? on.accepted / on.drafted : NaN;
      console.log(
        `engine speculation x${streams} (repeat task, 8 prompts, greedy, best of 3): ` +
          `end-to-end ${fmt(offRate)} → ${fmt(onRate)} tokens/s (${fmt(onRate / offRate, 2)}x)` +
          (streams === 1
            ? `, decode ${fmt(offDecode)} → ${fmt(onDecode)} tokens/s (${fmt(onDecode / offDecode, 2)}x)`
            : "") +
          `; ngram K=${k}: acceptance ${fmt(100 * acceptance, 1)}%, ${
            fmt(on.tokens / on.streamSteps, 2)
          } tokens/step ` +
          `per stream; ${on.tokens} tokens (off ${off.tokens})`,
      );
    }
  }
}

/**
 * 64 concurrent chat requests whose max_output_tokens defaults to the rest of the context (what the API does when a
 * client gives none), on a KV pool of 4 full contexts. Reserving each request's worst case would admit 4 at a time;
 * blocks taken as sequences grow admit as many as the blocks in use allow. Samples running / waiting / blocks in use
 * every 20 ms and prints the timeline's summary.
 */
export async function admission(dir: string): Promise<void> {
  const model = await loadModel(dir);
  const blockSize = 16;
  const perContext = Math.ceil(model.maxModelLen / blockSize);
  const numKvBlocks = 4 * perContext;
  const render = (text: string) =>
    model.format.render({ messages: [{ role: "user", content: text }], tools: [], toolChoice: "auto" });
  const asks = [
    "What is 17 + 25?",
    "What is the capital of Japan?",
    "Repeat the phrase 'good morning' 5 times.",
    "Convert 3 kilometers to meters.",
    "What is 9 times 7?",
    "What is the weather in Paris?",
    "Which city is the capital of France?",
    "What is 64 - 18?",
  ];
  const engine = await openEngine({
    modelDir: dir,
    model,
    maxNumSeqs: 64,
    maxModelLen: model.maxModelLen,
    backend: { numKvBlocks, blockSize, shards: 1 },
  });
  try {
    const requests = Array.from({ length: 64 }, (_, i) => {
      const promptTokens = render(asks[i % asks.length]!);
      return {
        id: `adm-${i}`,
        promptTokens,
        sampling: sampling({ maxTokens: model.maxModelLen - promptTokens.length, stopTokens: model.format.stopTokens }),
      };
    });
    const samples: { t: number; running: number; waiting: number; blocks: number }[] = [];
    const t0 = performance.now();
    const timer = setInterval(() => {
      const s = engine.stats();
      samples.push({ t: performance.now() - t0, running: s.running, waiting: s.waiting, blocks: s.kvBlocksUsed ?? 0 });
    }, 20);
    const r = await concurrent(engine, requests);
    clearInterval(timer);
    const m = engine.metrics();
    const busy = samples.filter((s) => s.running > 0);
    const mean = (f: (s: (typeof samples)[number]) => number) => busy.reduce((a, s) => a + f(s), 0) / busy.length;
    const timeline = busy.filter((_, i) => i % Math.max(1, Math.floor(busy.length / 8)) === 0)
      .map((s) => `${fmt(s.t)}ms:${s.running}r/${s.waiting}w/${s.blocks}b`).join(" ");
    console.log(
      `engine admission 64 requests (max_output_tokens = rest of the ${model.maxModelLen}-token context, pool ` +
        `${numKvBlocks} blocks of ${blockSize} = 4 contexts): worst-case reservation would run 4 at once; ` +
        `peak ${m.peakRunning} running, mean ${fmt(mean((s) => s.running), 1)} running while busy, peak ` +
        `${m.peakBlocksInUse}/${numKvBlocks} blocks in use (mean ${fmt(mean((s) => s.blocks))}), ` +
        `${m.preemptions} preemptions, prefix cache ${engine.stats().prefixCacheHitTokens} of ` +
        `${engine.stats().prefixCacheQueriedTokens} prompt tokens; ${r.tokens} tokens in ${fmt(r.wallMs)} ms ` +
        `(${fmt(r.aggregate)} tokens/s)`,
    );
    console.log(`engine admission timeline (time: running/waiting/blocks): ${timeline}`);
  } finally {
    await engine.close();
  }
}

if (import.meta.main) await run();
