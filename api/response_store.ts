/**
 * Durable storage for stored responses: the latest response snapshot, its input items, the conversation needed to
 * continue it (`previous_response_id`), and the append-only event log that `GET ?stream=true` replays.
 *
 * Invariants:
 * - The event log is append-only and keyed by (response id, sequence_number), so a replay returns byte-identical
 *   payloads with the original numbering.
 * - Every write is committed before the call returns (WAL, synchronous=NORMAL survives a killed process), except
 *   `appendLater`'s: those are committed together, one transaction for all responses, on the next turn of the
 *   event loop (after that turn's network writes) or at the next `flush()`. A caller that needs an event on disk
 *   before it is sent (a terminal event) calls `flush()`.
 * - This process always reads its own writes: every read, delete, update and direct append commits the queued
 *   writes first, so per-response order is the order of the calls.
 * - Listeners are in-memory only: they tell tailing readers that new events exist; the data comes from SQLite.
 */
import { DatabaseSync, type StatementSync } from "node:sqlite";

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

/** A queued `appendLater`: events, the snapshot they changed (if any), where a failure is reported. */
interface QueuedWrite {
  readonly id: string;
  readonly events: readonly StoredEvent[];
  readonly snapshot: Record<string, unknown> | undefined;
  readonly onError: (error: unknown) => void;
}

const TERMINAL_TYPES = new Set(["response.completed", "response.incomplete", "response.failed"]);

const SCHEMA = `
CREATE TABLE IF NOT EXISTS responses (
  id TEXT PRIMARY KEY,
  response TEXT NOT NULL,
  conversation TEXT NOT NULL,
  terminal INTEGER NOT NULL DEFAULT 0,
  created_at INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS input_items (
  response_id TEXT NOT NULL,
  position INTEGER NOT NULL,
  item_id TEXT NOT NULL,
  item TEXT NOT NULL,
  PRIMARY KEY (response_id, position)
);
CREATE INDEX IF NOT EXISTS input_items_by_item ON input_items (item_id);
CREATE TABLE IF NOT EXISTS output_items (
  item_id TEXT PRIMARY KEY,
  response_id TEXT NOT NULL,
  item TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS events (
  response_id TEXT NOT NULL,
  seq INTEGER NOT NULL,
  event TEXT NOT NULL,
  PRIMARY KEY (response_id, seq)
);
`;

export class ResponseStore {
  readonly #db: DatabaseSync;
  readonly #listeners = new Map<string, Set<() => void>>();
  readonly #insertResponse: StatementSync;
  readonly #insertItem: StatementSync;
  readonly #insertEvent: StatementSync;
  readonly #updateResponse: StatementSync;
  readonly #markTerminal: StatementSync;
  readonly #selectResponse: StatementSync;
  readonly #responseExists: StatementSync;
  readonly #selectEventsAfter: StatementSync;
  readonly #selectItems: StatementSync;
  readonly #upsertOutputItem: StatementSync;
  readonly #selectOutputItem: StatementSync;
  readonly #selectInputItem: StatementSync;
  #queue: QueuedWrite[] = [];
  #flushTimer: ReturnType<typeof setTimeout> | undefined;
  #inTransaction = false;

