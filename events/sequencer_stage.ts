/**
 * The only code that sets `sequence_number`: one counter per response, 0, 1, 2… in emission order. Numbers are
 * assigned at emission, never precomputed by builders, and only on the top-level event (nested items and
 * responses never carry one).
 */
import type { ResponseStreamEvent, UnsequencedEvent } from "./types.ts";

export class Sequencer {
  #next: number;

  /** `first` > 0 continues a stored event log whose last event was numbered `first - 1`. */
  constructor(first = 0) {
    if (!(Number.isInteger(first) && first >= 0)) throw new RangeError("first sequence number must be a whole number");
    this.#next = first;
  }

  /** The number the next event will get (= events numbered so far). */
  get next(): number {
    return this.#next;
  }

  /**
   * Numbers the events in place and returns the same array as numbered events: the sequencer takes ownership of the
   * array and its events (no copy per event, which was a large share of a step's allocation). `sequence_number` is
   * added as the last key, so JSON and SSE bytes have it last, as a copy `{ ...event, sequence_number }` would.
   * Stamping an event twice is a caller bug and throws.
   */
  stamp(events: UnsequencedEvent[]): ResponseStreamEvent[] {
    for (let i = 0; i < events.length; i++) {
      const e = events[i] as { sequence_number?: number };
      if (e.sequence_number !== undefined) throw new Error("event already has a sequence number");
      e.sequence_number = this.#next++;
    }
    return events as unknown as ResponseStreamEvent[];
  }
}

/** The sequence stage as a stream: one numbered array per input array. */
export function sequencerStage(): TransformStream<UnsequencedEvent[], ResponseStreamEvent[]> {
  const core = new Sequencer();
  return new TransformStream({
    transform(events, controller) {
      controller.enqueue(core.stamp(events));
    },
  });
}
