/**
 * The Conversations API's conversations (conversation_store.ts) in the SQLite file of sqlite_store.ts, sharing its
 * transactions.
 *
 * Invariants:
 * - An append takes `MAX(position) + 1` inside the write transaction, so appends never interleave.
 * - The tables are created with `IF NOT EXISTS`, so a file written before conversations existed gains them at open
 *   and keeps every row; an older server opening a newer file ignores them.
 */
import type { DatabaseSync, StatementSync } from "node:sqlite";
import {
  type AppendOutcome,
  type Conversation,
  conversationItemId as itemId,
  type ConversationItemsPage,
  conversationItemsPage,
  type ConversationStore,
  type Duplicate,
  firstDuplicate,
  itemsToAppend,
} from "./conversation_store.ts";
import { syncPromise } from "./sync_promise.ts";
import type { PageQuery } from "../pagination.ts";

const SCHEMA = `
CREATE TABLE IF NOT EXISTS conversations (
  id TEXT PRIMARY KEY,
  created_at INTEGER NOT NULL,
  metadata TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS conversation_items (
  conversation_id TEXT NOT NULL,
  position INTEGER NOT NULL,
  item_id TEXT NOT NULL,
  item TEXT NOT NULL,
  PRIMARY KEY (conversation_id, position)
);
CREATE UNIQUE INDEX IF NOT EXISTS conversation_items_by_id ON conversation_items (conversation_id, item_id);
CREATE INDEX IF NOT EXISTS conversation_items_by_item ON conversation_items (item_id);
`;

/** Runs `body` in one write transaction (joining an enclosing one). */
export type Transaction = (body: () => void) => void;

export class SqliteConversationStore implements ConversationStore {
  readonly #transaction: Transaction;
  readonly #insert: StatementSync;
  readonly #select: StatementSync;
  readonly #updateMetadata: StatementSync;
  readonly #delete: StatementSync;
  readonly #deleteItems: StatementSync;
  readonly #lastPosition: StatementSync;
  readonly #insertItem: StatementSync;
  readonly #itemExists: StatementSync;
  readonly #selectItem: StatementSync;
  readonly #deleteItem: StatementSync;
  readonly #selectAnyItem: StatementSync;
  readonly #allItems: StatementSync;
  readonly #pageAsc: StatementSync;
  readonly #pageDesc: StatementSync;

