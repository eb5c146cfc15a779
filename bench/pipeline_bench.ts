/**
 * Token ids → SSE bytes through the streaming core on one core, for a harmony and a simple (ChatML) output, at
 * 1, 4 and 8 tokens per engine step. The engine is replaced by pre-built chunks so only the pipeline is measured.
 * Two compositions of the same cores alternate within each round (the machine is shared: load drifts hit both alike),
 * and each prints the median of the rounds:
 * - the fused stream the server uses (`responseSseStream`):
 *   `pipeline <harmony|simple> <K> tokens/step: <N> tokens/s`;
 * - the design's stage chain, `chunks.pipeThrough(splitStage).pipeThrough(parseStage).pipeThrough(emitterStage)
 *   .pipeThrough(sequencerStage).pipeThrough(sseEncoder)`:
 *   `pipeline staged <harmony|simple> <K> tokens/step: <N> tokens/s (staged/fused <R>, ...)`.
 *
 * Then the allocation per engine step, which timing noise on a shared machine cannot hide: the HTTP benchmark's
 * stamped PacedEngine (o200k, harmony) drained bare (`engine`), through `responseSseStream` (`pipeline`), through the
 * stage chain (`staged`), and through the API's path with each (`api`: `startGeneration` + `responseSseStream` with
 * the generation's hooks + the recorder, as responses_service streams; `staged-api`: the same hooks and recorder as
 * stages of the chain). It runs in a child process whose young generation is large enough that no GC runs while it
 * measures, so heap growth is allocation. Prints
 * `pipeline alloc <engine|pipeline|staged|api|staged-api> <K> tokens/step: <B> bytes/step (+<E> external),
 * <F> bytes/response`.
 */
import { Metrics } from "../api/metrics.ts";
import { startGeneration } from "../api/generation.ts";
import { ResponseRecorder } from "../api/responses/response_recorder.ts";
import type { EngineChunk } from "../engine/engine.ts";
import { createHarmonyFormat } from "../prompt/harmony_format.ts";
import { buildResponse } from "../events/response_template.ts";
import { O200kTokenizer } from "../testing/o200k_tokenizer.ts";
import { PacedEngine, stampedScript } from "../testing/paced_engine.ts";
import type { Tokenizer } from "../checkpoint/tokenizer.ts";
import type { OutputParser } from "../parsers/segment.ts";
import { CounterIds } from "../events/ids.ts";
import { responseSseStream, type ResponseTemplate } from "../events/pipeline.ts";
import type { ChunkTap } from "../events/chunk_tap.ts";
import type { ResponseStreamEvent } from "../events/types.ts";
import { splitStage } from "../events/split_stage.ts";
import { parseStage } from "../events/parse_stage.ts";
import { emitterStage } from "../events/emitter_stage.ts";
import { sequencerStage } from "../events/sequencer_stage.ts";
import { sseEncoder } from "../events/sse_encoder.ts";
import { randomIds } from "../events/ids.ts";
import { ChatmlParser } from "../parsers/chatml_parser.ts";
import { HarmonyParser } from "../parsers/harmony_parser.ts";
import { ToyTokenizer } from "../testing/toy_tokenizer.ts";
import { template as testTemplate } from "../testing/response_fixtures.ts";

const TOKENS = 200_000;

const template: ResponseTemplate = { ...testTemplate, id: "resp_bench", model: "bench", store: false };

interface Case {
  readonly name: "harmony" | "simple";
  readonly tokenizer: Tokenizer;
  readonly tokens: readonly number[];
  readonly parser: () => OutputParser;
}

/** Repeats `body` until the script holds at least `n` tokens, between `head` and `tail`. */
function script(tok: Tokenizer, head: string, body: string, tail: string, n: number): number[] {
  const unit = tok.encodeOrdinary(body);
  const out = tok.encode(head);
  while (out.length < n) out.push(...unit);
  out.push(...tok.encode(tail));
  return out;
}

function cases(): Case[] {
  const toy = new ToyTokenizer();
  const prose = "Hello world, the weather in Paris is mild; caf\u00e9 prices in \u20ac are rising. ";
  return [
    {
      name: "harmony",
      tokenizer: toy,
      // Reasoning then a final answer, as gpt-oss writes them.
      tokens: [
        ...script(toy, "<|channel|>analysis<|message|>", prose, "<|end|>", TOKENS / 2),
        ...script(toy, "<|start|>assistant<|channel|>final<|message|>", prose, "<|return|>", TOKENS / 2),
      ],
      parser: () => new HarmonyParser(toy, { toolNames: [] }),
    },
    {
      name: "simple",
      tokenizer: toy,
      // A ChatML answer after a short <think> block, as Qwen3-style models write them.
      tokens: script(toy, "<think>\nShort plan.\n</think>\n\n", prose, "<|im_end|>", TOKENS),
      parser: () => new ChatmlParser(toy, { toolNames: [] }),
    },
  ];
}

