/**
 * Follows one response's events as they are produced: keeps the latest Response snapshot and the finished output
 * items, and (when `store` is on) persists the event log and snapshot. Events before the terminal one are queued
 * for the store's batched commit (one transaction for every stream's step, after the step's bytes went out); the
 * terminal batch commits everything queued **before** it is sent, so a client that saw the terminal event can
 * always retrieve it, even after the server is killed.
 */
import { responseFailed } from "../../events/builders.ts";
import { Sequencer } from "../../events/sequencer_stage.ts";
import type { OutputItem, Response, ResponseStreamEvent } from "../../events/types.ts";
import type { ResponseStore } from "../store/response_store.ts";

const TERMINAL = new Set(["response.completed", "response.incomplete", "response.failed"]);

export class ResponseRecorder {
  readonly #store: ResponseStore | null;
  readonly #id: string;
  #snapshot: Response;
  readonly #output: OutputItem[] = [];
  #ended = false;
  /** The last sequence number recorded, so a cancellation's terminal event follows it. */
  #lastSequence = -1;
  readonly #onEnd: (() => Promise<void> | void) | undefined;
  readonly #onStoreError: (error: unknown) => void;

  /**
   * `onEnd` runs after the terminal event or the cancellation was recorded (and, for a terminal event, before it is
   * sent: `record` waits for it). A failing store write is reported to `onStoreError` and does not throw: the
   * client's stream must not break because persistence did.
   */
  constructor(
    initial: Response,
    store: ResponseStore | null,
    hooks: { onEnd?: () => Promise<void> | void; onStoreError?: (error: unknown) => void } = {},
  ) {
    this.#snapshot = initial;
    this.#store = store;
    this.#id = initial.id;
    this.#onEnd = hooks.onEnd;
    this.#onStoreError = hooks.onStoreError ?? (() => {});
  }

  get snapshot(): Response {
    return this.#snapshot;
  }

  /** True after a terminal event or a cancellation was recorded. */
  get ended(): boolean {
    return this.#ended;
  }

  /**
   * Records a batch of the response's events. Once the response ended (a terminal event, or a cancellation decided
   * from its cause) later events are ignored: a stream cut by its client must not turn "cancelled" into "failed"
   * when the cut engine stream's end is parsed afterwards.
   *
   * Returns a promise only for the batch that ends the response: it resolves once everything recorded is committed
   * and `onEnd` ran, and the terminal event may then be sent.
   */
  record(events: readonly ResponseStreamEvent[]): Promise<void> | undefined {
    if (this.#ended) return undefined;
    let changed = false;
    for (const event of events) {
      this.#lastSequence = event.sequence_number;
      switch (event.type) {
        case "response.output_item.done":
          this.#output[event.output_index] = event.item;
          break;
        case "response.created":
        case "response.queued":
        case "response.in_progress":
        case "response.completed":
        case "response.incomplete":
        case "response.failed":
          this.#snapshot = event.response;
          changed = true;
          if (TERMINAL.has(event.type)) this.#ended = true;
          break;
        default:
          break;
      }
    }
    if (this.#store !== null) {
      const snapshot = changed ? this.#snapshot as unknown as Record<string, unknown> : undefined;
      this.#store.appendLater(this.#id, events, snapshot, this.#onStoreError);
    }
    return this.#ended ? this.#finish() : undefined;
  }

  async #finish(): Promise<void> {
    try {
      await this.#store?.flush();
    } catch (error) {
      this.#onStoreError(error);
    }
    await this.#onEnd?.();
  }

  /**
   * The generation stopped without a terminal event (client gone, cancelled): the response is "cancelled", with the
   * items that were finished. No-op once ended, so a late cancel never overwrites a completed response.
   *
   * The stored log gets a terminal event too, so a replay ends like every other stream. The spec has no cancellation
   * event: it is a `response.failed` carrying the cancelled response (status "cancelled", as GET reports it).
   */
  async cancel(final?: Response): Promise<Response> {
    if (this.#ended) return this.#snapshot;
    this.#ended = true;
    this.#snapshot = final ?? { ...this.#snapshot, status: "cancelled", output: this.#output.filter(Boolean) };
    // The snapshot and the terminal event in one write (one transaction): a reader never sees one without the other.
    const terminal = new Sequencer(this.#lastSequence + 1).stamp([responseFailed(this.#snapshot)]);
    try {
      this.#store?.appendLater(
        this.#id,
        terminal,
        this.#snapshot as unknown as Record<string, unknown>,
        this.#onStoreError,
      );
      await this.#store?.flush();
    } catch (error) {
      this.#onStoreError(error);
    }
    await this.#onEnd?.();
    return this.#snapshot;
  }
}
