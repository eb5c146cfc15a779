/**
 * WebSocket mode under a client that stops reading: the server must stop pulling engine steps once the socket's
 * buffers are full (not buffer the whole response in memory), and go on when the client reads again. The client is
 * a raw TCP connection speaking just enough WebSocket (RFC 6455) to send one masked text frame and read frames.
 * Loopback TCP buffers grow to tens of MB here, so the response must be larger than that for the stall to show.
 */
import assert from "node:assert/strict";
import { validateStream } from "../../../conformance/validator.ts";
import type { Engine, EngineChunk, GenerateRequest } from "../../../engine/engine.ts";
import { answerText, MODEL, startTestServer, tokenizer } from "../../../testing/test_server.ts";

const utf8 = new TextEncoder();

/** A client text frame (masked, as RFC 6455 §5.3 requires of clients). */
function textFrame(text: string): Uint8Array {
  const payload = utf8.encode(text);
  assert.ok(payload.length < 65536);
  const mask = [0x12, 0x34, 0x56, 0x78];
  const frame = new Uint8Array(8 + payload.length);
  frame.set([0x81, 0x80 | 126, payload.length >> 8, payload.length & 0xff, ...mask]);
  for (let i = 0; i < payload.length; i++) frame[8 + i] = payload[i]! ^ mask[i % 4]!;
  return frame;
}

/** Splits the server's (unmasked, unfragmented) frames out of a byte stream. */
class FrameReader {
  #buffer = new Uint8Array(0);
  readonly texts: string[] = [];
  readonly #decoder = new TextDecoder();

  push(bytes: Uint8Array): void {
    const joined = new Uint8Array(this.#buffer.length + bytes.length);
    joined.set(this.#buffer);
    joined.set(bytes, this.#buffer.length);
    let at = 0;
    for (;;) {
      if (joined.length - at < 2) break;
      let length = joined[at + 1]! & 0x7f;
      let head = 2;
      if (length === 126) {
        if (joined.length - at < 4) break;
        length = (joined[at + 2]! << 8) | joined[at + 3]!;
        head = 4;
      } else if (length === 127) {
        if (joined.length - at < 10) break;
        length = Number(new DataView(joined.buffer, joined.byteOffset + at + 2, 8).getBigUint64(0));
        head = 10;
      }
      if (joined.length - at < head + length) break;
      if ((joined[at]! & 0x0f) === 1) {
        this.texts.push(this.#decoder.decode(joined.subarray(at + head, at + head + length)));
      }
      at += head + length;
    }
    this.#buffer = joined.slice(at);
  }
}

/** Makes `engine` count the steps the server pulls from it. */
function countSteps(engine: Engine, pulled: { steps: number }): void {
  const generate = engine.generate.bind(engine);
  engine.generate = (request: GenerateRequest) => {
    const reader = generate(request).getReader();
    return new ReadableStream<EngineChunk>({
      async pull(controller) {
        const { done, value } = await reader.read();
        if (done) return controller.close();
        pulled.steps++;
        controller.enqueue(value);
      },
      cancel: async (reason) => await reader.cancel(reason),
    }, { highWaterMark: 0 });
  };
}

Deno.test("websocket: a client that stops reading holds its generation back; reading resumes it, closing cancels it", async () => {
  const tok = tokenizer();
  // With 20 logprob alternatives a token's event is a few KB: tens of MB in all, far more than the buffers on the way
  // (the server's 1 MiB high-water mark, the relay's, the kernel's) hold.
  const script = tok.encode(answerText("ab ".repeat(16_000)));
  const pulled = { steps: 0 };
  const t = startTestServer({ script, maxModelLen: script.length + 4096, chunking: { seed: 7, max: 4 } });
  countSteps(t.engine, pulled);
  const conn = await Deno.connect({ hostname: t.server.hostname, port: t.server.port });
  try {
    await conn.write(utf8.encode(
      "GET /v1/responses HTTP/1.1\r\nhost: rill\r\nupgrade: websocket\r\nconnection: Upgrade\r\n" +
        "sec-websocket-key: dGhlIHNhbXBsZSBub25jZQ==\r\nsec-websocket-version: 13\r\n\r\n",
    ));
    const buffer = new Uint8Array(1 << 16);
    const n = await conn.read(buffer);
    const text = new TextDecoder().decode(buffer.subarray(0, n ?? 0));
    assert.match(text, /^HTTP\/1\.1 101 /);
    const frames = new FrameReader();
    frames.push(buffer.subarray(text.indexOf("\r\n\r\n") + 4, n ?? 0));
    await conn.write(textFrame(JSON.stringify({
      type: "response.create",
      model: MODEL,
      input: "hi",
      include: ["message.output_text.logprobs"],
      top_logprobs: 20,
    })));
    // Not reading: the steps pulled stop growing well before the end of the script.
    let last = -1;
    for (let i = 0; i < 100 && pulled.steps !== last; i++) {
      last = pulled.steps;
      await new Promise((r) => setTimeout(r, 300));
    }
    assert.equal(pulled.steps, last, "the server kept pulling steps from a client that reads nothing");
    const fewestSteps = Math.ceil(script.length / 4);
    assert.ok(pulled.steps < fewestSteps * 0.75, `pulled ${pulled.steps} of at least ${fewestSteps} steps`);
    assert.equal(t.server.active(), 1);
    // Reading again: the server goes on pulling steps.
    const blockedAt = pulled.steps;
    for (let read = 0; read < 8 << 20 && pulled.steps === blockedAt;) {
      const m = await conn.read(buffer);
      if (m === null) break;
      frames.push(buffer.subarray(0, m));
      read += m;
    }
    const deadline = Date.now() + 10_000;
    while (pulled.steps === blockedAt && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    assert.ok(pulled.steps > blockedAt, "reading again did not resume the generation");
    // What arrived is a valid beginning of the stream; closing now cancels the response.
    const events = frames.texts.map((f) => JSON.parse(f));
    assert.equal(events[0].type, "response.created");
    assert.deepEqual(validateStream(events, { logprobs: true, cancelled: true }), []);
    conn.close();
    while (t.server.active() > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    assert.equal(t.server.active(), 0);
    const id = events[0].response.id;
    assert.equal((await t.store.get(id))?.response.status, "cancelled");
  } finally {
    try {
      conn.close();
    } catch { /* closed by the test */ }
    await t.close();
  }
});
