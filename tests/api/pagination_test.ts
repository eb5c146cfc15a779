import assert from "node:assert/strict";
import { pageQuery } from "../../api/pagination.ts";
import { ApiError } from "../../prompt/errors.ts";

const url = (query: string) => new URL(`http://rill.test/v1/conversations/conv_1/items${query}`);

function rejects(query: string, param: string, code: string): void {
  assert.throws(() => pageQuery(url(query)), (e: unknown) => {
    assert.ok(e instanceof ApiError, String(e));
    assert.equal(e.status, 400);
    assert.equal(e.param, param, e.message);
    assert.equal(e.code, code, e.message);
    return true;
  });
}

Deno.test("pagination: defaults are 20 items, newest first, from the start", () => {
  assert.deepEqual(pageQuery(url("")), { limit: 20, order: "desc" });
});

Deno.test("pagination: limit, order and after are read as given", () => {
  assert.deepEqual(pageQuery(url("?limit=1&order=asc&after=msg_9")), { limit: 1, order: "asc", after: "msg_9" });
  assert.deepEqual(pageQuery(url("?limit=100&order=desc")), { limit: 100, order: "desc" });
  assert.deepEqual(pageQuery(url("?include=message.output_text.logprobs")), { limit: 20, order: "desc" });
});

Deno.test("pagination: a bad limit or order is a 400 naming it", () => {
  for (const limit of ["0", "101", "-1", "1.5", "abc", "", "1e1", " 5"]) {
    rejects(`?limit=${encodeURIComponent(limit)}`, "limit", "invalid_value");
  }
  for (const order of ["ASC", "newest", ""]) rejects(`?order=${order}`, "order", "invalid_value");
});

Deno.test("pagination: an unknown parameter or include value is a 400 naming it", () => {
  rejects("?before=msg_1", "before", "unknown_parameter");
  rejects("?starting_after=3", "starting_after", "unknown_parameter");
  rejects("?include=file_search_call.results", "include", "unsupported_parameter");
  rejects("?include[]=nope", "include[]", "unsupported_parameter");
});
