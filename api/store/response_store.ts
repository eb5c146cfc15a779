/**
 * The store behind every stateful Responses feature: stored responses (latest snapshot, input items, the chain a
 * `previous_response_id` continues, the append-only event log `GET ?stream=true` replays), the Conversations API's
 * conversations (`conversations`), background work and the owner leases that let several servers share one store, and
 * the deployment's reasoning key. Two implementations pass the same conformance suite: the embedded SQLite file
 * (sqlite_store.ts, the default) and PostgreSQL (postgres_store.ts, `--store postgres://…`).
 *
 * Invariants every implementation keeps:
 * - The event log is append-only and keyed by (response id, sequence_number); a replay returns the stored payloads
 *   with their original numbering. A log that has its terminal event takes no more events, so a response never gets
 *   two terminal events, whichever server ends it.
 * - Every write method has committed when its promise resolves, except `appendLater`'s: those are committed together
 *   at the next batched commit or `flush()`. A caller that needs an event durable before it is sent (a terminal
 *   event) awaits `flush()`.
 * - A server reads its own writes: reads, deletes, updates and direct appends first commit the queued writes, so
 *   per-response order is the order of the calls.
 * - Each store has an owner id; a response row records the owner generating it, and each owner keeps a lease. A
 *   server fails (once, atomically) in-flight rows whose owner's lease expired, and never touches a live owner's.
 * - `subscribe` listeners hear of every change to a response's log or snapshot made through this store; with
 *   `crossServerNotify` they also hear of changes made by every other server on the same store.
 * - A cancellation asked of any server reaches the owner's `onCancelRequest` listener.
 */
import type { ConversationStore } from "./conversation_store.ts";
import type { PageQuery } from "../pagination.ts";

export interface StoredEvent {
  readonly sequence_number: number;
  readonly type: string;
}

export interface InputItemsPage {
  readonly data: Record<string, unknown>[];
  readonly first_id: string | null;
  readonly last_id: string | null;
  readonly has_more: boolean;
}

export interface StoreOptions {
  /** This server's owner id (default: a random one). */
  readonly owner?: string;
  /** How long an owner's heartbeat stays valid, ms. Default 15 s. */
  readonly leaseMs?: number;
  /** Stored responses older than this many seconds are deleted by `sweep()` (0: kept forever). */
  readonly ttlSeconds?: number;
  /** Epoch milliseconds (tests). */
  readonly clock?: () => number;
  /** Told when a lease renewal fails and when this server takes over another's in-flight responses (for the log). */
  readonly onLease?: (event: LeaseEvent) => void;
}

/** What a server's lease keeping reports: both are rare, and an operator wants to see them. */
export type LeaseEvent =
  /** A heartbeat that did not reach the database; the next one is tried a third of a lease later. */
  | { readonly kind: "renewal_failed"; readonly error: string }
  /** In-flight responses of `owner` failed here: its lease was last renewed `renewedMsAgo` ago (null: never seen). */
  | {
    readonly kind: "took_over";
    readonly owner: string | null;
    readonly ids: readonly string[];
    readonly renewedMsAgo: number | null;
  };

export interface ResponseStore {
  /** This server's owner id. */
  readonly owner: string;
  /** The Conversations API's conversations and their items. */
  readonly conversations: ConversationStore;
  /** Whether other servers' writes wake this store's `subscribe` listeners (else a tail of theirs must poll). */
  readonly crossServerNotify: boolean;

  /** Commits queued writes, gives the lease back and closes the connection. */
  close(): Promise<void>;
  /**
   * Takes this server's lease and keeps it (a heartbeat every third of the lease, failing dead owners' in-flight rows
   * and sweeping expired responses at each). Resolves with how many rows start-up recovery failed.
   */
  startLease(): Promise<number>;
  heartbeat(): Promise<void>;
  /** Whether `owner` holds a live lease (this server always does). */
  ownerAlive(owner: string | null): Promise<boolean>;
  /** The owner recorded for a response (null for unknown ids or rows older than owners). */
  ownerOf(id: string): Promise<string | null>;
  /** Fails every in-flight row whose owner's lease expired; resolves with how many. */
  recoverOrphans(): Promise<number>;
  /**
   * Marks a queued/in_progress response failed with `error` and closes its log with `response.failed`, atomically
   * and only if it is still in flight. Resolves with the failed response, or undefined if it was not in flight.
   */
  failInFlight(id: string, error: { code: string; message: string }): Promise<Record<string, unknown> | undefined>;
  /** Deletes responses past the TTL that are not in flight (a bounded batch); resolves with how many. */
  sweep(batch?: number): Promise<number>;

