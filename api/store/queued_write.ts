import type { StoredEvent } from "./response_store.ts";

/** A queued `appendLater`: events, the snapshot they changed (if any), where a failure is reported. */
export interface QueuedWrite {
  readonly id: string;
  readonly events: readonly StoredEvent[];
  readonly snapshot: Record<string, unknown> | undefined;
  readonly onError: (error: unknown) => void;
}