function chunksOf(tokens: readonly number[], k: number): EngineChunk[] {
  const chunks: EngineChunk[] = [];
  for (let i = 0; i < tokens.length; i += k) chunks.push({ type: "step", tokens: tokens.slice(i, i + k) });
  chunks.push({ type: "finish", reason: "stop", promptTokens: 10, outputTokens: tokens.length });
  return chunks;
}

function source(chunks: readonly EngineChunk[]): ReadableStream<EngineChunk> {
  let i = 0;
  return new ReadableStream<EngineChunk>({
    pull(controller) {
      const c = chunks[i++];
      if (c === undefined) controller.close();
      else controller.enqueue(c);
    },
  }, { highWaterMark: 0 });
}

type Variant = "fused" | "staged";

interface StagedOptions {
  readonly template: ResponseTemplate;
  readonly tokenizer: Tokenizer;
  readonly parser: OutputParser;
  readonly ids?: CounterIds;
}

/**
 * A stage of its own that calls the generation's hooks as chunks pass (metrics; abort on cancel). A transformer's
 * `cancel` also runs when the source fails (the pipe aborts the writable side), where the generation wants `end`:
 * close enough to weigh the chain, not to serve it.
 */
function tapStage(tap: ChunkTap): TransformStream<EngineChunk, EngineChunk> {
  return new TransformStream<EngineChunk, EngineChunk>({
    transform(chunk, controller) {
      tap.chunk(chunk);
      controller.enqueue(chunk);
    },
    flush: () => tap.end(),
    cancel: () => tap.cancel(),
  });
}

/** The record hook as a stage: each sequenced step goes to `onEvents` before it is encoded. */
function recordStage(
  onEvents: (events: readonly ResponseStreamEvent[]) => unknown,
): TransformStream<
  ResponseStreamEvent[],
  ResponseStreamEvent[]
> {
  return new TransformStream({
    async transform(events, controller) {
      const wait = onEvents(events);
      if (wait instanceof Promise) await wait;
      controller.enqueue(events);
    },
  });
}

/** The design's stage chain, production-shaped: engine chunks → (tap) → split → parse → emit → sequence → SSE. */
function stagedSseStream(
  chunks: ReadableStream<EngineChunk>,
  o: StagedOptions,
  tap?: ChunkTap,
  onEvents?: (events: readonly ResponseStreamEvent[]) => unknown,
): ReadableStream<Uint8Array> {
  const tapped = tap === undefined ? chunks : chunks.pipeThrough(tapStage(tap));
  const sequenced = tapped
    .pipeThrough(splitStage(o.tokenizer))
    .pipeThrough(parseStage(o.parser))
    .pipeThrough(emitterStage({ template: o.template, ids: o.ids ?? randomIds }))
    .pipeThrough(sequencerStage());
  return (onEvents === undefined ? sequenced : sequenced.pipeThrough(recordStage(onEvents))).pipeThrough(sseEncoder());
}

function sseOf(variant: Variant, chunks: ReadableStream<EngineChunk>, o: StagedOptions): ReadableStream<Uint8Array> {
  switch (variant) {
    case "fused":
      return responseSseStream(chunks, o);
    case "staged":
      return stagedSseStream(chunks, o);
  }
}

/** Seconds to push the chunks through the pipeline, draining the SSE bytes. */
async function once(variant: Variant, c: Case, chunks: readonly EngineChunk[]): Promise<number> {
  const t0 = performance.now();
  const sse = sseOf(variant, source(chunks), {
    template,
    tokenizer: c.tokenizer,
    parser: c.parser(),
    ids: new CounterIds(),
  });
  let bytes = 0;
  for await (const b of sse) bytes += b.length;
  if (bytes === 0) throw new Error("pipeline produced no bytes");
  return (performance.now() - t0) / 1000;
}

type AllocPath = "engine" | "pipeline" | "api" | "staged" | "staged-api";

