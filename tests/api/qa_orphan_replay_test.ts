/**
 * A background response cut off by a server stop (kill -9) is marked failed on the next read; its stored event log
 * must then end with `response.failed` too, so replaying it (`?stream=true`, from the start or after a cursor) ends
 * like any stream instead of stopping mid-response.
 */
import assert from "node:assert/strict";
import { startTestServer } from "../../testing/test_server.ts";

function sseEvents(text: string): { type: string; sequence_number: number; response?: { status?: string } }[] {
  return text.split("\n\n").filter((b) => b.includes("data: ")).map((b) =>
    JSON.parse(b.slice(b.indexOf("data: ") + 6))
  );
}

Deno.test("an orphaned response's replay ends with response.failed, numbered after the last stored event", async () => {
  const t = startTestServer();
  try {
    const orphan = { id: "resp_orphan2", object: "response", status: "in_progress", background: true, output: [] };
    t.store.create(orphan, [], { version: 1, items: [] });
    const started = [
      { type: "response.created", sequence_number: 0, response: orphan },
      { type: "response.in_progress", sequence_number: 1, response: orphan },
    ];
    t.store.appendEvents("resp_orphan2", started);
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
    assert.equal(t.store.isTerminal("resp_orphan2"), true);
  } finally {
    await t.close();
  }
});
