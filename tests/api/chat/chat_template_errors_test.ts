import assert from "node:assert/strict";
import { createServer } from "../../../server/server.ts";
import { SqliteStore } from "../../../api/store/sqlite_store.ts";
import { HfTokenizer } from "../../../checkpoint/hf_tokenizer.ts";
import { createTemplateFormat } from "../../../prompt/template_format.ts";
import { ScriptedEngine } from "../../../testing/scripted_engine.ts";
import { postJson } from "../../../testing/test_server.ts";

const tokenizer = HfTokenizer.fromJSON(
  JSON.parse(Deno.readTextFileSync(new URL("../../fixtures/tokenizers/byte_level.json", import.meta.url))),
);
// What many Hugging Face templates do with a conversation they cannot render.
const TEMPLATE = "{% for m in messages %}{% if m.role == 'assistant' and loop.first %}" +
  "{{ raise_exception('Conversation roles must start with user') }}{% endif %}" +
  "<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}<|im_start|>assistant\n";

Deno.test("a conversation the chat template rejects is a 400 with the template's message, not a logged 500", async () => {
  const errors: unknown[] = [];
  const store = SqliteStore.open(":memory:");
  const server = createServer({
    engine: new ScriptedEngine({ tokenizer, script: tokenizer.encode("ok<|im_end|>"), modelId: "tiny" }),
    format: createTemplateFormat(tokenizer, TEMPLATE),
    modelId: "tiny",
    store,
    port: 0,
    onError: (error) => errors.push(error),
  });
  try {
    const assistantFirst = [{ role: "assistant", content: "hello" }, { role: "user", content: "hi" }];
    const requests = [
      ["chat/completions", { model: "tiny", messages: assistantFirst }],
      ["responses", { model: "tiny", input: assistantFirst }],
      ["responses/input_tokens", { model: "tiny", input: assistantFirst }],
    ] as const;
    for (const [path, body] of requests) {
      const r = await postJson(`${server.url}/v1/${path}`, body);
      assert.equal(r.status, 400, path);
      const { error } = await r.json();
      assert.equal(error.type, "invalid_request_error");
      assert.match(error.message, /Conversation roles must start with user/);
    }
    assert.deepEqual(errors, []);
    const ok = await postJson(`${server.url}/v1/chat/completions`, {
      model: "tiny",
      messages: assistantFirst.slice(1),
    });
    assert.equal(ok.status, 200);
    await ok.body?.cancel();
  } finally {
    await server.shutdown(1000);
    await store.close();
  }
});
