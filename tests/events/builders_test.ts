/**
 * The leaf builders' contract (issue 2): one pure function per wire event, named after it, importing nothing but the
 * wire types — never parsers/, never state.
 */
import assert from "node:assert/strict";
import * as b from "../../events/builders.ts";

type Builder = (...args: unknown[]) => { type: string };
const builders = Object.entries(b as unknown as Record<string, unknown>)
  .filter((e): e is [string, Builder] => typeof e[1] === "function");

/** `response.output_text.delta` and `outputTextDelta` both → `outputtextdelta`. */
const squash = (name: string): string => name.replace(/[._]/g, "").toLowerCase().replace(/^response/, "");

// Frozen arguments of every shape a builder takes: a mutation would throw in strict-mode module code.
const ref = Object.freeze({ itemId: "msg_1", outputIndex: 0, contentIndex: 0 });
const args: unknown[] = [ref, "text", Object.freeze([]), "name"];

Deno.test("builders: one per wire event, named after it, each returning a fresh object and mutating nothing", () => {
  assert.ok(builders.length >= 30, `only ${builders.length} builders`);
  const types = new Set<string>();
  for (const [name, build] of builders) {
    const first = build(...args.slice(0, Math.max(build.length, 1)));
    const second = build(...args.slice(0, Math.max(build.length, 1)));
    assert.equal(squash(first.type), squash(name), `${name} builds ${first.type}`);
    assert.ok(!types.has(first.type), `two builders for ${first.type}`);
    types.add(first.type);
    assert.notEqual(first, second, `${name} returned a shared object`);
    assert.deepEqual(first, second, `${name} is not a pure function of its arguments`);
    assert.ok(!("sequence_number" in first), `${name} numbers its event`);
  }
});

Deno.test("builders import only the wire types (never parsers/ or any stateful module)", () => {
  const source = Deno.readTextFileSync(new URL("../../events/builders.ts", import.meta.url));
  const imports = [...source.matchAll(/^import\b[^;]*?from\s+"([^"]+)"/gm)].map((m) => [m[0], m[1]!] as const);
  assert.ok(imports.length > 0);
  for (const [line, from] of imports) {
    assert.equal(from, "./types.ts", line);
    assert.ok(line.startsWith("import type "), `${line} is not type-only`);
  }
  assert.ok(!/^\s*(let|var)\s/m.test(source), "module-level mutable state");
});
