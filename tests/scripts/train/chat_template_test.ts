/**
 * The bundled ChatML model was trained on prompts produced by scripts/train/data.py. These tests prove that its
 * committed chat template, rendered by @huggingface/jinja (as rill renders it), produces those exact prompts, and
 * that the golden files the backends rely on are well formed.
 */
import { Template } from "@huggingface/jinja";
import assert from "node:assert/strict";

const chatml = new URL("../../../models/rill-tiny-chatml/", import.meta.url);
const harmony = new URL("../../../models/rill-tiny-harmony/", import.meta.url);

interface PromptCase {
  readonly text: string;
  readonly template_messages?: unknown[];
  readonly template_tools?: unknown[];
}

async function readJson<T>(base: URL, path: string): Promise<T> {
  return JSON.parse(await Deno.readTextFile(new URL(path, base))) as T;
}

Deno.test("chatml chat template renders the training prompts byte for byte", async () => {
  const cfg = await readJson<{ chat_template: string }>(chatml, "tokenizer_config.json");
  const { cases } = await readJson<{ cases: PromptCase[] }>(chatml, "golden/prompts.json");
  const template = new Template(cfg.chat_template);
  assert.ok(cases.length >= 10);
  for (const c of cases) {
    const tools = c.template_tools ?? [];
    const out = template.render({
      messages: c.template_messages ?? [],
      tools: tools.length > 0 ? tools : undefined,
      add_generation_prompt: true,
    });
    assert.equal(out, c.text);
  }
});

Deno.test("chatml chat template accepts flat tools and object arguments", async () => {
  const cfg = await readJson<{ chat_template: string }>(chatml, "tokenizer_config.json");
  const { cases } = await readJson<{ cases: PromptCase[] }>(chatml, "golden/prompts.json");
  const template = new Template(cfg.chat_template);
  const withCall = cases.filter((c) => JSON.stringify(c.template_messages).includes("tool_calls"));
  assert.ok(withCall.length > 0);
  for (const c of withCall) {
    const messages = (c.template_messages ?? []).map((m) => {
      const msg = m as { tool_calls?: { function: { name: string; arguments: string } }[] };
      if (msg.tool_calls === undefined) return m;
      return {
        ...msg,
        tool_calls: msg.tool_calls.map((tc) => ({
          function: { name: tc.function.name, arguments: JSON.parse(tc.function.arguments) },
        })),
      };
    });
    const tools = (c.template_tools ?? []).map((t) => (t as { function: unknown }).function);
    assert.equal(template.render({ messages, tools, add_generation_prompt: true }), c.text);
  }
});

for (const [name, base] of [["chatml", chatml], ["harmony", harmony]] as const) {
  Deno.test(`${name} golden logits name 3 positions of full-vocab logits`, async () => {
    const config = await readJson<{ vocab_size: number }>(base, "config.json");
    const { cases } = await readJson<
      { cases: { input_ids: number[]; positions: number[]; logits: number[][] }[] }
    >(base, "golden/logits.json");
    assert.ok(cases.length >= 3);
    for (const c of cases) {
      assert.deepEqual(c.positions, [c.input_ids.length - 3, c.input_ids.length - 2, c.input_ids.length - 1]);
      assert.equal(c.logits.length, 3);
      for (const row of c.logits) assert.equal(row.length, config.vocab_size);
    }
  });
}
