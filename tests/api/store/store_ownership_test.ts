/**
 * One data directory under several servers, and crash recovery: each server owns its in-flight rows (owner id +
 * lease), never touches a live server's, takes over a dead one's, and fails rows a crash left in flight at start-up.
 */
import assert from "node:assert/strict";
import { SqliteStore } from "../../../api/store/sqlite_store.ts";
import { answerText, MODEL, postJson, startTestServer, tokenizer } from "../../../testing/test_server.ts";

function inFlight(id: string): Record<string, unknown> {
  return { id, object: "response", status: "in_progress", output: [], error: null };
}

async function withFile(body: (path: string) => Promise<void> | void): Promise<void> {
  const dir = await Deno.makeTempDir();
  try {
    await body(`${dir}/responses.sqlite`);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

Deno.test("store: rows left in flight by a crashed server are failed at start-up, with a terminal event", async () => {
  await withFile(async (path) => {
    const crashed = SqliteStore.open(path, { owner: "srv_crashed" });
    await crashed.heartbeat();
    await crashed.create(inFlight("resp_a"), [], null);
    await crashed.appendEvents("resp_a", [{ type: "response.created", sequence_number: 0 }]);
    // A kill -9 closes nothing: the lease row stays, and expires.
    let now = Date.now() + 60_000;
    const next = SqliteStore.open(path, { owner: "srv_next", clock: () => now });
    try {
      assert.equal(await next.startLease(), 1);
      const stored = (await next.get("resp_a"))!.response as { status: string; error: { code: string } };
      assert.equal(stored.status, "failed");
      assert.equal(stored.error.code, "server_error");
      assert.deepEqual((await next.eventsAfter("resp_a", -1)).map((e) => e.type), [
        "response.created",
        "response.failed",
      ]);
      assert.equal(await next.isTerminal("resp_a"), true);
      now += 1000;
      assert.equal(await next.recoverOrphans(), 0, "failed once");
    } finally {
      await next.close();
    }
  });
});

Deno.test("store: a live server's in-flight rows are never touched; a dead server's are taken over once", async () => {
  await withFile(async (path) => {
    let now = 1_000_000;
    const a = SqliteStore.open(path, { owner: "srv_a", leaseMs: 10_000, clock: () => now });
    const b = SqliteStore.open(path, { owner: "srv_b", leaseMs: 10_000, clock: () => now });
    try {
      await a.heartbeat();
      await b.heartbeat();
      await a.create(inFlight("resp_a"), [], null);
      assert.equal(await b.recoverOrphans(), 0);
      assert.equal((await b.get("resp_a"))!.response.status, "in_progress");
      assert.equal(await b.ownerAlive(await b.ownerOf("resp_a")), true);
      // A stops beating; B takes over once the lease is gone.
      now += 11_000;
      await b.heartbeat();
      assert.equal(await b.recoverOrphans(), 1);
      assert.equal((await b.get("resp_a"))!.response.status, "failed");
      // A's late writes cannot add a second terminal event or overwrite the failure.
      await a.appendEvents("resp_a", [{ type: "response.completed", sequence_number: 1 }]);
      await a.update("resp_a", { ...inFlight("resp_a"), status: "completed" });
      assert.deepEqual((await a.eventsAfter("resp_a", -1)).map((e) => e.type), ["response.failed"]);
      assert.equal((await a.get("resp_a"))!.response.status, "failed");
    } finally {
      await a.close();
      await b.close();
    }
  });
});

Deno.test("store: two servers on one file: a GET on B leaves A's running background response to A", async () => {
  await withFile(async (path) => {
    const long = tokenizer().encode(answerText("word ".repeat(60)));
    const a = startTestServer({ storePath: path, stepDelayMs: 5, chunking: "one", script: long });
    const b = startTestServer({ storePath: path });
    await a.store.startLease();
    await b.store.startLease();
    try {
      const created = await (await postJson(`${a.baseURL}/responses`, { model: MODEL, input: "hi", background: true }))
        .json();
      await new Promise((r) => setTimeout(r, 30));
      const seen = await (await fetch(`${b.baseURL}/responses/${created.id}`)).json();
      assert.equal(seen.status, "in_progress");
      // B's tail follows A's writes (polling) and ends with A's terminal event.
      const tail = await (await fetch(`${b.baseURL}/responses/${created.id}?stream=true`)).text();
      const types = tail.split("\n").filter((l) => l.startsWith("event: ")).map((l) => l.slice(7));
      assert.equal(types.at(-1), "response.completed");
      const log = await a.store.eventsAfter(created.id, -1);
      assert.equal(
        log.filter((e) => e.type.startsWith("response.") && /completed|failed|incomplete/.test(e.type)).length,
        1,
      );
      assert.equal((await b.store.get(created.id))!.response.status, "completed");
    } finally {
      await a.close();
      await b.close();
    }
  });
});

Deno.test("store: two servers on one file: a cancel sent to B stops the background response A generates", async () => {
  await withFile(async (path) => {
    const words = 300;
    const long = tokenizer().encode(answerText("word ".repeat(words)));
    const a = startTestServer({ storePath: path, stepDelayMs: 5, chunking: "one", script: long });
    const b = startTestServer({ storePath: path });
    await a.store.startLease();
    await b.store.startLease();
    try {
      const created = await (await postJson(`${a.baseURL}/responses`, { model: MODEL, input: "hi", background: true }))
        .json();
      await new Promise((r) => setTimeout(r, 50));
      const r = await postJson(`${b.baseURL}/responses/${created.id}/cancel`, {});
      const cancelled = await r.json();
      assert.equal(r.status, 200);
      assert.equal(cancelled.status, "cancelled", "B answers once A ended it");
      const log = await a.store.eventsAfter(created.id, -1);
      assert.equal(log.filter((e) => /^response\.(completed|failed|incomplete)$/.test(e.type)).length, 1);
      const deltas = log.filter((e) => e.type === "response.output_text.delta").length;
      assert.ok(deltas < words / 2, `A stopped generating (${deltas} text deltas)`);
      assert.equal(a.server.active(), 0);
    } finally {
      await a.close();
      await b.close();
    }
  });
});
