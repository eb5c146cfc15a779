/**
 * The constraint layer on a real tokenizer: masks follow accepted tokens, rollback restores the exact earlier mask,
 * draft mask rows leave the constraint as it was, a required constraint forbids the turn's end before its trigger,
 * control tokens cannot appear inside the JSON, a disposed constraint allows everything; and the request → spec
 * mapping of tool_choice.
 */
import assert from "node:assert/strict";
import { advanceConstraint, fillDraftMasks, maskWords } from "../../engine/token_constraint.ts";
import { loadModel } from "../../prompt/load_model.ts";
import { ConstraintCompiler } from "../../grammar/constraint_compiler.ts";
import { structuredRequest } from "../../prompt/structured_output.ts";

const ROOT = new URL("../../", import.meta.url).pathname;
const PARAMS = {
  type: "object",
  properties: { city: { type: "string" } },
  required: ["city"],
  additionalProperties: false,
};

function allowed(words: Uint32Array, offset: number, token: number): boolean {
  return ((words[offset + (token >>> 5)]! >>> (token & 31)) & 1) === 1;
}

Deno.test("grammar constraint on the harmony tokenizer: masks, rollback, drafts, end tokens, control tokens", async () => {
  const model = await loadModel(`${ROOT}models/rill-tiny-harmony`);
  const tk = model.tokenizer;
  const compiler = await ConstraintCompiler.create(tk, tk.vocabSize);
  const compiled = await compiler.compile(
    { text: { kind: "json_schema", schema: PARAMS, strict: true }, tools: [], required: true },
    model.format.constraintLayout,
  );
  const c = await compiled.create();
  const W = maskWords(tk.vocabSize);
  const ret = tk.specialId("<|return|>")!;
  const end = tk.specialId("<|end|>")!;
  const words = new Uint32Array(W * 8);
  c.fillMask(words, 0);
  assert.ok(!allowed(words, 0, ret), "the turn cannot end before the answer");
  const text = '<|channel|>analysis<|message|>Hi.<|end|><|start|>assistant<|channel|>final<|message|>{"city":"Oslo"}';
  const ids = tk.encode(text);
  const masks: Uint32Array[] = [];
  for (const id of ids) {
    const m = new Uint32Array(W);
    c.fillMask(m, 0);
    masks.push(m);
    assert.ok(allowed(m, 0, id), `token ${JSON.stringify(tk.decode([id]))} must be allowed`);
    assert.ok(c.accept(id));
  }
  c.fillMask(words, 0);
  assert.ok(allowed(words, 0, ret), "after the JSON the turn may end");
  // Rewind into the JSON string: the mask there is the one seen going forward, and control tokens are not in it.
  c.rollback(3);
  const back = new Uint32Array(W);
  c.fillMask(back, 0);
  assert.deepEqual(back, masks[ids.length - 3]);
  assert.ok(!allowed(back, 0, end), "a control token inside the JSON string");
  // Draft rows: row r is the mask after r drafts; the constraint is unchanged afterwards.
  const drafts = ids.slice(ids.length - 3);
  const rows = fillDraftMasks(c, drafts, words, W);
  assert.equal(rows, drafts.length + 1);
  for (let r = 0; r < drafts.length; r++) {
    assert.deepEqual(words.subarray(r * W, (r + 1) * W), masks[ids.length - 3 + r]);
  }
  c.fillMask(back, 0);
  assert.deepEqual(back, masks[ids.length - 3]);
  // The same rows placed from a later row of a batch's allowedMask (maskRowStart = 4).
  const batchMask = new Uint32Array(W * 8);
  assert.equal(fillDraftMasks(c, drafts.slice(0, 2), batchMask, W, 4), 3);
  assert.deepEqual(batchMask.subarray(0, 4 * W), new Uint32Array(4 * W));
  for (let r = 0; r < 3; r++) assert.deepEqual(batchMask.subarray((4 + r) * W, (5 + r) * W), masks[ids.length - 3 + r]);
  // A draft the grammar refuses ends the rows at its own (which forbids it).
  const bad = [ret, ret];
  assert.equal(fillDraftMasks(c, bad, words, W), 1);
  assert.ok(!allowed(words, 0, bad[0]!));
  assert.ok(!c.accept(bad[0]!));
  c.dispose();
  c.fillMask(words, 0);
  assert.ok(allowed(words, 0, end) && allowed(words, 0, ret));
  assert.ok(c.accept(end));
});

