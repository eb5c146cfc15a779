/**
 * Opens the store `rill serve` was given: PostgreSQL with `--store postgres://…` (its schema created or migrated
 * first), else the SQLite file `responses.sqlite` in `--data-dir` (or memory only with `:memory:`).
 */
import { CliError } from "./cli_options.ts";
import { PostgresStore } from "./postgres_store.ts";
import type { ResponseStore } from "./response_store.ts";
import { SqliteStore } from "./sqlite_store.ts";

export interface StoreSource {
  readonly dataDir: string;
  readonly storeTtl: number;
  readonly store: string | undefined;
}

export async function openStore(source: StoreSource): Promise<ResponseStore> {
  const ttlSeconds = source.storeTtl;
  if (source.store !== undefined) {
    try {
      return await PostgresStore.connect(source.store, { ttlSeconds });
    } catch (error) {
      throw new CliError(
        `Cannot open the store at ${redactedUrl(source.store)}: ${error instanceof Error ? error.message : error}`,
      );
    }
  }
  if (source.dataDir === ":memory:") return SqliteStore.open(":memory:", { ttlSeconds });
  try {
    Deno.mkdirSync(source.dataDir, { recursive: true });
    return SqliteStore.open(`${source.dataDir}/responses.sqlite`, { ttlSeconds });
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
