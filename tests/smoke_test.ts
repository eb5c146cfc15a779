import assert from "node:assert/strict";
import { QueueFullError } from "../engine/engine.ts";

Deno.test("QueueFullError is an Error with its own name", () => {
  const e = new QueueFullError("queue full");
  assert.ok(e instanceof Error);
  assert.equal(e.name, "QueueFullError");
});
