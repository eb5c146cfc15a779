/**
 * Codex CLI's own requests, replayed against rill. The fixtures in tests/fixtures/codex/ are request bodies and
 * headers that `codex exec` (@openai/codex 0.169.0, `wire_api = "responses"`) sent to a rill server through a logging
 * proxy; only local paths and the installation id were replaced. Each replay checks what Codex needs of the answer:
 * a valid stream whose items it reads from `response.output_item.done`, a `response.completed` with the usage fields
 * it reads, tool calls as `function_call` items with a `call_id`, and acceptance of the follow-up request that carries
 * the call's output back (with the reasoning item replayed as Codex replays it).
 */
import assert from "node:assert/strict";
import type { GenerateRequest } from "../../engine/engine.ts";
import { validateSSE } from "../../conformance/validator.ts";
import {
  answerText,
  MODEL,
  startTestServer,
  type TestServer,
  tokenizer,
  toolCallText,
} from "../../testing/test_server.ts";

interface Recorded {
  readonly command: string;
  readonly headers: Record<string, string>;
  readonly body: Record<string, unknown> & { input: Record<string, unknown>[] };
}

type Item = Record<string, unknown> & { type: string; id: string };
type Event = Record<string, unknown> & { type: string };

function recorded(name: string): Recorded {
  const fixture: Recorded = JSON.parse(
    Deno.readTextFileSync(new URL(`../fixtures/codex/${name}.json`, import.meta.url)),
  );
  assert.equal(fixture.body.model, MODEL, "recorded against a server serving the test model's name");
  return fixture;
}

/** Like a small tool-using model: runs `echo hi` with exec_command when asked to, reads the output, answers. */
function codexScript(request: GenerateRequest): readonly number[] {
  const tok = tokenizer();
  const prompt = tok.decode(request.promptTokens);
  const turn = prompt.slice(prompt.lastIndexOf("<|start|>user"));
  const answered = /<\|start\|>functions\.exec_command to=assistant/.test(turn);
  if (turn.includes("echo hi") && !answered) return tok.encode(toolCallText("exec_command", '{"cmd":"echo hi"}'));
  return tok.encode(answerText(answered ? "The command printed hi." : "hi"));
}

/** Posts a body with Codex's headers; returns the validated events of the stream. */
async function replay(t: TestServer, headers: Record<string, string>, body: unknown): Promise<Event[]> {
  const r = await fetch(`${t.baseURL}/responses`, { method: "POST", headers, body: JSON.stringify(body) });
  const text = await r.text();
  assert.equal(r.status, 200, text);
  assert.equal(r.headers.get("content-type"), "text/event-stream");
  const { events, violations } = validateSSE(text);
  assert.deepEqual(violations, [], text.slice(0, 2000));
  return events as Event[];
}

/** The items Codex takes from `output_item.done`, checked against the terminal response. */
function doneItems(events: readonly Event[]): Item[] {
  assert.equal(events[0]?.type, "response.created");
  const completed = events.at(-1)!;
  assert.equal(completed.type, "response.completed");
  const response = completed.response as Record<string, unknown>;
  assert.match(String(response.id), /^resp_/);
  const usage = response.usage as {
    input_tokens_details: { cached_tokens: unknown };
    output_tokens_details: { reasoning_tokens: unknown };
  };
  assert.equal(typeof usage.input_tokens_details.cached_tokens, "number");
  assert.equal(typeof usage.output_tokens_details.reasoning_tokens, "number");
  const items = events.filter((e) => e.type === "response.output_item.done").map((e) => e.item as Item);
  assert.deepEqual(response.output, items);
  return items;
}

Deno.test("codex payload: the recorded first request of 'say hi' streams a reasoning item and the answer", async () => {
  const t = startTestServer({ script: codexScript });
  try {
    const { headers, body } = recorded("say_hi");
    assert.deepEqual(body.include, ["reasoning.encrypted_content"]);
    assert.equal(body.store, false);
    const events = await replay(t, headers, body);
    const items = doneItems(events);
    assert.deepEqual(items.map((i) => i.type), ["reasoning", "message"]);
    assert.deepEqual(items[1]!.content, [{ type: "output_text", text: "hi", annotations: [], logprobs: [] }]);
    const id = String((events.at(-1)!.response as { id: string }).id);
    assert.equal(await t.store.get(id), undefined, "store: false keeps nothing");
    // Codex asks for `reasoning.encrypted_content`: the reasoning is sealed for the next turn (and also in clear).
    assert.equal(typeof items[0]!.encrypted_content, "string");
    assert.ok(Array.isArray(items[0]!.content) && items[0]!.content.length === 1);

    // Codex's developer messages and its function tools reach the prompt; its hosted web_search is not offered.
    const prompt = tokenizer().decode(t.engine.requests[0]!.promptTokens);
    assert.ok(prompt.includes("You are a coding agent running in the Codex CLI"));
    assert.ok(prompt.includes("type exec_command = "), "function tools are offered");
    assert.ok(!prompt.includes("type web_search"), "hosted tools are not offered");
  } finally {
    await t.close();
  }
});

