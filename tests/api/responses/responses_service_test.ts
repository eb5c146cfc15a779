import assert from "node:assert/strict";
import { MODEL, postJson, startTestServer } from "../../../testing/test_server.ts";

/** Reads `reader` to its end, failing (instead of hanging the suite) if it has not ended within `ms`. */
async function readToEnd(reader: ReadableStreamDefaultReader<Uint8Array>, ms: number): Promise<string> {
  const decoder = new TextDecoder();
  let text = "";
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`the stream did not end within ${ms} ms; got:\n${text}`)), ms);
  });
  try {
    for (;;) {
      const { done, value } = await Promise.race([reader.read(), timeout]);
      if (done) return text;
      text += decoder.decode(value, { stream: true });
    }
  } finally {
    clearTimeout(timer);
  }
}

function eventTypes(sse: string): string[] {
  return [...sse.matchAll(/^event: (\S+)$/gm)].map((m) => m[1]!);
}

Deno.test("DELETE of a running background response cancels its generation and ends every open tail", async () => {
  // Slow enough that the generation is surely still running when the DELETE arrives.
  const t = startTestServer({ stepDelayMs: 40, chunking: "one" });
  try {
    const r = await postJson(`${t.baseURL}/responses`, { model: MODEL, input: "hi", background: true, stream: true });
    const own = r.body!.getReader();
    const first = new TextDecoder().decode((await own.read()).value);
    const id = /"id":"(resp_[0-9a-f]+)"/.exec(first)![1]!;
    const tail = await fetch(`${t.baseURL}/responses/${id}?stream=true`);
    const other = tail.body!.getReader();
    await other.read(); // the replayed head: the tail is now live
    assert.equal(t.engine.stats().running, 1);

    const del = await fetch(`${t.baseURL}/responses/${id}`, { method: "DELETE" });
    assert.equal(del.status, 200);
    assert.deepEqual(await del.json(), { id, object: "response", deleted: true });
    // The DELETE answers after the cancel took effect: nothing is generating it any more.
    assert.equal(t.engine.stats().running, 0);

    // Both tails end without a hang. No cancellation event exists in the spec, so a deleted response's tail ends
    // with no further event (in particular no terminal event claiming it completed).
    for (const reader of [own, other]) {
      const rest = await readToEnd(reader, 2000);
      assert.ok(!eventTypes(rest).includes("response.completed"), rest);
    }
    assert.equal(t.engine.stats().running, 0);

    assert.equal((await fetch(`${t.baseURL}/responses/${id}`)).status, 404);
    const tailAfter = await fetch(`${t.baseURL}/responses/${id}?stream=true`);
    assert.equal(tailAfter.status, 404);
    await tailAfter.body?.cancel();
  } finally {
    await t.close();
  }
});

/**
 * A background response cut off by a server stop (kill -9) is marked failed on the next read; its stored event log
 * must then end with `response.failed` too, so replaying it (`?stream=true`, from the start or after a cursor) ends
 * like any stream instead of stopping mid-response.
 */

function sseEvents(text: string): { type: string; sequence_number: number; response?: { status?: string } }[] {
  return text.split("\n\n").filter((b) => b.includes("data: ")).map((b) =>
    JSON.parse(b.slice(b.indexOf("data: ") + 6))
  );
}

Deno.test("an orphaned response's replay ends with response.failed, numbered after the last stored event", async () => {
  const t = startTestServer();
  try {
    const orphan = { id: "resp_orphan2", object: "response", status: "in_progress", background: true, output: [] };
    await t.store.create(orphan, [], { version: 1, items: [] });
    const started = [
      { type: "response.created", sequence_number: 0, response: orphan },
      { type: "response.in_progress", sequence_number: 1, response: orphan },
    ];
    await t.store.appendEvents("resp_orphan2", started);
    const events = sseEvents(await (await fetch(`${t.baseURL}/responses/resp_orphan2?stream=true`)).text());
    assert.deepEqual(events.map((e) => e.type), ["response.created", "response.in_progress", "response.failed"]);
    assert.equal(events[2]!.sequence_number, 2);
    assert.equal(events[2]!.response?.status, "failed");
    // Settling is done once: later reads and replays see the same single terminal event.
    assert.equal((await (await fetch(`${t.baseURL}/responses/resp_orphan2`)).json()).status, "failed");
    const after = sseEvents(
      await (await fetch(`${t.baseURL}/responses/resp_orphan2?stream=true&starting_after=1`)).text(),
    );
    assert.deepEqual(after.map((e) => [e.type, e.sequence_number]), [["response.failed", 2]]);
    assert.equal(await t.store.isTerminal("resp_orphan2"), true);
  } finally {
    await t.close();
  }
});