  create(
    response: Record<string, unknown>,
    inputItems: readonly Record<string, unknown>[],
    conversation: unknown,
  ): Promise<void>;
  /** Appends events in order; a terminal event marks the response terminal. No-op for a deleted or ended log. */
  appendEvents(id: string, events: readonly StoredEvent[]): Promise<void>;
  /** Replaces the snapshot and indexes its output items for `item_reference`. No-op for a deleted response. */
  update(id: string, response: Record<string, unknown>): Promise<void>;
  /** Queues events (and the snapshot they produced) for the next batched commit; a failure goes to `onError`. */
  appendLater(
    id: string,
    events: readonly StoredEvent[],
    snapshot: Record<string, unknown> | undefined,
    onError: (error: unknown) => void,
  ): void;
  /** Commits every queued write. */
  flush(): Promise<void>;

  /** A stored item by id for `item_reference`: an output item first, else the latest input item with that id. */
  item(itemId: string): Promise<Record<string, unknown> | undefined>;
  get(id: string): Promise<{ response: Record<string, unknown>; conversation: unknown } | undefined>;
  /** Every item before response `id`'s output, oldest first; undefined for an unknown id. */
  conversationItems(id: string): Promise<Record<string, unknown>[] | undefined>;
  isTerminal(id: string): Promise<boolean>;
  /** Deletes a response, first writing its history into the responses that continue it. */
  delete(id: string): Promise<boolean>;
  /** Cursor pagination over a response's input items; undefined for an unknown response. */
  listInputItems(
    id: string,
    query: PageQuery,
  ): Promise<InputItemsPage | undefined>;
  eventsAfter(id: string, startingAfter: number): Promise<StoredEvent[]>;
  /** Calls `listener` after each change to response `id`; returns the unsubscribe function. */
  subscribe(id: string, listener: () => void): () => void;

  /** Asks whichever server generates `id` to stop it (that server's `onCancelRequest` listeners hear of it). */
  requestCancel(id: string): Promise<void>;
  /** Registers the listener that stops this server's generation of a response when a cancellation is asked. */
  onCancelRequest(listener: (id: string) => void): void;

  /**
   * The deployment's reasoning key: the one stored, or else `fresh`, stored now. When several servers start at once
   * the first to store wins and every server gets that key.
   */
  reasoningKey(fresh: Uint8Array): Promise<Uint8Array>;
}

export const TERMINAL_TYPES: ReadonlySet<string> = new Set([
  "response.completed",
  "response.incomplete",
  "response.failed",
]);

/** What a response cut off by its owner's death is stored as. */
export const ORPHANED = {
  code: "server_error",
  message: "The server generating this response stopped before it finished",
};

/** A conversation as stored: v1 is the whole history (older rows, and rows whose previous response is gone). */
export type StoredConversationRow =
  | { readonly version: 1; readonly items: readonly Record<string, unknown>[] }
  | { readonly version: 2; readonly previous: string | null; readonly items: readonly Record<string, unknown>[] };

export function responseId(response: Record<string, unknown>): string {
  const id = response.id;
  if (typeof id !== "string" || id === "") throw new TypeError("stored response needs a non-empty string id");
  return id;
}

/** The id an input item is stored under: its own, else one made from the response id and its position. */
export function inputItemId(responseId: string, item: Record<string, unknown>, position: number): string {
  return typeof item.id === "string" && item.id !== "" ? item.id : `${responseId}_item_${position}`;
}

/** A snapshot's output items that have an id, which `item_reference` can name; in output order. */
export function referenceableOutputItems(response: Record<string, unknown>): { itemId: string; item: unknown }[] {
  const output = Array.isArray(response.output) ? response.output as unknown[] : [];
  const items: { itemId: string; item: unknown }[] = [];
  for (const item of output) {
    const itemId = (item as { id?: unknown } | null)?.id;
    if (typeof itemId === "string" && itemId !== "") items.push({ itemId, item });
  }
  return items;
}

/** The id of the response a stored conversation continues (null for v1 rows and chain starts). */
export function previousOf(conversation: unknown): string | null {
  const row = conversation as { version?: unknown; previous?: unknown } | null;
  return row?.version === 2 && typeof row.previous === "string" ? row.previous : null;
}

/**
 * The items before the output of the first link of `chain` (newest first, each link's stored conversation and
 * response), oldest first: each link's items, then the output of the link it continues.
 */
export function chainItems(
  chain: readonly { conversation: StoredConversationRow | null; response: Record<string, unknown> }[],
): Record<string, unknown>[] {
  const items: Record<string, unknown>[] = [];
  for (let i = chain.length - 1; i >= 0; i--) {
    const link = chain[i]!;
    if (i < chain.length - 1) {
      const output = chain[i + 1]!.response.output;
      if (Array.isArray(output)) items.push(...output as Record<string, unknown>[]);
    }
    if (link.conversation !== null) items.push(...link.conversation.items);
  }
  return items;
}
