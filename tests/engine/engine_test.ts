import assert from "node:assert/strict";
import type { EngineChunk, GenerateRequest, SamplingParams } from "../../engine/engine.ts";
import { QueueFullError } from "../../engine/engine.ts";
import { HfTokenizer } from "../../checkpoint/hf_tokenizer.ts";
import type { LlmEngine } from "../../engine/llm_engine.ts";
import { openEngine, type OpenEngineOptions } from "../../engine/open_engine.ts";
import type { HostSampledBackend } from "../../engine/backends/host_sampled_backend.ts";
import type { OnnxBackend } from "../../engine/backends/onnx_backend.ts";

/** The ONNX session under the engine's host sampler (one shard). */
function onnxOf(engine: LlmEngine): OnnxBackend {
  return (engine.backend as HostSampledBackend).inner as OnnxBackend;
}

const FIXTURE = new URL("../fixtures/tiny-random", import.meta.url).pathname;
const tokenizer = await HfTokenizer.fromFile(`${FIXTURE}/tokenizer.json`);

function sampling(p: Partial<SamplingParams> = {}): SamplingParams {
  return { temperature: 0, topP: 1, topK: 0, maxTokens: 24, stopTokens: [], stopStrings: [], logprobs: -1, ...p };
}

let nextId = 0;
function request(prompt: string, p: Partial<SamplingParams> = {}, signal?: AbortSignal): GenerateRequest {
  return {
    id: `r${nextId++}`,
    promptTokens: tokenizer.encode(prompt),
    sampling: sampling(p),
    ...(signal ? { signal } : {}),
  };
}

interface Result {
  tokens: number[];
  chunks: EngineChunk[];
  finish: Extract<EngineChunk, { type: "finish" }>;
}

async function collect(stream: ReadableStream<EngineChunk>): Promise<Result> {
  const chunks: EngineChunk[] = [];
  for await (const c of stream) chunks.push(c);
  const finish = chunks.at(-1);
  assert.ok(finish?.type === "finish", "a generation ends with exactly one finish chunk");
  assert.equal(chunks.filter((c) => c.type === "finish").length, 1);
  const tokens = chunks.flatMap((c) => c.type === "step" ? [...c.tokens] : []);
  for (const c of chunks) if (c.type === "step") assert.ok(c.tokens.length > 0, "no empty step chunks");
  return { tokens, chunks, finish };
}

async function withEngine<T>(options: Partial<OpenEngineOptions>, fn: (e: LlmEngine) => Promise<T>): Promise<T> {
  // eosTokenIds [] keeps random-weight generations from ending early on a special token by chance.
  const engine = await openEngine({ modelDir: FIXTURE, tokenizer, eosTokenIds: [], ...options });
  try {
    return await fn(engine);
  } finally {
    await engine.close();
  }
}

const PROMPTS = [
  "Hello, world!",
  "<|start|>user<|message|>repeat abc abc abc abc<|end|>",
  "x",
  "The quick brown fox jumps over the lazy dog. The quick brown fox",
  "1 2 3 1 2 3 1 2 3",
  "Zürich ☃",
  "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
  "abcabcabcabcabc",
];

Deno.test("engine: a request gives the same greedy tokens alone and inside a batch of 8 mixed requests", async () => {
  await withEngine({ maxNumSeqs: 8 }, async (engine) => {
    const target = () => request(PROMPTS[3]!, { maxTokens: 40 });
    const aloneOut = await collect(engine.generate(target()));
    assert.equal(aloneOut.tokens.length, 40);
    assert.equal(aloneOut.finish.reason, "length");
    // Mixed: sampled and greedy, different prompt lengths and budgets, staggered arrivals so the batch changes
    // shape (joins, leaves, prefill beside decode) while the target runs.
    const others = PROMPTS.filter((_, i) => i !== 3).map((p, i) =>
      request(p, i % 2 === 0 ? { temperature: 0.9, seed: i, maxTokens: 5 + 7 * i } : { maxTokens: 10 + 3 * i })
    );
    const runs: Promise<Result>[] = [collect(engine.generate(others[0]!)), collect(engine.generate(others[1]!))];
    const t = engine.generate(target());
    for (const r of others.slice(2)) {
      await new Promise((res) => setTimeout(res, 0));
      runs.push(collect(engine.generate(r)));
    }
    const inBatch = await collect(t);
    await Promise.all(runs);
    assert.deepEqual(inBatch.tokens, aloneOut.tokens);
    assert.ok(engine.metrics().steps < 8 * 40, "requests shared steps");
  });
});

