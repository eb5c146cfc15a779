import assert from "node:assert/strict";
import { ResponseRecorder } from "../../../api/responses/response_recorder.ts";
import { SqliteStore } from "../../../api/store/sqlite_store.ts";
import { buildResponse, type ResponseTemplate } from "../../../events/response_template.ts";
import { template as sharedTemplate } from "../../../testing/response_fixtures.ts";
import type { Response, ResponseStreamEvent } from "../../../events/types.ts";

const template: ResponseTemplate = { ...sharedTemplate, id: "resp_rec" };

const response = (status: Response["status"]): Response => buildResponse(template, { status, output: [], usage: null });

function lifecycle(type: string, status: Response["status"], sequence_number: number): ResponseStreamEvent {
  return { type, response: response(status), sequence_number } as unknown as ResponseStreamEvent;
}

function delta(sequence_number: number): ResponseStreamEvent {
  return {
    type: "response.output_text.delta",
    item_id: "msg_1",
    output_index: 0,
    content_index: 0,
    delta: "hi",
    logprobs: [],
    sequence_number,
  } as unknown as ResponseStreamEvent;
}

/** A recorder writing through one connection, and a second connection that sees only what was committed. */
async function withStores(
  body: (writer: SqliteStore, reader: SqliteStore) => void | Promise<void>,
): Promise<void> {
  const dir = await Deno.makeTempDir();
  const writer = SqliteStore.open(`${dir}/rill.db`);
  const reader = SqliteStore.open(`${dir}/rill.db`);
  try {
    await body(writer, reader);
  } finally {
    await writer.close();
    await reader.close();
    await Deno.remove(dir, { recursive: true });
  }
}

Deno.test("recorder: steps are committed in the next turn; the terminal batch is on disk when record returns", async () => {
  await withStores(async (writer, reader) => {
    const initial = response("in_progress");
    await writer.create(initial as unknown as Record<string, unknown>, [], null);
    const errors: unknown[] = [];
    const recorder = new ResponseRecorder(initial, writer, { onStoreError: (e) => errors.push(e) });
    await recorder.record([
      lifecycle("response.created", "in_progress", 0),
      lifecycle("response.in_progress", "in_progress", 1),
    ]);
    await recorder.record([delta(2)]);
    assert.deepEqual(await reader.eventsAfter(template.id, -1), []);
    await new Promise((resolve) => setTimeout(resolve, 20));
    assert.deepEqual((await reader.eventsAfter(template.id, -1)).map((e) => e.sequence_number), [0, 1, 2]);
    await recorder.record([delta(3)]);
    await recorder.record([lifecycle("response.completed", "completed", 4)]);
    // No turn of the event loop in between: what a client could see next is already committed.
    assert.deepEqual((await reader.eventsAfter(template.id, 1)).map((e) => e.sequence_number), [2, 3, 4]);
    assert.equal(await reader.isTerminal(template.id), true);
    assert.equal((await reader.get(template.id))?.response.status, "completed");
    assert.equal(recorder.ended, true);
    assert.deepEqual(errors, []);
  });
});

Deno.test("recorder: a cancel commits the queued steps before the cancelled snapshot", async () => {
  await withStores(async (writer, reader) => {
    const initial = response("in_progress");
    await writer.create(initial as unknown as Record<string, unknown>, [], null);
    let ended = 0;
    const recorder = new ResponseRecorder(initial, writer, { onEnd: () => void ended++ });
    await recorder.record([lifecycle("response.created", "in_progress", 0), delta(1)]);
    await recorder.cancel();
    // The log ends with a terminal event carrying the cancelled response, so a replay ends.
    const log = await reader.eventsAfter(template.id, -1) as unknown as { sequence_number: number; type: string }[];
    assert.deepEqual(log.map((e) => e.sequence_number), [0, 1, 2]);
    assert.equal(log[2]!.type, "response.failed");
    assert.equal(await reader.isTerminal(template.id), true);
    assert.equal((await reader.get(template.id))?.response.status, "cancelled");
    assert.equal(ended, 1);
    // Decided once: what the cut stream parses afterwards is not recorded.
    await recorder.record([lifecycle("response.completed", "completed", 3)]);
    assert.equal((await reader.get(template.id))?.response.status, "cancelled");
    assert.equal((await reader.eventsAfter(template.id, 2)).length, 0);
  });
});
