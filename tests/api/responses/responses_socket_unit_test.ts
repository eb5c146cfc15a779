/**
 * ResponsesSocket against a socket double and a scripted response source: backpressure (no event is read while the
 * send buffer is over the high-water mark), the bound on waiting requests, and RecentResponses' eviction.
 */
import assert from "node:assert/strict";
import { RecentResponses } from "../../../api/responses/recent_responses.ts";
import { ResponsesSocket, type SocketLike, type StartResponse } from "../../../api/responses/responses_socket.ts";
import type { StreamedResponse } from "../../../api/responses/responses_service.ts";
import type { Response, ResponseStreamEvent } from "../../../events/types.ts";

class FakeSocket implements SocketLike {
  readyState = 1;
  bufferedAmount = 0;
  readonly sent: Record<string, unknown>[] = [];
  readonly #listeners = new Map<string, ((event: MessageEvent) => void)[]>();

  send(data: string): void {
    this.sent.push(JSON.parse(data));
  }
  close(): void {
    this.readyState = 3;
    for (const listener of this.#listeners.get("close") ?? []) listener(new MessageEvent("close"));
  }
  addEventListener(type: string, listener: (event: MessageEvent) => void): void {
    this.#listeners.set(type, [...(this.#listeners.get(type) ?? []), listener]);
  }
  receive(message: unknown): void {
    for (const listener of this.#listeners.get("message") ?? []) {
      listener(new MessageEvent("message", { data: JSON.stringify(message) }));
    }
  }
}

/** A response of `steps` batches of one event each, counting reads; `stop` ends it. */
function scripted(steps: number, reads: { count: number; stopped: boolean }): StreamedResponse {
  let step = 0;
  return {
    id: "resp_test",
    history: [],
    read() {
      reads.count++;
      if (reads.stopped || step >= steps) return Promise.resolve(null);
      const event = { type: "response.output_text.delta", sequence_number: step++ } as unknown as ResponseStreamEvent;
      return Promise.resolve([event]);
    },
    stop() {
      reads.stopped = true;
    },
    final: () => ({ id: "resp_test", status: "completed", output: [] }) as unknown as Response,
  };
}

const tick = () => new Promise((r) => setTimeout(r, 20));

Deno.test("socket: no further events are read while the send buffer is over the high-water mark", async () => {
  const socket = new FakeSocket();
  const reads = { count: 0, stopped: false };
  const start: StartResponse = () => Promise.resolve(scripted(100, reads));
  new ResponsesSocket(socket, { start, maxMessageChars: 1 << 20, highWaterBytes: 1000 });
  socket.bufferedAmount = 5000;
  socket.receive({ type: "response.create", model: "m", input: "x" });
  await tick();
  await tick();
  // One step was read and sent; the next waits for the buffer.
  assert.equal(reads.count, 1);
  assert.equal(socket.sent.length, 1);
  socket.bufferedAmount = 0;
  await tick();
  assert.equal(reads.count, 101);
  assert.equal(socket.sent.length, 100);
});

Deno.test("socket: closing while the buffer is full stops the response", async () => {
  const socket = new FakeSocket();
  const reads = { count: 0, stopped: false };
  const handler = new ResponsesSocket(socket, {
    start: () => Promise.resolve(scripted(100, reads)),
    maxMessageChars: 1 << 20,
    highWaterBytes: 1000,
  });
  socket.bufferedAmount = 5000;
  socket.receive({ type: "response.create", model: "m", input: "x" });
  await tick();
  socket.close();
  await handler.finished;
  assert.equal(reads.stopped, true);
  assert.equal(socket.sent.length, 1);
});

Deno.test("socket: at most maxPending requests wait; more are refused with an error event", async () => {
  const socket = new FakeSocket();
  const started: string[] = [];
  let release!: () => void;
  const gate = new Promise<void>((resolve) => release = resolve);
  const start: StartResponse = async (body) => {
    started.push(body.input as string);
    await gate;
    return scripted(1, { count: 0, stopped: false });
  };
  new ResponsesSocket(socket, { start, maxMessageChars: 1 << 20, maxPending: 2 });
  for (const input of ["a", "b", "c", "d"]) socket.receive({ type: "response.create", model: "m", input });
  await tick();
  // "a" runs, "b" and "c" wait, "d" is refused.
  assert.deepEqual(started, ["a"]);
  assert.equal(socket.sent.length, 1);
  assert.equal(socket.sent[0]!.type, "error");
  assert.equal((socket.sent[0]!.error as Record<string, unknown>).code, "too_many_pending_requests");
  release();
  await tick();
  assert.deepEqual(started, ["a", "b", "c"]);
});

Deno.test("socket: a message over the size limit is refused before it is parsed", async () => {
  const socket = new FakeSocket();
  let starts = 0;
  new ResponsesSocket(socket, {
    start: () => {
      starts++;
      return Promise.resolve(scripted(1, { count: 0, stopped: false }));
    },
    maxMessageChars: 64,
  });
  socket.receive({ type: "response.create", model: "m", input: "x".repeat(100) });
  await tick();
  assert.equal(starts, 0);
  assert.equal((socket.sent[0]!.error as Record<string, unknown>).code, "payload_too_large");
});

Deno.test("socket: a response that ends failed evicts the previous_response_id it continued", async () => {
  const socket = new FakeSocket();
  const looked: (string | undefined)[] = [];
  let n = 0;
  const start: StartResponse = async (body, previous) => {
    const id = `resp_${++n}`;
    const continues = body.previous_response_id;
    if (typeof continues === "string") looked.push((await previous(continues))?.response.id as string | undefined);
    const status = body.input === "fail" ? "failed" : "completed";
    return {
      id,
      history: [],
      read: () => Promise.resolve(null),
      stop() {},
      final: () => ({ id, status, output: [] }) as unknown as Response,
    };
  };
  new ResponsesSocket(socket, { start, maxMessageChars: 1 << 20 });
  socket.receive({ type: "response.create", model: "m", input: "x" });
  await tick();
  socket.receive({ type: "response.create", model: "m", input: "ok", previous_response_id: "resp_1" });
  socket.receive({ type: "response.create", model: "m", input: "fail", previous_response_id: "resp_1" });
  socket.receive({ type: "response.create", model: "m", input: "ok", previous_response_id: "resp_1" });
  await tick();
  // A completed continuation keeps resp_1; the failed one evicts it.
  assert.deepEqual(looked, ["resp_1", "resp_1", undefined]);
});

Deno.test("recent responses: the oldest entry goes when full; remembering again refreshes an entry", async () => {
  const recent = new RecentResponses(2);
  const response = (id: string) => ({ id, status: "completed", output: [] });
  recent.remember(response("a"), [{ type: "message" }]);
  recent.remember(response("b"), []);
  recent.remember(response("a"), []);
  recent.remember(response("c"), []);
  assert.equal(recent.size, 2);
  assert.equal(await recent.lookup("b"), undefined);
  assert.deepEqual((await recent.lookup("a"))?.conversation, { version: 1, items: [] });
  assert.equal((await recent.lookup("c"))?.response.id, "c");
  assert.throws(() => new RecentResponses(0), RangeError);
});
