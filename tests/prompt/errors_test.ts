import assert from "node:assert/strict";
import { QueueFullError } from "../../engine/engine.ts";
import { ApiError, errorResponse, invalidRequest, methodNotAllowed, unauthorized } from "../../prompt/errors.ts";

async function body(response: Response): Promise<{ error: Record<string, unknown> }> {
  return await response.json();
}

Deno.test("errorResponse gives the OpenAI error shape with param and code", async () => {
  const response = errorResponse(invalidRequest("bad temperature", "temperature", "invalid_value"));
  assert.equal(response.status, 400);
  assert.equal(response.headers.get("content-type"), "application/json");
  assert.deepEqual(await body(response), {
    error: { message: "bad temperature", type: "invalid_request_error", param: "temperature", code: "invalid_value" },
  });
});

Deno.test("errorResponse maps QueueFullError to 429 with Retry-After", async () => {
  const response = errorResponse(new QueueFullError("queue full: 3 in flight"));
  assert.equal(response.status, 429);
  assert.equal(response.headers.get("retry-after"), "1");
  const { error } = await body(response);
  assert.equal(error.type, "rate_limit_error");
  assert.equal(error.code, "rate_limit_exceeded");
  assert.equal(error.param, null);
});

Deno.test("errorResponse never leaks an unknown error's message or stack", async () => {
  const secret = new Error("ENOENT: /secret/path/model.onnx");
  const response = errorResponse(secret);
  assert.equal(response.status, 500);
  const text = await response.text();
  assert.ok(!text.includes("secret"), text);
  assert.ok(!text.includes("at "), text);
  const { error } = JSON.parse(text);
  assert.equal(error.type, "server_error");
  assert.equal(typeof error.message, "string");
});

Deno.test("405 names the allowed methods and 401 asks for a bearer token", () => {
  const e405 = errorResponse(methodNotAllowed("PUT", ["GET", "DELETE"]));
  assert.equal(e405.status, 405);
  assert.equal(e405.headers.get("allow"), "GET, DELETE");
  const e401 = errorResponse(unauthorized("Incorrect API key provided"));
  assert.equal(e401.status, 401);
  assert.match(e401.headers.get("www-authenticate") ?? "", /^Bearer/);
  assert.ok(new ApiError({ status: 404, type: "not_found_error", message: "x" }).toJSON().error.code === null);
});
