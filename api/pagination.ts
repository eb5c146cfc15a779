/**
 * Cursor pagination of the list routes (`GET /v1/conversations/{id}/items`, `GET /v1/responses/{id}/input_items`):
 * the query parameters `limit` (1..100, default 20), `order` (`asc` | `desc`, default `desc`) and `after` (an item
 * id), plus `include`. A bad value is a 400 naming its parameter; any other parameter is a 400 `unknown_parameter`.
 */
import { invalidRequest } from "../prompt/errors.ts";
import { checkQuery } from "./validation.ts";

/** One page's request: in `order`, after the item `after` (from the start when absent), at most `limit` items. */
export interface PageQuery {
  readonly limit: number;
  readonly order: "asc" | "desc";
  readonly after?: string;
}

export function pageQuery(url: URL): PageQuery {
  checkQuery(url, ["limit", "order", "after", "include"]);
  const q = url.searchParams;
  const limitText = q.get("limit") ?? "20";
  const limit = Number(limitText);
  if (!/^\d+$/.test(limitText) || limit < 1 || limit > 100) {
    throw invalidRequest("'limit' must be an integer between 1 and 100", "limit", "invalid_value");
  }
  const order = q.get("order") ?? "desc";
  if (order !== "asc" && order !== "desc") {
    throw invalidRequest("'order' must be 'asc' or 'desc'", "order", "invalid_value");
  }
  const after = q.get("after");
  return { limit, order, ...(after === null ? {} : { after }) };
}
