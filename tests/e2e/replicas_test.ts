/**
 * Many rill servers, one state: three `rill serve` processes (the real CLI, server and store over the scripted
 * engine) on one PostgreSQL database started for the test, behind a round-robin proxy with no affinity. Every
 * stateful Responses feature crosses replicas: chains, item references, tails of another replica's running response
 * (byte-identical, live), cancel, delete, input_items, Conversations, compaction and encrypted reasoning; then a
 * replica killed with -9 while its background responses run.
 */
import assert from "node:assert/strict";
import { type Proc, spawnServe } from "../../testing/serve_process.ts";
import { type PostgresServer, startPostgres } from "../../testing/postgres_server.ts";
import { type RoundRobinProxy, startRoundRobinProxy } from "../../testing/round_robin_proxy.ts";
import { MODEL } from "../../testing/test_server.ts";

const ENTRY = new URL("../../testing/scripted_serve.ts", import.meta.url).pathname;
const LONG_WORDS = 150;
const LEASE_MS = 1500;

function post(base: string, path: string, body: unknown): Promise<Response> {
  return fetch(`${base}/v1${path}`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });
}

async function json(response: Response | Promise<Response>, status = 200): Promise<Record<string, unknown>> {
  const r = await response;
  const body = await r.json();
  assert.equal(r.status, status, JSON.stringify(body));
  return body;
}

/** The SSE events of a body, in order. */
function events(text: string): { type: string; data: Record<string, unknown> }[] {
  return text.split("\n\n").filter((block) => block.includes("data: ")).map((block) => {
    const data = JSON.parse(block.slice(block.indexOf("data: ") + 6));
    return { type: data.type as string, data };
  });
}

/** The status of a GET, its body discarded. */
async function statusOf(url: string): Promise<number> {
  const r = await fetch(url);
  await r.body?.cancel();
  return r.status;
}

const TERMINAL = new Set(["response.completed", "response.incomplete", "response.failed"]);

async function startReplicas(url: string, count: number, leaseMs = LEASE_MS): Promise<Proc[]> {
  const env = {
    RILL_TEST_STEP_DELAY_MS: "20",
    RILL_TEST_LONG_WORDS: String(LONG_WORDS),
    RILL_STORE_LEASE_MS: String(leaseMs),
  };
  // Started together: the schema migration must not race.
  return await Promise.all(
    Array.from({ length: count }, () => spawnServe(ENTRY, ["--port", "0", "--store", url], env)),
  );
}

/** A failure with the end of each replica's log, which says why a replica went away. */
function withLogs(error: unknown, replicas: readonly Proc[]): Error {
  const logs = replicas.map((replica, i) => `--- replica ${i} ---\n${replica.stderr().slice(-2000)}`).join("\n");
  return new Error(`${error instanceof Error ? error.stack ?? error.message : error}\n${logs}`);
}

async function stopAll(replicas: readonly Proc[]): Promise<void> {
  for (const replica of replicas) {
    try {
      replica.child.kill("SIGKILL");
    } catch {
      // Already gone.
    }
    await replica.finish();
  }
}

