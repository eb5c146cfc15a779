/**
 * The Conversations API's conversations (conversation_store.ts) in PostgreSQL (postgres_store.ts's database).
 *
 * Invariants:
 * - An append locks the conversation's row (`FOR UPDATE`) before it reads the last position, so appends from any
 *   replica are serialized and each one's items stay contiguous.
 * - Deleting a conversation takes the same lock, so it never interleaves with an append.
 */
import {
  type AppendOutcome,
  type Conversation,
  conversationItemId,
  type ConversationItemsPage,
  conversationItemsPage,
  type ConversationStore,
  type Duplicate,
  firstDuplicate,
  itemsToAppend,
} from "./conversation_store.ts";
import type postgres from "postgres";
import type { Sql, TxSql } from "./postgres_sql.ts";
import { textArray } from "./postgres_text_array.ts";
import type { PageQuery } from "../pagination.ts";

type Queryable = Sql | TxSql;

export class PostgresConversationStore implements ConversationStore {
  readonly #sql: Sql;

  constructor(sql: Sql) {
    this.#sql = sql;
  }

  async create(
    conversation: Conversation,
    items: readonly Record<string, unknown>[],
  ): Promise<Conversation | Duplicate> {
    const duplicate = firstDuplicate(items, () => false);
    if (duplicate !== undefined) return duplicate;
    await this.#sql.begin(async (sql) => {
      await sql`
        INSERT INTO rill_conversations (id, created_at, metadata)
        VALUES (${conversation.id}, ${conversation.created_at}, ${JSON.stringify(conversation.metadata)})`;
      await insertItems(sql, conversation.id, 0, items);
    });
    return conversation;
  }

  async get(id: string): Promise<Conversation | undefined> {
    const [row] = await this.#sql`SELECT id, created_at, metadata FROM rill_conversations WHERE id = ${id}`;
    return row === undefined ? undefined : conversationOf(row);
  }

  async updateMetadata(id: string, metadata: Record<string, string>): Promise<Conversation | undefined> {
    const [row] = await this.#sql`
      UPDATE rill_conversations SET metadata = ${JSON.stringify(metadata)} WHERE id = ${id}
      RETURNING id, created_at, metadata`;
    return row === undefined ? undefined : conversationOf(row);
  }

  async delete(id: string): Promise<boolean> {
    return await this.#sql.begin(async (sql) => {
      const deleted = await sql`DELETE FROM rill_conversations WHERE id = ${id}`;
      await sql`DELETE FROM rill_conversation_items WHERE conversation_id = ${id}`;
      return deleted.count > 0;
    });
  }

  async append(
    id: string,
    items: readonly Record<string, unknown>[],
    held: "refuse" | "skip" = "refuse",
  ): Promise<AppendOutcome> {
    return await this.#sql.begin(async (sql): Promise<AppendOutcome> => {
      const [conversation] = await sql`SELECT id FROM rill_conversations WHERE id = ${id} FOR UPDATE`;
      if (conversation === undefined) return { kind: "no_conversation" };
      const ids = items.map(conversationItemId);
      const heldRows = ids.length === 0 ? [] : await sql`
        SELECT item_id FROM rill_conversation_items
        WHERE conversation_id = ${id} AND item_id = ANY(${textArray(sql, ids)})`;
      const heldIds = new Set(heldRows.map((row) => row.item_id as string));
      const fresh = itemsToAppend(items, held, (key) => heldIds.has(key));
      if ("kind" in fresh) return fresh;
      const [last] = await sql`
        SELECT MAX(position) AS position FROM rill_conversation_items WHERE conversation_id = ${id}`;
      const next = last?.position === null || last?.position === undefined ? 0 : Number(last.position) + 1;
      await insertItems(sql, id, next, fresh);
      return { kind: "appended" };
    });
  }

  async items(id: string): Promise<Record<string, unknown>[] | undefined> {
    if (await this.get(id) === undefined) return undefined;
    const rows = await this.#sql`
      SELECT item FROM rill_conversation_items WHERE conversation_id = ${id} ORDER BY position`;
    return rows.map((row) => JSON.parse(row.item as string));
  }

  async item(id: string, itemId: string): Promise<Record<string, unknown> | undefined> {
    const [row] = await this.#sql`
      SELECT item FROM rill_conversation_items WHERE conversation_id = ${id} AND item_id = ${itemId}`;
    return row === undefined ? undefined : JSON.parse(row.item as string);
  }

  async anyItem(itemId: string): Promise<Record<string, unknown> | undefined> {
    const [row] = await this.#sql`
      SELECT item FROM rill_conversation_items WHERE item_id = ${itemId} ORDER BY serial DESC LIMIT 1`;
    return row === undefined ? undefined : JSON.parse(row.item as string);
  }

  async deleteItem(id: string, itemId: string): Promise<boolean> {
    const deleted = await this.#sql`
      DELETE FROM rill_conversation_items WHERE conversation_id = ${id} AND item_id = ${itemId}`;
    return deleted.count > 0;
  }

  async listItems(
    id: string,
    query: PageQuery,
  ): Promise<ConversationItemsPage | "no_item" | undefined> {
    if (await this.get(id) === undefined) return undefined;
    let from = query.order === "asc" ? -1 : 2 ** 31 - 1;
    if (query.after !== undefined) {
      const [at] = await this.#sql`
        SELECT position FROM rill_conversation_items WHERE conversation_id = ${id} AND item_id = ${query.after}`;
      if (at === undefined) return "no_item";
      from = Number(at.position);
    }
    // One row more than the page tells whether there are more.
    const rows = query.order === "asc"
      ? await this.#sql`
        SELECT item_id, item FROM rill_conversation_items WHERE conversation_id = ${id} AND position > ${from}
        ORDER BY position LIMIT ${query.limit + 1}`
      : await this.#sql`
        SELECT item_id, item FROM rill_conversation_items WHERE conversation_id = ${id} AND position < ${from}
        ORDER BY position DESC LIMIT ${query.limit + 1}`;
    return conversationItemsPage(rows as unknown as { item_id: string; item: string }[], query.limit);
  }
}

/** Inserts `items` at positions `from`, `from + 1`, … of conversation `id`. */
async function insertItems(
  sql: Queryable,
  id: string,
  from: number,
  items: readonly Record<string, unknown>[],
): Promise<void> {
  if (items.length === 0) return;
  await sql`
    INSERT INTO rill_conversation_items (conversation_id, position, item_id, item)
    SELECT ${id}, ${from} + x.position - 1, x.item_id, x.item
    FROM unnest(
      ${textArray(sql, items.map(conversationItemId))},
      ${textArray(sql, items.map((item) => JSON.stringify(item)))}
    ) WITH ORDINALITY AS x(item_id, item, position)`;
}

/** A `rill_conversations` row (id, created_at, metadata) as the API's object. */
function conversationOf(row: postgres.Row): Conversation {
  return {
    id: row.id as string,
    object: "conversation",
    created_at: Number(row.created_at),
    metadata: JSON.parse(row.metadata as string),
  };
}
