/**
 * WebSocket mode of `/v1/responses`, end to end through the server (and its connection gate): the official SDK's
 * `ResponsesWS` client and a plain `WebSocket`. Every response's events must pass the same stream validator as SSE.
 */
import assert from "node:assert/strict";
import OpenAI from "openai";
import { ResponsesWS } from "openai/resources/responses/ws";
import { validateSSE, validateStream } from "../../../conformance/validator.ts";
import { ANSWER, MODEL, postJson, startTestServer, type TestServer, tokenizer } from "../../../testing/test_server.ts";

type Json = Record<string, unknown>;

const TERMINAL = new Set(["response.completed", "response.incomplete", "response.failed"]);

/** A plain WebSocket client that queues the server's messages. */
class Socket {
  readonly ws: WebSocket;
  readonly #messages: Json[] = [];
  #waiter: (() => void) | null = null;
  readonly opened: Promise<boolean>;
  readonly closed: Promise<void>;

  constructor(t: TestServer, key?: string) {
    const url = `${t.url.replace(/^http/, "ws")}/v1/responses`;
    const init = key === undefined ? undefined : { headers: { authorization: `Bearer ${key}` } };
    // Deno's WebSocket takes request headers as a second argument (not in the DOM typings).
    this.ws = new WebSocket(url, init as unknown as string[]);
    this.opened = new Promise((resolve) => {
      this.ws.addEventListener("open", () => resolve(true));
      this.ws.addEventListener("error", () => resolve(false));
    });
    this.closed = new Promise((resolve) => this.ws.addEventListener("close", () => resolve()));
    this.ws.addEventListener("message", (event) => {
      this.#messages.push(JSON.parse(event.data as string));
      this.#waiter?.();
    });
  }

  send(message: unknown): void {
    this.ws.send(typeof message === "string" ? message : JSON.stringify(message));
  }

