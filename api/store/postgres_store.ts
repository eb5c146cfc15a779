/**
 * The PostgreSQL implementation of the store (response_store.ts), for several rill replicas on one database
 * (`--store postgres://USER:PASS@HOST:PORT/DB`). The client is the `postgres` npm package: no dependencies, its own
 * protocol code (no native addon), pipelining, and LISTEN/NOTIFY that re-listens after a reconnect.
 *
 * Invariants beyond the interface's:
 * - The schema is created or migrated at connect time in one transaction under an advisory lock, recorded in
 *   `rill_schema` (postgres_schema.ts): replicas of different versions starting together never race.
 * - `appendLater` writes are committed in one transaction per batch (every response's writes queued since the last
 *   batch started; batches start at most every COMMIT_INTERVAL_MS, and one at a time): one locked read for all of
 *   them, then one multi-row statement each for events, terminal marks, snapshots and output items, pipelined.
 * - Every commit that changes responses sends `NOTIFY rill_events` with this owner and the ids, so a tail on any
 *   replica is woken as the events are written (no polling); this server's own listeners are called directly.
 * - Only the owner recorded on a row appends to its log or rewrites its snapshot; a log that ended takes nothing
 *   more. Writes check under a per-response advisory lock, taken shared by appends and exclusively by a takeover
 *   (failInFlight) or a delete, so a takeover and the owner's last write never both end a log, and a delete never
 *   leaves rows of a write that was committing. (An advisory lock writes nothing, unlike a row lock.)
 * - A cancellation is `NOTIFY rill_cancel` with the response id (and a flag on the row, which the owner also reads
 *   at each heartbeat in case it was reconnecting when the notification went out).
 * - Leases use the servers' clocks (epoch milliseconds), which must agree within a small part of the lease (NTP).
 */
import postgres from "postgres";
import { PostgresConversationStore } from "./postgres_conversation_store.ts";
import { guardPostgresClient } from "./postgres_client_guard.ts";
import { migrate } from "./postgres_schema.ts";
import type { Sql, TxSql } from "./postgres_sql.ts";
import { textArray } from "./postgres_text_array.ts";
import { isConnectionError, StoreUnavailableError } from "./store_unavailable_error.ts";
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
import { inputItemsPage } from "./input_items_page.ts";
import type { QueuedWrite } from "./queued_write.ts";
import { ResponseListeners } from "./response_listeners.ts";
import { TakeoverReport } from "./takeover_report.ts";
import { responseFailed } from "../../events/builders.ts";
import { Sequencer } from "../../events/sequencer_stage.ts";
import type { Response } from "../../events/types.ts";
import type { PageQuery } from "../pagination.ts";

const EVENTS_CHANNEL = "rill_events";
const CANCEL_CHANNEL = "rill_cancel";
/**
 * Least time between the starts of two batched commits of `appendLater` writes. A commit costs PostgreSQL about as
 * much CPU as a few dozen event rows, so under load this keeps batches large; it is also the most a tail on another
 * replica lags behind the generating one (terminal events and direct writes are committed at once).
 */
const COMMIT_INTERVAL_MS = 5;
/** Mixed into the hash of a response id that keys its advisory lock (other users of the database use other keys). */
const LOCK_SEED = 0x72696c6c;
/** Kept writes are retried after this long, doubling up to RETRY_MAX_MS while the database stays unreachable. */
const RETRY_MIN_MS = 100;
const RETRY_MAX_MS = 2000;
/** Writes kept for an unreachable database, at most (a bound on memory during a long outage). */
const MAX_KEPT_WRITES = 200_000;
/** What a response whose writes were dropped during an outage is stored as. */
const LOST = {
  code: "store_unavailable",
  message: "The response store's database was unreachable for too long while this response was generated",
};
/** NOTIFY payloads must stay under 8000 bytes: ids are sent in chunks below this. */
const NOTIFY_BYTES = 7000;

export interface PostgresStoreOptions extends StoreOptions {
  /** Connections in the pool (one more is kept for LISTEN). Default 8. */
  readonly maxConnections?: number;
}

