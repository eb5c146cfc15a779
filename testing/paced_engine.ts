/**
 * A test/bench engine that emits steps of exactly K tokens. With `stepMs` > 0 all sequences advance together on
 * one shared clock, one step every `stepMs` milliseconds, like a batching engine's step loop (a sequence whose
 * consumer was late waits for the next tick); with 0 each sequence steps as fast as it is pulled. Unlike the
 * ScriptedEngine's seeded chunkings the step size is exact, so a benchmark can state "4 tokens per step". Honours
 * abort (finish "abort" at the next step).
 *
 * Stamped mode makes latency measurable across processes: every body step starts with the 3-digit token of the
 * wall-clock millisecond (mod 1000) at which the step was produced, so a client on the same machine can compute
 * each event's latency from the text it receives.
 */
import type { Engine, EngineChunk, EngineStats, GenerateRequest } from "../engine/engine.ts";
import type { Tokenizer } from "../checkpoint/tokenizer.ts";

/** The answer: `head` as the first step, then `steps` steps of [stamp, filler × (K-1)], then `tail`. */
export interface StampedScript {
  readonly head: readonly number[];
  /** Token id of "000".."999" by value. */
  readonly digits: readonly number[];
  readonly filler: number;
  readonly tail: readonly number[];
  readonly steps: number;
}

export interface PacedEngineOptions {
  readonly tokenizer: Tokenizer;
  /** A fixed answer cut into steps of K tokens, or a stamped script. */
  readonly script: readonly number[] | StampedScript;
  readonly tokensPerStep: number;
  readonly stepMs: number;
  readonly modelId: string;
  readonly maxModelLen?: number;
}

/** Wall-clock milliseconds, comparable between processes on one machine. */
export function wallMs(): number {
  return performance.timeOrigin + performance.now();
}

/** Builds the stamped script over a tokenizer whose "000".."999" and " token" are single tokens (o200k). */
export function stampedScript(tok: Tokenizer, steps: number): StampedScript {
  const one = (text: string) => {
    const ids = tok.encodeOrdinary(text);
    if (ids.length !== 1) throw new TypeError(`${JSON.stringify(text)} is not a single token`);
    return ids[0]!;
  };
  return {
    head: tok.encode("<|channel|>final<|message|>"),
    digits: Array.from({ length: 1000 }, (_, i) => one(String(i).padStart(3, "0"))),
    filler: one(" token"),
    tail: tok.encode("<|return|>"),
    steps,
  };
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
    const { tokensPerStep, stepMs } = this.#o;
    const next = this.#stepper(this.#o.script, tokensPerStep);
    let sent = 0;
    let step = 0;
    let finished = false;
    this.#running++;
    const end = (controller: ReadableStreamDefaultController<EngineChunk>, reason: "stop" | "length" | "abort") => {
      finished = true;
      this.#running--;
      controller.enqueue({ type: "finish", reason, promptTokens: request.promptTokens.length, outputTokens: sent });
      controller.close();
    };
    return new ReadableStream<EngineChunk>({
      pull: async (controller) => {
        if (stepMs > 0 && step > 0) await this.#nextTick();
        if (request.signal?.aborted) return end(controller, "abort");
        const tokens = next(step++);
        if (tokens === null) return end(controller, "stop");
        const room = request.sampling.maxTokens - sent;
        if (room <= 0) return end(controller, "length");
        const cut = tokens.length > room ? tokens.slice(0, room) : tokens;
        sent += cut.length;
        controller.enqueue({ type: "step", tokens: cut });
      },
      cancel: () => {
        if (!finished) this.#running--;
        finished = true;
      },
    }, { highWaterMark: 0 });
  }

  /** Step i's tokens (null after the last step). */
  #stepper(script: PacedEngineOptions["script"], k: number): (i: number) => readonly number[] | null {
    if (Array.isArray(script)) {
      const fixed = script as readonly number[];
      return (i) => (i * k < fixed.length ? fixed.slice(i * k, (i + 1) * k) : null);
    }
    const s = script as StampedScript;
    const filler = Array.from({ length: k - 1 }, () => s.filler);
    return (i) => {
      if (i === 0) return s.head;
      if (i <= s.steps) return [s.digits[Math.floor(wallMs()) % 1000]!, ...filler];
      return i === s.steps + 1 ? s.tail : null;
    };
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