  async next(): Promise<Json> {
    while (this.#messages.length === 0) {
      await new Promise<void>((resolve) => this.#waiter = resolve);
      this.#waiter = null;
    }
    return this.#messages.shift()!;
  }

  /** Messages up to and including a terminal event, or a lone `error` that refused a message. */
  async response(): Promise<Json[]> {
    const events: Json[] = [];
    for (;;) {
      const event = await this.next();
      events.push(event);
      if (TERMINAL.has(event.type as string)) return events;
      if (event.type === "error" && event.sequence_number === undefined) return events;
    }
  }

  async close(): Promise<void> {
    this.ws.close();
    await this.closed;
  }
}

function valid(events: Json[], options: { cancelled?: boolean } = {}): Json {
  assert.deepEqual(validateStream(events, options), [], JSON.stringify(events).slice(0, 2000));
  return events.at(-1)!.response as Json;
}

/** The events with everything that differs between two runs of the same request (ids, times) blanked. */
function normalized(events: readonly unknown[]): string {
  return JSON.stringify(events)
    .replace(/"(resp|msg|rs|fc|fco)_[0-9a-f]+"/g, '"$1_"')
    .replace(/"(created_at|completed_at)":\d+/g, '"$1":0');
}

Deno.test("websocket: the official SDK's ResponsesWS streams responses that pass the validator, FIFO on one socket", async () => {
  const t = startTestServer({ server: { apiKey: "sk-test" } });
  const client = new OpenAI({ apiKey: "sk-test", baseURL: t.baseURL });
  const socket = new ResponsesWS(client);
  try {
    const events: Json[] = [];
    let completed = 0;
    const done = Promise.withResolvers<void>();
    socket.on("event", (event) => {
      events.push(event as unknown as Json);
      if (event.type === "response.completed" && ++completed === 3) done.resolve();
    });
    socket.on("error", (error) => done.reject(error));
    // Three creates sent at once: they run one after another, each a whole stream.
    for (const input of ["one", "two", "three"]) {
      socket.send({ type: "response.create", model: MODEL, input, store: false });
    }
    await done.promise;
    const streams: Json[][] = [];
    for (const event of events) {
      if (event.type === "response.created") streams.push([]);
      streams.at(-1)!.push(event);
    }
    assert.equal(streams.length, 3);
    const ids = new Set<unknown>();
    for (const stream of streams) {
      const final = valid(stream);
      assert.equal(final.status, "completed");
      assert.equal(final.store, false);
      assert.equal(stream[0]!.sequence_number, 0);
      ids.add(final.id);
    }
    assert.equal(ids.size, 3);
    assert.deepEqual(t.engine.requests.map((r) => tokenizer().decode(r.promptTokens).match(/one|two|three/)?.[0]), [
      "one",
      "two",
      "three",
    ]);
  } finally {
    socket.close();
    await t.close();
  }
});

Deno.test("websocket: the events are the SSE stream's events, message for message", async () => {
  const t = startTestServer();
  const ws = new Socket(t);
  try {
    assert.equal(await ws.opened, true);
    const body = { model: MODEL, input: "hi", include: ["message.output_text.logprobs"], top_logprobs: 2 };
    ws.send({ type: "response.create", ...body });
    const overSocket = await ws.response();
    valid(overSocket);
    const r = await postJson(`${t.baseURL}/responses`, { ...body, stream: true });
    const { events: overSse, violations } = validateSSE(await r.text());
    assert.deepEqual(violations, []);
    assert.equal(normalized(overSocket), normalized(overSse));
  } finally {
    await ws.close();
    await t.close();
  }
});

Deno.test("websocket: previous_response_id continues from this socket's responses with store: false", async () => {
  const t = startTestServer();
  const ws = new Socket(t);
  const other = new Socket(t);
  try {
    assert.equal(await ws.opened, true);
    ws.send({ type: "response.create", model: MODEL, input: "first question", store: false });
    const first = valid(await ws.response());
    ws.send({
      type: "response.create",
      model: MODEL,
      input: "second question",
      previous_response_id: first.id,
      store: false,
    });
    const second = valid(await ws.response());
    assert.equal(second.status, "completed");
    assert.equal(second.previous_response_id, first.id);
    // The model saw the first turn (its question and its answer) before the second question.
    const prompt = tokenizer().decode(t.engine.requests[1]!.promptTokens);
    assert.ok(prompt.indexOf("first question") < prompt.indexOf(ANSWER), prompt);
    assert.ok(prompt.indexOf(ANSWER) < prompt.indexOf("second question"), prompt);
    // And a chain of three: the second continuation sees both earlier turns.
    ws.send({
      type: "response.create",
      model: MODEL,
      input: "third question",
      previous_response_id: second.id,
      store: false,
    });
    valid(await ws.response());
    const third = tokenizer().decode(t.engine.requests[2]!.promptTokens);
    for (const text of ["first question", "second question", "third question"]) assert.ok(third.includes(text), text);

    // Nothing was stored: over HTTP, or on another socket, the id is unknown.
    const http = await postJson(`${t.baseURL}/responses`, { model: MODEL, input: "x", previous_response_id: first.id });
    assert.equal(http.status, 404);
    assert.equal(await other.opened, true);
    other.send({ type: "response.create", model: MODEL, input: "x", previous_response_id: first.id });
    const [refused] = await other.response();
    assert.equal(refused!.type, "error");
    assert.equal((refused!.error as Json).code, "previous_response_not_found");
    assert.equal((refused!.error as Json).param, "previous_response_id");
    assert.equal(refused!.status, 404);
  } finally {
    await ws.close();
    await other.close();
    await t.close();
  }
});

Deno.test("websocket: a failed continuation evicts its previous_response_id (store: false)", async () => {
  const t = startTestServer();
  const ws = new Socket(t);
  try {
    assert.equal(await ws.opened, true);
    ws.send({ type: "response.create", model: MODEL, input: "Say hi", store: false });
    const first = valid(await ws.response());
    assert.equal(first.status, "completed");
    // A continuation that fails: the output answers a call the conversation never made.
    ws.send({
      type: "response.create",
      model: MODEL,
      previous_response_id: first.id,
      input: [{ type: "function_call_output", call_id: "call_unknown", output: "{}" }],
      store: false,
    });
    const [failed] = await ws.response();
    assert.equal(failed!.type, "error");
    assert.equal(failed!.status, 400);
    assert.equal((failed!.error as Json).param, "input[0].call_id");
    // The failed turn evicted the response it continued: continuing from it again is refused, not answered.
    ws.send({
      type: "response.create",
      model: MODEL,
      input: "Say hi again",
      previous_response_id: first.id,
      store: false,
    });
    const [refused] = await ws.response();
    assert.equal(refused!.type, "error", JSON.stringify(refused));
    assert.equal(refused!.status, 404);
    assert.equal((refused!.error as Json).code, "previous_response_not_found");
    assert.equal((refused!.error as Json).param, "previous_response_id");
    assert.equal(t.engine.requests.length, 1);
    // The connection stays usable, and other responses it holds are untouched.
    ws.send({ type: "response.create", model: MODEL, input: "fresh", store: false });
    const fresh = valid(await ws.response());
    ws.send({ type: "response.create", model: MODEL, input: "more", previous_response_id: fresh.id, store: false });
    assert.equal(valid(await ws.response()).status, "completed");
  } finally {
    await ws.close();
    await t.close();
  }
});

Deno.test("websocket: a failed continuation of a stored response still finds it in the store", async () => {
  const t = startTestServer();
  const ws = new Socket(t);
  try {
    assert.equal(await ws.opened, true);
    ws.send({ type: "response.create", model: MODEL, input: "Say hi" });
    const first = valid(await ws.response());
    ws.send({
      type: "response.create",
      model: MODEL,
      previous_response_id: first.id,
      input: [{ type: "function_call_output", call_id: "call_unknown", output: "{}" }],
    });
    assert.equal((await ws.response())[0]!.type, "error");
    ws.send({ type: "response.create", model: MODEL, input: "again", previous_response_id: first.id });
    const next = valid(await ws.response());
    assert.equal(next.status, "completed");
    assert.ok(tokenizer().decode(t.engine.requests[1]!.promptTokens).includes("Say hi"));
  } finally {
    await ws.close();
    await t.close();
  }
});

Deno.test("websocket: a stored response continues from the store on a new socket", async () => {
  const t = startTestServer();
  const ws = new Socket(t);
  try {
    const r = await postJson(`${t.baseURL}/responses`, { model: MODEL, input: "stored question" });
    const stored = await r.json() as Json;
    assert.equal(await ws.opened, true);
    ws.send({ type: "response.create", model: MODEL, input: "next", previous_response_id: stored.id });
    assert.equal(valid(await ws.response()).status, "completed");
    assert.ok(tokenizer().decode(t.engine.requests[1]!.promptTokens).includes("stored question"));
  } finally {
    await ws.close();
    await t.close();
  }
});

Deno.test("websocket: bad messages are error events naming the param, and the socket stays usable", async () => {
  const t = startTestServer();
  const ws = new Socket(t);
  try {
    assert.equal(await ws.opened, true);
    const cases: [unknown, string | null, string | null][] = [
      ["{not json", null, "invalid_json"],
      ["[1,2]", null, "invalid_type"],
      [{ type: "response.cancel" }, "type", "invalid_value"],
      [{ type: "response.steer", previous_response_id: "resp_1", input: "x" }, "type", "unsupported_parameter"],
      [{ type: "response.create", model: MODEL, input: "x", background: true }, "background", "unsupported_parameter"],
      [{ type: "response.create", model: MODEL, input: 5 }, "input", null],
      [{ type: "response.create", model: MODEL, input: "x", temperature: "hot" }, "temperature", null],
      [{ type: "response.create", model: "other-model", input: "x" }, "model", "model_not_found"],
      [{ type: "response.create", model: MODEL, input: "x", stream_id: 7 }, "stream_id", "invalid_type"],
    ];
    for (const [message, param, code] of cases) {
      ws.send(message);
      const events = await ws.response();
      assert.equal(events.length, 1, JSON.stringify(events));
      const event = events[0]!;
      assert.equal(event.type, "error", JSON.stringify(message));
      const error = event.error as Json;
      assert.equal(error.param, param, JSON.stringify(event));
      if (code !== null) assert.equal(error.code, code, JSON.stringify(event));
      assert.equal(error.type, "invalid_request_error");
      assert.equal(typeof error.message, "string");
      assert.ok((event.status as number) >= 400 && (event.status as number) < 500);
    }
    ws.send({ type: "response.create", model: MODEL, input: "still here?" });
    assert.equal(valid(await ws.response()).status, "completed");
    assert.equal(t.engine.requests.length, 1);
  } finally {
    await ws.close();
    await t.close();
  }
});

Deno.test("websocket: stream_id is echoed on every event of its response", async () => {
  const t = startTestServer();
  const ws = new Socket(t);
  try {
    assert.equal(await ws.opened, true);
    ws.send({ type: "response.create", model: MODEL, input: "hi", stream_id: "lane-a" });
    const events = await ws.response();
    assert.ok(events.every((e) => e.stream_id === "lane-a"));
    valid(events.map(({ stream_id: _, ...e }) => e));
    ws.send({ type: "response.create", model: MODEL, input: "hi", stream_id: "lane-b", temperature: -1 });
    const [refused] = await ws.response();
    assert.equal(refused!.stream_id, "lane-b");
  } finally {
    await ws.close();
    await t.close();
  }
});

Deno.test("websocket: closing the socket cancels the running response and frees the engine", async () => {
  const t = startTestServer({ stepDelayMs: 20, chunking: "one" });
  const ws = new Socket(t);
  try {
    assert.equal(await ws.opened, true);
    ws.send({ type: "response.create", model: MODEL, input: "hi" });
    const created = await ws.next();
    assert.equal(created.type, "response.created");
    const id = (created.response as Json).id as string;
    await ws.next();
    await ws.close();
    const deadline = Date.now() + 5000;
    while ((await t.store.get(id))?.response.status !== "cancelled" && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 20));
    }
    assert.equal((await t.store.get(id))?.response.status, "cancelled");
    assert.equal(t.engine.requests[0]!.signal?.aborted, true);
    while (t.server.active() > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    assert.equal(t.server.active(), 0);
  } finally {
    await t.close();
  }
});