Deno.test("engine: speculation on and off give identical greedy output, with drafts both accepted and rejected", async () => {
  const prompts = PROMPTS.map((p) => request(p, { maxTokens: 60 }));
  const run = (speculative: "ngram" | "none") =>
    withEngine({ speculative, numSpeculativeTokens: 4, ngram: { minN: 1, maxN: 3 } }, async (engine) => {
      const results = await Promise.all(prompts.map((r) => collect(engine.generate(r))));
      return { results, metrics: engine.metrics() };
    });
  const off = await run("none");
  const on = await run("ngram");
  on.results.forEach((r, i) => assert.deepEqual(r.tokens, off.results[i]!.tokens, `prompt ${i}`));
  assert.ok(on.metrics.draftedTokens > 0);
  assert.ok(on.metrics.acceptedDrafts > 0, "some drafts accepted");
  assert.ok(on.metrics.acceptedDrafts < on.metrics.draftedTokens, "some drafts rejected (rollback exercised)");
  const multi = on.results.some((r) => r.chunks.some((c) => c.type === "step" && c.tokens.length > 1));
  assert.ok(multi, "some step carried several tokens");
});

Deno.test("engine: same seed gives the same sampled output alone, in a batch, and with speculation", async () => {
  const r = (seed: number) => request(PROMPTS[1]!, { temperature: 1, topP: 0.95, topK: 50, seed, maxTokens: 30 });
  const base = await withEngine({}, (e) => collect(e.generate(r(5))));
  const again = await withEngine({}, async (e) => {
    const noise = [1, 2, 3].map((s) => collect(e.generate(request(PROMPTS[s]!, { temperature: 1, seed: s }))));
    const mine = collect(e.generate(r(5)));
    await Promise.all(noise);
    return await mine;
  });
  assert.deepEqual(again.tokens, base.tokens);
  const other = await withEngine({}, (e) => collect(e.generate(r(6))));
  assert.notDeepEqual(other.tokens, base.tokens);
  const specA = await withEngine({ speculative: "ngram", ngram: { minN: 1 } }, (e) => collect(e.generate(r(5))));
  const specB = await withEngine({ speculative: "ngram", ngram: { minN: 1 } }, (e) => collect(e.generate(r(5))));
  assert.deepEqual(specA.tokens, specB.tokens);
});

Deno.test("engine: stop token ends the sequence and is reported; maxTokens gives 'length'", async () => {
  await withEngine({}, async (engine) => {
    const full = await collect(engine.generate(request(PROMPTS[0]!, { maxTokens: 30 })));
    assert.equal(full.finish.reason, "length");
    assert.equal(full.finish.outputTokens, 30);
    assert.equal(full.finish.promptTokens, tokenizer.encode(PROMPTS[0]!).length);
    const stopTok = full.tokens[9]!;
    const cut = full.tokens.indexOf(stopTok) + 1;
    const stopped = await collect(engine.generate(request(PROMPTS[0]!, { maxTokens: 30, stopTokens: [stopTok] })));
    assert.equal(stopped.finish.reason, "stop");
    assert.deepEqual(stopped.tokens, full.tokens.slice(0, cut));
    const eos = await withEngine(
      { eosTokenIds: [stopTok] },
      (e) => collect(e.generate(request(PROMPTS[0]!, { maxTokens: 30 }))),
    );
    assert.deepEqual(eos.tokens, full.tokens.slice(0, cut));
    assert.equal(eos.finish.reason, "stop");
  });
});

Deno.test("engine: stop string ends the sequence without emitting it or anything after it", async () => {
  await withEngine({ speculative: "ngram", ngram: { minN: 1 } }, async (engine) => {
    const full = await collect(engine.generate(request(PROMPTS[3]!, { maxTokens: 60 })));
    // The fixture's tokens are single bytes; pick a printable ASCII byte from the middle of the output.
    const k = full.tokens.findIndex((t, i) => i >= 5 && t >= 0x30 && t <= 0x7a);
    assert.ok(k >= 0, "fixture output has a printable byte");
    const ch = String.fromCharCode(full.tokens[k]!);
    const first = full.tokens.indexOf(full.tokens[k]!);
    const stopped = await collect(engine.generate(request(PROMPTS[3]!, { maxTokens: 60, stopStrings: [ch] })));
    assert.equal(stopped.finish.reason, "stop");
    assert.deepEqual(stopped.tokens, full.tokens.slice(0, first));
    assert.equal(stopped.finish.outputTokens, first + 1, "usage counts the generated stop-string token");
  });
});