Deno.test("replicas: three servers on one PostgreSQL serve every stateful feature from any replica", async (t) => {
  let pg: PostgresServer | undefined;
  let replicas: Proc[] = [];
  let proxy: RoundRobinProxy | undefined;
  try {
    pg = await startPostgres();
    replicas = await startReplicas(await pg.createDatabase("replicas"), 3);
    const lb = startRoundRobinProxy(replicas.map((r) => r.url));
    proxy = lb;
    const [a, b, c] = replicas.map((r) => r.url) as [string, string, string];

    await t.step("a previous_response_id chain and item references continue on other replicas", async () => {
      const first = await json(post(lb.url, "/responses", { model: MODEL, input: "hi" }));
      const second = await json(
        post(lb.url, "/responses", { model: MODEL, input: "again", previous_response_id: first.id }),
      );
      const third = await json(
        post(lb.url, "/responses", { model: MODEL, input: "more", previous_response_id: second.id }),
      );
      const usage = (r: Record<string, unknown>) => (r.usage as { input_tokens: number }).input_tokens;
      assert.ok(usage(third) > usage(second) && usage(second) > usage(first), "each turn sees the history");
      const message = (first.output as { id: string; type: string }[]).find((item) => item.type === "message")!;
      await json(post(lb.url, "/responses", {
        model: MODEL,
        input: [{ type: "item_reference", id: message.id }, { role: "user", content: "and?" }],
      }));
      // Every replica reads every response and its input items.
      for (const base of [a, b, c]) {
        assert.equal((await json(fetch(`${base}/v1/responses/${third.id}`))).status, "completed");
        const items = await json(fetch(`${base}/v1/responses/${third.id}/input_items`));
        assert.deepEqual((items.data as { type: string }[]).map((item) => item.type), ["message"]);
      }
      // Deleted through one replica, gone on all; the chain that continues it still continues.
      assert.equal((await json(fetch(`${a}/v1/responses/${first.id}`, { method: "DELETE" }))).deleted, true);
      for (const base of [a, b, c]) {
        assert.equal(await statusOf(`${base}/v1/responses/${first.id}`), 404);
      }
      const fourth = await json(post(b, "/responses", { model: MODEL, input: "last", previous_response_id: third.id }));
      assert.ok(usage(fourth) > usage(third));
    });

    await t.step("a tail on B of a response A is still streaming is live and byte-identical", async () => {
      const started = performance.now();
      const r = await post(a, "/responses", { model: MODEL, input: "[long] talk", stream: true });
      const reader = r.body!.getReader();
      const decoder = new TextDecoder();
      let own = "";
      while (!own.includes("response.created")) own += decoder.decode((await reader.read()).value, { stream: true });
      const id = (events(own)[0]!.data.response as { id: string }).id;
      const tail = fetch(`${b}/v1/responses/${id}?stream=true`);
      const suffix = fetch(`${c}/v1/responses/${id}?stream=true&starting_after=5`);
      // B's first bytes come while A is still generating.
      const tailReader = (await tail).body!.getReader();
      let tailed = decoder.decode((await tailReader.read()).value);
      const firstTailByte = performance.now();
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        own += decoder.decode(value, { stream: true });
      }
      const ownEnded = performance.now();
      for (;;) {
        const { done, value } = await tailReader.read();
        if (done) break;
        tailed += decoder.decode(value, { stream: true });
      }
      assert.ok(firstTailByte < ownEnded, "the tail started before the stream ended");
      assert.ok(ownEnded - started > 1000, "the response took a while (the tail had something to follow)");
      assert.equal(tailed, own, "B's tail is byte-identical to A's stream");
      const rest = await (await suffix).text();
      assert.deepEqual(
        events(rest).map((e) => e.data.sequence_number),
        events(own).slice(6).map((e) => e.data.sequence_number),
      );
      assert.ok(own.endsWith(rest), "the suffix after starting_after=5 is the stream's own");
    });

    await t.step("cancel on B stops the background response A is generating", async () => {
      const created = await json(post(a, "/responses", { model: MODEL, input: "[long] go", background: true }));
      const id = created.id as string;
      // Wait until A is visibly generating (from C), then cancel through B.
      for (let i = 0; i < 200; i++) {
        const seen = await json(fetch(`${c}/v1/responses/${id}`));
        if (seen.status === "in_progress") break;
        await new Promise((r) => setTimeout(r, 20));
      }
      const log = await fetch(`${a}/v1/responses/${id}?stream=true`);
      const cancelled = await json(post(b, `/responses/${id}/cancel`, {}));
      assert.equal(cancelled.status, "cancelled");
      const types = events(await log.text()).map((e) => e.type);
      assert.equal(types.filter((type) => TERMINAL.has(type)).length, 1, "one terminal event");
      const deltas = types.filter((type) => type === "response.output_text.delta").length;
      assert.ok(deltas < LONG_WORDS, `generation stopped early (${deltas} text deltas of ~${LONG_WORDS * 2})`);
      // A's generation really stopped: nothing more is written after the cancel.
      const after = await json(fetch(`${c}/v1/responses/${id}`));
      assert.equal(after.status, "cancelled");
      await new Promise((r) => setTimeout(r, 200));
      const again = await (await fetch(`${c}/v1/responses/${id}?stream=true`)).text();
      assert.equal(events(again).length, types.length);
    });

    await t.step("Conversations CRUD and turns from any replica", async () => {
      const conversation = await json(post(lb.url, "/conversations", { metadata: { topic: "x" }, items: [] }));
      const id = conversation.id as string;
      await json(post(lb.url, `/conversations/${id}/items`, { items: [{ role: "user", content: "context" }] }));
      await json(post(lb.url, "/responses", { model: MODEL, input: "one", conversation: id }));
      await json(post(lb.url, "/responses", { model: MODEL, input: "two", conversation: id }));
      const lists = await Promise.all(
        [a, b, c].map((base) => json(fetch(`${base}/v1/conversations/${id}/items?order=asc`))),
      );
      for (const list of lists) assert.deepEqual(list, lists[0]);
      const items = lists[0]!.data as { id: string; type: string }[];
      assert.equal(
        items.filter((item) => item.type === "message").length,
        5,
        "context, two turns of question + answer",
      );
      await json(post(b, `/conversations/${id}`, { metadata: { topic: "y" } }));
      assert.deepEqual((await json(fetch(`${c}/v1/conversations/${id}`))).metadata, { topic: "y" });
      await json(fetch(`${a}/v1/conversations/${id}/items/${items[0]!.id}`, { method: "DELETE" }));
      assert.equal(
        (await fetch(`${b}/v1/conversations/${id}/items/${items[0]!.id}`).then(async (
          r,
        ) => (await r.body?.cancel(), r))).status,
        404,
      );
      await json(fetch(`${c}/v1/conversations/${id}`, { method: "DELETE" }));
      assert.equal(
        (await fetch(`${a}/v1/conversations/${id}`).then(async (r) => (await r.body?.cancel(), r))).status,
        404,
      );
    });

    await t.step("compaction and encrypted reasoning sealed on one replica open on another", async () => {
      const compacted = await json(post(a, "/responses/compact", { model: MODEL, input: "a long talk about Paris" }));
      const output = compacted.output as { type: string; encrypted_content?: string }[];
      assert.ok(output.some((item) => item.type === "compaction"));
      await json(post(b, "/responses", { model: MODEL, input: [...output, { role: "user", content: "go on" }] }));
      const sealed = await json(post(c, "/responses", {
        model: MODEL,
        input: "hi",
        store: false,
        include: ["reasoning.encrypted_content"],
      }));
      const items = sealed.output as { type: string; encrypted_content?: string }[];
      assert.ok(items.some((item) => item.type === "reasoning" && typeof item.encrypted_content === "string"));
      await json(post(a, "/responses", {
        model: MODEL,
        store: false,
        input: [{ role: "user", content: "hi" }, ...items, { role: "user", content: "and then?" }],
      }));
    });

    await t.step("kill -9 of a replica: its background responses end failed once, tails on others end", async () => {
      const ids: string[] = [];
      for (let i = 0; i < 3; i++) {
        ids.push(
          (await json(post(c, "/responses", { model: MODEL, input: `[long] bg ${i}`, background: true }))).id as string,
        );
      }
      await new Promise((r) => setTimeout(r, 200));
      const tail = fetch(`${a}/v1/responses/${ids[0]}?stream=true`);
      const tailReader = (await tail).body!.getReader();
      await tailReader.read();
      const killedAt = performance.now();
      replicas[2]!.child.kill("SIGKILL");
      await replicas[2]!.finish();
      let text = "";
      const decoder = new TextDecoder();
      for (;;) {
        const { done, value } = await tailReader.read();
        if (done) break;
        text += decoder.decode(value, { stream: true });
      }
      assert.equal(events(text).at(-1)!.type, "response.failed", "the tail on A ends with the failure");
      // Its last heartbeat was at most a third of a lease before the kill.
      assert.ok(performance.now() - killedAt >= LEASE_MS * 2 / 3 - 20, "taken over only after the lease expired");
      for (const id of ids) {
        const failed = await json(fetch(`${b}/v1/responses/${id}`));
        assert.equal(failed.status, "failed");
        assert.match((failed.error as { message: string }).message, /stopped before it finished/);
        const log = events(await (await fetch(`${a}/v1/responses/${id}?stream=true`)).text());
        assert.equal(log.filter((e) => TERMINAL.has(e.type)).length, 1, "one terminal event");
        assert.equal(log.at(-1)!.type, "response.failed");
      }
      // The replica that took them over says so, with the owner's lease age, in its log.
      const logged = replicas.slice(0, 2).map((replica) => replica.stderr()).join("\n");
      const line = logged.split("\n").find((l) => l.includes("failed the in-flight responses of a server"));
      assert.ok(line !== undefined, "a takeover is logged");
      assert.match(line, /renewedMsAgo=\d+/);
      assert.ok(ids.some((id) => line.includes(id)), `the log names the responses taken over: ${line}`);
    });
  } catch (error) {
    throw withLogs(error, replicas);
  } finally {
    await proxy?.close();
    await stopAll(replicas);
    await pg?.close();
  }
});

