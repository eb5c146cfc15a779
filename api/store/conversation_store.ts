/**
 * Conversations (the Conversations API): each conversation's metadata and its ordered items, in the same store as
 * stored responses (sqlite_conversation_store.ts, postgres_conversation_store.ts).
 *
 * Invariants every implementation keeps:
 * - Items are kept in append order; two responses (or servers) appending to one conversation at once never lose or
 *   interleave each other's items: each append's items stay contiguous, in the order given.
 * - An item id is unique within its conversation (a second item with a known id is refused, as OpenAI does).
 * - Items are copies: deleting a response leaves the conversation's items, and deleting a conversation leaves the
 *   responses made in it.
 */
import type { PageQuery } from "../pagination.ts";
export interface Conversation {
  readonly id: string;
  readonly object: "conversation";
  /** Unix seconds. */
  readonly created_at: number;
  readonly metadata: Record<string, string>;
}

export interface ConversationItemsPage {
  readonly data: Record<string, unknown>[];
  readonly first_id: string | null;
  readonly last_id: string | null;
  readonly has_more: boolean;
}

/** An item whose id the conversation already holds, or that repeats among the items given. */
export interface Duplicate {
  readonly kind: "duplicate";
  /** Its index among the items given. */
  readonly index: number;
  readonly itemId: string;
}

export type AppendOutcome = { readonly kind: "appended" } | { readonly kind: "no_conversation" } | Duplicate;

export interface ConversationStore {
  /**
   * Creates a conversation holding `items` (each with an `id`), atomically: when an id repeats within `items`,
   * nothing is created and the duplicate is returned.
   */
  create(conversation: Conversation, items: readonly Record<string, unknown>[]): Promise<Conversation | Duplicate>;
  get(id: string): Promise<Conversation | undefined>;
  /** Replaces the metadata; undefined for an unknown conversation. */
  updateMetadata(id: string, metadata: Record<string, string>): Promise<Conversation | undefined>;
  /** Deletes the conversation and its items; false when it did not exist. */
  delete(id: string): Promise<boolean>;
  /**
   * Appends `items` (each with an `id`) after the conversation's last item, all or nothing: an unknown conversation
   * or an id the conversation already holds (or that repeats within `items`) appends nothing. With `held: "skip"`,
   * such items are left out instead, the first of each id kept.
   */
  append(id: string, items: readonly Record<string, unknown>[], held?: "refuse" | "skip"): Promise<AppendOutcome>;
  /** Every item, oldest first; undefined for an unknown conversation. */
  items(id: string): Promise<Record<string, unknown>[] | undefined>;
  /** One item; undefined when the conversation does not hold it. */
  item(id: string, itemId: string): Promise<Record<string, unknown> | undefined>;
  /** An item of any conversation (the latest stored with that id), for `item_reference`. */
  anyItem(itemId: string): Promise<Record<string, unknown> | undefined>;
  /** Deletes one item; false when the conversation does not hold it. */
  deleteItem(id: string, itemId: string): Promise<boolean>;
  /**
   * Cursor pagination: the items after the item `after` in `order` (from the start when absent). Undefined for an
   * unknown conversation, `"no_item"` when `after` names no item of it.
   */
  listItems(
    id: string,
    query: PageQuery,
  ): Promise<ConversationItemsPage | "no_item" | undefined>;
}

export function conversationItemId(item: Record<string, unknown>): string {
  const id = item.id;
  if (typeof id !== "string" || id === "") throw new TypeError("a conversation item needs a non-empty string id");
  return id;
}

/** The first item whose id repeats within `items` or is already `held`. */
export function firstDuplicate(
  items: readonly Record<string, unknown>[],
  held: (itemId: string) => boolean,
): Duplicate | undefined {
  const seen = new Set<string>();
  for (const [index, item] of items.entries()) {
    const key = conversationItemId(item);
    if (seen.has(key) || held(key)) return { kind: "duplicate", index, itemId: key };
    seen.add(key);
  }
  return undefined;
}

/**
 * What an append of `items` writes: with `held: "refuse"`, all of them, or the first duplicate (an id repeated
 * within `items` or already held); with `"skip"`, the first of each id that is not held.
 */
export function itemsToAppend(
  items: readonly Record<string, unknown>[],
  held: "refuse" | "skip",
  isHeld: (itemId: string) => boolean,
): readonly Record<string, unknown>[] | Duplicate {
  const seen = new Set<string>();
  const fresh = held === "refuse" ? items : items.filter((item) => {
    const key = conversationItemId(item);
    const keep = !seen.has(key) && !isHeld(key);
    seen.add(key);
    return keep;
  });
  return firstDuplicate(fresh, isHeld) ?? fresh;
}

/** A page of at most `limit` items from rows read one past it (the extra row tells whether there are more). */
export function conversationItemsPage(
  rows: readonly { readonly item_id: string; readonly item: string }[],
  limit: number,
): ConversationItemsPage {
  const page = rows.slice(0, limit);
  return {
    data: page.map((row) => JSON.parse(row.item)),
    first_id: page[0]?.item_id ?? null,
    last_id: page.at(-1)?.item_id ?? null,
    has_more: rows.length > limit,
  };
}
