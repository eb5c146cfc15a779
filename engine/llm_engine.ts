/**
 * rill's Engine: continuous batching over a Backend, per-request sampling, stop handling and n-gram speculative
 * decoding. `createEngine` loads a model directory (or a bare ONNX file) onto the ONNX Runtime CPU backend; any other
 * Backend can be passed as `customBackend`.
 *
 * Step loop (one iteration = one engine step = one batched backend call):
 *   1. aborted sequences (signal or stream cancel) leave with finish "abort" and free their cache;
 *   2. waiting sequences are admitted (slots, KV budget, prefill budget);
 *   3. every running sequence contributes one batch entry: its prompt (fresh), else its last token plus drafts;
 *   4. the backend runs; each sequence samples/verifies, rolls back rejected drafts, applies stop rules and limits,
 *      and receives exactly one `step` chunk carrying all tokens it may emit this step (none when a stop-string
 *      prefix is being held back), plus a `finish` chunk when it ends.
 * Invariant between steps: a running, non-fresh sequence has `cachedLength === length - 1` (every token but the
 * last sampled one is in the backend cache).
 */
import type { Backend } from "./backend.ts";
import type { Engine, EngineChunk, EngineStats, FinishReason, GenerateRequest, TokenLogprob } from "./engine.ts";
import { KvCacheBudget } from "./kv_cache.ts";
import { NgramProposer, type NgramProposerOptions } from "./ngram_proposer.ts";
import { OnnxBackend, type OnnxBackendOptions } from "./backends/onnx_backend.ts";
import { Sampler, tokenLogprob } from "./sampler.ts";
import { Scheduler } from "./scheduler.ts";
import { StopMatcher } from "./stop_matcher.ts";
import { advanceConstraint, constrainRows } from "./token_constraint.ts";
import { ShardedBackend, WorkerBackend } from "./backends/worker_backend.ts";
import type { Tokenizer } from "../model/tokenizer.ts";

export interface EngineOptions {
  /** A model directory (config.json + onnx/model.onnx). */
  readonly modelDir?: string;
  /** An ONNX file; config.json is looked up next to it or one directory up. */
  readonly modelPath?: string;
  /**
   * The ONNX model's bytes, used instead of reading `onnx/model.onnx` (or `modelPath`) from disk, e.g. a model
   * embedded in a compiled binary that native code cannot open by path. Must be self-contained (no external data).
   * modelDir/modelPath then only locate config.json.
   */
  readonly modelBytes?: Uint8Array;
  /** A ready backend (e.g. a native one); then modelDir/modelPath only supply config.json, if given. */
  readonly customBackend?: Backend;
  readonly tokenizer: Tokenizer;
  readonly modelId?: string;
  readonly backend?: OnnxBackendOptions;
  /**
   * Split each step's batch across this many ONNX sessions running at once: the main thread plus `shards - 1` Web
   * Workers (default 1). Helps large batches on multi-core machines; small batches stay on the main thread.
   */
  readonly shards?: number;
  /** Most sequences in one batch (default 32). */
  readonly maxNumSeqs?: number;
  /** Most requests waiting beyond the free batch slots (default 256). */
  readonly maxQueue?: number;
  /** Context length; defaults to the model's max_position_embeddings. */
  readonly maxModelLen?: number;
  readonly speculative?: "ngram" | "none";
  /** Drafts per step when speculating (default 4). */
  readonly numSpeculativeTokens?: number;
  readonly ngram?: NgramProposerOptions;
  /** Always-stop token ids; default: eos_token_id from generation_config.json / config.json. */
  readonly eosTokenIds?: readonly number[];
  /** KV budget in tokens (default maxNumSeqs × maxModelLen, i.e. never the limiting factor). */
  readonly kvCacheTokens?: number;
  /** Padded prompt tokens admitted per step (default 8192, less for vocabularies over ~8k). */
  readonly maxPrefillTokens?: number;
}

/** Counters for benchmarks and diagnostics. */
export interface EngineMetrics {
  readonly steps: number;
  readonly generatedTokens: number;
  readonly draftedTokens: number;
  readonly acceptedDrafts: number;
  /** Verify entries (a sequence feeding ≥ 1 draft in a step). */
  readonly verifySteps: number;
  /** Seconds spent inside backend.step. */
  readonly backendSeconds: number;
  /** Seconds of whole steps (backend + engine work). */
  readonly stepSeconds: number;
}

interface ModelConfig {
  vocabSize?: number;
  maxPositions?: number;
  numLayers?: number;
  kvHeads?: number;
  headDim?: number;
  eos: number[];
}

