/**
 * `GET /v1/responses/{id}?stream=true&starting_after=N`: replays a stored response's event log after N and, while
 * the response is still running, tails it live. The stream always ends: after the terminal event, or when the
 * response was cancelled (there is no cancellation event in the spec), deleted, or left unfinished by a previous
 * server process (status still running but nobody generating it). A tail of a response another server generates
 * is woken by the store's cross-server notifications where it has them (PostgreSQL), and polls where it has not
 * (several servers on one SQLite file).
 */
import type { ResponseStore } from "../store/response_store.ts";
import { StoreUnavailableError } from "../store/store_unavailable_error.ts";
import { SseEncoder } from "../../events/sse_encoder.ts";
import type { ResponseStreamEvent } from "../../events/types.ts";

/** How often a waiting tail of another server's response looks for its events (SQLite: no notifications). */
const POLL_MS = 250;

/** Retries of a tail whose database is unreachable: after this long, doubling up to RETRY_MAX_MS. */
const RETRY_MIN_MS = 100;
const RETRY_MAX_MS = 2000;

/** An unreachable database ends nothing: the tail reads again once it is back. */
function notFinishedIfUnavailable(error: unknown): boolean {
  if (error instanceof StoreUnavailableError) return false;
  throw error;
}

/** Whether anyone may still append to the log (a live generation, here or on another live server). */
export type IsLive = (id: string) => Promise<boolean>;

/** Whether nobody will append to `id`'s log any more: gone, terminal, settled, or its generation dead. */
export async function logEnded(store: ResponseStore, id: string, isLive: IsLive): Promise<boolean> {
  if (await store.isTerminal(id)) return true;
  const stored = await store.get(id);
  if (stored === undefined) return true;
  const status = stored.response.status;
  if (status !== "queued" && status !== "in_progress") return true;
  return !await isLive(id);
}

export function tailEvents(
  store: ResponseStore,
  id: string,
  startingAfter: number,
  isLive: IsLive,
  onEnd?: () => void,
): ReadableStream<Uint8Array> {
  // This process's writes wake the tail through the store's listeners, and so do other servers' where the store
  // notifies across servers; otherwise another server's writes can only be polled for.
  let poll: boolean | undefined;
  const encoder = new SseEncoder();
  let cursor = startingAfter;
  let version = 0;
  let wake: (() => void) | null = null;
  let unsubscribe: (() => void) | null = store.subscribe(id, () => {
    version++;
    wake?.();
  });
  const stop = () => {
    unsubscribe?.();
    unsubscribe = null;
    wake?.();
    onEnd?.();
  };
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      if (poll === undefined) {
        const owner = store.crossServerNotify ? null : await store.ownerOf(id);
        poll = owner !== null && owner !== store.owner;
      }
      for (let retry = RETRY_MIN_MS;;) {
        const seen = version;
        let events;
        try {
          events = await store.eventsAfter(id, cursor);
        } catch (error) {
          // The database is away: the tail waits for it (the client's stream stays open) and reads on.
          if (!(error instanceof StoreUnavailableError) || unsubscribe === null) throw error;
          await new Promise((resolve) => setTimeout(resolve, retry));
          retry = Math.min(RETRY_MAX_MS, retry * 2);
          continue;
        }
        retry = RETRY_MIN_MS;
        if (events.length > 0) {
          cursor = events[events.length - 1]!.sequence_number;
          // Stored events are the exact objects that were streamed; only the type brand is missing.
          controller.enqueue(encoder.encode(events as unknown as ResponseStreamEvent[]));
          return;
        }
        if (unsubscribe === null || await logEnded(store, id, isLive).catch(notFinishedIfUnavailable)) {
          stop();
          controller.close();
          return;
        }
        // Wait for the next append/update unless one already happened since `seen` was read.
        if (version === seen) {
          let timer: ReturnType<typeof setTimeout> | undefined;
          await new Promise<void>((resolve) => {
            wake = resolve;
            if (poll) timer = setTimeout(resolve, POLL_MS);
          });
          clearTimeout(timer);
        }
        wake = null;
      }
    },
    cancel() {
      stop();
    },
  }, { highWaterMark: 0 });
}
