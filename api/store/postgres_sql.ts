/** The `postgres` client's connection (pool) and transaction handles, as the PostgreSQL store's files use them. */
import type postgres from "postgres";

// deno-lint-ignore no-explicit-any
export type Sql = postgres.Sql<any>;
// deno-lint-ignore no-explicit-any
export type TxSql = postgres.TransactionSql<any>;