Deno.test("codex payload: exec_command call, then the recorded follow-up carrying its output is answered", async () => {
  const t = startTestServer({ script: codexScript, chunking: { seed: 4, max: 3 } });
  try {
    const first = recorded("exec_call");
    const items = doneItems(await replay(t, first.headers, first.body));
    assert.deepEqual(items.map((i) => i.type), ["reasoning", "function_call"]);
    const call = items[1]!;
    assert.equal(call.name, "exec_command");
    assert.match(String(call.call_id), /^call_/);
    assert.deepEqual(JSON.parse(String(call.arguments)), { cmd: "echo hi" });

    // Codex's follow-up is the same history plus, in this order, the reasoning item, the call and its output.
    // Replay the recorded one with the ids and the sealed reasoning of this run, as Codex would send them; the
    // reasoning goes back as its blob only, so what reaches the prompt is what the blob holds.
    const followUp = recorded("exec_followup");
    const tail = followUp.body.input.slice(first.body.input.length);
    assert.deepEqual(tail.map((i) => i.type), ["reasoning", "function_call", "function_call_output"]);
    const [reasoning, recordedCall, output] = tail as [Item, Item, Item];
    const body = {
      ...followUp.body,
      input: [
        ...followUp.body.input.slice(0, first.body.input.length),
        { ...reasoning, id: items[0]!.id, content: undefined, encrypted_content: items[0]!.encrypted_content },
        { ...recordedCall, id: call.id, call_id: call.call_id, arguments: call.arguments },
        { ...output, call_id: call.call_id },
      ],
    };
    const answer = doneItems(await replay(t, followUp.headers, body));
    assert.deepEqual(answer.map((i) => i.type), ["reasoning", "message"]);
    assert.deepEqual(answer[1]!.content, [
      { type: "output_text", text: "The command printed hi.", annotations: [], logprobs: [] },
    ]);

    const prompt = tokenizer().decode(t.engine.requests[1]!.promptTokens);
    assert.match(prompt, /<\|start\|>assistant to=functions\.exec_command\b[^]*?\{"cmd":"echo hi"\}<\|call\|>/);
    assert.ok(prompt.includes(String(output.output)), "the command output reaches the model");
    assert.ok(prompt.includes("Need a tool."), "the replayed reasoning of a turn that called a tool is kept");
  } finally {
    await t.close();
  }
});

Deno.test("codex payload: a resumed session replays the earlier answer and is answered, with env_key auth", async () => {
  const t = startTestServer({ script: codexScript, server: { apiKey: "local-key" } });
  try {
    const { headers, body } = recorded("resume_turn");
    const replayed = body.input.filter((i) => i.role === "assistant" || i.type === "reasoning");
    assert.deepEqual(replayed.map((i) => i.type), ["reasoning", "message"]);
    assert.equal(replayed[1]!.phase, "final_answer");
    const denied = await fetch(`${t.baseURL}/responses`, { method: "POST", headers, body: JSON.stringify(body) });
    assert.equal(denied.status, 401);
    await denied.body?.cancel();
    // `env_key = "RILL_API_KEY"` in the provider config makes Codex send it as a bearer token.
    const items = doneItems(await replay(t, { ...headers, authorization: "Bearer local-key" }, body));
    assert.equal(items.at(-1)!.type, "message");
    const prompt = tokenizer().decode(t.engine.requests[0]!.promptTokens);
    assert.ok(prompt.includes("<|channel|>final<|message|>hi<|end|><|start|>user<|message|>and once more"), prompt);
  } finally {
    await t.close();
  }
});

Deno.test("codex payload: the recorded follow-up is accepted as recorded (ids from another server)", async () => {
  const t = startTestServer({ script: codexScript });
  try {
    const { headers, body } = recorded("exec_followup");
    const items = doneItems(await replay(t, headers, body));
    assert.equal(items.at(-1)!.type, "message");
  } finally {
    await t.close();
  }
});

Deno.test("codex payload: a reasoning item carrying a blob rill did not seal is a 400 naming it", async () => {
  const t = startTestServer({ script: codexScript });
  try {
    const { headers, body } = recorded("say_hi");
    const opaque = "gAAAAABpZ2Q5opaque-blob-from-another-server==";
    const input = [
      ...body.input,
      { type: "reasoning", id: "rs_foreign", summary: [], encrypted_content: opaque },
      { type: "message", role: "assistant", content: [{ type: "output_text", text: "hello" }] },
      { type: "message", role: "user", content: [{ type: "input_text", text: "say hi again" }] },
    ];
    const r = await fetch(`${t.baseURL}/responses`, {
      method: "POST",
      headers,
      body: JSON.stringify({ ...body, input }),
    });
    assert.equal(r.status, 400);
    const { error } = await r.json();
    assert.equal(error.type, "invalid_request_error");
    assert.equal(error.param, `input[${body.input.length}].encrypted_content`);
    assert.equal(t.engine.requests.length, 0);
  } finally {
    await t.close();
  }
});

Deno.test("codex payload: --output-schema on a model without a Hugging Face tokenizer (no grammar engine) is a 400 naming text.format", async () => {
  const t = startTestServer({ script: codexScript });
  try {
    const { headers, body } = recorded("output_schema");
    assert.equal((body.text as { format: { name: string } }).format.name, "codex_output_schema");
    const r = await fetch(`${t.baseURL}/responses`, { method: "POST", headers, body: JSON.stringify(body) });
    assert.equal(r.status, 400);
    const { error } = await r.json();
    assert.equal(error.param, "text.format");
    assert.equal(error.code, "unsupported_parameter");
    assert.equal(t.engine.requests.length, 0);
  } finally {
    await t.close();
  }
});

Deno.test("codex payload: a prompt over the context is the error code Codex maps to 'ran out of room'", async () => {
  const t = startTestServer({ script: codexScript, maxModelLen: 4096 });
  try {
    const { headers, body } = recorded("say_hi");
    const r = await fetch(`${t.baseURL}/responses`, { method: "POST", headers, body: JSON.stringify(body) });
    assert.equal(r.status, 400);
    const { error } = await r.json();
    assert.equal(error.code, "context_length_exceeded");
  } finally {
    await t.close();
  }
});
