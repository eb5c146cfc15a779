/**
 * Structured outputs are JSON on one line with at most one space between tokens: the rewritten xgrammar grammars
 * (json_object's any-object grammar and json_schema grammars, whose parts that leave a value open use xgrammar's
 * built-in any-value rules) accept every layout with zero or one space in each gap between tokens and refuse any
 * newline, tab or second space there, while strings keep whatever escapes they hold; and the token constraint built
 * from them refuses such tokens on a real tokenizer.
 */
import assert from "node:assert/strict";
import fc from "fast-check";
import { compactJsonGrammar, singleSpaceWhitespace } from "../../grammar/compact_json_grammar.ts";
import { ConstraintCompiler } from "../../grammar/constraint_compiler.ts";
import type { SchemaRef } from "../../grammar/output_constraint.ts";
import { initXgrammar, xgrammar } from "../../grammar/xgrammar.ts";
import { loadModel } from "../../prompt/load_model.ts";
import { maskWords } from "../../engine/token_constraint.ts";
import { whitespaceBreach } from "../../testing/compact_json_check.ts";

const ROOT = new URL("../../", import.meta.url).pathname;

/** What the untyped test helpers of web-xgrammar offer (not part of rill's typed xgrammar surface). */
interface XgTestings {
  Grammar: { fromEBNF(ebnf: string): Promise<{ dispose(): void }> };
  Testings: { isGrammarAcceptString(grammar: unknown, input: string): Promise<boolean> };
}

async function acceptor(ref: SchemaRef): Promise<{ accepts(text: string): Promise<boolean>; dispose(): void }> {
  await initXgrammar();
  const x = xgrammar() as unknown as XgTestings;
  const grammar = await x.Grammar.fromEBNF(await compactJsonGrammar(ref));
  return {
    accepts: (text) => x.Testings.isGrammarAcceptString(grammar, text),
    dispose: () => grammar.dispose(),
  };
}

/** `value` as JSON with `gap()` between every two tokens (strings as JSON.stringify writes them). */
function layout(value: unknown, gap: () => string): string {
  if (Array.isArray(value)) {
    if (value.length === 0) return `[${gap()}]`;
    return `[${gap()}${value.map((v) => layout(v, gap)).join(`${gap()},${gap()}`)}${gap()}]`;
  }
  if (typeof value === "object" && value !== null) {
    const entries = Object.entries(value);
    if (entries.length === 0) return `{${gap()}}`;
    const members = entries.map(([k, v]) => `${JSON.stringify(k)}${gap()}:${gap()}${layout(v, gap)}`);
    return `{${gap()}${members.join(`${gap()},${gap()}`)}${gap()}}`;
  }
  return JSON.stringify(value);
}

const GAPS = ["", " ", "  ", "\n", "\t", " \n", "\r", "   "];
const ALLOWED = new Set(["", " "]);

/** Lays `value` out with gaps drawn from `picks` (cycled); whether every gap drawn is allowed. */
function laidOut(value: unknown, picks: readonly number[]): { text: string; compact: boolean } {
  let n = 0;
  let compact = true;
  const text = layout(value, () => {
    const gap = GAPS[picks[n++ % picks.length]! % GAPS.length]!;
    if (!ALLOWED.has(gap)) compact = false;
    return gap;
  });
  return { text, compact };
}

const OBJECTS = fc.dictionary(
  fc.string({ maxLength: 6 }),
  fc.jsonValue({ maxDepth: 3 }).filter((v) => !(typeof v === "number" && Object.is(v, -0))),
  { maxKeys: 4 },
);

Deno.test("the whitespace rewrite narrows only the whitespace class, never a literal or another class", () => {
  const ebnf = 'a ::= ("[" [ \\n\\t]* "[ \\\\n\\\\t]" b [ \\n\\t] [^\\0-\\x1f\\"\\\\\\r\\n] [,}\\]:] "\\" [ \\n\\t]")';
  assert.equal(
    singleSpaceWhitespace(ebnf),
    'a ::= ("[" [ ]? "[ \\\\n\\\\t]" b [ ] [^\\0-\\x1f\\"\\\\\\r\\n] [,}\\]:] "\\" [ \\n\\t]")',
  );
  assert.throws(() => singleSpaceWhitespace('a ::= "open'), /unterminated literal/);
});