Deno.test("structuredRequest: tool_choice decides which calls are constrained and whether one is required", () => {
  const tools = [
    { name: "a", parameters: PARAMS, strict: true },
    { name: "b", parameters: PARAMS },
  ];
  const base = { text: undefined, textParam: "text.format", tools, strictDefault: false, toolParam: (n: string) => n };
  assert.equal(structuredRequest({ ...base, choice: "none" }), undefined);
  const auto = structuredRequest({ ...base, choice: "auto" })!;
  assert.equal(auto.spec.required, false);
  assert.deepEqual(auto.spec.tools.map((t) => [t.name, t.parameters !== undefined]), [["a", true], ["b", false]]);
  assert.equal(structuredRequest({ ...base, tools: [tools[1]!], choice: "auto" }), undefined);
  const named = structuredRequest({ ...base, choice: { type: "function", name: "b" } })!;
  assert.equal(named.spec.required, true);
  assert.deepEqual(named.spec.tools.map((t) => t.name), ["b"]);
  const required = structuredRequest({ ...base, choice: "required", strictDefault: true })!;
  assert.deepEqual(required.spec.tools.map((t) => t.strict), [true, true]);
  const text = structuredRequest({
    ...base,
    text: { kind: "json_object" },
    choice: "none",
  })!;
  assert.deepEqual(text.spec, { text: { kind: "json_object" }, tools: [], required: true });
});

Deno.test("a layout without reasoning in the output is constrained from the first token (answer or call)", async () => {
  const model = await loadModel(`${ROOT}models/rill-tiny-chatml`);
  const tk = model.tokenizer;
  const layout = { ...model.format.constraintLayout, opening: "" };
  const compiler = await ConstraintCompiler.create(tk, tk.vocabSize);
  const compiled = await compiler.compile({
    text: { kind: "json_schema", schema: PARAMS, strict: true },
    tools: [{ name: "get_weather", parameters: PARAMS, strict: true }],
    required: true,
  }, layout);
  const W = maskWords(tk.vocabSize);
  const words = new Uint32Array(W);
  const imEnd = tk.specialId("<|im_end|>")!;
  const accepts = async (text: string) => {
    const c = await compiled.create();
    try {
      for (const id of tk.encode(text)) {
        c.fillMask(words, 0);
        if (!allowed(words, 0, id) || !c.accept(id)) return false;
      }
      c.fillMask(words, 0);
      return allowed(words, 0, imEnd);
    } finally {
      c.dispose();
    }
  };
  assert.ok(await accepts('{"city": "Oslo"}'));
  assert.ok(await accepts('<tool_call>{"name": "get_weather", "arguments": {"city": "Oslo"}}</tool_call>'));
  assert.ok(!(await accepts("Hello")));
  assert.ok(!(await accepts("<think>\nHi\n</think>\n\n")));
});

Deno.test("harmony calls may name the recipient before or after the channel (rill's form and gpt-oss's)", async () => {
  const model = await loadModel(`${ROOT}models/rill-tiny-harmony`);
  const tk = model.tokenizer;
  const compiler = await ConstraintCompiler.create(tk, tk.vocabSize);
  const W = maskWords(tk.vocabSize);
  const words = new Uint32Array(W);
  const call = tk.specialId("<|call|>")!;
  for (const required of [true, false]) {
    const compiled = await compiler.compile(
      { tools: [{ name: "get_weather", parameters: PARAMS, strict: true }], required },
      model.format.constraintLayout,
    );
    for (
      const header of [
        "<|start|>assistant to=functions.get_weather<|channel|>commentary <|constrain|>json<|message|>",
        "<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>",
      ]
    ) {
      const c = await compiled.create();
      const text = `<|channel|>analysis<|message|>Call it.<|end|>${header}{"city":"Oslo"}`;
      for (const id of tk.encode(text)) {
        c.fillMask(words, 0);
        assert.ok(allowed(words, 0, id), `${JSON.stringify(tk.decode([id]))} in ${header} (required ${required})`);
        assert.ok(c.accept(id));
      }
      c.fillMask(words, 0);
      assert.ok(allowed(words, 0, call));
      // Arguments outside the schema are refused.
      const bad = await compiled.create();
      const ids = tk.encode(`<|channel|>analysis<|message|>Call it.<|end|>${header}{"town"`);
      assert.ok(!ids.every((id) => bad.accept(id)));
      c.dispose();
      bad.dispose();
    }
  }
});

Deno.test("drafts past the turn's end token need no rows, and advancing stops at it", async () => {
  const model = await loadModel(`${ROOT}models/rill-tiny-chatml`);
  const tk = model.tokenizer;
  const compiler = await ConstraintCompiler.create(tk, tk.vocabSize);
  const compiled = await compiler.compile(
    { text: { kind: "json_schema", schema: PARAMS, strict: true }, tools: [], required: true },
    model.format.constraintLayout,
  );
  const c = await compiled.create();
  const imEnd = tk.specialId("<|im_end|>")!;
  for (const id of tk.encode('<think>\nOk.\n</think>\n\n{"city": "Oslo"}')) assert.ok(c.accept(id));
  const W = maskWords(tk.vocabSize);
  const words = new Uint32Array(W * 4);
  const after = tk.encode("Hi");
  // The end token, then drafts an n-gram proposer could copy from history: only the end token's own row is needed.
  assert.equal(fillDraftMasks(c, [imEnd, ...after], words, W), 1);
  assert.ok(allowed(words, 0, imEnd));
  assert.ok(!c.isTerminated(), "draft checking leaves the constraint as it was");
  assert.ok(advanceConstraint(c, [imEnd, ...after]));
  assert.ok(c.isTerminated());
  c.dispose();
});