class Sequence {
  readonly id: number;
  readonly request: GenerateRequest;
  readonly promptLength: number;
  readonly reserveTokens: number;
  readonly sampler: Sampler;
  readonly matcher: StopMatcher;
  readonly tokens: Int32Array;
  length: number;
  generated = 0;
  cachedLength = 0;
  drafts: number[] = [];
  /** Logprobs of tokens held back by the stop matcher, released in the same FIFO order. */
  heldLogprobs: TokenLogprob[] = [];
  aborted = false;
  done = false;
  controller!: ReadableStreamDefaultController<EngineChunk>;
  onAbort: (() => void) | undefined;

  constructor(
    id: number,
    request: GenerateRequest,
    maxModelLen: number,
    stops: number[],
    tk: Tokenizer,
  ) {
    this.id = id;
    this.request = request;
    this.promptLength = request.promptTokens.length;
    this.reserveTokens = Math.min(this.promptLength + request.sampling.maxTokens, maxModelLen);
    this.sampler = new Sampler(request.sampling);
    this.matcher = new StopMatcher(
      stops,
      request.sampling.stopStrings,
      (id) => tk.tokenBytes(id),
      (text) => tk.encodeOrdinary(text),
    );
    this.tokens = new Int32Array(Math.max(this.reserveTokens, this.promptLength));
    this.tokens.set(request.promptTokens);
    this.length = this.promptLength;
  }

  send(chunk: EngineChunk): void {
    try {
      this.controller.enqueue(chunk);
    } catch {
      // The consumer cancelled; the cancel hook already marked the sequence aborted.
    }
  }
}

