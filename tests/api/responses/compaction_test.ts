/**
 * `POST /v1/responses/compact` through the official `openai` SDK (`client.responses.compact`), over a scripted
 * engine that answers the summary request with a fixed summary: the compacted list is the user messages plus one
 * opaque compaction item, and used as `input` it renders the summary in place of the conversation.
 */
import assert from "node:assert/strict";
import OpenAI from "openai";
import { SUMMARY_HEADER } from "../../../api/responses/conversation_items.ts";
import { SUMMARY_REQUEST } from "../../../api/responses/response_compaction.ts";
import type { GenerateRequest } from "../../../engine/engine.ts";
import {
  answerText,
  defaultScript,
  MODEL,
  postJson,
  startTestServer,
  type TestServer,
  tokenizer,
} from "../../../testing/test_server.ts";

const SUMMARY = "The user asked for the weather in Paris (sunny) and Rome (rainy).";

function summarizingScript(): (request: GenerateRequest) => readonly number[] {
  const tok = tokenizer();
  const fallback = defaultScript(tok);
  return (request) =>
    tok.decode(request.promptTokens).includes(SUMMARY_REQUEST) ? tok.encode(answerText(SUMMARY)) : fallback(request);
}

const CONVERSATION = [
  { role: "user" as const, content: "Weather in Paris?" },
  { role: "assistant" as const, content: "It is sunny in Paris." },
  { role: "user" as const, content: "And Rome?" },
  { role: "assistant" as const, content: "Rainy in Rome." },
];

function prompts(t: TestServer): string[] {
  return t.engine.requests.map((r) => t.engine.tokenizer.decode(r.promptTokens));
}

Deno.test("compact: the SDK's responses.compact returns the user messages and a sealed compaction item", async () => {
  const t = startTestServer({ script: summarizingScript() });
  try {
    const openai = new OpenAI({ baseURL: t.baseURL, apiKey: "unused", maxRetries: 0 });
    const compacted = await openai.responses.compact({
      model: MODEL,
      input: CONVERSATION,
      instructions: "Be brief.",
    });
    assert.equal(compacted.object, "response.compaction");
    assert.match(compacted.id, /^resp_/);
    assert.equal(typeof compacted.created_at, "number");
    assert.deepEqual(
      compacted.output.map((item) =>
        item.type === "message" ? `${item.role}:${JSON.stringify(item.content)}` : item.type
      ),
      [
        `user:${JSON.stringify([{ type: "input_text", text: "Weather in Paris?" }])}`,
        `user:${JSON.stringify([{ type: "input_text", text: "And Rome?" }])}`,
        "compaction",
      ],
    );
    const compaction = compacted.output.at(-1)!;
    assert.ok(compaction.type === "compaction");
    assert.match(compaction.id, /^cmp_/);
    assert.ok(!compaction.encrypted_content.includes("Paris"), "the summary travels sealed");
    assert.ok(compacted.usage.input_tokens > 0 && compacted.usage.output_tokens > 0);
    // The model saw the whole conversation, the instructions and the request to summarise it.
    const summaryPrompt = prompts(t).at(-1)!;
    for (const text of ["Be brief.", "It is sunny in Paris.", "Rainy in Rome.", SUMMARY_REQUEST]) {
      assert.ok(summaryPrompt.includes(text), text);
    }

    // The compacted list as input: the summary stands in for the assistant turns it replaced.
    const next = await openai.responses.create({
      model: MODEL,
      store: false,
      input: [...compacted.output, { role: "user", content: "And Berlin?" }] as OpenAI.Responses.ResponseInput,
    });
    assert.equal(next.status, "completed");
    const prompt = prompts(t).at(-1)!;
    assert.ok(prompt.includes(`<|start|>user<|message|>${SUMMARY_HEADER}${SUMMARY}<|end|>`), prompt);
    assert.ok(!prompt.includes("Rainy in Rome."), prompt);
    assert.ok(
      prompt.indexOf("And Rome?") < prompt.indexOf(SUMMARY) && prompt.indexOf(SUMMARY) < prompt.indexOf("And Berlin?"),
    );

    // Compacting a compacted conversation again folds the earlier summary into the new one.
    const again = await openai.responses.compact({
      model: MODEL,
      input: [...compacted.output, { role: "user", content: "And Berlin?" }] as OpenAI.Responses.ResponseInput,
    });
    assert.deepEqual(again.output.map((i) => i.type), ["message", "message", "message", "compaction"]);
    assert.ok(prompts(t).at(-1)!.includes(SUMMARY_HEADER + SUMMARY));
  } finally {
    await t.close();
  }
});

Deno.test("compact: previous_response_id brings the stored chain; a string input is one user message", async () => {
  const t = startTestServer({ script: summarizingScript() });
  try {
    const openai = new OpenAI({ baseURL: t.baseURL, apiKey: "unused", maxRetries: 0 });
    const first = await openai.responses.create({ model: MODEL, input: "First question" });
    const compacted = await openai.responses.compact({
      model: MODEL,
      previous_response_id: first.id,
      input: "Second question",
    });
    // The SDK types output messages as assistant ones; the compacted list holds user messages.
    const items = compacted.output as unknown as { type: string; role?: string; content?: { text: string }[] }[];
    const users = items.flatMap((item) =>
      item.type === "message" && item.role === "user" ? (item.content ?? []).map((part) => part.text) : []
    );
    assert.deepEqual(users, ["First question", "Second question"]);
    assert.equal(compacted.output.at(-1)!.type, "compaction");
  } finally {
    await t.close();
  }
});

Deno.test("compact: bad requests are 400/404/405 with the param named; a tampered compaction item is refused", async () => {
  const t = startTestServer({ script: summarizingScript() });
  try {
    const get = await fetch(`${t.baseURL}/responses/compact`);
    assert.equal(get.status, 405);
    assert.equal(get.headers.get("allow"), "POST");
    await get.body?.cancel();
    const cases: [unknown, number, string | null][] = [
      [{ model: MODEL }, 400, "input"],
      [{ model: MODEL, input: "x", stream: true }, 400, "stream"],
      [{ model: "nope", input: "x" }, 404, "model"],
      [{ model: MODEL, input: [{ type: "compaction" }] }, 400, "input[0].encrypted_content"],
      [{ model: MODEL, previous_response_id: "resp_missing" }, 404, "previous_response_id"],
    ];
    for (const [body, status, param] of cases) {
      const response = await postJson(`${t.baseURL}/responses/compact`, body);
      const error = (await response.json()).error;
      assert.equal(response.status, status, JSON.stringify(body));
      assert.equal(error.param, param, JSON.stringify(body));
    }
    const compacted = await (await postJson(`${t.baseURL}/responses/compact`, { model: MODEL, input: CONVERSATION }))
      .json() as { output: { type: string; encrypted_content?: string }[] };
    const blob = compacted.output.at(-1)!.encrypted_content!;
    const tampered = blob.slice(0, 10) + (blob[10] === "A" ? "B" : "A") + blob.slice(11);
    const refused = await postJson(`${t.baseURL}/responses`, {
      model: MODEL,
      input: [...compacted.output.slice(0, -1), { type: "compaction", encrypted_content: tampered }],
    });
    assert.equal(refused.status, 400);
    assert.equal((await refused.json()).error.param, "input[2].encrypted_content");
  } finally {
    await t.close();
  }
});