export class PostgresStore implements ResponseStore {
  readonly #sql: Sql;
  readonly owner: string;
  readonly crossServerNotify = true;
  readonly conversations: PostgresConversationStore;
  readonly #leaseMs: number;
  readonly #ttlSeconds: number;
  readonly #clock: () => number;
  readonly #onLease: ((event: LeaseEvent) => void) | undefined;
  readonly #listeners = new ResponseListeners();
  readonly #cancelListeners: ((id: string) => void)[] = [];
  #queue: QueuedWrite[] = [];
  #flushTimer: ReturnType<typeof setTimeout> | undefined;
  /** When the last batch started committing (performance.now()). */
  #lastBatchAt = -Infinity;
  /** The commit in flight (or the last one): batches commit one after another, in order. */
  #committing: Promise<void> = Promise.resolve();
  /** A commit scheduled behind the one in flight, which takes everything queued when it starts. */
  #next: Promise<void> | null = null;
  #leaseTimer: ReturnType<typeof setInterval> | undefined;
  /** When this server last renewed its lease, and before when it judges no other lease expired (see heartbeat). */
  #lastBeat = 0;
  #recoverAfter = 0;
  #unlisten: (() => Promise<void>)[] = [];
  /** Retrying writes kept while the database is unreachable. */
  #retryTimer: ReturnType<typeof setTimeout> | undefined;
  #retryDelay = RETRY_MIN_MS;
  /** Responses whose writes were dropped during an outage (see #keepForLater). */
  readonly #lost = new Set<string>();
  #closed = false;

  private constructor(sql: Sql, options: PostgresStoreOptions) {
    this.#sql = sql;
    this.owner = options.owner ?? `srv_${crypto.randomUUID().replaceAll("-", "")}`;
    this.#leaseMs = options.leaseMs ?? 15_000;
    this.#ttlSeconds = options.ttlSeconds ?? 0;
    this.#clock = options.clock ?? Date.now;
    this.#onLease = options.onLease;
    this.conversations = new PostgresConversationStore(sql);
  }

  /** Connects, creates or migrates the schema, and starts listening for other replicas' notifications. */
  static async connect(url: string, options: PostgresStoreOptions = {}): Promise<PostgresStore> {
    guardPostgresClient();
    const sql: Sql = postgres(url, {
      max: options.maxConnections ?? 8,
      onnotice: () => {},
      connect_timeout: 5,
      transform: { undefined: null },
    });
    try {
      await migrate(sql);
      const store = new PostgresStore(sql, options);
      await store.#listen();
      return store;
    } catch (error) {
      await sql.end({ timeout: 1 });
      throw error;
    }
  }