export class LlmEngine implements Engine {
  readonly modelId: string;
  readonly tokenizer: Tokenizer;
  readonly maxModelLen: number;
  readonly backend: Backend;
  readonly #eos: readonly number[];
  readonly #kv: KvCacheBudget;
  readonly #scheduler: Scheduler<Sequence>;
  readonly #proposer: NgramProposer | undefined;
  readonly #k: number;
  #nextId = 1;
  #loop: Promise<void> | undefined;
  #closing = false;
  #wake: (() => void) | undefined;
  #metrics = {
    steps: 0,
    generatedTokens: 0,
    draftedTokens: 0,
    acceptedDrafts: 0,
    verifySteps: 0,
    backendSeconds: 0,
    stepSeconds: 0,
  };

  constructor(backend: Backend, options: EngineOptions, config: ModelConfig) {
    this.backend = backend;
    this.tokenizer = options.tokenizer;
    this.modelId = options.modelId ?? "model";
    const modelMax = Math.min(backend.maxPositions, config.maxPositions ?? backend.maxPositions);
    this.maxModelLen = Math.min(options.maxModelLen ?? modelMax, modelMax);
    if (!(this.maxModelLen >= 2)) throw new RangeError("maxModelLen must be at least 2");
    this.#eos = options.eosTokenIds ?? config.eos;
    const maxNumSeqs = options.maxNumSeqs ?? 32;
    this.#kv = new KvCacheBudget(options.kvCacheTokens ?? maxNumSeqs * this.maxModelLen);
    this.#scheduler = new Scheduler<Sequence>({
      maxNumSeqs,
      maxQueue: options.maxQueue ?? 256,
      // The decoder-with-past graph returns logits for every fed position, so a prefill run holds rows × length × vocab
      // floats; bound that to ~256 MB by default (one sequence is always admitted regardless).
      maxPrefillTokens: options.maxPrefillTokens ?? Math.max(512, Math.min(8192, Math.floor(64e6 / backend.vocabSize))),
    }, this.#kv);
    this.#k = options.numSpeculativeTokens ?? 4;
    if (!(this.#k >= 1)) throw new RangeError("numSpeculativeTokens must be at least 1");
    this.#proposer = (options.speculative ?? "none") === "ngram" ? new NgramProposer(options.ngram) : undefined;
  }

  generate(request: GenerateRequest): ReadableStream<EngineChunk> {
    if (this.#closing) throw new Error("engine is closed");
    const stops = [...request.sampling.stopTokens, ...this.#eos];
    const seq = new Sequence(this.#nextId++, request, this.maxModelLen, stops, this.tokenizer);
    const invalid = this.#validate(seq);
    if (invalid === undefined) this.#scheduler.enqueue(seq); // throws QueueFullError before a stream exists
    return new ReadableStream<EngineChunk>({
      start: (controller) => {
        seq.controller = controller;
        if (invalid !== undefined) {
          seq.done = true;
          controller.enqueue({
            type: "finish",
            reason: invalid.reason,
            promptTokens: seq.promptLength,
            outputTokens: 0,
            ...(invalid.message ? { message: invalid.message } : {}),
          });
          controller.close();
          return;
        }
        const signal = request.signal;
        if (signal !== undefined) {
          seq.onAbort = () => this.#abort(seq);
          if (signal.aborted) seq.aborted = true;
          else signal.addEventListener("abort", seq.onAbort, { once: true });
        }
        this.#kick();
      },
      cancel: () => this.#abort(seq),
    });
  }

  stats(): EngineStats {
    return {
      running: this.#scheduler.running.length,
      waiting: this.#scheduler.waiting.length,
      kvCacheUsage: this.#kv.usage,
    };
  }

  metrics(): EngineMetrics {
    return { ...this.#metrics };
  }

  async close(): Promise<void> {
    this.#closing = true;
    while (this.#loop !== undefined) await this.#loop;
    await this.backend.close();
  }

  #validate(seq: Sequence): { reason: FinishReason; message?: string } | undefined {
    const n = seq.promptLength;
    if (n === 0) return { reason: "error", message: "empty prompt" };
    if (n >= this.maxModelLen) {
      return { reason: "error", message: `prompt has ${n} tokens; the context length is ${this.maxModelLen}` };
    }
    const V = this.backend.vocabSize;
    for (const t of seq.request.promptTokens) {
      if (!Number.isInteger(t) || t < 0 || t >= V) {
        return { reason: "error", message: `prompt token ${t} is outside the vocabulary` };
      }
    }
    if (seq.request.sampling.maxTokens <= 0) return { reason: "length" };
    if (!this.#scheduler.fits(seq)) {
      return {
        reason: "error",
        message: `request needs ${seq.reserveTokens} cache tokens; the budget is ${this.#kv.capacity}`,
      };
    }
    return undefined;
  }

  #abort(seq: Sequence): void {
    if (seq.done) return;
    seq.aborted = true;
    this.#kick();
  }

  #kick(): void {
    // Started in a microtask so requests submitted in the same tick share the first step. `#loop` is cleared in
    // the same synchronous stretch as the final idle check, so a request enqueued later always starts a new loop.
    if (this.#loop !== undefined) return;
    this.#loop = (async () => {
      await Promise.resolve();
      try {
        await this.#run();
      } finally {
        this.#loop = undefined;
      }
    })();
  }

  async #run(): Promise<void> {
    while (!this.#scheduler.idle) {
      for (const seq of [...this.#scheduler.waiting, ...this.#scheduler.running]) {
        if (seq.aborted) this.#finish(seq, "abort");
      }
      const admitted = new Set(this.#scheduler.admit());
      const running = this.#scheduler.running;
      if (running.length === 0) break; // only reachable when nothing waits either (admission always takes one)
      try {
        await this.#step(running, admitted);
      } catch (e) {
        // A bug in sampling or bookkeeping must not strand streams: fail this batch and keep serving.
        const message = e instanceof Error ? e.message : String(e);
        for (const seq of [...running]) this.#finish(seq, "error", message);
      }
    }
  }

  async #step(running: readonly Sequence[], admitted: ReadonlySet<Sequence>): Promise<void> {
    const started = performance.now();
    const batch = running.map((seq) => {
      if (admitted.has(seq)) {
        return { seqId: seq.id, tokens: seq.request.promptTokens, cachedLength: 0, logitsCount: 1 };
      }
      seq.drafts = this.#propose(seq);
      const tokens = [seq.tokens[seq.length - 1]!, ...seq.drafts];
      return { seqId: seq.id, tokens, cachedLength: seq.cachedLength, logitsCount: tokens.length };
    });
    const seqs = [...running];
    let out;
    try {
      out = await this.backend.step(batch);
    } catch (e) {
      const message = e instanceof Error ? e.message : String(e);
      for (const seq of seqs) this.#finish(seq, "error", message);
      return;
    }
    const backendDone = performance.now();
    this.#metrics.backendSeconds += (backendDone - started) / 1000;
    const V = this.backend.vocabSize;
    seqs.forEach((seq, i) => {
      const logits = out.logits(i);
      const rows: Float32Array[] = [];
      for (let r = 0; r < logits.length / V; r++) rows.push(logits.subarray(r * V, (r + 1) * V));
      const constraint = seq.request.constraint;
      const drafts = admitted.has(seq) ? [] : seq.drafts;
      // Sampling sees masked copies; `rows` stay raw for logprobs.
      const sampled = constraint === undefined ? rows : constrainRows(constraint, rows, drafts, V);
      let produced: number[];
      if (admitted.has(seq)) {
        seq.cachedLength = seq.promptLength;
        produced = [seq.sampler.sample(sampled[0]!)];
      } else if (seq.drafts.length === 0) {
        seq.cachedLength += 1;
        produced = [seq.sampler.sample(sampled[0]!)];
      } else {
        const verdict = seq.sampler.verify(sampled, seq.drafts);
        const kept = seq.cachedLength + 1 + verdict.acceptedDrafts;
        if (verdict.acceptedDrafts < seq.drafts.length) this.backend.truncate(seq.id, kept);
        seq.cachedLength = kept;
        produced = verdict.tokens;
        this.#metrics.draftedTokens += seq.drafts.length;
        this.#metrics.acceptedDrafts += verdict.acceptedDrafts;
        this.#metrics.verifySteps++;
      }
      this.#kv.setUsed(seq.id, seq.cachedLength);
      if (constraint !== undefined && !advanceConstraint(constraint, produced)) {
        this.#finish(seq, "error", `a sampled token is outside the output grammar (${produced.join(", ")})`);
        return;
      }
      this.#accept(seq, produced, rows);
    });
    this.#metrics.steps++;
    this.#metrics.stepSeconds += (performance.now() - started) / 1000;
  }

  #propose(seq: Sequence): number[] {
    if (this.#proposer === undefined) return [];
    const sp = seq.request.sampling;
    const k = Math.min(this.#k, sp.maxTokens - seq.generated - 1, this.maxModelLen - seq.length);
    return k > 0 ? this.#proposer.propose(seq.tokens, seq.length, k) : [];
  }

  /** Runs produced tokens through limits and stop rules; emits this step's chunk and, if it ends, the finish. */
  #accept(seq: Sequence, produced: readonly number[], rows: readonly Float32Array[]): void {
    const sp = seq.request.sampling;
    const wantLogprobs = sp.logprobs >= 0;
    const emit: number[] = [];
    const emitLogprobs: TokenLogprob[] = [];
    let reason: FinishReason | undefined;
    for (let k = 0; k < produced.length; k++) {
      const token = produced[k]!;
      seq.tokens[seq.length++] = token;
      seq.generated++;
      this.#metrics.generatedTokens++;
      if (wantLogprobs) seq.heldLogprobs.push(tokenLogprob(rows[k]!, token, sp.logprobs));
      const verdict = seq.matcher.push(token);
      emit.push(...verdict.tokens);
      const synthesized = verdict.kind === "stop" ? verdict.synthesized ?? 0 : 0;
      if (wantLogprobs) {
        emitLogprobs.push(...seq.heldLogprobs.splice(0, verdict.tokens.length - synthesized));
        // Synthesized tokens re-encode the text of the generated token T in which a stop string starts, before the
        // stop string; the model never scored them. Rule: the first carries T's entry (logprob and top list, which
        // describe the choice that produced that text), the others carry T's logprob with an empty top list, so
        // there is still exactly one entry per emitted token and no alternative is invented. Usage (`generated`)
        // keeps counting what the model generated, through the token that completed the stop string.
        const t = seq.heldLogprobs[0];
        for (let i = 0; i < synthesized && t !== undefined; i++) {
          emitLogprobs.push(i === 0 ? t : { logprob: t.logprob, top: [] });
        }
      }
      if (verdict.kind === "stop") {
        reason = "stop";
        break;
      }
      if (seq.generated >= sp.maxTokens || seq.length >= this.maxModelLen) {
        const rest = seq.matcher.flush();
        emit.push(...rest);
        if (wantLogprobs) emitLogprobs.push(...seq.heldLogprobs.splice(0, rest.length));
        reason = "length";
        break;
      }
    }
    if (emit.length > 0) {
      seq.send(wantLogprobs ? { type: "step", tokens: emit, logprobs: emitLogprobs } : { type: "step", tokens: emit });
    }
    if (reason !== undefined) this.#finish(seq, reason);
  }

  #finish(seq: Sequence, reason: FinishReason, message?: string): void {
    if (seq.done) return;
    seq.done = true;
    this.#scheduler.remove(seq);
    this.backend.release(seq.id);
    if (seq.onAbort !== undefined) seq.request.signal?.removeEventListener("abort", seq.onAbort);
    seq.send({
      type: "finish",
      reason,
      promptTokens: seq.promptLength,
      outputTokens: seq.generated,
      ...(message !== undefined ? { message } : {}),
    });
    try {
      seq.controller.close();
    } catch {
      // already cancelled by the consumer
    }
  }
}

