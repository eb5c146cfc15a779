/**
 * The Conversations API: create / retrieve / update / delete a conversation, and list / append / retrieve / delete
 * its items. Objects have the OpenAI shapes (`conversation`, `conversation.deleted`, a `list` of items whose
 * `first_id`/`last_id` are strings, `""` on an empty page as the spec types them).
 *
 * Items sent here are parsed exactly like `POST /v1/responses` input (the same 400s, naming `items[i]…`), an
 * `item_reference` stands for the stored item it names, and each item is stored in wire form with an id (ids the
 * client sent are kept; an id the conversation already holds is a 400, as OpenAI answers). `include` values are
 * checked like the responses routes': stored items already carry what their creating request included.
 */
import type { IdPrefix } from "../../events/ids.ts";
import { invalidRequest, notFound } from "../../prompt/errors.ts";
import { jsonResponse } from "../http_response.ts";
import type { ResponseStore } from "../store/response_store.ts";
import type { Conversation, Duplicate } from "../store/conversation_store.ts";
import {
  ConversationCreateSchema,
  ConversationItemsCreateSchema,
  ConversationUpdateSchema,
} from "./conversations_schema.ts";
import { parseInputItem } from "../responses/responses_schema.ts";
import { withId } from "../responses/responses_request.ts";
import { pageQuery } from "../pagination.ts";
import { checkQuery, parseOrThrow } from "../validation.ts";

export interface ConversationsServiceOptions {
  readonly store: ResponseStore;
  readonly newId: (prefix: IdPrefix) => string;
  /** Unix seconds. */
  readonly now: () => number;
}

export function conversationNotFound(id: string, param: string | null = null) {
  return notFound(`Conversation with id '${id}' not found.`, param);
}

function duplicateItem(duplicate: Duplicate) {
  return invalidRequest(
    `Duplicate item found with id ${duplicate.itemId}. Remove duplicate items from your input and try again.`,
    `items[${duplicate.index}].id`,
    "invalid_value",
  );
}

export class ConversationsService {
  readonly #o: ConversationsServiceOptions;

  constructor(options: ConversationsServiceOptions) {
    this.#o = options;
  }

  async create(body: Record<string, unknown>, url: URL): Promise<Response> {
    checkQuery(url, []);
    const parsed = parseOrThrow(ConversationCreateSchema, body);
    const items = await this.#items(parsed.items ?? []);
    const conversation: Conversation = {
      id: this.#o.newId("conv"),
      object: "conversation",
      created_at: this.#o.now(),
      metadata: parsed.metadata ?? {},
    };
    const created = await this.#o.store.conversations.create(conversation, items);
    if ("kind" in created) throw duplicateItem(created);
    return jsonResponse(created);
  }

  async retrieve(id: string, url: URL): Promise<Response> {
    checkQuery(url, []);
    const conversation = await this.#o.store.conversations.get(id);
    if (conversation === undefined) throw conversationNotFound(id);
    return jsonResponse(conversation);
  }

  /** `metadata: null` clears it. */
  async update(id: string, body: Record<string, unknown>, url: URL): Promise<Response> {
    checkQuery(url, []);
    const parsed = parseOrThrow(ConversationUpdateSchema, body);
    const conversation = await this.#o.store.conversations.updateMetadata(id, parsed.metadata ?? {});
    if (conversation === undefined) throw conversationNotFound(id);
    return jsonResponse(conversation);
  }

  async delete(id: string, url: URL): Promise<Response> {
    checkQuery(url, []);
    if (!await this.#o.store.conversations.delete(id)) throw conversationNotFound(id);
    return jsonResponse({ id, object: "conversation.deleted", deleted: true });
  }

  async listItems(id: string, url: URL): Promise<Response> {
    const query = pageQuery(url);
    const page = await this.#o.store.conversations.listItems(id, query);
    if (page === undefined) throw conversationNotFound(id);
    if (page === "no_item") throw notFound(`Item with id '${query.after}' not found in conversation '${id}'.`, "after");
    return jsonResponse(itemList(page.data, page.has_more));
  }

  /** Appends the items; answers them as a list, in the order given. */
  async createItems(id: string, body: Record<string, unknown>, url: URL): Promise<Response> {
    checkQuery(url, ["include"]);
    const parsed = parseOrThrow(ConversationItemsCreateSchema, body);
    if (await this.#o.store.conversations.get(id) === undefined) throw conversationNotFound(id);
    const items = await this.#items(parsed.items);
    const outcome = await this.#o.store.conversations.append(id, items);
    switch (outcome.kind) {
      case "appended":
        return jsonResponse(itemList(items, false));
      case "no_conversation":
        throw conversationNotFound(id);
      case "duplicate":
        throw duplicateItem(outcome);
      default: {
        const never: never = outcome;
        throw new TypeError(`Unhandled append outcome ${JSON.stringify(never)}`);
      }
    }
  }

  async retrieveItem(id: string, itemId: string, url: URL): Promise<Response> {
    checkQuery(url, ["include"]);
    const conversations = this.#o.store.conversations;
    const item = await conversations.item(id, itemId);
    if (item !== undefined) return jsonResponse(item);
    if (await conversations.get(id) === undefined) throw conversationNotFound(id);
    throw notFound(`Item with id '${itemId}' not found in conversation '${id}'.`);
  }

  /** Answers the conversation, as OpenAI does. */
  async deleteItem(id: string, itemId: string, url: URL): Promise<Response> {
    checkQuery(url, []);
    const conversations = this.#o.store.conversations;
    const conversation = await conversations.get(id);
    if (conversation === undefined) throw conversationNotFound(id);
    if (!await conversations.deleteItem(id, itemId)) {
      throw notFound(`Item with id '${itemId}' not found in conversation '${id}'.`);
    }
    return jsonResponse(conversation);
  }

  /** Wire items with ids, parsed like `/v1/responses` input; `item_reference`s resolved to the items they name. */
  async #items(raw: readonly unknown[]): Promise<Record<string, unknown>[]> {
    const items: Record<string, unknown>[] = [];
    for (const [i, entry] of raw.entries()) {
      let resolved = entry;
      if ((entry as { type?: unknown } | null)?.type === "item_reference") {
        const ref = (entry as { id?: unknown }).id;
        if (typeof ref !== "string" || ref === "") {
          throw invalidRequest("An item_reference needs a non-empty string 'id'", `items[${i}].id`);
        }
        resolved = (await this.#o.store.item(ref)) ?? (await this.#o.store.conversations.anyItem(ref));
        if (resolved === undefined) throw notFound(`Item with id '${ref}' not found.`, `items[${i}].id`);
      }
      items.push(asConversationItem(withId(parseInputItem(resolved, ["items", i]), this.#o)));
    }
    return items;
  }
}

/**
 * An item as a conversation holds it: an assistant message's `output_text` parts carry `annotations` and
 * `logprobs` (both required by the spec's content part; parsed input keeps only the text). Other items as given.
 */
export function asConversationItem(item: Record<string, unknown>): Record<string, unknown> {
  if (item.type !== "message" || !Array.isArray(item.content)) return item;
  const content = (item.content as Record<string, unknown>[]).map((part) =>
    part.type === "output_text" ? { annotations: [], logprobs: [], ...part } : part
  );
  return { ...item, content };
}

function itemList(data: readonly Record<string, unknown>[], hasMore: boolean) {
  const id = (item: Record<string, unknown> | undefined) => typeof item?.id === "string" ? item.id : "";
  return { object: "list", data, first_id: id(data[0]), last_id: id(data.at(-1)), has_more: hasMore };
}