/** Drains one response of `steps` stamped steps of `k` tokens through `path`. */
async function drain(path: AllocPath, tok: O200kTokenizer, steps: number, k: number): Promise<void> {
  const engine = new PacedEngine({
    tokenizer: tok,
    script: stampedScript(tok, steps),
    tokensPerStep: k,
    stepMs: 0,
    modelId: "bench",
  });
  const sampling = {
    temperature: 0,
    topP: 1,
    topK: 0,
    maxTokens: 1 << 20,
    stopTokens: [],
    stopStrings: [],
    logprobs: -1,
  };
  const options = {
    template,
    tokenizer: tok,
    parser: createHarmonyFormat(tok).createParser({ toolNames: [] }),
  };
  let body: ReadableStream<unknown>;
  if (path === "engine") body = engine.generate({ id: "r", promptTokens: [1], sampling });
  else if (path === "pipeline") {
    body = responseSseStream(engine.generate({ id: "r", promptTokens: [1], sampling }), options);
  } else if (path === "staged") {
    body = stagedSseStream(engine.generate({ id: "r", promptTokens: [1], sampling }), options);
  } else {
    const initial = buildResponse(template, { status: "in_progress", output: [], usage: null });
    const recorder = new ResponseRecorder(initial, null);
    const generation = startGeneration(engine, {
      id: "r",
      promptTokens: [1],
      sampling,
      metrics: new Metrics(),
      startedAt: performance.now(),
      onCancel: () => recorder.cancel(),
    });
    body = path === "api"
      ? responseSseStream(generation.source, { ...options, tap: generation.tap }, (events) => recorder.record(events))
      : stagedSseStream(generation.source, options, generation.tap, (events) => recorder.record(events));
  }
  for await (const _ of body);
}

/** Heap and external bytes allocated by `responses` responses of `steps` steps each (no GC may run meanwhile). */
async function allocated(path: AllocPath, tok: O200kTokenizer, responses: number, steps: number, k: number) {
  (globalThis as unknown as { gc(): void }).gc();
  const before = Deno.memoryUsage();
  for (let i = 0; i < responses; i++) await drain(path, tok, steps, k);
  const after = Deno.memoryUsage();
  return { heap: after.heapUsed - before.heapUsed, external: after.external - before.external };
}

/** The child process's side: per-step bytes = the growth between short and long responses, per extra step. */
async function allocChild(): Promise<void> {
  const tok = new O200kTokenizer();
  const responses = 20;
  const [short, long] = [50, 250];
  for (const k of [1, 4]) {
    for (const path of ["engine", "pipeline", "staged", "api", "staged-api"] as const) {
      for (let i = 0; i < 3; i++) await allocated(path, tok, responses, long, k); // warm-up: JIT
      const a = await allocated(path, tok, responses, short, k);
      const b = await allocated(path, tok, responses, long, k);
      const perStep = (b.heap - a.heap) / (responses * (long - short));
      const external = (b.external - a.external) / (responses * (long - short));
      const fixed = a.heap / responses - perStep * short;
      console.log(
        `pipeline alloc ${path} ${k} tokens/step: ${Math.round(perStep)} bytes/step ` +
          `(+${Math.round(external)} external), ${Math.round(fixed)} bytes/response`,
      );
    }
  }
}

/** Young generation (MiB per semi-space) that holds a whole measurement, so no scavenge disturbs it. */
const ALLOC_SEMI_SPACE_MB = 1024;

async function allocReport(): Promise<void> {
  const out = await new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "-A",
      `--v8-flags=--expose-gc,--min-semi-space-size=${ALLOC_SEMI_SPACE_MB},--max-semi-space-size=${ALLOC_SEMI_SPACE_MB}`,
      new URL(import.meta.url).pathname,
      "--alloc",
    ],
    stderr: "inherit",
  }).output();
  Deno.stdout.writeSync(out.stdout);
  if (!out.success) throw new Error("allocation probe failed");
}

const ROUNDS = 5;

function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 === 1 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

export async function run(): Promise<void> {
  await allocReport();
  for (const c of cases()) {
    for (const k of [1, 4, 8]) {
      const chunks = chunksOf(c.tokens, k);
      await once("fused", c, chunks); // warm-up: JIT and caches
      await once("staged", c, chunks);
      // The machine is shared: the variants alternate within each round so load drifts hit both alike.
      const times: Record<Variant, number[]> = { fused: [], staged: [] };
      for (let r = 0; r < ROUNDS; r++) {
        const order: Variant[] = r % 2 === 0 ? ["fused", "staged"] : ["staged", "fused"];
        for (const v of order) times[v].push(await once(v, c, chunks));
      }
      const rate = (v: Variant) => Math.round(c.tokens.length / median(times[v]));
      console.log(`pipeline ${c.name} ${k} tokens/step: ${rate("fused")} tokens/s`);
      console.log(
        `pipeline staged ${c.name} ${k} tokens/step: ${rate("staged")} tokens/s ` +
          `(staged/fused ${(rate("staged") / rate("fused")).toFixed(3)}, median of ${ROUNDS} alternating rounds)`,
      );
    }
  }
}

if (import.meta.main && Deno.args[0] === "--alloc") await allocChild();
