/**
 * rill's Engine: continuous batching over any Backend (engine/step_batch.ts), paged KV through the scheduler's block
 * manager, stop handling and speculative decoding (n-gram drafts, or a draft model inside a backend that has one). The
 * backend samples and verifies drafts itself; the engine owns the numbers (who runs, what each feeds, block tables,
 * sampling parameters) and the text rules.
 *
 * Draft-model speculation: every sampled entry asks the backend for k proposals (`proposeCounts`), which the step
 * returns as the draft model's greedy continuation of the accepted tokens; they become the sequence's drafts in its
 * next step. The draft model writes its own KV for k positions past the step's context, so those lookahead slots are
 * allocated first (from free blocks only: when none are free the sequence proposes fewer, never preempts anyone).
 *
 * Step loop (one iteration = one engine step = one backend call with one packed batch):
 *   1. aborted sequences (signal or stream cancel) leave with finish "abort" and give their blocks back;
 *   2. the scheduler plans the step under the token budget: decodes (last token + drafts), prefill chunks, newly
 *      admitted sequences; blocks are taken as sequences grow, and when they run out the newest sequence is
 *      preempted and later recomputed (its client sees only a delay);
 *   3. the plan is packed into the reused StepBatch buffers and the backend runs;
 *   4. each sampled sequence takes its accepted tokens (1..drafts+1) through stop rules and limits, and receives
 *      exactly one `step` chunk carrying all tokens it may emit this step (none when a stop-string prefix is held
 *      back), plus a `finish` chunk when it ends. Rollback of rejected drafts is implicit: the next step's context
 *      length says what the sequence keeps.
 * Invariant between steps: a running sequence has 1 ≤ length − computedLength (every known token but the unfed
 * ones is in the backend's KV).
 */
import type { Engine, EngineChunk, EngineStats, FinishReason, GenerateRequest, TokenLogprob } from "./engine.ts";
import { BlockManager } from "./block_manager.ts";
import { NgramProposer, type NgramProposerOptions } from "./ngram_proposer.ts";
import { Scheduler, type StepEntry, type StepPlan } from "./scheduler.ts";
import type { Backend } from "./step_batch.ts";
import { rowFromRequest } from "./sampling_fields.ts";
import { StepBatchBuilder } from "./step_batch_builder.ts";
import { StopMatcher } from "./stop_matcher.ts";
import { advanceConstraint } from "./token_constraint.ts";
import type { Tokenizer } from "../checkpoint/tokenizer.ts";

export interface EngineOptions {
  readonly tokenizer: Tokenizer;
  readonly modelId?: string;
  /** Most sequences in one step (default min(32, the backend's maxSeqs)). */
  readonly maxNumSeqs?: number;
  /** Most requests waiting beyond the free batch slots (default 256). */
  readonly maxQueue?: number;
  /** Context length; defaults to, and is capped by, the backend's maxPositions. */
  readonly maxModelLen?: number;
  /** "draft" and "eagle3" need a backend that proposes drafts inside its step (`info.proposesDrafts`): a draft
   * model or an EAGLE-3 head; the engine treats both alike. */
  readonly speculative?: "ngram" | "draft" | "eagle3" | "none";
  /** Drafts per step when speculating (default 4, capped by the backend's maxDrafts). */
  readonly numSpeculativeTokens?: number;
  readonly ngram?: NgramProposerOptions;
  /** Always-stop token ids (e.g. the model's eos_token_id); default none. */
  readonly eosTokenIds?: readonly number[];
  /** Fed tokens per step, drafts included (default: the backend's maxBatchTokens). */
  readonly maxNumBatchedTokens?: number;
  /** Share identical prompt-prefix blocks between requests (default: when the backend shares prefix blocks). */
  readonly enablePrefixCache?: boolean;
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
  /** Sequences that gave their blocks back to make room, to be recomputed. */
  readonly preemptions: number;
  /** Prompt tokens served from the prefix cache. */
  readonly cachedPromptTokens: number;
  /** Most sequences running in one step so far. */
  readonly peakRunning: number;
  /** Most KV blocks in use after a step so far. */
  readonly peakBlocksInUse: number;
}

