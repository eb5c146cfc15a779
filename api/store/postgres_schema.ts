/**
 * The PostgreSQL store's schema (postgres_store.ts, postgres_conversation_store.ts) and its migrations.
 *
 * Invariants:
 * - `migrate` runs in one transaction holding a transaction-scoped advisory lock, so replicas starting together
 *   apply each migration exactly once, and none sees a half-made schema.
 * - `rill_schema` holds the version reached. Migrations are only ever appended to MIGRATIONS; a database at a newer
 *   version than this build knows is used as it is (migrations only add), never downgraded.
 * - Every table's name starts with `rill_`, so rill can share a database that already holds other tables.
 */
import type { Sql } from "./postgres_sql.ts";

/** Arbitrary but fixed: the advisory lock every rill replica takes around migrations. */
const MIGRATION_LOCK = 7_361_120_524;

/** Migration N (1-based) brings the schema from version N-1 to N. */
const MIGRATIONS: readonly string[] = [
  `
  CREATE TABLE rill_responses (
    id text PRIMARY KEY,
    response text NOT NULL,
    status text NOT NULL,
    conversation text NOT NULL,
    terminal boolean NOT NULL DEFAULT false,
    created_at bigint NOT NULL,
    owner text,
    previous_id text,
    cancel_requested boolean NOT NULL DEFAULT false
  );
  CREATE INDEX rill_responses_by_previous ON rill_responses (previous_id);
  CREATE INDEX rill_responses_by_created ON rill_responses (created_at);
  CREATE INDEX rill_responses_in_flight ON rill_responses (owner) WHERE terminal = false;
  CREATE TABLE rill_input_items (
    response_id text NOT NULL,
    position integer NOT NULL,
    item_id text NOT NULL,
    item text NOT NULL,
    serial bigint GENERATED ALWAYS AS IDENTITY,
    PRIMARY KEY (response_id, position)
  );
  CREATE INDEX rill_input_items_by_item ON rill_input_items (item_id, serial);
  CREATE TABLE rill_output_items (
    item_id text PRIMARY KEY,
    response_id text NOT NULL,
    item text NOT NULL
  );
  CREATE INDEX rill_output_items_by_response ON rill_output_items (response_id);
  CREATE TABLE rill_events (
    response_id text NOT NULL,
    seq integer NOT NULL,
    event text NOT NULL,
    PRIMARY KEY (response_id, seq)
  );
  CREATE TABLE rill_servers (
    id text PRIMARY KEY,
    heartbeat bigint NOT NULL
  );
  CREATE TABLE rill_settings (
    name text PRIMARY KEY,
    value text NOT NULL
  );
  CREATE TABLE rill_conversations (
    id text PRIMARY KEY,
    created_at bigint NOT NULL,
    metadata text NOT NULL
  );
  CREATE TABLE rill_conversation_items (
    conversation_id text NOT NULL,
    position integer NOT NULL,
    item_id text NOT NULL,
    item text NOT NULL,
    serial bigint GENERATED ALWAYS AS IDENTITY,
    PRIMARY KEY (conversation_id, position)
  );
  CREATE UNIQUE INDEX rill_conversation_items_by_id ON rill_conversation_items (conversation_id, item_id);
  CREATE INDEX rill_conversation_items_by_item ON rill_conversation_items (item_id, serial);
  `,
];

/** The schema version this build writes. */
export const SCHEMA_VERSION = MIGRATIONS.length;

/** Creates or migrates the schema; resolves with the version the database is at afterwards. */
export async function migrate(sql: Sql): Promise<number> {
  return await sql.begin(async (tx) => {
    await tx`SELECT pg_advisory_xact_lock(${MIGRATION_LOCK})`;
    await tx`CREATE TABLE IF NOT EXISTS rill_schema (version integer NOT NULL)`;
    const [row] = await tx`SELECT version FROM rill_schema`;
    let version = row === undefined ? 0 : Number(row.version);
    if (row === undefined) await tx`INSERT INTO rill_schema (version) VALUES (0)`;
    for (; version < MIGRATIONS.length; version++) await tx.unsafe(MIGRATIONS[version]!).simple();
    await tx`UPDATE rill_schema SET version = ${version} WHERE version < ${version}`;
    return version;
  });
}