Deno.test("engine: maxModelLen ends generation with 'length'; oversize prompts fail cleanly", async () => {
  await withEngine({ maxModelLen: 20, speculative: "ngram", ngram: { minN: 1 } }, async (engine) => {
    const p = request(PROMPTS[0]!, { maxTokens: 100 });
    const r = await collect(engine.generate(p));
    assert.equal(r.finish.reason, "length");
    assert.equal(r.tokens.length, 20 - p.promptTokens.length);
    const big = await collect(engine.generate(request("x".repeat(25))));
    assert.equal(big.finish.reason, "error");
    assert.match(big.finish.message ?? "", /context length/);
  });
});

Deno.test("engine: logprobs come with every token, top alternatives sorted, greedy token on top", async () => {
  await withEngine({ speculative: "ngram", ngram: { minN: 1 } }, async (engine) => {
    const r = await collect(engine.generate(request(PROMPTS[4]!, { maxTokens: 20, logprobs: 3 })));
    for (const c of r.chunks) {
      if (c.type !== "step") continue;
      assert.equal(c.logprobs?.length, c.tokens.length);
      c.logprobs!.forEach((lp, i) => {
        assert.equal(lp.top.length, 3);
        assert.equal(lp.top[0]!.id, c.tokens[i]);
        assert.ok(Math.abs(lp.top[0]!.logprob - lp.logprob) < 1e-9);
        assert.ok(lp.logprob <= 0 && lp.top[1]!.logprob <= lp.top[0]!.logprob);
      });
    }
    const none = await collect(engine.generate(request(PROMPTS[4]!, { maxTokens: 5 })));
    for (const c of none.chunks) if (c.type === "step") assert.equal(c.logprobs, undefined);
  });
});

Deno.test("engine: abort ends the request at the next step and frees its cache", async () => {
  await withEngine({}, async (engine) => {
    const ctrl = new AbortController();
    const stream = engine.generate(request(PROMPTS[3]!, { maxTokens: 400 }, ctrl.signal));
    const other = collect(engine.generate(request(PROMPTS[0]!, { maxTokens: 10 })));
    const reader = stream.getReader();
    let steps = 0;
    let finish: EngineChunk | undefined;
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      if (value.type === "step" && ++steps === 3) {
        assert.ok(engine.stats().kvCacheUsage > 0);
        ctrl.abort();
      }
      if (value.type === "finish") finish = value;
    }
    assert.equal(finish?.type === "finish" && finish.reason, "abort");
    assert.ok(steps <= 4, `left within a step of the abort (${steps} steps)`);
    await other;
    assert.equal(engine.stats().kvCacheUsage, 0);
    assert.equal(onnxOf(engine).liveSequences, 0);
    // A consumer that cancels its stream counts as an abort too.
    const s2 = engine.generate(request(PROMPTS[3]!, { maxTokens: 400 }));
    const r2 = s2.getReader();
    await r2.read();
    await r2.cancel();
    await collect(engine.generate(request(PROMPTS[0]!, { maxTokens: 3 })));
    const stats = engine.stats();
    assert.deepEqual([stats.running, stats.waiting, stats.kvCacheUsage, stats.kvBlocksUsed], [0, 0, 0, 0]);
    assert.equal(onnxOf(engine).liveSequences, 0);
    // Aborted before admission: finishes without running.
    const pre = new AbortController();
    pre.abort();
    const r3 = await collect(engine.generate(request(PROMPTS[0]!, {}, pre.signal)));
    assert.equal(r3.finish.reason, "abort");
    assert.equal(r3.tokens.length, 0);
  });
});

Deno.test("engine: a full waiting queue throws QueueFullError synchronously; queued requests still run", async () => {
  await withEngine({ maxNumSeqs: 2, maxQueue: 1 }, async (engine) => {
    const a = collect(engine.generate(request(PROMPTS[0]!, { maxTokens: 8 })));
    const b = collect(engine.generate(request(PROMPTS[1]!, { maxTokens: 8 })));
    const c = collect(engine.generate(request(PROMPTS[2]!, { maxTokens: 8 })));
    assert.throws(() => engine.generate(request(PROMPTS[3]!)), QueueFullError);
    const { running, waiting } = engine.stats();
    assert.equal(running + waiting, 3);
    const results = await Promise.all([a, b, c]);
    for (const r of results) assert.equal(r.finish.reason, "length");
  });
});