async function readJson(path: string): Promise<Record<string, unknown> | undefined> {
  let text: string;
  try {
    text = await Deno.readTextFile(path);
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) return undefined;
    throw e;
  }
  try {
    return JSON.parse(text) as Record<string, unknown>;
  } catch (e) {
    throw new Error(`${path}: invalid JSON (${e instanceof Error ? e.message : e})`);
  }
}

function ids(value: unknown): number[] {
  if (typeof value === "number") return [value];
  if (Array.isArray(value)) return value.filter((v): v is number => typeof v === "number");
  return [];
}

function num(value: unknown): number | undefined {
  return typeof value === "number" && Number.isFinite(value) ? value : undefined;
}

/** Reads the config.json / generation_config.json fields the engine and backend need. */
export async function readModelConfig(dir: string): Promise<ModelConfig> {
  const config = await readJson(`${dir}/config.json`);
  const generation = await readJson(`${dir}/generation_config.json`);
  if (config === undefined) return { eos: ids(generation?.["eos_token_id"]) };
  const heads = num(config["num_attention_heads"]);
  const hidden = num(config["hidden_size"]);
  const headDim = num(config["head_dim"]) ?? (heads && hidden ? hidden / heads : undefined);
  const out: ModelConfig = {
    eos: [...new Set([...ids(generation?.["eos_token_id"]), ...ids(config["eos_token_id"])])],
  };
  const set = (key: keyof Omit<ModelConfig, "eos">, v: number | undefined) => {
    if (v !== undefined) out[key] = v;
  };
  set("vocabSize", num(config["vocab_size"]));
  set("maxPositions", num(config["max_position_embeddings"]));
  set("numLayers", num(config["num_hidden_layers"]));
  set("kvHeads", num(config["num_key_value_heads"]) ?? heads);
  set("headDim", headDim);
  return out;
}

