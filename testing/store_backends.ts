/**
 * Test support: the store implementations behind one factory, for the conformance suite. Each `fresh()` database is
 * empty; `open()` on it may be called several times (several servers on one store).
 */
import type { ResponseStore, StoreOptions } from "../api/store/response_store.ts";
import { SqliteStore } from "../api/store/sqlite_store.ts";
import { PostgresStore } from "../api/store/postgres_store.ts";
import { type PostgresServer, startPostgres } from "./postgres_server.ts";

export interface StoreDatabase {
  open(options?: StoreOptions): Promise<ResponseStore>;
}

export interface StoreBackend {
  readonly name: "sqlite" | "postgres";
  /** A new empty database. */
  fresh(): Promise<StoreDatabase>;
  close(): Promise<void>;
}

export async function sqliteBackend(): Promise<StoreBackend> {
  const dir = await Deno.makeTempDir({ prefix: "rill-store-" });
  let n = 0;
  return {
    name: "sqlite",
    fresh() {
      const path = `${dir}/db${n++}.sqlite`;
      return Promise.resolve({ open: (options = {}) => Promise.resolve(SqliteStore.open(path, options)) });
    },
    async close() {
      await Deno.remove(dir, { recursive: true });
    },
  };
}

export async function postgresBackend(server?: PostgresServer): Promise<StoreBackend> {
  const pg = server ?? await startPostgres();
  let n = 0;
  return {
    name: "postgres",
    async fresh() {
      const url = await pg.createDatabase(`conformance_${n++}`);
      return { open: (options = {}) => PostgresStore.connect(url, options) };
    },
    async close() {
      if (server === undefined) await pg.close();
    },
  };
}