Deno.test("websocket: the API key is checked at the upgrade; a GET without upgrade is a 426", async () => {
  const t = startTestServer({ server: { apiKey: "sk-test" } });
  try {
    for (const key of [undefined, "wrong"]) {
      const ws = new Socket(t, key);
      assert.equal(await ws.opened, false, `key ${key}`);
      await ws.closed;
    }
    assert.equal(t.engine.requests.length, 0);
    const plain = await fetch(`${t.baseURL}/responses`, { headers: { authorization: "Bearer sk-test" } });
    assert.equal(plain.status, 426);
    assert.equal(((await plain.json()) as { error: Json }).error.code, "upgrade_required");
    const unauthorized = await fetch(`${t.baseURL}/responses`);
    assert.equal(unauthorized.status, 401);
    await unauthorized.body?.cancel();
    const ok = new Socket(t, "sk-test");
    assert.equal(await ok.opened, true);
    await ok.close();
  } finally {
    await t.close();
  }
});

Deno.test("websocket: an idle socket outlives the connection gate's idle timeout", async () => {
  const t = startTestServer({ server: { idleTimeoutMs: 100 } });
  const ws = new Socket(t);
  try {
    assert.equal(await ws.opened, true);
    await new Promise((r) => setTimeout(r, 600));
    ws.send({ type: "response.create", model: MODEL, input: "hi" });
    assert.equal(valid(await ws.response()).status, "completed");
  } finally {
    await ws.close();
    await t.close();
  }
});

