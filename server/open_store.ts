/**
 * Opens the store `rill serve` was given: PostgreSQL with `--store postgres://…` (its schema created or migrated
 * first), else the SQLite file `responses.sqlite` in `--data-dir` (or memory only with `:memory:`).
 * `RILL_STORE_LEASE_MS` sets how long a replica's lease outlives its last heartbeat (default 15000): a replica that
 * dies has its in-flight responses failed by another one that long after.
 */
import { CliError } from "./cli_options.ts";
import { PostgresStore } from "../api/store/postgres_store.ts";
import type { LeaseEvent, ResponseStore } from "../api/store/response_store.ts";
import { SqliteStore } from "../api/store/sqlite_store.ts";

export interface StoreSource {
  readonly dataDir: string;
  readonly storeTtl: number;
  readonly store: string | undefined;
}

/** onLease: told of failed lease renewals and of takeovers (rill serve logs them). */
export async function openStore(
  source: StoreSource,
  onLease?: (event: LeaseEvent) => void,
): Promise<ResponseStore> {
  const ttlSeconds = source.storeTtl;
  const lease = Deno.env.get("RILL_STORE_LEASE_MS");
  const leaseMs = lease === undefined || lease === "" ? undefined : Number(lease);
  if (leaseMs !== undefined && !(Number.isInteger(leaseMs) && leaseMs >= 100)) {
    throw new CliError(`RILL_STORE_LEASE_MS must be an integer ≥ 100, got '${lease}'`);
  }
  const options = {
    ttlSeconds,
    ...(leaseMs === undefined ? {} : { leaseMs }),
    ...(onLease === undefined ? {} : { onLease }),
  };
  if (source.store !== undefined) {
    try {
      return await PostgresStore.connect(source.store, options);
    } catch (error) {
      throw new CliError(
        `Cannot open the store at ${redactedUrl(source.store)}: ${error instanceof Error ? error.message : error}`,
      );
    }
  }
  if (source.dataDir === ":memory:") return SqliteStore.open(":memory:", options);
  try {
    Deno.mkdirSync(source.dataDir, { recursive: true });
    return SqliteStore.open(`${source.dataDir}/responses.sqlite`, options);
  } catch (error) {
    throw new CliError(
      `Cannot open the response store in '${source.dataDir}': ${error instanceof Error ? error.message : error}`,
    );
  }
}

/** The URL without its password, for messages and logs. */
export function redactedUrl(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.password !== "") parsed.password = "***";
    return parsed.toString();
  } catch {
    return "the given URL";
  }
}