  private constructor(db: DatabaseSync) {
    this.#db = db;
    db.exec("PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; PRAGMA busy_timeout = 5000;");
    db.exec(SCHEMA);
    this.#insertResponse = db.prepare(
      "INSERT INTO responses (id, response, conversation, terminal, created_at) VALUES (?, ?, ?, 0, ?)",
    );
    this.#insertItem = db.prepare("INSERT INTO input_items (response_id, position, item_id, item) VALUES (?, ?, ?, ?)");
    this.#insertEvent = db.prepare("INSERT INTO events (response_id, seq, event) VALUES (?, ?, ?)");
    this.#updateResponse = db.prepare("UPDATE responses SET response = ? WHERE id = ?");
    this.#markTerminal = db.prepare("UPDATE responses SET terminal = 1 WHERE id = ?");
    this.#selectResponse = db.prepare("SELECT response, conversation, terminal FROM responses WHERE id = ?");
    this.#responseExists = db.prepare("SELECT 1 FROM responses WHERE id = ?");
    this.#selectEventsAfter = db.prepare("SELECT event FROM events WHERE response_id = ? AND seq > ? ORDER BY seq");
    this.#selectItems = db.prepare("SELECT item_id, item FROM input_items WHERE response_id = ? ORDER BY position");
    this.#upsertOutputItem = db.prepare(
      "INSERT OR REPLACE INTO output_items (item_id, response_id, item) VALUES (?, ?, ?)",
    );
    this.#selectOutputItem = db.prepare("SELECT item FROM output_items WHERE item_id = ?");
    this.#selectInputItem = db.prepare(
      "SELECT item_id, item FROM input_items WHERE item_id = ? ORDER BY rowid DESC LIMIT 1",
    );
  }

  /** Opens (creating if needed) a store at a file path, or an in-memory one for ":memory:". */
  static open(path: string): ResponseStore {
    return new ResponseStore(new DatabaseSync(path));
  }

  close(): void {
    this.flush();
    this.#listeners.clear();
    this.#db.close();
  }

  create(
    response: Record<string, unknown>,
    inputItems: readonly Record<string, unknown>[],
    conversation: unknown,
  ): void {
    const id = responseId(response);
    this.#transaction(() => {
      this.#insertResponse.run(id, JSON.stringify(response), JSON.stringify(conversation ?? null), Date.now());
      inputItems.forEach((item, position) => {
        const itemId = typeof item.id === "string" && item.id !== "" ? item.id : `${id}_item_${position}`;
        this.#insertItem.run(id, position, itemId, JSON.stringify(item));
      });
    });
  }

  /**
   * Appends events in order; a terminal event marks the response terminal in the same transaction. Like `update`, a
   * no-op once the response was deleted: its generation may still be ending, and must not leave rows behind.
   */
  appendEvents(id: string, events: readonly StoredEvent[]): void {
    this.flush();
    if (events.length === 0) return;
    let terminal = false;
    this.#transaction(() => {
      if (this.#responseExists.get(id) === undefined) return;
      for (const event of events) {
        this.#insertEvent.run(id, event.sequence_number, JSON.stringify(event));
        if (TERMINAL_TYPES.has(event.type)) terminal = true;
      }
      if (terminal) this.#markTerminal.run(id);
    });
    this.#notify(id);
  }

  /** Also indexes the snapshot's output items by id, so a later request can name them in an `item_reference`. */
  update(id: string, response: Record<string, unknown>): void {
    this.flush();
    const output = Array.isArray(response.output) ? response.output as unknown[] : [];
    if (output.length === 0) {
      this.#updateResponse.run(JSON.stringify(response), id);
    } else {
      this.#transaction(() => {
        // No row updated: the response was deleted, and its items must not become referenceable again.
        if (Number(this.#updateResponse.run(JSON.stringify(response), id).changes) === 0) return;
        for (const item of output) {
          const itemId = (item as { id?: unknown } | null)?.id;
          if (typeof itemId === "string" && itemId !== "") this.#upsertOutputItem.run(itemId, id, JSON.stringify(item));
        }
      });
    }
    this.#notify(id);
  }

  /**
   * Queues `events` (and the `snapshot` they produced, if any) for the next batched commit: a streaming step costs
   * a queue push instead of a transaction, and the JSON encoding and SQLite work run after the step's bytes went
   * out. A failing write is reported to `onError`; it never throws here.
   */
  appendLater(
    id: string,
    events: readonly StoredEvent[],
    snapshot: Record<string, unknown> | undefined,
    onError: (error: unknown) => void,
  ): void {
    if (events.length === 0 && snapshot === undefined) return;
    this.#queue.push({ id, events, snapshot, onError });
    this.#flushTimer ??= setTimeout(() => {
      this.#flushTimer = undefined;
      this.flush();
    }, 0);
  }

  /**
   * Commits every queued write now, in one transaction. If that fails, each response's writes are retried in a
   * transaction of their own, so one failing response neither loses the others' events nor hides its own error.
   */
  flush(): void {
    if (this.#flushTimer !== undefined) {
      clearTimeout(this.#flushTimer);
      this.#flushTimer = undefined;
    }
    if (this.#queue.length === 0) return;
    const queued = this.#queue;
    this.#queue = [];
    try {
      this.#transaction(() => {
        for (const write of queued) this.#write(write);
      });
    } catch {
      for (const write of queued) {
        try {
          this.#transaction(() => this.#write(write));
        } catch (error) {
          write.onError(error);
        }
      }
    }
  }

  /** Through the public methods, so a queued write is exactly the direct calls it stands for. */
  #write(write: QueuedWrite): void {
    this.appendEvents(write.id, write.events);
    if (write.snapshot !== undefined) this.update(write.id, write.snapshot);
  }

  /**
   * A stored item by id, for `item_reference`: an output item of a stored response first (what clients reference),
   * else the latest stored input item with that id. Undefined when no stored response has it.
   */
  item(itemId: string): Record<string, unknown> | undefined {
    this.flush();
    const output = this.#selectOutputItem.get(itemId) as { item: string } | undefined;
    if (output !== undefined) return JSON.parse(output.item);
    const input = this.#selectInputItem.get(itemId) as { item_id: string; item: string } | undefined;
    return input === undefined ? undefined : { id: input.item_id, ...JSON.parse(input.item) };
  }

  get(id: string): { response: Record<string, unknown>; conversation: unknown } | undefined {
    this.flush();
    const row = this.#selectResponse.get(id) as { response: string; conversation: string } | undefined;
    if (!row) return undefined;
    return { response: JSON.parse(row.response), conversation: JSON.parse(row.conversation) };
  }

  isTerminal(id: string): boolean {
    this.flush();
    const row = this.#selectResponse.get(id) as { terminal: number } | undefined;
    return row?.terminal === 1;
  }

  delete(id: string): boolean {
    this.flush();
    let deleted = false;
    this.#transaction(() => {
      const result = this.#db.prepare("DELETE FROM responses WHERE id = ?").run(id);
      deleted = Number(result.changes) > 0;
      this.#db.prepare("DELETE FROM input_items WHERE response_id = ?").run(id);
      this.#db.prepare("DELETE FROM output_items WHERE response_id = ?").run(id);
      this.#db.prepare("DELETE FROM events WHERE response_id = ?").run(id);
    });
    if (deleted) this.#notify(id);
    return deleted;
  }

  /** Cursor pagination over a response's input items; `after` is an item id. Undefined for an unknown response. */
  listInputItems(
    id: string,
    query: { readonly limit: number; readonly order: "asc" | "desc"; readonly after?: string },
  ): InputItemsPage | undefined {
    this.flush();
    if (this.#responseExists.get(id) === undefined) return undefined;
    const rows = this.#selectItems.all(id) as { item_id: string; item: string }[];
    if (query.order === "desc") rows.reverse();
    let start = 0;
    if (query.after !== undefined) {
      const at = rows.findIndex((row) => row.item_id === query.after);
      start = at < 0 ? rows.length : at + 1;
    }
    const page = rows.slice(start, start + query.limit);
    const data = page.map((row) => ({ id: row.item_id, ...JSON.parse(row.item) }));
    return {
      data,
      first_id: page[0]?.item_id ?? null,
      last_id: page.at(-1)?.item_id ?? null,
      has_more: start + page.length < rows.length,
    };
  }

  eventsAfter(id: string, startingAfter: number): StoredEvent[] {
    this.flush();
    const rows = this.#selectEventsAfter.all(id, startingAfter) as { event: string }[];
    return rows.map((row) => JSON.parse(row.event));
  }

  subscribe(id: string, listener: () => void): () => void {
    let set = this.#listeners.get(id);
    if (!set) this.#listeners.set(id, set = new Set());
    set.add(listener);
    return () => {
      set.delete(listener);
      if (set.size === 0 && this.#listeners.get(id) === set) this.#listeners.delete(id);
    };
  }

  #notify(id: string): void {
    const set = this.#listeners.get(id);
    if (!set) return;
    // Copy: a listener may unsubscribe itself while being called.
    for (const listener of [...set]) listener();
  }

  /** Nested calls (a batched flush writing through `appendEvents`/`update`) join the outer transaction. */
  #transaction(body: () => void): void {
    if (this.#inTransaction) return body();
    this.#db.exec("BEGIN IMMEDIATE");
    this.#inTransaction = true;
    try {
      body();
      this.#db.exec("COMMIT");
    } catch (error) {
      this.#db.exec("ROLLBACK");
      throw error;
    } finally {
      this.#inTransaction = false;
    }
  }
}

function responseId(response: Record<string, unknown>): string {
  const id = response.id;
  if (typeof id !== "string" || id === "") throw new TypeError("stored response needs a non-empty string id");
  return id;
}
