/**
 * The embedded SQLite implementation of the store (response_store.ts): one file per data directory (the default), or
 * memory only (`:memory:`).
 *
 * Invariants beyond the interface's:
 * - Every write is committed before its promise is made (WAL, synchronous=NORMAL survives a killed process), except
 *   `appendLater`'s: those are committed together, one transaction for all responses, on the next turn of the event
 *   loop (after that turn's network writes) or at the next `flush()`.
 * - Several servers may share one file (one machine). Listeners are in-memory only, so a tail of another server's
 *   response polls (`crossServerNotify` is false); a cancellation asked of another server is a flag on the row that
 *   its owner reads at its batched commits (at most every 50 ms) and each heartbeat.
 * - Conversations are stored by reference: a response keeps its own input items and the id of its previous
 *   response; the history is rebuilt by walking the chain. Deleting (or expiring) a response first writes the full
 *   history into the responses that continue it, so no chain ever breaks.
 * - The file uses incremental auto-vacuum: deletions give their pages back at the next sweep.
 * - The Conversations API's conversations live in the same file (sqlite_conversation_store.ts), sharing its
 *   transactions.
 */
import { DatabaseSync, type StatementSync } from "node:sqlite";
import { SqliteConversationStore } from "./sqlite_conversation_store.ts";
import {
  chainItems,
  inputItemId,
  type InputItemsPage,
  type LeaseEvent,
  ORPHANED,
  previousOf,
  referenceableOutputItems,
  responseId,
  type ResponseStore,
  type StoredConversationRow,
  type StoredEvent,
  type StoreOptions,
  TERMINAL_TYPES,
} from "./response_store.ts";
import { syncPromise } from "./sync_promise.ts";
import { inputItemsPage } from "./input_items_page.ts";
import type { QueuedWrite } from "./queued_write.ts";
import { ResponseListeners } from "./response_listeners.ts";
import { TakeoverReport } from "./takeover_report.ts";
import { responseFailed } from "../../events/builders.ts";
import { Sequencer } from "../../events/sequencer_stage.ts";
import type { Response } from "../../events/types.ts";
import type { PageQuery } from "../pagination.ts";

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
CREATE TABLE IF NOT EXISTS servers (
  id TEXT PRIMARY KEY,
  heartbeat INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS settings (
  name TEXT PRIMARY KEY,
  value TEXT NOT NULL
);
`;

/** How often the batched commits look for cancellations other servers asked of this one's responses. */
const CANCEL_CHECK_MS = 50;

/** Columns added after the first schema; added to older files at open. */
const ADDED_COLUMNS: readonly [string, string][] = [
  ["owner", "TEXT"],
  ["previous_id", "TEXT"],
  ["cancel_requested", "INTEGER NOT NULL DEFAULT 0"],
];

export class SqliteStore implements ResponseStore {
  readonly #db: DatabaseSync;
  readonly #listeners = new ResponseListeners();
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
  /** This server's owner id. */
  readonly owner: string;
  readonly #leaseMs: number;
  readonly crossServerNotify = false;
  readonly #cancelListeners: ((id: string) => void)[] = [];
  /** Cancellations already handed to the listeners, so each is delivered once. */
  readonly #cancelsDelivered = new Set<string>();
  #cancelsCheckedAt = -Infinity;
  readonly #selectCancels: StatementSync;
  readonly #ttlSeconds: number;
  readonly #clock: () => number;
  readonly #onLease: ((event: LeaseEvent) => void) | undefined;
  #leaseTimer: ReturnType<typeof setInterval> | undefined;
  /** The Conversations API's conversations and their items. */
  readonly conversations: SqliteConversationStore;

  private constructor(db: DatabaseSync, options: StoreOptions) {
    this.#db = db;
    this.owner = options.owner ?? `srv_${crypto.randomUUID().replaceAll("-", "")}`;
    this.#leaseMs = options.leaseMs ?? 15_000;
    this.#ttlSeconds = options.ttlSeconds ?? 0;
    this.#clock = options.clock ?? Date.now;
    this.#onLease = options.onLease;
    db.exec("PRAGMA busy_timeout = 5000;");
    // Must precede the first table of a new file; an older file is converted once (VACUUM rewrites it).
    const vacuum = db.prepare("PRAGMA auto_vacuum").get() as { auto_vacuum: number };
    if (vacuum.auto_vacuum !== 2) {
      db.exec("PRAGMA auto_vacuum = INCREMENTAL;");
      const hasTables = db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table'").get() !== undefined;
      if (hasTables) {
        try {
          db.exec("VACUUM;");
        } catch {
          // Another server holds the file (VACUUM needs it alone): the conversion waits for a later start.
        }
      }
    }
    db.exec("PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL;");
    db.exec(SCHEMA);
    const columns = new Set(
      (db.prepare("PRAGMA table_info(responses)").all() as { name: string }[]).map((c) => c.name),
    );
    for (const [name, type] of ADDED_COLUMNS) {
      if (!columns.has(name)) db.exec(`ALTER TABLE responses ADD COLUMN ${name} ${type}`);
    }
    db.exec(
      "CREATE INDEX IF NOT EXISTS responses_by_previous ON responses (previous_id);" +
        "CREATE INDEX IF NOT EXISTS responses_by_created ON responses (created_at);" +
        "CREATE INDEX IF NOT EXISTS responses_in_flight ON responses (terminal, owner);",
    );
    this.#insertResponse = db.prepare(
      "INSERT INTO responses (id, response, conversation, terminal, created_at, owner, previous_id) " +
        "VALUES (?, ?, ?, 0, ?, ?, ?)",
    );
    this.#insertItem = db.prepare("INSERT INTO input_items (response_id, position, item_id, item) VALUES (?, ?, ?, ?)");
    this.#insertEvent = db.prepare("INSERT INTO events (response_id, seq, event) VALUES (?, ?, ?)");
    // A response whose log ended is only rewritten by the server that ended it (see failInFlight).
    this.#updateResponse = db.prepare(
      "UPDATE responses SET response = ? WHERE id = ? AND (terminal = 0 OR owner = ?)",
    );
    this.#markTerminal = db.prepare("UPDATE responses SET terminal = 1 WHERE id = ?");
    this.#selectResponse = db.prepare("SELECT response, conversation, terminal FROM responses WHERE id = ?");
    this.#responseExists = db.prepare("SELECT 1 FROM responses WHERE id = ?");
    this.#selectEventsAfter = db.prepare("SELECT event FROM events WHERE response_id = ? AND seq > ? ORDER BY seq");
    this.#selectItems = db.prepare("SELECT item_id, item FROM input_items WHERE response_id = ? ORDER BY position");
    this.#upsertOutputItem = db.prepare(
      "INSERT OR REPLACE INTO output_items (item_id, response_id, item) VALUES (?, ?, ?)",
    );
    this.#selectOutputItem = db.prepare("SELECT item FROM output_items WHERE item_id = ?");
    this.#selectCancels = db.prepare(
      "SELECT id FROM responses WHERE terminal = 0 AND owner = ? AND cancel_requested = 1",
    );
    this.#selectInputItem = db.prepare(
      "SELECT item_id, item FROM input_items WHERE item_id = ? ORDER BY rowid DESC LIMIT 1",
    );
    this.conversations = new SqliteConversationStore(db, (body) => this.#transaction(body));
  }

  /** Opens (creating if needed) a store at a file path, or an in-memory one for ":memory:". */
  static open(path: string, options: StoreOptions = {}): SqliteStore {
    return new SqliteStore(new DatabaseSync(path), options);
  }

  close(): Promise<void> {
    return syncPromise(() => this.closeSync());
  }

  closeSync(): void {
    this.flushSync();
    if (this.#leaseTimer !== undefined) clearInterval(this.#leaseTimer);
    this.#leaseTimer = undefined;
    // A clean stop gives the lease back: this server's rows are settled by then (shutdown ends every generation).
    this.#db.prepare("DELETE FROM servers WHERE id = ?").run(this.owner);
    this.#listeners.clear();
    this.#db.close();
  }

  /**
   * Takes this server's lease and keeps it: a heartbeat every third of the lease, and at each one the in-flight
   * rows of dead owners are failed, and (with a TTL) expired responses swept. Returns how many rows start-up
   * recovery failed. The timer does not keep the process alive.
   */
  startLease(): Promise<number> {
    return syncPromise(() => this.#startLease());
  }

  #startLease(): number {
    this.#heartbeat();
    const recovered = this.#recoverOrphans();
    this.#sweep(500);
    if (this.#leaseTimer !== undefined) return recovered;
    const timer = setInterval(() => {
      // A busy or failing database is retried at the next beat; the lease lasts three of them.
      try {
        this.#heartbeat();
      } catch (error) {
        this.#onLease?.({ kind: "renewal_failed", error: error instanceof Error ? error.message : String(error) });
        return;
      }
      try {
        this.#deliverCancels();
        this.#recoverOrphans();
        this.#sweep(500);
      } catch {
        // Tried again at the next beat.
      }
    }, Math.max(1, Math.floor(this.#leaseMs / 3)));
    Deno.unrefTimer(timer);
    this.#leaseTimer = timer;
    return recovered;
  }

  heartbeat(): Promise<void> {
    return syncPromise(() => this.#heartbeat());
  }

  #heartbeat(): void {
    this.#db.prepare(
      "INSERT INTO servers (id, heartbeat) VALUES (?, ?) ON CONFLICT (id) DO UPDATE SET heartbeat = excluded.heartbeat",
    ).run(this.owner, this.#clock());
  }

  /** Whether `owner` holds a live lease (this server always does). */
  ownerAlive(owner: string | null): Promise<boolean> {
    return syncPromise(() => this.#ownerAlive(owner));
  }

  #ownerAlive(owner: string | null): boolean {
    if (owner === this.owner) return true;
    if (owner === null) return false;
    const row = this.#db.prepare("SELECT heartbeat FROM servers WHERE id = ?").get(owner) as
      | { heartbeat: number }
      | undefined;
    return this.#leaseHeld(row === undefined ? null : row.heartbeat, this.#clock());
  }

  /** Whether a lease last renewed at `heartbeat` (null: none) is still held at `now`. */
  #leaseHeld(heartbeat: number | null, now: number): boolean {
    return heartbeat !== null && heartbeat > now - this.#leaseMs;
  }

  /** The owner recorded for a response (null for rows older than owners, or unknown ids). */
  ownerOf(id: string): Promise<string | null> {
    return syncPromise(() => this.#ownerOf(id));
  }

  #ownerOf(id: string): string | null {
    this.flushSync();
    const row = this.#db.prepare("SELECT owner FROM responses WHERE id = ?").get(id) as
      | { owner: string | null }
      | undefined;
    return row?.owner ?? null;
  }

  /**
   * Fails every in-flight row whose owner is dead (or unknown): rows a crashed or killed server left behind. Never
   * touches this server's rows or a live server's. Returns how many it failed.
   */
  recoverOrphans(): Promise<number> {
    return syncPromise(() => this.#recoverOrphans());
  }

  #recoverOrphans(): number {
    this.flushSync();
    // Each row with its owner's last heartbeat (NULL: no owner, or no lease row).
    const rows = this.#db.prepare(
      "SELECT r.id, r.owner, s.heartbeat FROM responses r LEFT JOIN servers s ON s.id = r.owner " +
        "WHERE r.terminal = 0 AND (r.owner IS NULL OR r.owner != ?) " +
        "AND json_extract(r.response, '$.status') IN ('queued', 'in_progress')",
    ).all(this.owner) as { id: string; owner: string | null; heartbeat: number | null }[];
    const now = this.#clock();
    const taken = new TakeoverReport(now);
    for (const row of rows) {
      const heartbeat = row.heartbeat === null ? null : Number(row.heartbeat);
      if (this.#leaseHeld(heartbeat, now)) continue;
      if (this.#failInFlight(row.id, ORPHANED) === undefined) continue;
      taken.add(row.id, row.owner, heartbeat);
    }
    if (taken.count > 0) {
      this.#db.prepare("DELETE FROM servers WHERE heartbeat <= ?").run(now - this.#leaseMs);
    }
    taken.report(this.#onLease);
    return taken.count;
  }

  /**
   * Marks a queued/in_progress response failed with `error` and closes its log with `response.failed`, in one
   * transaction that first checks the row is still in flight (two servers recovering it, or its owner finishing it
   * meanwhile, never yield two terminal events). Returns the failed response, or undefined if it was not in flight.
   */
  failInFlight(id: string, error: { code: string; message: string }): Promise<Record<string, unknown> | undefined> {
    return syncPromise(() => this.#failInFlight(id, error));
  }

  #failInFlight(id: string, error: { code: string; message: string }): Record<string, unknown> | undefined {
    this.flushSync();
    let failed: Record<string, unknown> | undefined;
    this.#transaction(() => {
      const row = this.#selectResponse.get(id) as { response: string; terminal: number } | undefined;
      if (row === undefined || row.terminal === 1) return;
      const response = JSON.parse(row.response) as Record<string, unknown>;
      if (response.status !== "queued" && response.status !== "in_progress") return;
      failed = { ...response, status: "failed", error };
      const last = this.#db.prepare("SELECT MAX(seq) AS seq FROM events WHERE response_id = ?").get(id) as {
        seq: number | null;
      };
      // The log's own numbering continues: a Sequencer is the only code that numbers events.
      const [terminal] = new Sequencer((last.seq ?? -1) + 1).stamp([responseFailed(failed as unknown as Response)]);
      this.#db.prepare("UPDATE responses SET response = ?, terminal = 1, owner = ? WHERE id = ?").run(
        JSON.stringify(failed),
        this.owner,
        id,
      );
      this.#insertEvent.run(id, terminal!.sequence_number, JSON.stringify(terminal));
    });
    if (failed !== undefined) this.#listeners.notify(id);
    return failed;
  }

  /**
   * Deletes responses older than the TTL that are not in flight (oldest first, a bounded batch per call), then
   * gives free pages back to the file system. Returns how many it deleted.
   */
  sweep(batch = 500): Promise<number> {
    return syncPromise(() => this.#sweep(batch));
  }

  #sweep(batch: number): number {
    if (this.#ttlSeconds <= 0) return 0;
    this.flushSync();
    const before = this.#clock() - this.#ttlSeconds * 1000;
    const ids = this.#db.prepare(
      "SELECT id FROM responses WHERE created_at < ? AND (terminal = 1 OR " +
        "json_extract(response, '$.status') NOT IN ('queued', 'in_progress')) ORDER BY created_at LIMIT ?",
    ).all(before, batch) as { id: string }[];
    for (const { id } of ids) this.#delete(id);
    if (ids.length > 0) this.vacuum();
    return ids.length;
  }

  /** Returns free pages to the file system (incremental auto-vacuum). */
  vacuum(pages = 2000): void {
    this.flushSync();
    // Stepped to the end: each step frees one page, and exec would stop after the first.
    this.#db.prepare(`PRAGMA incremental_vacuum(${Math.max(1, Math.floor(pages))})`).all();
  }

  create(
    response: Record<string, unknown>,
    inputItems: readonly Record<string, unknown>[],
    conversation: unknown,
  ): Promise<void> {
    return syncPromise(() => this.#create(response, inputItems, conversation));
  }

  #create(response: Record<string, unknown>, inputItems: readonly Record<string, unknown>[], conversation: unknown) {
    const id = responseId(response);
    const previous = previousOf(conversation);
    this.#transaction(() => {
      this.#insertResponse.run(
        id,
        JSON.stringify(response),
        JSON.stringify(conversation ?? null),
        this.#clock(),
        this.owner,
        previous,
      );
      inputItems.forEach((item, position) => {
        this.#insertItem.run(id, position, inputItemId(id, item, position), JSON.stringify(item));
      });
    });
  }

  /**
   * Appends events in order; a terminal event marks the response terminal in the same transaction. Like `update`, a
   * no-op once the response was deleted: its generation may still be ending, and must not leave rows behind.
   */
  appendEvents(id: string, events: readonly StoredEvent[]): Promise<void> {
    return syncPromise(() => {
      this.flushSync();
      this.#appendEvents(id, events);
    });
  }

  #appendEvents(id: string, events: readonly StoredEvent[]): void {
    if (events.length === 0) return;
    let terminal = false;
    this.#transaction(() => {
      const row = this.#selectResponse.get(id) as { terminal: number } | undefined;
      // Gone, or its log already ended (e.g. failed by another server that took it over): nothing more is added.
      if (row === undefined || row.terminal === 1) return;
      for (const event of events) {
        this.#insertEvent.run(id, event.sequence_number, JSON.stringify(event));
        if (TERMINAL_TYPES.has(event.type)) terminal = true;
      }
      if (terminal) this.#markTerminal.run(id);
    });
    if (terminal) this.#cancelsDelivered.delete(id);
    this.#listeners.notify(id);
  }

  /** Also indexes the snapshot's output items by id, so a later request can name them in an `item_reference`. */
  update(id: string, response: Record<string, unknown>): Promise<void> {
    return syncPromise(() => {
      this.flushSync();
      this.#update(id, response);
    });
  }

  #update(id: string, response: Record<string, unknown>): void {
    const items = referenceableOutputItems(response);
    if (items.length === 0) {
      this.#updateResponse.run(JSON.stringify(response), id, this.owner);
    } else {
      this.#transaction(() => {
        // No row updated: the response was deleted, and its items must not become referenceable again.
        if (Number(this.#updateResponse.run(JSON.stringify(response), id, this.owner).changes) === 0) return;
        for (const { itemId, item } of items) this.#upsertOutputItem.run(itemId, id, JSON.stringify(item));
      });
    }
    this.#listeners.notify(id);
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
      this.flushSync();
      // Looked for at most every CANCEL_CHECK_MS: a query per commit would cost the streaming path more than the
      // commit of a step itself.
      const now = performance.now();
      if (now - this.#cancelsCheckedAt < CANCEL_CHECK_MS) return;
      this.#cancelsCheckedAt = now;
      try {
        this.#deliverCancels();
      } catch {
        // A busy database: a later commit or the heartbeat looks again.
      }
    }, 0);
  }

  /**
   * Commits every queued write now, in one transaction. If that fails, each response's writes are retried in a
   * transaction of their own, so one failing response neither loses the others' events nor hides its own error.
   */
  flush(): Promise<void> {
    return syncPromise(() => this.flushSync());
  }

  flushSync(): void {
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
    this.#appendEvents(write.id, write.events);
    if (write.snapshot !== undefined) this.#update(write.id, write.snapshot);
  }

  /**
   * A stored item by id, for `item_reference`: an output item of a stored response first (what clients reference),
   * else the latest stored input item with that id. Undefined when no stored response has it.
   */
  item(itemId: string): Promise<Record<string, unknown> | undefined> {
    return syncPromise(() => this.#item(itemId));
  }

  #item(itemId: string): Record<string, unknown> | undefined {
    this.flushSync();
    const output = this.#selectOutputItem.get(itemId) as { item: string } | undefined;
    if (output !== undefined) return JSON.parse(output.item);
    const input = this.#selectInputItem.get(itemId) as { item_id: string; item: string } | undefined;
    return input === undefined ? undefined : { id: input.item_id, ...JSON.parse(input.item) };
  }

  get(id: string): Promise<{ response: Record<string, unknown>; conversation: unknown } | undefined> {
    return syncPromise(() => this.#get(id));
  }

  #get(id: string): { response: Record<string, unknown>; conversation: unknown } | undefined {
    this.flushSync();
    const row = this.#selectResponse.get(id) as { response: string; conversation: string } | undefined;
    if (!row) return undefined;
    return { response: JSON.parse(row.response), conversation: JSON.parse(row.conversation) };
  }

  /**
   * Every item before response `id`'s output, oldest first: its chain's inputs and outputs, then its own input.
   * Undefined for an unknown id. One row read per response in the chain; no history is stored twice.
   */
  conversationItems(id: string): Promise<Record<string, unknown>[] | undefined> {
    return syncPromise(() => this.#conversationItems(id));
  }

  #conversationItems(id: string): Record<string, unknown>[] | undefined {
    this.flushSync();
    const chain: { conversation: StoredConversationRow | null; response: Record<string, unknown> }[] = [];
    const seen = new Set<string>();
    for (let at: string | null = id; at !== null && !seen.has(at);) {
      seen.add(at);
      const row = this.#selectResponse.get(at) as { response: string; conversation: string } | undefined;
      if (row === undefined) break;
      const conversation = JSON.parse(row.conversation) as StoredConversationRow | null;
      chain.push({ conversation, response: JSON.parse(row.response) });
      at = conversation?.version === 2 ? conversation.previous : null;
    }
    if (chain.length === 0) return undefined;
    return chainItems(chain);
  }

  isTerminal(id: string): Promise<boolean> {
    return syncPromise(() => {
      this.flushSync();
      return (this.#selectResponse.get(id) as { terminal: number } | undefined)?.terminal === 1;
    });
  }

  delete(id: string): Promise<boolean> {
    return syncPromise(() => this.#delete(id));
  }

  #delete(id: string): boolean {
    this.flushSync();
    let deleted = false;
    this.#transaction(() => {
      // Responses that continue this one get their whole history written out first.
      const children = this.#db.prepare("SELECT id FROM responses WHERE previous_id = ?").all(id) as { id: string }[];
      for (const child of children) {
        const items = this.#conversationItems(child.id) ?? [];
        this.#db.prepare("UPDATE responses SET conversation = ?, previous_id = NULL WHERE id = ?").run(
          JSON.stringify({ version: 1, items }),
          child.id,
        );
      }
      const result = this.#db.prepare("DELETE FROM responses WHERE id = ?").run(id);
      deleted = Number(result.changes) > 0;
      this.#db.prepare("DELETE FROM input_items WHERE response_id = ?").run(id);
      this.#db.prepare("DELETE FROM output_items WHERE response_id = ?").run(id);
      this.#db.prepare("DELETE FROM events WHERE response_id = ?").run(id);
    });
    if (deleted) this.#listeners.notify(id);
    return deleted;
  }

  /** Cursor pagination over a response's input items; `after` is an item id. Undefined for an unknown response. */
  listInputItems(
    id: string,
    query: PageQuery,
  ): Promise<InputItemsPage | undefined> {
    return syncPromise(() => this.#listInputItems(id, query));
  }

  #listInputItems(
    id: string,
    query: PageQuery,
  ): InputItemsPage | undefined {
    this.flushSync();
    if (this.#responseExists.get(id) === undefined) return undefined;
    const rows = this.#selectItems.all(id) as { item_id: string; item: string }[];
    return inputItemsPage(rows, query);
  }

  eventsAfter(id: string, startingAfter: number): Promise<StoredEvent[]> {
    return syncPromise(() => {
      this.flushSync();
      const rows = this.#selectEventsAfter.all(id, startingAfter) as { event: string }[];
      return rows.map((row) => JSON.parse(row.event));
    });
  }

  requestCancel(id: string): Promise<void> {
    return syncPromise(() => {
      this.flushSync();
      this.#db.prepare("UPDATE responses SET cancel_requested = 1 WHERE id = ? AND terminal = 0").run(id);
      if (this.#ownerOf(id) === this.owner) this.#deliverCancels();
    });
  }

  onCancelRequest(listener: (id: string) => void): void {
    this.#cancelListeners.push(listener);
  }

  /** Hands this server's newly asked cancellations to the listeners. */
  #deliverCancels(): void {
    if (this.#cancelListeners.length === 0) return;
    const rows = this.#selectCancels.all(this.owner) as { id: string }[];
    for (const { id } of rows) {
      if (this.#cancelsDelivered.has(id)) continue;
      this.#cancelsDelivered.add(id);
      for (const listener of this.#cancelListeners) listener(id);
    }
  }

  reasoningKey(fresh: Uint8Array): Promise<Uint8Array> {
    return syncPromise(() => {
      const hex = Array.from(fresh, (b) => b.toString(16).padStart(2, "0")).join("");
      this.#db.prepare("INSERT INTO settings (name, value) VALUES ('reasoning_key', ?) ON CONFLICT DO NOTHING").run(
        hex,
      );
      const row = this.#db.prepare("SELECT value FROM settings WHERE name = 'reasoning_key'").get() as {
        value: string;
      };
      return new Uint8Array(row.value.match(/../g)!.map((h) => parseInt(h, 16)));
    });
  }

  subscribe(id: string, listener: () => void): () => void {
    return this.#listeners.subscribe(id, listener);
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