Deno.test("engine: close lets running work finish, then refuses new requests", async () => {
  const engine = await openEngine({ modelDir: FIXTURE, tokenizer, eosTokenIds: [] });
  const r = collect(engine.generate(request(PROMPTS[0]!, { maxTokens: 12 })));
  await engine.close();
  assert.equal((await r).tokens.length, 12);
  assert.throws(() => engine.generate(request(PROMPTS[0]!)), /closed/);
});

Deno.test("engine: opens a model directory and reads context length and eos from its description", async () => {
  const engine = await openEngine({ modelDir: FIXTURE });
  try {
    assert.equal(engine.maxModelLen, 512);
    assert.equal(engine.modelId, "tiny-random");
    const eos = tokenizer.specialId("<|return|>")!;
    const r = await collect(engine.generate({ id: "x", promptTokens: [eos], sampling: sampling({ maxTokens: 3 }) }));
    assert.ok(r.tokens.length <= 3);
  } finally {
    await engine.close();
  }
  await assert.rejects(openEngine({ modelDir: "/nonexistent/model", tokenizer }), /not found/);
});

Deno.test("engine on ONNX: a repeated prompt is served from the prefix cache with the same tokens and logprobs", async () => {
  const text = "The quick brown fox jumps over the lazy dog. ".repeat(3);
  const p = { maxTokens: 16, logprobs: 3 };
  const plain = await withEngine({ backend: { prefixCache: false } }, async (engine) => {
    assert.equal(engine.backend.info.sharesPrefixBlocks, false);
    return await collect(engine.generate(request(text, p)));
  });
  await withEngine({}, async (engine) => {
    assert.equal(engine.backend.info.sharesPrefixBlocks, true);
    const first = await collect(engine.generate(request(text, p)));
    const second = await collect(engine.generate(request(text, p)));
    const n = tokenizer.encode(text).length;
    assert.equal(first.finish.cachedTokens, 0);
    assert.equal(second.finish.cachedTokens, Math.floor((n - 1) / 16) * 16);
    assert.ok(second.finish.cachedTokens! >= 32);
    for (const run of [first, second]) {
      assert.deepEqual(run.tokens, plain.tokens);
      const lps = run.chunks.flatMap((c) => c.type === "step" ? [...(c.logprobs ?? [])] : []);
      const want = plain.chunks.flatMap((c) => c.type === "step" ? [...(c.logprobs ?? [])] : []);
      // The cached blocks hold the KV the uncached run computed for those positions; the prompt's tail then runs
      // through the with-past kernels instead of the prefill ones, which may differ in the last float bits.
      assert.equal(lps.length, want.length);
      lps.forEach((lp, i) => {
        assert.ok(Math.abs(lp.logprob - want[i]!.logprob) < 1e-5, `token ${i}: ${lp.logprob} vs ${want[i]!.logprob}`);
        assert.deepEqual(lp.top.map((t) => t.id), want[i]!.top.map((t) => t.id));
      });
    }
  });
});

Deno.test("engine on ONNX: a request whose max output is the whole context takes blocks as it grows, not up front", async () => {
  // The fixture's context is 512 tokens = 32 blocks; the pool holds that plus 4. A worst-case reservation would run
  // the long request alone; taking blocks on demand runs the short ones beside it.
  await withEngine({ maxNumSeqs: 8, backend: { numKvBlocks: 36 } }, async (engine) => {
    const longPrompt = tokenizer.encode(PROMPTS[3]!);
    const long = collect(engine.generate(request(PROMPTS[3]!, { maxTokens: 512 - longPrompt.length })));
    const shorts = await Promise.all(
      PROMPTS.slice(0, 6).map((p) => collect(engine.generate(request(p, { maxTokens: 8 })))),
    );
    for (const s of shorts) assert.equal(s.tokens.length, 8);
    assert.equal(engine.stats().running, 1, "the short ones finished while the long one runs");
    assert.equal((await long).tokens.length, 512 - longPrompt.length);
    assert.equal(engine.metrics().peakRunning, 7);
    assert.ok(engine.metrics().peakBlocksInUse <= 36);
  });
});