/** Reads a whole SSE body, noting when the terminal event arrived. */
async function readStream(response: Response): Promise<{ text: string; endedAt: number }> {
  const reader = response.body!.getReader();
  const decoder = new TextDecoder();
  let text = "";
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    text += decoder.decode(value, { stream: true });
  }
  return { text, endedAt: performance.now() };
}

Deno.test("replicas: the database stopped and restarted under load: 503s, generation goes on, nothing lost", async () => {
  let pg: PostgresServer | undefined;
  let replicas: Proc[] = [];
  try {
    pg = await startPostgres();
    // The default lease, well past the outage: after it every replica waits a lease before taking over others, and
    // the owner, alive all along, must have renewed by then even when its reconnect lags on a loaded machine (a 6 s
    // lease was once overtaken so under heavy load: taking over a live owner whose reconnect lags a lease is the
    // protocol's documented limit, not what this case checks).
    replicas = await startReplicas(await pg.createDatabase("outage"), 2, 15_000);
    const [a, b] = replicas.map((r) => r.url) as [string, string];
    const streams = await Promise.all(
      Array.from({ length: 4 }, (_, i) => post(a, "/responses", { model: MODEL, input: `[long] s${i}`, stream: true })),
    );
    // Read from now on, a failure kept as a value: it is asserted on below, after the outage.
    const reads = streams.map((stream) => readStream(stream).catch((error: unknown) => ({ error })));
    const background = (await json(post(a, "/responses", { model: MODEL, input: "[long] bg", background: true })))
      .id as string;
    await new Promise((r) => setTimeout(r, 500));
    const stoppedAt = performance.now();
    await pg.stop();

    // Requests that need the database: 503 with Retry-After, promptly.
    const asked = performance.now();
    const get = await fetch(`${b}/v1/responses/${background}`);
    assert.equal(get.status, 503, await get.text());
    assert.equal(get.headers.get("retry-after"), "1");
    const stored = await post(b, "/responses", { model: MODEL, input: "hi" });
    assert.equal(stored.status, 503);
    assert.equal(((await stored.json()).error as { code: string }).code, "store_unavailable");
    assert.ok(performance.now() - asked < 5000, "answered, not held");
    // Generation that does not need it goes on.
    assert.equal((await json(post(a, "/responses", { model: MODEL, input: "hi", store: false }))).status, "completed");
    const outage = 2500 - (performance.now() - stoppedAt);
    if (outage > 0) await new Promise((r) => setTimeout(r, outage));
    await pg.start();

    const read = await Promise.all(reads);
    const own = read.map((result) => {
      if ("error" in result) assert.fail(`a stream broke: ${result.error}\n${replicas[0]!.stderr().slice(-3000)}`);
      return result;
    });
    for (const { text } of own) assert.equal(events(text).at(-1)!.type, "response.completed");
    assert.ok(own.some(({ endedAt }) => endedAt > stoppedAt), "the streams went on through the outage");
    // Every event produced while the database was away is written once it is back.
    for (const { text } of own) {
      const id = (events(text)[0]!.data.response as { id: string }).id;
      let replay = "";
      for (let i = 0; i < 100 && !replay.includes("response.completed"); i++) {
        const r = await fetch(`${b}/v1/responses/${id}?stream=true`);
        replay = r.status === 200 ? await r.text() : (await r.body?.cancel(), "");
        if (!replay.includes("response.completed")) await new Promise((r) => setTimeout(r, 100));
      }
      assert.equal(replay, text, `the stored log of ${id} is the stream its client got`);
    }
    let final: Record<string, unknown> = {};
    for (let i = 0; i < 150; i++) {
      final = await json(fetch(`${b}/v1/responses/${background}`));
      if (final.status !== "in_progress") break;
      await new Promise((r) => setTimeout(r, 100));
    }
    assert.equal(final.status, "completed", JSON.stringify(final.error));
    const log = events(await (await fetch(`${a}/v1/responses/${background}?stream=true`)).text());
    assert.deepEqual(log.map((e) => e.data.sequence_number), log.map((_, i) => i), "no gap in the log");
    assert.equal(log.at(-1)!.type, "response.completed");
    // Both replicas recovered without a restart.
    const next = await json(post(b, "/responses", { model: MODEL, input: "again", previous_response_id: background }));
    await json(post(a, "/responses", { model: MODEL, input: "more", previous_response_id: next.id }));
  } catch (error) {
    throw withLogs(error, replicas);
  } finally {
    await stopAll(replicas);
    await pg?.close();
  }
});
