/**
 * Stop strings cut the visible text exactly where the stop string begins, even when it starts inside a token:
 * on rill-tiny-chatml the answer to "What is 12 + 7?" contains "12 + 7 = 19", and " =" is one token, so the space
 * before "=" survives only if the engine splits that token.
 */
import assert from "node:assert/strict";
import { withBundledServer } from "../../testing/bundled_server.ts";

async function chat(url: string, extra: Record<string, unknown>): Promise<{ content: string; finish: string }> {
  const res = await fetch(`${url}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({
      model: "rill-tiny-chatml",
      messages: [{ role: "user", content: "What is 12 + 7?" }],
      temperature: 0,
      max_tokens: 48,
      ...extra,
    }),
  });
  assert.equal(res.status, 200);
  const body = await res.json();
  return { content: body.choices[0].message.content, finish: body.choices[0].finish_reason };
}

Deno.test("chat completions: a stop string starting inside a token cuts the text exactly before it", async () => {
  await withBundledServer("rill-tiny-chatml", 1, async (url) => {
    const full = await chat(url, {});
    const at = full.content.indexOf("= 19");
    assert.ok(at > 0, `unstopped answer contains "= 19": ${JSON.stringify(full.content)}`);
    const stopped = await chat(url, { stop: ["= 19"] });
    assert.equal(stopped.finish, "stop");
    assert.equal(stopped.content, full.content.slice(0, at));
    assert.ok(stopped.content.endsWith("12 + 7 "), JSON.stringify(stopped.content));
  });
});
