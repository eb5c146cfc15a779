/**
 * A test/bench engine that emits a fixed token list in steps of exactly K tokens. With `stepMs` > 0 all sequences
 * advance together on one shared clock, one step every `stepMs` milliseconds, like a batching engine's step loop
 * (a sequence whose consumer was late waits for the next tick); with 0 each sequence steps as fast as it is pulled.
 * Unlike the ScriptedEngine's seeded chunkings the step size is exact, so a benchmark can state "4 tokens per
 * step". Honours abort (finish "abort" at the next step).
 */
import type { Engine, EngineChunk, EngineStats, GenerateRequest } from "../../engine/engine.ts";
import type { Tokenizer } from "../../engine/tokenizer.ts";

export interface PacedEngineOptions {
  readonly tokenizer: Tokenizer;
  readonly tokens: readonly number[];
  readonly tokensPerStep: number;
  readonly stepMs: number;
  readonly modelId: string;
  readonly maxModelLen?: number;
}

export class PacedEngine implements Engine {
  readonly modelId: string;
  readonly tokenizer: Tokenizer;
  readonly maxModelLen: number;
  readonly #o: PacedEngineOptions;
  #running = 0;
  #waiters: (() => void)[] = [];
  #ticking = false;

  constructor(options: PacedEngineOptions) {
    this.#o = options;
    this.modelId = options.modelId;
    this.tokenizer = options.tokenizer;
    this.maxModelLen = options.maxModelLen ?? 1 << 20;
  }

  generate(request: GenerateRequest): ReadableStream<EngineChunk> {
    const { tokens, tokensPerStep, stepMs } = this.#o;
    const total = Math.min(tokens.length, request.sampling.maxTokens);
    let at = 0;
    let finished = false;
    this.#running++;
    const end = (controller: ReadableStreamDefaultController<EngineChunk>, reason: "stop" | "length" | "abort") => {
      finished = true;
      this.#running--;
      controller.enqueue({ type: "finish", reason, promptTokens: request.promptTokens.length, outputTokens: at });
      controller.close();
    };
    return new ReadableStream<EngineChunk>({
      pull: async (controller) => {
        if (stepMs > 0 && at > 0) await this.#nextTick();
        if (request.signal?.aborted) return end(controller, "abort");
        if (at >= total) return end(controller, total < tokens.length ? "length" : "stop");
        const step = tokens.slice(at, Math.min(total, at + tokensPerStep));
        at += step.length;
        controller.enqueue({ type: "step", tokens: step });
      },
      cancel: () => {
        if (!finished) this.#running--;
        finished = true;
      },
    }, { highWaterMark: 0 });
  }

  /** Resolves at the next shared step; the clock runs while anyone waits and corrects its own drift. */
  #nextTick(): Promise<void> {
    const tick = new Promise<void>((resolve) => this.#waiters.push(resolve));
    if (!this.#ticking) {
      this.#ticking = true;
      const stepMs = this.#o.stepMs;
      let due = performance.now() + stepMs;
      const fire = () => {
        const waiters = this.#waiters;
        this.#waiters = [];
        for (const wake of waiters) wake();
        if (this.#running === 0 && this.#waiters.length === 0) {
          this.#ticking = false;
          return;
        }
        due += stepMs;
        setTimeout(fire, Math.max(0, due - performance.now()));
      };
      setTimeout(fire, stepMs);
    }
    return tick;
  }

  stats(): EngineStats {
    return { running: this.#running, waiting: 0, kvCacheUsage: 0 };
  }

  close(): Promise<void> {
    return Promise.resolve();
  }
}
