import assert from "node:assert/strict";
import { MODEL, postJson, startTestServer } from "../../testing/test_server.ts";

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