function randomSeed(): bigint {
  const buf = new BigUint64Array(1);
  crypto.getRandomValues(buf);
  return buf[0]!;
}

class Sequence {
  readonly id: number;
  readonly request: GenerateRequest;
  readonly promptLength: number;
  readonly matcher: StopMatcher;
  /** Known tokens: prompt then generated; `tokens[0 .. length)`. */
  readonly tokens: Int32Array;
  length: number;
  computedLength = 0;
  cachedPromptTokens = 0;
  readonly seed: bigint;
  generated = 0;
  /** Drafts proposed for the coming step (the plan may use fewer). */
  proposal: number[] = [];
  /** The draft model's last proposal, a continuation of `tokens[0 .. draftFor)`. */
  draftProposal: number[] = [];
  draftFor = -1;
  /** Logprobs of tokens held back by the stop matcher, released in the same FIFO order. */
  heldLogprobs: TokenLogprob[] = [];
  admitted = false;
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
    this.matcher = new StopMatcher(
      stops,
      request.sampling.stopStrings,
      (id) => tk.tokenBytes(id),
      (text) => tk.encodeOrdinary(text),
    );
    const most = Math.min(this.promptLength + Math.max(0, request.sampling.maxTokens), maxModelLen);
    this.tokens = new Int32Array(Math.max(most, this.promptLength));
    this.tokens.set(request.promptTokens);
    this.length = this.promptLength;
    const seed = request.sampling.seed;
    this.seed = seed === undefined ? randomSeed() : BigInt.asUintN(64, BigInt(Math.trunc(seed)));
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
  readonly #blocks: BlockManager;
  readonly #scheduler: Scheduler<Sequence>;
  readonly #builder: StepBatchBuilder;
  readonly #proposer: NgramProposer | undefined;
  /** Whether the backend's draft model proposes the drafts. */
  readonly #draft: boolean;
  readonly #k: number;
  #nextId = 1;
  #loop: Promise<void> | undefined;
  #closing = false;
  #metrics = {
    steps: 0,
    generatedTokens: 0,
    draftedTokens: 0,
    acceptedDrafts: 0,
    verifySteps: 0,
    backendSeconds: 0,
    stepSeconds: 0,
    preemptions: 0,
    cachedPromptTokens: 0,
    peakRunning: 0,
    peakBlocksInUse: 0,
  };

  constructor(backend: Backend, options: EngineOptions) {
    const info = backend.info;
    this.backend = backend;
    this.tokenizer = options.tokenizer;
    this.modelId = options.modelId ?? "model";
    this.maxModelLen = Math.min(options.maxModelLen ?? info.maxPositions, info.maxPositions);
    if (!(this.maxModelLen >= 2)) throw new RangeError("maxModelLen must be at least 2");
    this.#eos = options.eosTokenIds ?? [];
    const maxNumSeqs = Math.min(options.maxNumSeqs ?? 32, info.maxSeqs);
    const budget = Math.min(options.maxNumBatchedTokens ?? info.maxBatchTokens, info.maxBatchTokens);
    const prefix = options.enablePrefixCache ?? info.sharesPrefixBlocks;
    if (prefix && !info.sharesPrefixBlocks) throw new RangeError("this backend does not share prefix blocks");
    this.#blocks = new BlockManager({
      numBlocks: info.numBlocks,
      blockSize: info.blockSize,
      enablePrefixCache: prefix,
      ...(info.slidingWindow !== undefined && info.slidingWindow > 0
        ? { slidingWindow: info.slidingWindow, numSlidingBlocks: info.numSlidingBlocks ?? 0 }
        : {}),
    });
    this.#scheduler = new Scheduler<Sequence>({
      maxNumSeqs,
      maxQueue: options.maxQueue ?? 256,
      maxNumBatchedTokens: budget,
      maxModelLen: this.maxModelLen,
    }, this.#blocks);
    this.#builder = new StepBatchBuilder(info, this.maxModelLen);
    const k = options.numSpeculativeTokens ?? 4;
    if (!(Number.isInteger(k) && k >= 1)) throw new RangeError("numSpeculativeTokens must be at least 1");
    // The backend verifies at most maxDrafts per step; a backend built without drafts turns speculation off.
    this.#k = Math.min(k, info.maxDrafts);
    const speculative = options.speculative ?? "none";
    this.#proposer = speculative === "ngram" && this.#k > 0 ? new NgramProposer(options.ngram) : undefined;
    if (speculative === "draft" && !info.proposesDrafts) {
      throw new RangeError("speculative draft needs a backend with a draft model (--backend native --draft-model DIR)");
    }
    if (speculative === "eagle3" && !info.proposesDrafts) {
      throw new RangeError(
        "speculative eagle3 needs a backend with an EAGLE-3 head (--backend native --draft-model DIR)",
      );
    }
    this.#draft = (speculative === "draft" || speculative === "eagle3") && this.#k > 0;
  }

  generate(request: GenerateRequest): ReadableStream<EngineChunk> {
    if (this.#closing) throw new Error("engine is closed");
    const stops = [...request.sampling.stopTokens, ...this.#eos];
    const seq = new Sequence(this.#nextId++, request, this.maxModelLen, stops, this.tokenizer);
    const invalid = this.#validate(seq);
    if (invalid === undefined) this.#scheduler.enqueue(seq, request.admitted === true); // throws QueueFullError before a stream exists
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
    const s = this.#scheduler.stats();
    return {
      running: this.#scheduler.running.length,
      waiting: this.#scheduler.waiting.length,
      kvCacheUsage: s.blocksInUse / s.blocksTotal,
      kvBlocksUsed: s.blocksInUse,
      kvBlocksTotal: s.blocksTotal,
      prefixCacheQueriedTokens: s.prefixQueriedTokens,
      prefixCacheHitTokens: s.prefixHitTokens,
      preemptions: s.preemptions,
      admitted: s.admitted,
      queueTimeSeconds: s.queueTimeMs / 1000,
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
    const V = this.backend.info.vocabSize;
    for (const t of seq.request.promptTokens) {
      if (!Number.isInteger(t) || t < 0 || t >= V) {
        return { reason: "error", message: `prompt token ${t} is outside the vocabulary` };
      }
    }
    if (seq.request.sampling.maxTokens <= 0) return { reason: "length" };
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
      if (this.#scheduler.idle) break;
      let plan: StepPlan<Sequence>;
      try {
        plan = this.#scheduler.schedule((seq, most) => this.#propose(seq, most));
      } catch (e) {
        // Bookkeeping bugs must not strand streams: fail everyone and keep serving later requests.
        const message = e instanceof Error ? e.message : String(e);
        for (const seq of [...this.#scheduler.running, ...this.#scheduler.waiting]) this.#finish(seq, "error", message);
        continue;
      }
      for (const seq of plan.preempted) {
        this.backend.release(seq.id);
        this.#metrics.preemptions++;
      }
      if (plan.entries.length === 0) {
        if (plan.preempted.length > 0) continue;
        // Nothing could be scheduled with nothing running: the pool cannot take the head of the queue.
        const head = this.#scheduler.waiting[0];
        if (head !== undefined) this.#finish(head, "error", "the KV cache cannot hold this request");
        continue;
      }
      try {
        await this.#step(plan);
      } catch (e) {
        // A bug in bookkeeping must not strand streams: fail this batch and keep serving.
        const message = e instanceof Error ? e.message : String(e);
        for (const entry of plan.entries) this.#finish(entry.seq, "error", message);
      }
    }
  }

  /** Drafts the sequence would like to verify this step, at most `most` (the plan may still take fewer). */
  #propose(seq: Sequence, most: number): number {
    seq.proposal = [];
    if (this.#proposer === undefined && !this.#draft) return 0;
    const sp = seq.request.sampling;
    const k = Math.min(this.#k, most, sp.maxTokens - seq.generated - 1, this.maxModelLen - seq.length);
    if (k > 0) {
      if (this.#proposer !== undefined) seq.proposal = this.#proposer.propose(seq.tokens, seq.length, k);
      else if (seq.draftFor === seq.length) seq.proposal = seq.draftProposal.slice(0, k);
    }
    const constraint = seq.request.constraint;
    if (constraint !== undefined && seq.proposal.length > 0) {
      // Drafts the grammar forbids could never be accepted: keep only the allowed prefix, so every mask row of the
      // step allows something and speculation stays lossless.
      // A draft that would end the grammar is left for the target to sample: the row after it would allow nothing.
      let accepted = 0;
      let keep = 0;
      while (accepted < seq.proposal.length && constraint.accept(seq.proposal[accepted]!)) {
        accepted++;
        if (constraint.isTerminated()) break;
        keep = accepted;
      }
      if (accepted > 0) constraint.rollback(accepted);
      seq.proposal = seq.proposal.slice(0, keep);
    }
    return seq.proposal.length;
  }

  /** One engine step over the scheduler's plan: pack the batch, run the backend, then take each sequence's tokens. */
  async #step(plan: StepPlan<Sequence>): Promise<void> {
    const started = performance.now();
    this.#pack(plan);
    this.#metrics.peakRunning = Math.max(this.#metrics.peakRunning, this.#scheduler.running.length);
    if (!await this.#runBackend(plan)) return;
    this.#metrics.backendSeconds += (performance.now() - started) / 1000;
    plan.entries.forEach((e, i) => this.#postprocess(e, i));
    this.#metrics.peakBlocksInUse = Math.max(this.#metrics.peakBlocksInUse, this.#blocks.numUsedBlocks);
    this.#metrics.steps++;
    this.#metrics.stepSeconds += (performance.now() - started) / 1000;
  }

  /** Packs the plan's entries into the step batch: fed tokens, drafts, block tables, sampling, proposals. */
  #pack(plan: StepPlan<Sequence>): void {
    const b = this.#builder;
    b.reset();
    for (const e of plan.entries) {
      const seq = e.seq;
      seq.admitted = true;
      const sp = seq.request.sampling;
      const contextLen = e.start + e.count + e.drafts;
      const propose = this.#draft && e.sample ? this.#lookahead(seq, contextLen) : 0;
      b.add({
        seqId: seq.id,
        tokens: seq.tokens,
        from: e.start,
        to: e.start + e.count,
        drafts: e.drafts > 0 ? seq.proposal.slice(0, e.drafts) : [],
        sample: e.sample,
        blocks: this.#blocks.blockTable(seq.id).slice(0, Math.ceil((contextLen + propose) / this.#blocks.blockSize)),
        ...(this.#blocks.slidingWindow > 0
          ? {
            slidingBlocks: this.#blocks.slidingBlockTable(seq.id).slice(
              0,
              Math.ceil(contextLen / this.#blocks.blockSize),
            ),
          }
          : {}),
        propose,
        ...rowFromRequest(sp, seq.seed),
        ...(sp.logitBias === undefined ? {} : { logitBias: sp.logitBias }),
        promptLength: seq.promptLength,
        ...(seq.request.constraint === undefined ? {} : { constraint: seq.request.constraint }),
      });
    }
  }

  /** Runs the packed batch; a backend failure ends every sequence of the plan with its message (false then). */
  async #runBackend(plan: StepPlan<Sequence>): Promise<boolean> {
    try {
      await this.backend.step(this.#builder.batch(), this.#builder.result);
      return true;
    } catch (e) {
      const message = e instanceof Error ? e.message : String(e);
      for (const entry of plan.entries) this.#finish(entry.seq, "error", message);
      return false;
    }
  }

  /**
   * Takes entry `i`'s share of the step result: commits a prefill chunk, or hands the accepted tokens (and logprobs)
   * to the sequence, advances its grammar, commits the accepted drafts' KV and keeps the draft model's proposal.
   */
  #postprocess(e: StepEntry<Sequence>, i: number): void {
    const result = this.#builder.result;
    const seq = e.seq;
    if (seq.done) return;
    const fedEnd = e.start + e.count;
    if (!e.sample) {
      this.#scheduler.commit(seq, fedEnd);
      return;
    }
    const n = result.counts[i]!;
    if (!(n >= 1 && n <= e.drafts + 1)) throw new Error(`backend accepted ${n} tokens for ${e.drafts} drafts`);
    if (e.drafts > 0) {
      this.#metrics.draftedTokens += e.drafts;
      this.#metrics.acceptedDrafts += n - 1;
      this.#metrics.verifySteps++;
    }
    const { produced, logprobs } = this.#readTokens(i, n, seq.request.sampling.logprobs);
    const constraint = seq.request.constraint;
    if (constraint !== undefined && !advanceConstraint(constraint, produced)) {
      this.#finish(seq, "error", `a sampled token is outside the output grammar (${produced.join(", ")})`);
      return;
    }
    this.#accept(seq, produced, logprobs);
    if (seq.done) return;
    // Accepted drafts are in the KV now; the last accepted token is fed next step.
    this.#scheduler.commit(seq, fedEnd + n - 1);
    const proposed = result.proposedCounts?.[i] ?? 0;
    if (this.#draft && proposed > 0 && result.proposed !== undefined) {
      const KD = this.backend.info.maxDrafts;
      seq.draftProposal = Array.from(result.proposed.subarray(i * KD, i * KD + proposed));
      seq.draftFor = seq.length;
    }
  }

  /** Sequence `i`'s `n` accepted tokens from the step result, with their logprobs when asked (`wanted` ≥ 0). */
  #readTokens(i: number, n: number, wanted: number): { produced: number[]; logprobs: TokenLogprob[] } {
    const result = this.#builder.result;
    const W = this.backend.info.maxDrafts + 1;
    const maxTop = this.backend.info.maxTopLogprobs;
    const nTop = Math.min(wanted, maxTop);
    const produced: number[] = [];
    const logprobs: TokenLogprob[] = [];
    for (let r = 0; r < n; r++) {
      const slot = i * W + r;
      produced.push(result.tokens[slot]!);
      if (nTop >= 0) {
        const top: { id: number; logprob: number }[] = [];
        for (let j = 0; j < nTop; j++) {
          top.push({ id: result.topIds[slot * maxTop + j]!, logprob: result.topLogprobs[slot * maxTop + j]! });
        }
        logprobs.push({ logprob: result.logprobs[slot]!, top });
      }
    }
    return { produced, logprobs };
  }

  /**
   * How many proposals a sampled entry reaching `contextLen` asks the draft model for: what its next step could
   * verify, and no more lookahead slots than the pool can give without preempting (a partly full last block counts).
   */
  #lookahead(seq: Sequence, contextLen: number): number {
    const sp = seq.request.sampling;
    const k = Math.min(this.#k, this.maxModelLen - contextLen, sp.maxTokens - seq.generated - 1);
    if (k <= 0) return 0;
    if (this.#blocks.ensureCapacity(seq.id, contextLen + k)) return k;
    const held = this.#blocks.blockTable(seq.id).length * this.#blocks.blockSize;
    return Math.max(0, Math.min(k, held - contextLen));
  }

  /** Runs produced tokens through limits and stop rules; emits this step's chunk and, if it ends, the finish. */
  #accept(seq: Sequence, produced: readonly number[], logprobs: readonly TokenLogprob[]): void {
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
      if (wantLogprobs) seq.heldLogprobs.push(logprobs[k]!);
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
    this.#metrics.cachedPromptTokens += seq.cachedPromptTokens;
    seq.send({
      type: "finish",
      reason,
      promptTokens: seq.promptLength,
      outputTokens: seq.generated,
      ...(seq.admitted ? { cachedTokens: seq.cachedPromptTokens } : {}),
      ...(message !== undefined ? { message } : {}),
    });
    try {
      seq.controller.close();
    } catch {
      // already cancelled by the consumer
    }
  }
}

/** A ready engine over a ready backend. */
export function createEngine(backend: Backend, options: EngineOptions): LlmEngine {
  return new LlmEngine(backend, options);
}