Deno.test("websocket: shutdown ends a running response as the SSE path does, then closes the socket", async () => {
  const t = startTestServer({ stepDelayMs: 20, chunking: "one" });
  const ws = new Socket(t);
  assert.equal(await ws.opened, true);
  ws.send({ type: "response.create", model: MODEL, input: "hi" });
  assert.equal((await ws.next()).type, "response.created");
  const closing = t.server.shutdown(50);
  const events = await ws.response();
  await closing;
  await ws.closed;
  await t.store.close();
  assert.equal(events.at(-1)!.type, "response.failed");
  assert.ok(events.some((e) => e.type === "error" && e.code === "server_shutting_down"));
});

Deno.test("websocket: a response in a conversation adds its turn to it, and continues from it", async () => {
  const t = startTestServer();
  const ws = new Socket(t);
  try {
    const created = await postJson(`${t.baseURL}/conversations`, {
      items: [{ type: "message", role: "user", content: "earlier question" }],
    });
    const conversation = (await created.json() as Json).id as string;
    assert.equal(await ws.opened, true);
    ws.send({ type: "response.create", model: MODEL, input: "new question", conversation, store: false });
    const first = valid(await ws.response());
    assert.equal(first.status, "completed");
    assert.ok(tokenizer().decode(t.engine.requests[0]!.promptTokens).includes("earlier question"));
    const listed = await fetch(`${t.baseURL}/conversations/${conversation}/items?order=asc`);
    const items = ((await listed.json()) as { data: Json[] }).data;
    assert.equal(items.length, 1 + 1 + (first.output as Json[]).length);
    // previous_response_id from that response (kept by the socket) sees the conversation's history too.
    ws.send({
      type: "response.create",
      model: MODEL,
      input: "follow-up",
      previous_response_id: first.id,
      store: false,
    });
    valid(await ws.response());
    const prompt = tokenizer().decode(t.engine.requests[1]!.promptTokens);
    for (const text of ["earlier question", "new question", ANSWER, "follow-up"]) {
      assert.ok(prompt.includes(text), text);
    }
  } finally {
    await ws.close();
    await t.close();
  }
});
