import type { InputItemsPage } from "./response_store.ts";
import type { PageQuery } from "../pagination.ts";

/** One stored input item: its id and the item's JSON without the id. */
export interface StoredInputItemRow {
  readonly item_id: string;
  readonly item: string;
}

/**
 * The page of a response's input items (rows in stored order) that a cursor query asks for: in `order`, after the
 * item `after` (an unknown `after` gives an empty page), at most `limit` items.
 */
export function inputItemsPage(
  rows: readonly StoredInputItemRow[],
  query: PageQuery,
): InputItemsPage {
  const ordered = query.order === "desc" ? [...rows].reverse() : rows;
  let start = 0;
  if (query.after !== undefined) {
    const at = ordered.findIndex((row) => row.item_id === query.after);
    start = at < 0 ? ordered.length : at + 1;
  }
  const page = ordered.slice(start, start + query.limit);
  return {
    data: page.map((row) => ({ id: row.item_id, ...JSON.parse(row.item) })),
    first_id: page[0]?.item_id ?? null,
    last_id: page.at(-1)?.item_id ?? null,
    has_more: start + page.length < ordered.length,
  };
}
