/** `--store` (RILL_STORE): which store `rill serve` opens, and the errors a bad URL or an unreachable database give. */
import assert from "node:assert/strict";
import { CliError, parseServeArgs, type ServeConfig } from "../../server/cli_options.ts";
import { openStore, redactedUrl } from "../../server/open_store.ts";
import { SqliteStore } from "../../api/store/sqlite_store.ts";

const parse = (args: string[], env: Record<string, string> = {}) =>
  parseServeArgs(args, (name) => env[name]) as ServeConfig;

Deno.test("--store: a postgres URL from the flag or RILL_STORE; default none (the SQLite file)", () => {
  assert.equal(parse([]).store, undefined);
  assert.equal(parse(["--store", "postgres://u:p@db:5432/rill"]).store, "postgres://u:p@db:5432/rill");
  assert.equal(parse([], { RILL_STORE: "postgresql://db/rill" }).store, "postgresql://db/rill");
  assert.equal(parse(["--store=postgres://a/b"], { RILL_STORE: "postgres://c/d" }).store, "postgres://a/b");
  for (const bad of ["rill.db", "mysql://db/rill", "postgres://db", "postgres:///rill"]) {
    assert.throws(() => parse(["--store", bad]), CliError, bad);
  }
});

Deno.test("openStore: SQLite without --store; an unreachable database is a one-line CliError without the password", async () => {
  const memory = await openStore({ dataDir: ":memory:", storeTtl: 0, store: undefined });
  assert.ok(memory instanceof SqliteStore);
  await memory.close();
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (listener.addr as Deno.NetAddr).port;
  listener.close();
  const url = `postgres://rill:hunter2@127.0.0.1:${port}/rill`;
  const error = await openStore({ dataDir: ":memory:", storeTtl: 0, store: url }).then(
    (store) => store.close().then(() => assert.fail("connected to nothing")),
    (e: unknown) => e,
  );
  assert.ok(error instanceof CliError, String(error));
  assert.match(error.message, /^Cannot open the store at postgres:\/\/rill:\*\*\*@127\.0\.0\.1/);
  assert.doesNotMatch(error.message, /hunter2/);
  assert.equal(redactedUrl("postgres://a:b@h/d"), "postgres://a:***@h/d");
});
