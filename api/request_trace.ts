/**
 * What the access log line of one request reports besides method, route and status: the response id, token
 * counts, and — for a response whose body outlives the handler (SSE) — when that body really ended, so the logged
 * duration is the request's, not the time to its headers.
 */
export interface GenerationTotals {
  readonly promptTokens: number;
  readonly outputTokens: number;
}

export class RequestTrace {
  responseId: string | null = null;
  inputTokens: number | null = null;
  outputTokens: number | null = null;
  #bodyEnd: Promise<void> | null = null;

  /** Records a generation's totals when it ends. */
  count(done: Promise<GenerationTotals>): void {
    done.then((totals) => {
      this.inputTokens = totals.promptTokens;
      this.outputTokens = totals.outputTokens;
    });
  }

  /** The response body streams on after the handler returned; `end` resolves when it is done. */
  streamsUntil(end: Promise<unknown>): void {
    this.#bodyEnd = end.then(() => {}, () => {});
  }

  /** Resolves when the response body is done (at once for a body written in one piece). */
  get bodyEnd(): Promise<void> {
    return this.#bodyEnd ?? Promise.resolve();
  }

  get streaming(): boolean {
    return this.#bodyEnd !== null;
  }
}