Deno.test("json_object grammar: one space at most between tokens, no newline or tab, any layout of any object", async () => {
  const g = await acceptor({ schema: { type: "object" }, strict: false });
  try {
    for (
      const text of ['{"a":1}', '{"a": 1}', '{ "a" : [1, {"b":null}] }', "{}", "{ }", '{"a":[ ]}', '{"s":"x\\ny"}']
    ) {
      assert.ok(await g.accepts(text), text);
    }
    for (const text of ['{"a":\n1}', '{"a":  1}', "{  }", '{"a":[  ]}', '{\t"a":1}', '{"a":1 ,  "b":2}', '{"a":1}\n']) {
      assert.ok(!(await g.accepts(text)), JSON.stringify(text));
    }
    await fc.assert(
      fc.asyncProperty(OBJECTS, fc.array(fc.nat(), { minLength: 1, maxLength: 12 }), async (value, picks) => {
        const { text, compact } = laidOut(value, picks);
        assert.equal(await g.accepts(text), compact, JSON.stringify(text));
        if (compact) assert.equal(whitespaceBreach(text), undefined);
      }),
      { numRuns: 150, seed: 18 },
    );
  } finally {
    g.dispose();
  }
});

Deno.test("json_schema grammars: the same rule in declared, optional, open and referenced parts", async () => {
  const schema = {
    type: "object",
    properties: {
      answer: { type: "string" },
      score: { type: "integer" },
      tags: { type: "array", items: { type: "string" } },
      pair: { type: "array", prefixItems: [{ type: "string" }, { type: "number" }] },
      extra: { type: "object", additionalProperties: { type: "integer" } },
      any: {},
      either: { anyOf: [{ type: "null" }, { $ref: "#/$defs/node" }] },
    },
    required: ["answer", "score"],
    additionalProperties: false,
    $defs: { node: { type: "object", properties: { next: { $ref: "#/$defs/node" } } } },
  };
  const values = [
    { answer: "x y", score: 3 },
    { answer: "", score: -1, tags: [], pair: ["a", 1.5], extra: {}, any: { z: [null, true] }, either: null },
    { answer: "a\tb", score: 0, tags: ["p", "q"], extra: { k: 2 }, any: [], either: { next: { next: {} } } },
  ];
  for (const strict of [true, false]) {
    const g = await acceptor({ schema, strict });
    try {
      await fc.assert(
        fc.asyncProperty(
          fc.constantFrom(...values),
          fc.array(fc.nat(), { minLength: 1, maxLength: 16 }),
          async (value, picks) => {
            const { text, compact } = laidOut(value, picks);
            assert.equal(await g.accepts(text), compact, JSON.stringify(text));
          },
        ),
        { numRuns: 120, seed: 7 },
      );
    } finally {
      g.dispose();
    }
  }
});

Deno.test("the token constraint refuses a newline, a tab or a second space between JSON tokens", async () => {
  const model = await loadModel(`${ROOT}models/rill-tiny-chatml`);
  const tk = model.tokenizer;
  const compiler = await ConstraintCompiler.create(tk, tk.vocabSize);
  const layoutNoReasoning = { ...model.format.constraintLayout, opening: "" };
  const W = maskWords(tk.vocabSize);
  const words = new Uint32Array(W);
  const imEnd = tk.specialId("<|im_end|>")!;
  const schema = { type: "object", properties: { city: { type: "string" } }, required: ["city"] };
  for (const text of [{ kind: "json_object" as const }, { kind: "json_schema" as const, schema, strict: true }]) {
    const compiled = await compiler.compile({ text, tools: [], required: true }, layoutNoReasoning);
    const accepts = async (answer: string) => {
      const c = await compiled.create();
      try {
        for (const id of tk.encode(answer)) {
          c.fillMask(words, 0);
          if (((words[id >>> 5]! >>> (id & 31)) & 1) === 0 || !c.accept(id)) return false;
        }
        c.fillMask(words, 0);
        return ((words[imEnd >>> 5]! >>> (imEnd & 31)) & 1) === 1;
      } finally {
        c.dispose();
      }
    };
    for (const ok of ['{"city":"Oslo"}', '{"city": "Oslo"}', '{ "city" : "Oslo" }']) {
      assert.ok(await accepts(ok), `${text.kind}: ${ok}`);
    }
    for (const bad of ['{"city":\n"Oslo"}', '{"city":  "Oslo"}', '{\t"city":"Oslo"}', '{\n  "city": "Oslo"\n}']) {
      assert.ok(!(await accepts(bad)), `${text.kind}: ${JSON.stringify(bad)}`);
    }
  }
});
