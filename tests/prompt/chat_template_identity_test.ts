/**
 * rill's chat-template renderer (prompt/chat_template_render.ts over @huggingface/jinja) against Python's jinja2 in
 * transformers' environment: every template × conversation of tests/fixtures/chat_renders/ must render to the same
 * text that scripts/render_chat_templates.py recorded (renders.json), or fail where jinja2 failed. The templates are
 * the real ones of the npm tokenizer packages (Qwen3, Llama 3) and fixtures exercising the environment's features;
 * the clock is pinned to the recorded `now`, so no render depends on today's date.
 */
import assert from "node:assert/strict";
import { Template } from "@huggingface/jinja";
import { renderChatTemplate } from "../../prompt/chat_template_render.ts";
import { REAL_TOKENIZERS } from "../../testing/real_tokenizers.ts";

const FIXTURES = new URL("../fixtures/chat_renders/", import.meta.url);
const ROOT = new URL("../../", import.meta.url);

interface Conversation {
  readonly name: string;
  readonly messages: Record<string, unknown>[];
  readonly tools?: string;
}
interface Render {
  readonly template: string;
  readonly conversation: string;
  readonly text?: string;
  readonly error?: string;
}
interface Renders {
  readonly now: string;
  readonly templates: Record<string, { origin: string; sha256: string }>;
  readonly renders: readonly Render[];
}

const fixture = JSON.parse(await Deno.readTextFile(new URL("conversations.json", FIXTURES))) as {
  tools: Record<string, unknown[]>;
  conversations: Conversation[];
};
const recorded = JSON.parse(await Deno.readTextFile(new URL("renders.json", FIXTURES))) as Renders;

/** The template text and the special-token texts transformers passes (those tokenizer_config.json sets). */
async function loadTemplate(origin: string): Promise<{ source: string; specials: Record<string, string> }> {
  const real = Object.values(REAL_TOKENIZERS).find((t) => t.origin === origin);
  if (real === undefined) return { source: await Deno.readTextFile(new URL(origin, ROOT)), specials: {} };
  const config = JSON.parse(await Deno.readTextFile(real.tokenizerConfigPath)) as Record<string, unknown>;
  const specials: Record<string, string> = {};
  for (const key of ["bos_token", "eos_token"]) {
    const value = config[key];
    if (typeof value === "string") specials[key] = value;
  }
  return { source: String(config.chat_template), specials };
}

async function sha256(text: string): Promise<string> {
  const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(text));
  return Array.from(new Uint8Array(digest), (b) => b.toString(16).padStart(2, "0")).join("");
}

/** The recorded local time, as a local Date (strftime_now is Python's datetime.now(), local time). */
function recordedNow(iso: string): Date {
  const [date, time] = iso.split("T") as [string, string];
  const [y, mo, d] = date.split("-").map(Number) as [number, number, number];
  const [h, mi, s] = time.split(":").map(Number) as [number, number, number];
  return new Date(y, mo - 1, d, h, mi, s);
}

const now = recordedNow(recorded.now);

for (const [name, { origin, sha256: want }] of Object.entries(recorded.templates)) {
  Deno.test(`chat template ${name} (${origin}) renders every conversation as transformers' jinja2 does`, async () => {
    const { source, specials } = await loadTemplate(origin);
    assert.equal(await sha256(source), want, `${origin}: the template changed since renders.json was recorded`);
    const template = new Template(source);
    const cases = recorded.renders.filter((r) => r.template === name);
    assert.equal(cases.length, fixture.conversations.length);
    for (const c of cases) {
      const conversation = fixture.conversations.find((x) => x.name === c.conversation)!;
      const context: Record<string, unknown> = {
        messages: structuredClone(conversation.messages),
        add_generation_prompt: true,
        enable_thinking: true,
        ...specials,
      };
      if (conversation.tools !== undefined) context.tools = structuredClone(fixture.tools[conversation.tools]);
      const render = () => renderChatTemplate(template, context, () => now);
      if (c.error !== undefined) {
        assert.throws(render, Error, `${name} / ${c.conversation}: jinja2 failed (${c.error}), rill rendered`);
      } else {
        assert.equal(render(), c.text, `${name} / ${c.conversation}`);
      }
    }
  });
}