  async #listen(): Promise<void> {
    const events = await this.#sql.listen(EVENTS_CHANNEL, (payload) => {
      const bar = payload.indexOf("|");
      if (payload.slice(0, bar) === this.owner) return;
      for (const id of payload.slice(bar + 1).split(",")) this.#listeners.notify(id);
    }, () => {
      // (Re)connected: notifications sent while the connection was down are lost, so every waiting tail looks again.
      for (const id of this.#listeners.ids()) this.#listeners.notify(id);
    });
    const cancels = await this.#sql.listen(CANCEL_CHANNEL, (id) => this.#deliverCancel(id), () => {
      this.#pendingCancels().catch(() => {
        // Unreachable again: the next heartbeat looks.
      });
    });
    this.#unlisten = [() => events.unlisten(), () => cancels.unlisten()];
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    if (this.#leaseTimer !== undefined) clearInterval(this.#leaseTimer);
    this.#leaseTimer = undefined;
    clearTimeout(this.#retryTimer);
    this.#retryTimer = undefined;
    try {
      await this.flush();
      // A clean stop gives the lease back: this server's rows are settled by then (shutdown ends every generation).
      await this.#sql`DELETE FROM rill_servers WHERE id = ${this.owner}`;
    } catch (error) {
      // Unreachable: what was not written is lost with this process, and its lease expires; a live replica then
      // fails its unfinished responses, as after a crash. Anything else is a bug to report.
      if (!isConnectionError(error)) throw error;
    } finally {
      this.#closed = true;
      this.#listeners.clear();
      await Promise.allSettled(this.#unlisten.map((unlisten) => unlisten()));
      await this.#sql.end({ timeout: 2 });
    }
  }

  async startLease(): Promise<number> {
    return await this.#guard(async () => {
      await this.heartbeat();
      const recovered = await this.recoverOrphans();
      await this.sweep();
      if (this.#leaseTimer === undefined) {
        const timer = setInterval(() => {
          this.#beat().catch(() => {
            // An unreachable database is tried again at the next beat; the lease lasts three of them.
          });
        }, Math.max(1, Math.floor(this.#leaseMs / 3)));
        Deno.unrefTimer(timer);
        this.#leaseTimer = timer;
      }
      return recovered;
    });
  }

  async #beat(): Promise<void> {
    try {
      await this.heartbeat();
    } catch (error) {
      this.#onLease?.({ kind: "renewal_failed", error: error instanceof Error ? error.message : String(error) });
      throw error;
    }
    await this.#pendingCancels();
    await this.recoverOrphans();
    await this.sweep();
  }

  async heartbeat(): Promise<void> {
    return await this.#guard(async () => {
      const now = this.#clock();
      await this.#sql`
        INSERT INTO rill_servers (id, heartbeat) VALUES (${this.owner}, ${now})
        ON CONFLICT (id) DO UPDATE SET heartbeat = excluded.heartbeat`;
      // Back after more than half a lease without renewing (the database, or the way to it, was away): the other
      // replicas were likely cut off too and have not beaten since, so their leases look expired until they do.
      // Nobody is judged dead for one lease.
      if (this.#lastBeat > 0 && now - this.#lastBeat > this.#leaseMs / 2) this.#recoverAfter = now + this.#leaseMs;
      this.#lastBeat = now;
    });
  }

  /** Whether this server's view of the leases can be trusted: its own is fresh and no outage grace is running. */
  #canJudgeLeases(): boolean {
    const now = this.#clock();
    return now - this.#lastBeat <= this.#leaseMs / 2 && now >= this.#recoverAfter;
  }

  async ownerAlive(owner: string | null): Promise<boolean> {
    return await this.#guard(async () => {
      if (owner === this.owner) return true;
      if (owner === null) return false;
      // A stale lease is no evidence while this server's own is stale too (see heartbeat).
      if (!this.#canJudgeLeases()) return true;
      const [row] = await this.#sql`SELECT heartbeat FROM rill_servers WHERE id = ${owner}`;
      return row !== undefined && Number(row.heartbeat) > this.#clock() - this.#leaseMs;
    });
  }

  async ownerOf(id: string): Promise<string | null> {
    return await this.#guard(async () => {
      await this.flush();
      const [row] = await this.#sql`SELECT owner FROM rill_responses WHERE id = ${id}`;
      return (row?.owner as string | null | undefined) ?? null;
    });
  }

  async recoverOrphans(): Promise<number> {
    return await this.#guard(async () => {
      if (!this.#canJudgeLeases()) return 0;
      await this.flush();
      const now = this.#clock();
      const rows = await this.#sql`
        SELECT r.id, r.owner, s.heartbeat FROM rill_responses r LEFT JOIN rill_servers s ON s.id = r.owner
        WHERE r.terminal = false AND r.status IN ('queued', 'in_progress')
          AND (r.owner IS NULL OR r.owner <> ${this.owner})
          AND (s.heartbeat IS NULL OR s.heartbeat <= ${now - this.#leaseMs})`;
      const taken = new TakeoverReport(now);
      for (const row of rows) {
        if (await this.failInFlight(row.id as string, ORPHANED) === undefined) continue;
        taken.add(row.id as string, row.owner as string | null, row.heartbeat === null ? null : Number(row.heartbeat));
      }
      if (taken.count > 0) await this.#sql`DELETE FROM rill_servers WHERE heartbeat <= ${now - this.#leaseMs}`;
      taken.report(this.#onLease);
      return taken.count;
    });
  }

  async failInFlight(
    id: string,
    error: { code: string; message: string },
  ): Promise<Record<string, unknown> | undefined> {
    return await this.#guard(async () => {
      await this.flush();
      const failed = await this.#sql.begin(async (sql) => {
        await sql`SELECT pg_advisory_xact_lock(hashtextextended(${id}, ${LOCK_SEED}))`;
        const [row] = await sql`SELECT response, terminal FROM rill_responses WHERE id = ${id}`;
        if (row === undefined || row.terminal === true) return undefined;
        const response = JSON.parse(row.response as string) as Record<string, unknown>;
        if (response.status !== "queued" && response.status !== "in_progress") return undefined;
        const failed = { ...response, status: "failed", error };
        const [last] = await sql`SELECT MAX(seq) AS seq FROM rill_events WHERE response_id = ${id}`;
        // The log's own numbering continues: a Sequencer is the only code that numbers events.
        const next = last?.seq === null || last?.seq === undefined ? 0 : Number(last.seq) + 1;
        const [terminal] = new Sequencer(next).stamp([responseFailed(failed as unknown as Response)]);
        await sql`
          UPDATE rill_responses SET response = ${JSON.stringify(failed)}, status = 'failed', terminal = true,
            owner = ${this.owner}
          WHERE id = ${id}`;
        await sql`
          INSERT INTO rill_events (response_id, seq, event)
          VALUES (${id}, ${terminal!.sequence_number}, ${JSON.stringify(terminal)})`;
        await this.#notifyOthers(sql, [id]);
        return failed;
      });
      if (failed !== undefined) this.#listeners.notify(id);
      return failed;
    });
  }

  async sweep(batch = 500): Promise<number> {
    return await this.#guard(async () => {
      if (this.#ttlSeconds <= 0) return 0;
      await this.flush();
      const before = this.#clock() - this.#ttlSeconds * 1000;
      const rows = await this.#sql`
        SELECT id FROM rill_responses
        WHERE created_at < ${before} AND (terminal = true OR status NOT IN ('queued', 'in_progress'))
        ORDER BY created_at LIMIT ${batch}`;
      for (const row of rows) await this.delete(row.id as string);
      return rows.length;
    });
  }

  async create(
    response: Record<string, unknown>,
    inputItems: readonly Record<string, unknown>[],
    conversation: unknown,
  ): Promise<void> {
    return await this.#guard(async () => {
      const id = responseId(response);
      const itemIds = inputItems.map((item, position) => inputItemId(id, item, position));
      const items = inputItems.map((item) => JSON.stringify(item));
      // One statement, so one implicit transaction and one round trip: the row and its items, or nothing.
      await this.#sql`
        WITH created AS (
          INSERT INTO rill_responses (id, response, status, conversation, terminal, created_at, owner, previous_id)
          VALUES (${id}, ${JSON.stringify(response)}, ${String(response.status ?? "")},
            ${JSON.stringify(conversation ?? null)}, false, ${this.#clock()}, ${this.owner},
            ${previousOf(conversation)})
          RETURNING id
        )
        INSERT INTO rill_input_items (response_id, position, item_id, item)
        SELECT created.id, x.position - 1, x.item_id, x.item
        FROM created, unnest(${textArray(this.#sql, itemIds)}, ${textArray(this.#sql, items)})
          WITH ORDINALITY AS x(item_id, item, position)`;
    });
  }

  appendEvents(id: string, events: readonly StoredEvent[]): Promise<void> {
    if (events.length === 0) return this.flush();
    return this.#direct(id, events, undefined);
  }

  update(id: string, response: Record<string, unknown>): Promise<void> {
    return this.#direct(id, [], response);
  }

  /** A write committed in call order with the queued ones: queued, flushed, its own failure thrown. */
  async #direct(id: string, events: readonly StoredEvent[], snapshot: Record<string, unknown> | undefined) {
    let failure: { error: unknown } | undefined;
    this.#queue.push({ id, events, snapshot, onError: (error) => failure = { error } });
    await this.flush();
    if (failure !== undefined) throw failure.error;
  }

  appendLater(
    id: string,
    events: readonly StoredEvent[],
    snapshot: Record<string, unknown> | undefined,
    onError: (error: unknown) => void,
  ): void {
    if (events.length === 0 && snapshot === undefined) return;
    // Its earlier writes were dropped during an outage: a log with a gap is never written; the response ends failed.
    if (this.#lost.has(id)) return onError(new StoreUnavailableError());
    this.#queue.push({ id, events, snapshot, onError });
    // Batches start at most every COMMIT_INTERVAL_MS: a commit costs the database far more than a row, so under load
    // fewer, larger batches; an idle store commits on the next turn of the event loop.
    this.#flushTimer ??= setTimeout(() => {
      this.#flushTimer = undefined;
      this.flush().catch(() => {
        // Each write's failure went to its own onError.
      });
    }, Math.max(0, this.#lastBatchAt + COMMIT_INTERVAL_MS - performance.now()));
  }

  /**
   * Resolves once every write queued before the call is committed. Writes queued while a batch commits go in the
   * next batch, which starts when that one ends (so batches grow with load instead of queueing transactions).
   */
  flush(): Promise<void> {
    if (this.#flushTimer !== undefined) {
      clearTimeout(this.#flushTimer);
      this.#flushTimer = undefined;
    }
    if (this.#next !== null) return this.#next;
    if (this.#queue.length === 0) return this.#committing;
    const next = this.#committing.then(() => {
      this.#next = null;
      this.#lastBatchAt = performance.now();
      const queued = this.#queue;
      this.#queue = [];
      return this.#commitBatch(queued);
    });
    this.#next = next;
    this.#committing = next.catch(() => {});
    return next;
  }

  /** One batch in one transaction; if that fails, each response's writes alone, each failure to its own onError. */
  async #commitBatch(queued: readonly QueuedWrite[]): Promise<void> {
    if (queued.length === 0) return;
    try {
      await this.#commit(queued);
    } catch (error) {
      if (isConnectionError(error)) return this.#keepForLater(queued, error);
      const byId = new Map<string, QueuedWrite[]>();
      for (const write of queued) byId.set(write.id, [...byId.get(write.id) ?? [], write]);
      const unreachable: QueuedWrite[] = [];
      let cause: unknown;
      await Promise.all([...byId.values()].map(async (writes) => {
        try {
          await this.#commit(writes);
        } catch (error) {
          if (isConnectionError(error)) {
            unreachable.push(...writes);
            cause = error;
          } else {
            for (const write of writes) write.onError(error);
          }
        }
      }));
      if (unreachable.length > 0) return this.#keepForLater(unreachable, cause);
    }
    this.#retryDelay = RETRY_MIN_MS;
    if (this.#lost.size > 0) {
      // After this commit (failInFlight flushes, which waits for it).
      setTimeout(() => {
        this.#settleLost().catch(() => {
          // Unreachable again: the next successful commit tries again.
        });
      }, 0);
    }
  }

  /**
   * The database is unreachable: the writes go back to the head of the queue (ahead of later ones, so each log keeps
   * its order), a retry is scheduled, and the flush fails with StoreUnavailableError. Past MAX_KEPT_WRITES the
   * oldest responses' writes are dropped instead, and those responses are failed once the database is back.
   */
  #keepForLater(writes: readonly QueuedWrite[], cause: unknown): never {
    this.#queue = [...writes, ...this.#queue];
    while (this.#queue.length > MAX_KEPT_WRITES) {
      const lost = this.#queue[0]!.id;
      this.#lost.add(lost);
      const kept: QueuedWrite[] = [];
      for (const write of this.#queue) {
        if (write.id === lost) write.onError(new StoreUnavailableError(cause));
        else kept.push(write);
      }
      this.#queue = kept;
    }
    if (this.#retryTimer === undefined && !this.#closed) {
      this.#retryTimer = setTimeout(() => {
        this.#retryTimer = undefined;
        this.flush().catch(() => {
          // Still unreachable: the failed flush scheduled the next try.
        });
      }, this.#retryDelay);
      this.#retryDelay = Math.min(RETRY_MAX_MS, this.#retryDelay * 2);
    }
    throw new StoreUnavailableError(cause);
  }

  /** Responses whose writes were dropped during an outage end failed, once the database is reachable again. */
  async #settleLost(): Promise<void> {
    for (const id of [...this.#lost]) {
      await this.failInFlight(id, LOST);
      this.#lost.delete(id);
    }
  }

  /**
   * Commits `writes` (in order) in one transaction: events of logs that are still open and owned here, snapshots of
   * rows that still exist and are not ended by another server, their output items, and the notification.
   */
  async #commit(writes: readonly QueuedWrite[]): Promise<void> {
    const ids = [...new Set(writes.map((write) => write.id))].sort();
    const changed = await this.#sql.begin(async (sql) => {
      // Shared locks (no row is written to lock it): appends never wait for each other, only for a takeover or a
      // delete of the same response, which take the lock exclusively. The read that follows sees what they committed.
      // Arrays rather than lists of parameters: one prepared statement whatever the batch's size.
      const [, rows] = await Promise.all([
        sql`
          SELECT pg_advisory_xact_lock_shared(hashtextextended(id, ${LOCK_SEED}))
          FROM unnest(${textArray(sql, ids)}) AS id`,
        sql`SELECT id, terminal, owner FROM rill_responses WHERE id = ANY(${textArray(sql, ids)})`,
      ]);
      const state = new Map<string, { terminal: boolean; owner: string | null }>();
      for (const row of rows) {
        state.set(row.id as string, { terminal: row.terminal as boolean, owner: row.owner as string | null });
      }
      const events = { ids: [] as string[], seqs: [] as number[], texts: [] as string[] };
      const ended = new Set<string>();
      const snapshots = new Map<string, Record<string, unknown>>();
      for (const write of writes) {
        const row = state.get(write.id);
        // Gone: its generation may still be ending, and must not leave rows behind.
        if (row === undefined) continue;
        if (!row.terminal && write.events.length > 0) {
          for (const event of write.events) {
            events.ids.push(write.id);
            events.seqs.push(event.sequence_number);
            events.texts.push(JSON.stringify(event));
            if (TERMINAL_TYPES.has(event.type)) row.terminal = true;
          }
          if (row.terminal) ended.add(write.id);
        }
        // A response whose log ended is only rewritten by the server that ended it (see failInFlight).
        if (write.snapshot !== undefined && (!row.terminal || row.owner === this.owner || ended.has(write.id))) {
          snapshots.set(write.id, write.snapshot);
        }
      }
      const pending: Promise<unknown>[] = [];
      if (events.ids.length > 0) {
        pending.push(sql`
          INSERT INTO rill_events (response_id, seq, event)
          SELECT * FROM unnest(
            ${textArray(sql, events.ids)}, string_to_array(${events.seqs.join(",")}, ',')::int[], ${
          textArray(sql, events.texts)
        })`);
      }
      if (ended.size > 0) {
        pending.push(sql`UPDATE rill_responses SET terminal = true WHERE id = ANY(${textArray(sql, [...ended])})`);
      }
      if (snapshots.size > 0) {
        const entries = [...snapshots];
        pending.push(sql`
          UPDATE rill_responses AS r SET response = x.response, status = x.status
          FROM unnest(
            ${textArray(sql, entries.map(([id]) => id))},
            ${textArray(sql, entries.map(([, response]) => JSON.stringify(response)))},
            ${textArray(sql, entries.map(([, response]) => String(response.status ?? "")))}
          ) AS x(id, response, status)
          WHERE r.id = x.id`);
        const items: { item_id: string; id: string; item: string }[] = [];
        for (const [id, response] of snapshots) {
          for (const { itemId, item } of referenceableOutputItems(response)) {
            items.push({ item_id: itemId, id, item: JSON.stringify(item) });
          }
        }
        if (items.length > 0) {
          // One row per item id: a later snapshot's copy of an item replaces an earlier one in the same batch.
          const latest = [...new Map(items.map((item) => [item.item_id, item])).values()];
          pending.push(sql`
            INSERT INTO rill_output_items (item_id, response_id, item)
            SELECT * FROM unnest(
              ${textArray(sql, latest.map((item) => item.item_id))},
              ${textArray(sql, latest.map((item) => item.id))},
              ${textArray(sql, latest.map((item) => item.item))})
            ON CONFLICT (item_id) DO UPDATE SET response_id = excluded.response_id, item = excluded.item`);
        }
      }
      const changed = [...new Set([...events.ids, ...snapshots.keys()])];
      if (changed.length > 0) pending.push(this.#notifyOthers(sql, changed));
      await Promise.all(pending);
      return changed;
    });
    for (const id of changed) this.#listeners.notify(id);
  }

  /** Inside a transaction: tells the other replicas (on commit) that these responses changed. */
  async #notifyOthers(sql: TxSql, ids: readonly string[]): Promise<void> {
    const prefix = `${this.owner}|`;
    let chunk: string[] = [];
    let bytes = prefix.length;
    const sends: Promise<unknown>[] = [];
    const send = () => {
      if (chunk.length > 0) sends.push(sql`SELECT pg_notify(${EVENTS_CHANNEL}, ${prefix + chunk.join(",")})`);
      chunk = [];
      bytes = prefix.length;
    };
    for (const id of ids) {
      if (bytes + id.length + 1 > NOTIFY_BYTES) send();
      chunk.push(id);
      bytes += id.length + 1;
    }
    send();
    await Promise.all(sends);
  }

  async item(itemId: string): Promise<Record<string, unknown> | undefined> {
    return await this.#guard(async () => {
      await this.flush();
      const [output] = await this.#sql`SELECT item FROM rill_output_items WHERE item_id = ${itemId}`;
      if (output !== undefined) return JSON.parse(output.item as string);
      const [input] = await this.#sql`
        SELECT item_id, item FROM rill_input_items WHERE item_id = ${itemId} ORDER BY serial DESC LIMIT 1`;
      return input === undefined ? undefined : { id: input.item_id, ...JSON.parse(input.item as string) };
    });
  }

  async get(id: string): Promise<{ response: Record<string, unknown>; conversation: unknown } | undefined> {
    return await this.#guard(async () => {
      await this.flush();
      const [row] = await this.#sql`SELECT response, conversation FROM rill_responses WHERE id = ${id}`;
      if (row === undefined) return undefined;
      return { response: JSON.parse(row.response as string), conversation: JSON.parse(row.conversation as string) };
    });
  }

  async conversationItems(id: string): Promise<Record<string, unknown>[] | undefined> {
    return await this.#guard(async () => {
      await this.flush();
      return await conversationItemsIn(this.#sql, id);
    });
  }

  async isTerminal(id: string): Promise<boolean> {
    return await this.#guard(async () => {
      await this.flush();
      const [row] = await this.#sql`SELECT terminal FROM rill_responses WHERE id = ${id}`;
      return row?.terminal === true;
    });
  }

  async delete(id: string): Promise<boolean> {
    return await this.#guard(async () => {
      await this.flush();
      const deleted = await this.#sql.begin(async (sql) => {
        await sql`SELECT pg_advisory_xact_lock(hashtextextended(${id}, ${LOCK_SEED}))`;
        const [row] = await sql`SELECT id FROM rill_responses WHERE id = ${id}`;
        if (row === undefined) return false;
        // Responses that continue this one get their whole history written out first.
        const children = await sql`SELECT id FROM rill_responses WHERE previous_id = ${id} FOR UPDATE`;
        for (const child of children) {
          const items = await conversationItemsIn(sql, child.id as string) ?? [];
          await sql`
            UPDATE rill_responses SET conversation = ${JSON.stringify({ version: 1, items })}, previous_id = NULL
            WHERE id = ${child.id as string}`;
        }
        await sql`DELETE FROM rill_responses WHERE id = ${id}`;
        await sql`DELETE FROM rill_input_items WHERE response_id = ${id}`;
        await sql`DELETE FROM rill_output_items WHERE response_id = ${id}`;
        await sql`DELETE FROM rill_events WHERE response_id = ${id}`;
        await this.#notifyOthers(sql, [id]);
        return true;
      });
      if (deleted) this.#listeners.notify(id);
      return deleted;
    });
  }

  async listInputItems(
    id: string,
    query: PageQuery,
  ): Promise<InputItemsPage | undefined> {
    return await this.#guard(async () => {
      await this.flush();
      const [exists] = await this.#sql`SELECT 1 AS one FROM rill_responses WHERE id = ${id}`;
      if (exists === undefined) return undefined;
      const rows = [
        ...await this.#sql`
        SELECT item_id, item FROM rill_input_items WHERE response_id = ${id} ORDER BY position`,
      ] as unknown as {
        item_id: string;
        item: string;
      }[];
      return inputItemsPage(rows, query);
    });
  }

  async eventsAfter(id: string, startingAfter: number): Promise<StoredEvent[]> {
    return await this.#guard(async () => {
      await this.flush();
      const rows = await this.#sql`
        SELECT event FROM rill_events WHERE response_id = ${id} AND seq > ${startingAfter} ORDER BY seq`;
      return rows.map((row) => JSON.parse(row.event as string));
    });
  }

  /** Runs a store operation; an unreachable database becomes StoreUnavailableError (a 503 for the client). */
  async #guard<T>(body: () => Promise<T>): Promise<T> {
    try {
      return await body();
    } catch (error) {
      if (error instanceof StoreUnavailableError || !isConnectionError(error)) throw error;
      throw new StoreUnavailableError(error);
    }
  }

  subscribe(id: string, listener: () => void): () => void {
    return this.#listeners.subscribe(id, listener);
  }

  async requestCancel(id: string): Promise<void> {
    return await this.#guard(async () => {
      await this.flush();
      await this.#sql.begin(async (sql) => {
        await sql`UPDATE rill_responses SET cancel_requested = true WHERE id = ${id} AND terminal = false`;
        await sql`SELECT pg_notify(${CANCEL_CHANNEL}, ${id})`;
      });
    });
  }

  onCancelRequest(listener: (id: string) => void): void {
    this.#cancelListeners.push(listener);
  }

  #deliverCancel(id: string): void {
    for (const listener of this.#cancelListeners) listener(id);
  }

  /** Cancellations asked while this server's LISTEN connection was reconnecting. */
  async #pendingCancels(): Promise<void> {
    if (this.#cancelListeners.length === 0) return;
    const rows = await this.#sql`
      SELECT id FROM rill_responses WHERE terminal = false AND owner = ${this.owner} AND cancel_requested = true`;
    for (const row of rows) this.#deliverCancel(row.id as string);
  }

  async reasoningKey(fresh: Uint8Array): Promise<Uint8Array> {
    return await this.#guard(async () => {
      const hex = Array.from(fresh, (b) => b.toString(16).padStart(2, "0")).join("");
      await this.#sql`INSERT INTO rill_settings (name, value) VALUES ('reasoning_key', ${hex}) ON CONFLICT DO NOTHING`;
      const [row] = await this.#sql`SELECT value FROM rill_settings WHERE name = 'reasoning_key'`;
      return new Uint8Array((row!.value as string).match(/../g)!.map((h) => parseInt(h, 16)));
    });
  }
}

/** The chain walk of `conversationItems`, on a connection or inside a transaction. */
async function conversationItemsIn(sql: Sql | TxSql, id: string): Promise<Record<string, unknown>[] | undefined> {
  const chain: { conversation: StoredConversationRow | null; response: Record<string, unknown> }[] = [];
  const seen = new Set<string>();
  for (let at: string | null = id; at !== null && !seen.has(at);) {
    seen.add(at);
    const [row]: postgres.Row[] = await sql`SELECT response, conversation FROM rill_responses WHERE id = ${at}`;
    if (row === undefined) break;
    const conversation = JSON.parse(row.conversation as string) as StoredConversationRow | null;
    chain.push({ conversation, response: JSON.parse(row.response as string) });
    at = conversation?.version === 2 ? conversation.previous : null;
  }
  return chain.length === 0 ? undefined : chainItems(chain);
}
