/**
 * Storage that does not grow without bound: retention (`--store-ttl`) deletes old responses, incremental vacuum
 * gives their pages back, and a `previous_response_id` chain stores each turn's own items only (never the whole
 * history again), while deleting or expiring a response never breaks the chains that continue it.
 */
import assert from "node:assert/strict";
import { DatabaseSync } from "node:sqlite";
import { SqliteStore } from "../../../api/store/sqlite_store.ts";
import { MODEL, postJson, startTestServer, tokenizer } from "../../../testing/test_server.ts";

async function withFile(body: (path: string) => Promise<void> | void): Promise<void> {
  const dir = await Deno.makeTempDir();
  try {
    await body(`${dir}/responses.sqlite`);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

function done(id: string): Record<string, unknown> {
  return { id, object: "response", status: "completed", output: [], error: null };
}

Deno.test("store: responses past the TTL are swept and the file shrinks", async () => {
  await withFile(async (path) => {
    let now = 1_000_000_000;
    const filler = "x".repeat(4000);
    const store = SqliteStore.open(path, { ttlSeconds: 60, clock: () => now });
    for (let i = 0; i < 300; i++) {
      await store.create(done(`resp_${i}`), [{ type: "message", role: "user", content: filler }], null);
      await store.appendEvents(`resp_${i}`, [{ type: "response.completed", sequence_number: 0, filler } as never]);
    }
    await store.close();
    const full = Deno.statSync(path).size;
    now += 30_000;
    const young = SqliteStore.open(path, { ttlSeconds: 60, clock: () => now });
    assert.equal(await young.sweep(), 0, "nothing is older than the TTL yet");
    await young.create(done("resp_new"), [], null);
    now += 31_000;
    assert.equal(await young.sweep(1000), 300);
    assert.equal(await young.get("resp_0"), undefined);
    assert.notEqual(await young.get("resp_new"), undefined);
    await young.close();
    const swept = Deno.statSync(path).size;
    assert.ok(swept < full / 4, `file is ${swept} bytes after the sweep, ${full} before`);
  });
});

Deno.test("store: a previous_response_id chain stores each turn's own items, and survives deletes", async () => {
  await withFile(async (path) => {
    const t = startTestServer({ storePath: path });
    try {
      let previous: string | null = null;
      const ids: string[] = [];
      for (let turn = 0; turn < 40; turn++) {
        const r = await postJson(`${t.baseURL}/responses`, {
          model: MODEL,
          input: `turn ${turn} says ${"hello ".repeat(20)}`,
          ...(previous === null ? {} : { previous_response_id: previous }),
        });
        assert.equal(r.status, 200);
        previous = (await r.json()).id as string;
        ids.push(previous);
      }
      // Each row holds its own input only.
      for (const id of ids) {
        const conversation = (await t.store.get(id))!.conversation as { items: unknown[] };
        assert.equal(conversation.items.length, 1);
      }
      const history = (await t.store.conversationItems(ids.at(-1)!))!;
      assert.equal(history.length, 40 + 39 * 2, "40 inputs and 39 earlier answers (reasoning + message each)");
      // Deleting turns in the middle of the chain writes the history into the turn that continued each.
      for (const id of [ids[10]!, ids[11]!, ids[25]!]) {
        assert.equal((await fetch(`${t.baseURL}/responses/${id}`, { method: "DELETE" })).status, 200);
      }
      assert.deepEqual(await t.store.conversationItems(ids.at(-1)!), history);
      const next = await postJson(`${t.baseURL}/responses`, {
        model: MODEL,
        input: "last",
        previous_response_id: ids.at(-1),
      });
      assert.equal(next.status, 200);
      await next.body?.cancel();
      const prompt = tokenizer().decode(t.engine.requests.at(-1)!.promptTokens);
      assert.match(prompt, /turn 0 says/);
      assert.match(prompt, /turn 11 says/);
      assert.match(prompt, /turn 39 says/);
    } finally {
      await t.close();
    }
  });
});

Deno.test("store: a file from before incremental vacuum is converted at open, its rows kept", async () => {
  await withFile(async (path) => {
    const old = new DatabaseSync(path);
    old.exec(
      "CREATE TABLE responses (id TEXT PRIMARY KEY, response TEXT NOT NULL, conversation TEXT NOT NULL, " +
        "terminal INTEGER NOT NULL DEFAULT 0, created_at INTEGER NOT NULL);",
    );
    old.prepare("INSERT INTO responses VALUES (?, ?, ?, 1, ?)").run(
      "resp_old",
      JSON.stringify(done("resp_old")),
      JSON.stringify({ version: 1, items: [] }),
      Date.now(),
    );
    await old.close();
    const store = SqliteStore.open(path);
    assert.equal((await store.get("resp_old"))?.response.status, "completed");
    await store.close();
    const check = new DatabaseSync(path);
    assert.equal((check.prepare("PRAGMA auto_vacuum").get() as { auto_vacuum: number }).auto_vacuum, 2);
    check.close();
  });
});
