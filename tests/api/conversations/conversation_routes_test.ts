import assert from "node:assert/strict";
import { matchRoute } from "../../../server/routes.ts";

Deno.test("matchRoute: conversation routes carry the conversation id and the item id", () => {
  assert.deepEqual(matchRoute("POST", "/v1/conversations"), { kind: "match", match: { route: "/v1/conversations" } });
  assert.deepEqual(matchRoute("POST", "/v1/conversations/conv_1"), {
    kind: "match",
    match: { route: "/v1/conversations/{id}", id: "conv_1" },
  });
  assert.deepEqual(matchRoute("GET", "/v1/conversations/conv_1/items/"), {
    kind: "match",
    match: { route: "/v1/conversations/{id}/items", id: "conv_1" },
  });
  assert.deepEqual(matchRoute("DELETE", "/v1/conversations/conv_1/items/msg_2"), {
    kind: "match",
    match: { route: "/v1/conversations/{id}/items/{item_id}", id: "conv_1", itemId: "msg_2" },
  });
  assert.deepEqual(matchRoute("GET", "/v1/conversations"), {
    kind: "method",
    route: "/v1/conversations",
    allow: ["POST"],
  });
  assert.deepEqual(matchRoute("POST", "/v1/conversations/conv_1/items/msg_2"), {
    kind: "method",
    route: "/v1/conversations/{id}/items/{item_id}",
    allow: ["GET", "DELETE"],
  });
  assert.equal(matchRoute("GET", "/v1/conversations/conv_1/items/msg_2/extra").kind, "none");
});
