/** The PostgreSQL store's schema: created once by replicas starting together, recorded in its version table. */
import assert from "node:assert/strict";
import postgres from "postgres";
import { migrate, SCHEMA_VERSION } from "../../../api/store/postgres_schema.ts";
import { startPostgres } from "../../../testing/postgres_server.ts";

Deno.test("postgres schema: replicas migrating at once apply each migration once; a second start changes nothing", async () => {
  const pg = await startPostgres();
  const clients = Array.from({ length: 4 }, () => postgres(pg.url(), { max: 1, onnotice: () => {} }));
  try {
    await clients[0]!.unsafe("CREATE TABLE unrelated (id int)");
    const versions = await Promise.all(clients.map((sql) => migrate(sql)));
    assert.deepEqual(versions, versions.map(() => SCHEMA_VERSION));
    const sql = clients[0]!;
    assert.deepEqual([...await sql`SELECT version FROM rill_schema`].map((row) => row.version), [SCHEMA_VERSION]);
    const tables = [
      ...await sql`
      SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY tablename`,
    ].map((row) => row.tablename);
    assert.ok(tables.includes("unrelated"), "other tables are left alone");
    assert.ok(tables.filter((name) => name !== "unrelated").every((name) => name.startsWith("rill_")), String(tables));
    assert.equal(await migrate(sql), SCHEMA_VERSION);
    assert.equal((await sql`SELECT count(*)::int AS n FROM rill_schema`)[0]!.n, 1);
  } finally {
    await Promise.all(clients.map((sql) => sql.end({ timeout: 1 })));
    await pg.close();
  }
});
