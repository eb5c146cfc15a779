/**
 * A text[] parameter for the PostgreSQL store's batch statements, sent as one string of the values joined by the
 * ASCII record separator (U+001E) and split by the server. Rows of a batch are mostly JSON, which never holds a raw
 * control character (JSON.stringify escapes them), so this costs one join here and one split there, where a text
 * array literal costs escaping every quote of every value on this side, and a jsonb document parsing on that side.
 * Values that hold the separator (an id a client chose, say), and empty strings (which a split cannot tell from
 * nothing), go as an ordinary array parameter instead.
 */
import type postgres from "postgres";
import type { Sql, TxSql } from "./postgres_sql.ts";

type Tag = Sql | TxSql;

const SEPARATOR = "\u001e";

/** `values` as a text[] expression to interpolate into a statement of `sql`. */
export function textArray(sql: Tag, values: readonly string[]): postgres.Fragment {
  if (values.some((value) => value === "" || value.includes(SEPARATOR))) return sql`${sql.array([...values])}::text[]`;
  return sql`string_to_array(${values.join(SEPARATOR)}, E'\\x1e')`;
}
