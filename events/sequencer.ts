/**
 * The only code that sets `sequence_number`: one counter per response, 0, 1, 2… in emission order. Numbers are
 * assigned at emission, never precomputed by builders, and only on the top-level event (nested items and
 * responses never carry one).
 */
import type { ResponseStreamEvent, UnsequencedEvent } from "./types.ts";

export class Sequencer {
  #next = 0;

  /** The number the next event will get (= events numbered so far). */
  get next(): number {
    return this.#next;
  }

  stamp(events: readonly UnsequencedEvent[]): ResponseStreamEvent[] {
    const out: ResponseStreamEvent[] = new Array(events.length);
    for (let i = 0; i < events.length; i++) {
      out[i] = { ...events[i]!, sequence_number: this.#next++ } as ResponseStreamEvent;
    }
    return out;
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
