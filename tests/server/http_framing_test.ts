/** The HTTP/1.1 message-boundary scanner the connection front times requests with. */
import assert from "node:assert/strict";
import { FramingError, type FramingEvent, MessageScanner } from "../../server/http_framing.ts";

const utf8 = new TextEncoder();

/** Pushes `text` split into pieces of `size` bytes; returns the event types. */
function scan(scanner: MessageScanner, text: string, size = Infinity): string[] {
  const bytes = utf8.encode(text);
  const events: FramingEvent[] = [];
  for (let at = 0; at < bytes.length; at += size) events.push(...scanner.push(bytes.subarray(at, at + size)));
  return events.map((e) => e.type === "head" ? `head ${e.head.method ?? e.head.status}` : e.type);
}

Deno.test("framing: requests by Content-Length, chunked (split anywhere, with extensions) and pipelined", () => {
  const text = "POST /a HTTP/1.1\r\ncontent-length: 5\r\n\r\nhello" +
    "POST /b HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3;x=y\r\nabc\r\nA\r\n0123456789\r\n0\r\nt: v\r\n\r\n" +
    "GET /c HTTP/1.1\r\nhost: x\r\n\r\n";
  for (const size of [Infinity, 1, 2, 7]) {
    const scanner = new MessageScanner("request");
    assert.deepEqual(scan(scanner, text, size), ["head POST", "end", "head POST", "end", "head GET", "end"], `${size}`);
    assert.equal(scanner.inBody, false);
  }
  const partial = new MessageScanner("request");
  scan(partial, "POST /a HTTP/1.1\r\ncontent-length: 5\r\n\r\nhe");
  assert.equal(partial.inBody, true);
  const head = new MessageScanner("request");
  scan(head, "GET / HTT");
  assert.equal(head.headBytes, 9);
});

Deno.test("framing: responses: chunked SSE, bodiless HEAD/204/304, interim 100, and close-delimited", () => {
  const scanner = new MessageScanner("response");
  for (const method of ["POST", "HEAD", "GET", "GET", "GET", "GET"]) scanner.expect(method);
  const text = "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5\r\ndata:\r\n2\r\n\n\n\r\n0\r\n\r\n" +
    "HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\n" + // HEAD: no body follows
    "HTTP/1.1 204 No Content\r\n\r\n" +
    "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok" +
    "HTTP/1.1 304 Not Modified\r\ncontent-length: 7\r\n\r\n" +
    "HTTP/1.1 200 OK\r\n\r\nuntil the connection closes";
  assert.deepEqual(scan(scanner, text, 3), [
    "head 200",
    "end",
    "head 200",
    "end",
    "head 204",
    "end",
    "head 100",
    "head 200",
    "end",
    "head 304",
    "end",
    "head 200",
  ]);
});

Deno.test("framing: malformed framing is a FramingError", () => {
  for (
    const text of [
      "GARBAGE\r\n\r\n",
      "POST / HTTP/1.1\r\ncontent-length: x\r\n\r\n",
      "POST / HTTP/1.1\r\ncontent-length: 1\r\ncontent-length: 2\r\n\r\n",
      "POST / HTTP/1.1\r\ntransfer-encoding: gzip\r\n\r\n",
      "POST / HTTP/1.1\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n",
    ]
  ) {
    assert.throws(() => scan(new MessageScanner("request"), text), FramingError, text);
  }
  assert.throws(
    () => scan(new MessageScanner("request", 100), "GET / HTTP/1.1\r\n" + "x: y\r\n".repeat(30)),
    FramingError,
  );
});

Deno.test("framing: a 101 answers its request and ends HTTP on the connection (WebSocket upgrade)", () => {
  const scanner = new MessageScanner("response");
  scanner.expect("GET");
  const text = "HTTP/1.1 101 Switching Protocols\r\nupgrade: websocket\r\nconnection: Upgrade\r\n\r\n";
  // WebSocket frames follow: bytes that are not HTTP and must not be read as a head.
  assert.deepEqual(scan(scanner, text + "\x81\x05hello\x88\x00HTTP/1.1 200 OK\r\n\r\n"), ["head 101", "upgrade"]);
  assert.equal(scanner.inBody, true);
  const interim = new MessageScanner("response");
  interim.expect("POST");
  assert.deepEqual(
    scan(interim, "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n"),
    ["head 100", "head 200", "end"],
  );
});