  constructor(db: DatabaseSync, transaction: Transaction) {
    this.#transaction = transaction;
    db.exec(SCHEMA);
    this.#insert = db.prepare("INSERT INTO conversations (id, created_at, metadata) VALUES (?, ?, ?)");
    this.#select = db.prepare("SELECT id, created_at, metadata FROM conversations WHERE id = ?");
    this.#updateMetadata = db.prepare("UPDATE conversations SET metadata = ? WHERE id = ?");
    this.#delete = db.prepare("DELETE FROM conversations WHERE id = ?");
    this.#deleteItems = db.prepare("DELETE FROM conversation_items WHERE conversation_id = ?");
    this.#lastPosition = db.prepare(
      "SELECT MAX(position) AS position FROM conversation_items WHERE conversation_id = ?",
    );
    this.#insertItem = db.prepare(
      "INSERT INTO conversation_items (conversation_id, position, item_id, item) VALUES (?, ?, ?, ?)",
    );
    this.#itemExists = db.prepare("SELECT 1 FROM conversation_items WHERE conversation_id = ? AND item_id = ?");
    this.#selectItem = db.prepare(
      "SELECT position, item FROM conversation_items WHERE conversation_id = ? AND item_id = ?",
    );
    this.#selectAnyItem = db.prepare(
      "SELECT item FROM conversation_items WHERE item_id = ? ORDER BY rowid DESC LIMIT 1",
    );
    this.#deleteItem = db.prepare("DELETE FROM conversation_items WHERE conversation_id = ? AND item_id = ?");
    this.#allItems = db.prepare("SELECT item FROM conversation_items WHERE conversation_id = ? ORDER BY position");
    this.#pageAsc = db.prepare(
      "SELECT item_id, item FROM conversation_items WHERE conversation_id = ? AND position > ? " +
        "ORDER BY position LIMIT ?",
    );
    this.#pageDesc = db.prepare(
      "SELECT item_id, item FROM conversation_items WHERE conversation_id = ? AND position < ? " +
        "ORDER BY position DESC LIMIT ?",
    );
  }

  /**
   * Creates a conversation holding `items` (each with an `id`), atomically: when an id repeats within `items`,
   * nothing is created and the duplicate is returned.
   */
  create(conversation: Conversation, items: readonly Record<string, unknown>[]): Promise<Conversation | Duplicate> {
    return syncPromise(() => this.#create(conversation, items));
  }

  #create(conversation: Conversation, items: readonly Record<string, unknown>[]): Conversation | Duplicate {
    const duplicate = firstDuplicate(items, () => false);
    if (duplicate !== undefined) return duplicate;
    this.#transaction(() => {
      this.#insert.run(conversation.id, conversation.created_at, JSON.stringify(conversation.metadata));
      this.#insertItems(conversation.id, items);
    });
    return conversation;
  }

  get(id: string): Promise<Conversation | undefined> {
    return syncPromise(() => this.#get(id));
  }

  #get(id: string): Conversation | undefined {
    const row = this.#select.get(id) as { id: string; created_at: number; metadata: string } | undefined;
    if (row === undefined) return undefined;
    return { id: row.id, object: "conversation", created_at: row.created_at, metadata: JSON.parse(row.metadata) };
  }

  /** Replaces the metadata; undefined for an unknown conversation. */
  updateMetadata(id: string, metadata: Record<string, string>): Promise<Conversation | undefined> {
    return syncPromise(() => this.#updateMetadataSync(id, metadata));
  }

  #updateMetadataSync(id: string, metadata: Record<string, string>): Conversation | undefined {
    let changed = false;
    this.#transaction(() => {
      changed = Number(this.#updateMetadata.run(JSON.stringify(metadata), id).changes) > 0;
    });
    return changed ? this.#get(id) : undefined;
  }

  /** Deletes the conversation and its items; false when it did not exist. */
  delete(id: string): Promise<boolean> {
    return syncPromise(() => this.#deleteSync(id));
  }

  #deleteSync(id: string): boolean {
    let deleted = false;
    this.#transaction(() => {
      deleted = Number(this.#delete.run(id).changes) > 0;
      this.#deleteItems.run(id);
    });
    return deleted;
  }

  /**
   * Appends `items` (each with an `id`) after the conversation's last item, all or nothing: an unknown
   * conversation or an id the conversation already holds (or that repeats within `items`) appends nothing. With
   * `held: "skip"`, such items are left out instead, the first of each id kept (a response's turn, whose ids were
   * checked when it started, is never lost to an item another request added meanwhile).
   */
  append(
    id: string,
    items: readonly Record<string, unknown>[],
    held: "refuse" | "skip" = "refuse",
  ): Promise<AppendOutcome> {
    return syncPromise(() => this.#append(id, items, held));
  }

  #append(id: string, items: readonly Record<string, unknown>[], held: "refuse" | "skip"): AppendOutcome {
    let outcome: AppendOutcome = { kind: "appended" };
    this.#transaction(() => {
      if (this.#select.get(id) === undefined) {
        outcome = { kind: "no_conversation" };
        return;
      }
      const fresh = itemsToAppend(items, held, (key) => this.#itemExists.get(id, key) !== undefined);
      if ("kind" in fresh) {
        outcome = fresh;
        return;
      }
      this.#insertItems(id, fresh);
    });
    return outcome;
  }

  /** Every item, oldest first; undefined for an unknown conversation. */
  items(id: string): Promise<Record<string, unknown>[] | undefined> {
    return syncPromise(() => this.#itemsSync(id));
  }

  #itemsSync(id: string): Record<string, unknown>[] | undefined {
    if (this.#select.get(id) === undefined) return undefined;
    return (this.#allItems.all(id) as { item: string }[]).map((row) => JSON.parse(row.item));
  }

  /** One item; undefined when the conversation does not hold it. */
  item(id: string, itemId: string): Promise<Record<string, unknown> | undefined> {
    return syncPromise(() => this.#itemSync(id, itemId));
  }

  #itemSync(id: string, itemId: string): Record<string, unknown> | undefined {
    const row = this.#selectItem.get(id, itemId) as { item: string } | undefined;
    return row === undefined ? undefined : JSON.parse(row.item);
  }

  /** An item of any conversation (the latest stored with that id), for `item_reference`; undefined when none has it. */
  anyItem(itemId: string): Promise<Record<string, unknown> | undefined> {
    return syncPromise(() => this.anyItemSync(itemId));
  }

  /** For sqlite_store.ts's own lookups. */
  anyItemSync(itemId: string): Record<string, unknown> | undefined {
    const row = this.#selectAnyItem.get(itemId) as { item: string } | undefined;
    return row === undefined ? undefined : JSON.parse(row.item);
  }

  /** Deletes one item; false when the conversation does not hold it. */
  deleteItem(id: string, itemId: string): Promise<boolean> {
    return syncPromise(() => this.#deleteItemSync(id, itemId));
  }

  #deleteItemSync(id: string, itemId: string): boolean {
    let deleted = false;
    this.#transaction(() => {
      deleted = Number(this.#deleteItem.run(id, itemId).changes) > 0;
    });
    return deleted;
  }

  /**
   * Cursor pagination: the items after the item `after` in `order` (from the start when absent). Undefined for an
   * unknown conversation, `"no_item"` when `after` names no item of it.
   */
  listItems(
    id: string,
    query: PageQuery,
  ): Promise<ConversationItemsPage | "no_item" | undefined> {
    return syncPromise(() => this.#listItemsSync(id, query));
  }

  #listItemsSync(
    id: string,
    query: PageQuery,
  ): ConversationItemsPage | "no_item" | undefined {
    if (this.#select.get(id) === undefined) return undefined;
    let from = query.order === "asc" ? -1 : Number.MAX_SAFE_INTEGER;
    if (query.after !== undefined) {
      const at = this.#selectItem.get(id, query.after) as { position: number } | undefined;
      if (at === undefined) return "no_item";
      from = at.position;
    }
    const statement = query.order === "asc" ? this.#pageAsc : this.#pageDesc;
    // One row more than the page tells whether there are more.
    const rows = statement.all(id, from, query.limit + 1) as { item_id: string; item: string }[];
    return conversationItemsPage(rows, query.limit);
  }

  /** Inside a transaction: the items after the conversation's last one, in order. */
  #insertItems(id: string, items: readonly Record<string, unknown>[]): void {
    const last = this.#lastPosition.get(id) as { position: number | null };
    let position = (last.position ?? -1) + 1;
    for (const item of items) this.#insertItem.run(id, position++, itemId(item), JSON.stringify(item));
  }
}
