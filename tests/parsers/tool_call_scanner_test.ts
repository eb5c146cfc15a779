import assert from "node:assert/strict";
import fc from "fast-check";
import { ToolCallScanner } from "../../parsers/tool_call_scanner.ts";

/** Feeds `chunks` in order; returns name, status, the arguments text and where scanning stopped in the last chunk. */
function scanAll(chunks: readonly string[]) {
  const s = new ToolCallScanner();
  let args = "";
  let stop = -1;
  let nameAfter = -1; // total characters consumed when the name became known
  let consumed = 0;
  for (const chunk of chunks) {
    let i = 0;
    for (;;) {
      const hadName = s.name !== undefined;
      i = s.scan(chunk, i);
      args += s.takeArgs();
      if (!hadName && s.name !== undefined) nameAfter = consumed + i;
      if (i >= chunk.length || s.status !== "scanning") break;
    }
    if (s.status !== "scanning" && i < chunk.length) {
      stop = consumed + i;
      break;
    }
    consumed += chunk.length;
  }
  return { name: s.name, status: s.status, args, stop, nameAfter, argsStarted: s.argsStarted, done: s.argsComplete };
}

function chunked(text: string, cuts: readonly number[]): string[] {
  const points = [...new Set(cuts.map((c) => c % (text.length + 1)))].sort((a, b) => a - b);
  const out: string[] = [];
  let last = 0;
  for (const p of [...points, text.length]) {
    if (p > last) out.push(text.slice(last, p));
    last = Math.max(last, p);
  }
  return out;
}

Deno.test("object arguments stream raw, byte for byte", () => {
  const r = scanAll(['\n{"name": "get_weather", "arguments": {"city": "Par', 'is", "n": [1, 2.5e3, true, null]}}\n']);
  assert.equal(r.name, "get_weather");
  assert.equal(r.status, "done");
  assert.equal(r.args, '{"city": "Paris", "n": [1, 2.5e3, true, null]}');
  assert.equal(r.stop, -1);
});

Deno.test("string arguments are decoded, escapes and surrogate pairs split across chunks", () => {
  const inner = JSON.stringify({ q: 'say "hi"\n', e: "😀", u: "\u00e9" });
  const body = JSON.stringify({ name: "f", arguments: inner }).replace("😀", "\\ud83d\\ude00");
  for (let cut = 1; cut < body.length; cut++) {
    const r = scanAll([body.slice(0, cut), body.slice(cut)]);
    assert.equal(r.args, inner, `cut at ${cut}`);
    assert.equal(r.status, "done");
  }
});

Deno.test("the name pauses the scan right after its closing quote", () => {
  const s = new ToolCallScanner();
  const text = '{"name": "f", "arguments": {}}';
  const i = s.scan(text, 0);
  assert.equal(s.name, "f");
  assert.equal(text.slice(0, i), '{"name": "f"');
  assert.equal(s.scan(text, i), text.length);
  assert.equal(s.takeArgs(), "{}");
});

Deno.test("malformed input fails at the offending character", () => {
  assert.deepEqual([scanAll(["oops"]).status, scanAll(["oops"]).stop], ["failed", 0]);
  const r = scanAll(['{"name": "f", "arguments": {"a": 1]}']);
  assert.equal(r.status, "failed");
  assert.equal(r.stop, 34);
  assert.equal(scanAll(['{"name": 3}']).status, "failed");
  assert.equal(scanAll(['{"name": "f" "x"}']).status, "failed");
  assert.equal(scanAll(['{"name": "f", "arguments": "\\q"}']).status, "failed");
});

Deno.test("trailing text after the object is reported, other keys are skipped", () => {
  const r = scanAll(['{"id": {"x": "}"}, "name": "g", "extra": [1, "]"]}  more']);
  assert.equal(r.name, "g");
  assert.equal(r.status, "done");
  assert.equal(r.stop, '{"id": {"x": "}"}, "name": "g", "extra": [1, "]"]}  more'.indexOf("more"));
  assert.equal(r.argsStarted, false);
});

Deno.test("parameters is a synonym of arguments; primitives are accepted", () => {
  assert.equal(scanAll(['{"name": "f", "parameters": {"a": 1}}']).args, '{"a": 1}');
  assert.equal(scanAll(['{"name": "f", "arguments": null}']).args, "null");
});

Deno.test("property: result is independent of chunking", () => {
  const body = fc.oneof(
    fc.tuple(
      fc.record({ name: fc.string({ maxLength: 6 }), arguments: fc.jsonValue({ maxDepth: 3 }) }),
      fc.constantFrom(0, 1, 2),
    ).map(([o, indent]) => JSON.stringify(o, null, indent)),
    fc.record({ name: fc.string({ maxLength: 6 }), arguments: fc.jsonValue({ maxDepth: 2 }) }).map((o) =>
      JSON.stringify({ ...o, arguments: JSON.stringify(o.arguments) })
    ),
    fc.string({ maxLength: 30 }).map((s) => `{"name": "f", "arguments": ${s}`),
  );
  fc.assert(
    fc.property(body, fc.array(fc.nat(), { maxLength: 10 }), (text, cuts) => {
      const whole = scanAll([text]);
      assert.deepEqual(scanAll(chunked(text, cuts)), whole);
      // The scanner is lenient about bare literals (`A`); the arguments oracle applies to valid JSON only.
      const valid = (() => {
        try {
          return JSON.parse(text) as { arguments: unknown };
        } catch {
          return undefined;
        }
      })();
      if (valid !== undefined && whole.status === "done" && whole.stop < 0 && whole.argsStarted) {
        const parsed = valid;
        if (typeof parsed.arguments === "string") assert.equal(whole.args, parsed.arguments);
        else assert.deepEqual(JSON.parse(whole.args), parsed.arguments);
      }
    }),
    { numRuns: 500 },
  );
});