function dirname(path: string): string {
  const i = path.replace(/\/+$/, "").lastIndexOf("/");
  return i < 0 ? "." : i === 0 ? "/" : path.slice(0, i);
}

function basename(path: string): string {
  const trimmed = path.replace(/\/+$/, "");
  return trimmed.slice(trimmed.lastIndexOf("/") + 1);
}

async function exists(path: string): Promise<boolean> {
  try {
    await Deno.stat(path);
    return true;
  } catch {
    return false;
  }
}

/** Loads a model and returns a ready engine. */
export async function createEngine(options: EngineOptions): Promise<LlmEngine> {
  let configDir: string | undefined = options.modelDir;
  let onnxPath: string | undefined;
  if (options.modelDir !== undefined) {
    onnxPath = `${options.modelDir}/onnx/model.onnx`;
  } else if (options.modelPath !== undefined) {
    onnxPath = options.modelPath;
    const here = dirname(options.modelPath);
    for (const dir of [here, dirname(here)]) {
      if (await exists(`${dir}/config.json`)) {
        configDir = dir;
        break;
      }
    }
  } else if (options.customBackend === undefined && options.modelBytes === undefined) {
    throw new Error("createEngine: give modelDir, modelPath, modelBytes or customBackend");
  }
  const config = configDir !== undefined ? await readModelConfig(configDir) : { eos: [] };
  let backend = options.customBackend;
  if (backend === undefined) {
    const model: string | Uint8Array = options.modelBytes ?? onnxPath!;
    if (typeof model === "string" && !(await exists(model))) throw new Error(`model file not found: ${model}`);
    const dims: Record<string, number> = {};
    for (const key of ["vocabSize", "maxPositions", "numLayers", "kvHeads", "headDim"] as const) {
      const v = config[key];
      if (v !== undefined) dims[key] = v;
    }
    const shards = options.shards ?? 1;
    if (!(Number.isInteger(shards) && shards >= 1)) throw new RangeError("shards must be a positive integer");
    const main = await OnnxBackend.create(model, options.backend, dims);
    if (shards === 1) backend = main;
    else {
      const workers: Backend[] = [];
      try {
        for (let i = 1; i < shards; i++) {
          workers.push(await WorkerBackend.create(model, options.backend ?? {}, dims));
        }
      } catch (e) {
        await Promise.all([main, ...workers].map((b) => b.close()));
        throw e;
      }
      backend = new ShardedBackend([main, ...workers]);
    }
  }
  const modelId = options.modelId ??
    (options.modelDir !== undefined
      ? basename(options.modelDir)
      : configDir !== undefined
      ? basename(configDir)
      : "model");
  return new LlmEngine(backend, { ...options, modelId }, config);
}
