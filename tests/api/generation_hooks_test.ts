/**
 * Every endpoint's reader of a generation calls its hooks (api/generation.ts): each generation reaches the metrics
 * exactly once, with its output tokens and a first-token time, whether its stream is read by the Responses pipeline
 * (streamed, collected, background, compaction), the Chat Completions pipeline or the legacy Completions reader.
 */
import assert from "node:assert/strict";
import { MODEL, postJson, startTestServer, type TestServer } from "../../testing/test_server.ts";

function sample(text: string, name: string): number {
  const match = new RegExp(`^${name}(?:\\{[^}]*\\})? (\\S+)$`, "m").exec(text);
  if (match === null) throw new Error(`no ${name} in the metrics`);
  return Number(match[1]);
}

async function counts(t: TestServer): Promise<{ generations: number; tokens: number; running: number }> {
  const text = await (await fetch(`${t.url}/metrics`)).text();
  return {
    generations: sample(text, "rill_time_to_first_token_seconds_count"),
    tokens: sample(text, "rill_generation_tokens_total"),
    running: sample(text, "rill_num_requests_running"),
  };
}

/** Runs `request` and checks that it added `generations` generations and `tokens` output tokens to the metrics. */
async function observed(t: TestServer, generations: number, request: () => Promise<number>): Promise<void> {
  const before = await counts(t);
  const tokens = await request();
  const after = await counts(t);
  assert.ok(tokens > 0);
  assert.deepEqual(after, {
    generations: before.generations + generations,
    tokens: before.tokens + tokens,
    running: 0,
  });
}

/** The `usage` of the last SSE data frame that carries one. */
function streamedUsage(body: string, field: string): number {
  const usages = body.split("\n").filter((l) => l.startsWith("data: {")).map((l) => JSON.parse(l.slice(6)))
    .map((e) => e.usage ?? e.response?.usage).filter((u) => u != null);
  const last = usages.at(-1);
  if (last === undefined) throw new Error("no usage in the stream");
  return last[field];
}

Deno.test("generation hooks: every endpoint's reader reports each generation to the metrics once", async () => {
  const t = startTestServer();
  try {
    const input = { model: MODEL, input: "hi" };
    await observed(
      t,
      1,
      async () => (await (await postJson(`${t.baseURL}/responses`, input)).json()).usage.output_tokens,
    );
    await observed(t, 1, async () => {
      const body = await (await postJson(`${t.baseURL}/responses`, { ...input, stream: true })).text();
      return streamedUsage(body, "output_tokens");
    });
    await observed(t, 1, async () => {
      const created = await (await postJson(`${t.baseURL}/responses`, { ...input, background: true })).json();
      const tail = await (await fetch(`${t.baseURL}/responses/${created.id}?stream=true`)).text();
      return streamedUsage(tail, "output_tokens");
    });
    await observed(t, 1, async () => {
      const compacted = await (await postJson(`${t.baseURL}/responses/compact`, input)).json();
      return compacted.usage.output_tokens;
    });
    const chat = { model: MODEL, messages: [{ role: "user", content: "hi" }] };
    // One choice first: later choices wait for the first one's prefill, which only its hooks report.
    await observed(t, 1, async () => {
      return (await (await postJson(`${t.baseURL}/chat/completions`, chat)).json()).usage.completion_tokens;
    });
    await observed(t, 2, async () => {
      const completion = await (await postJson(`${t.baseURL}/chat/completions`, { ...chat, n: 2 })).json();
      return completion.usage.completion_tokens;
    });
    await observed(t, 2, async () => {
      const body = await (await postJson(`${t.baseURL}/chat/completions`, {
        ...chat,
        n: 2,
        stream: true,
        stream_options: { include_usage: true },
      })).text();
      return streamedUsage(body, "completion_tokens");
    });
    const completion = { model: MODEL, prompt: "hi", max_tokens: 5 };
    await observed(t, 1, async () => {
      return (await (await postJson(`${t.baseURL}/completions`, completion)).json()).usage.completion_tokens;
    });
    await observed(t, 1, async () => {
      const body = await (await postJson(`${t.baseURL}/completions`, {
        ...completion,
        stream: true,
        stream_options: { include_usage: true },
      })).text();
      return streamedUsage(body, "completion_tokens");
    });
  } finally {
    await t.close();
  }
});
