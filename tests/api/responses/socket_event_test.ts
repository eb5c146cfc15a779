/**
 * socketEvent: what a stream event looks like on the WebSocket. A failure after the response started is an SSE
 * `error` event, which the protocol's WebSocket error event (ResponseWsError) must also be.
 */
import assert from "node:assert/strict";
import { socketEvent } from "../../../api/responses/responses_socket.ts";
import { socketEventErrors, streamEventErrors } from "../../conformance/openapi_shape_check.ts";

const midStreamError = {
  type: "error",
  code: "server_error",
  message: "engine failed",
  param: null,
  sequence_number: 7,
};

Deno.test("socketEvent: a mid-stream error is both the SSE error event and the WebSocket error event", () => {
  const sent = socketEvent(midStreamError, "lane-1");
  assert.deepEqual(socketEventErrors(sent), []);
  assert.deepEqual(streamEventErrors(sent), []);
  assert.deepEqual(sent["error"], {
    type: "server_error",
    code: "server_error",
    message: "engine failed",
    param: null,
  });
  assert.equal(sent["stream_id"], "lane-1");
  assert.equal(sent["sequence_number"], 7);
  // The nested object is checked against ErrorPayload: a malformed one is caught.
  assert.notDeepEqual(socketEventErrors({ ...midStreamError, error: "x" }), []);
});

Deno.test("socketEvent: other events only gain their lane", () => {
  const delta = { type: "response.output_text.delta", delta: "hi", sequence_number: 3 };
  assert.deepEqual(socketEvent(delta, undefined), delta);
  assert.deepEqual(socketEvent(delta, "a"), { ...delta, stream_id: "a" });
});
