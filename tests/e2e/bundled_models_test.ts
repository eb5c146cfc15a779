/**
 * End to end over HTTP on each bundled trained model: the real server (createServer over loadServedModel, as
 * `rill serve` builds it) answers in-domain questions correctly at temperature 0, and runs a full get_weather tool
 * round trip — function_call, then function_call_output sent with previous_response_id, then a final answer that
 * uses the tool's result. Every stream passes the validator with no allowances. With draft-model speculation the
 * answers are the same (greedy output does not depend on the drafts).
 */
import assert from "node:assert/strict";
import { validateSSE } from "../../conformance/validator.ts";
import { BUNDLED_MODELS, GET_WEATHER, withBundledServer } from "../../testing/bundled_server.ts";
import { LlmEngine } from "../../engine/llm_engine.ts";

interface Item {
  type: string;
  [key: string]: unknown;
}
interface Completed {
  id: string;
  status: string;
  output: Item[];
}

/** POSTs a streamed /v1/responses request; returns the terminal response after validating every event. */
async function streamed(url: string, body: Record<string, unknown>): Promise<Completed> {
  const res = await fetch(`${url}/v1/responses`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ ...body, stream: true }),
  });
  assert.equal(res.status, 200, await res.clone().text());
  const { events, violations } = validateSSE(await res.text());
  assert.deepEqual(violations, []);
  const last = events.at(-1) as { type: string; response: Completed };
  assert.equal(last.type, "response.completed");
  return last.response;
}

function outputText(r: Completed): string {
  return r.output
    .filter((i) => i.type === "message")
    .flatMap((i) => i["content"] as { type: string; text: string }[])
    .map((c) => c.text)
    .join("");
}

const ROOT = new URL("../../", import.meta.url).pathname;

/** Each model on ONNX, on the native library, on the native library with the other bundled model as its draft, and
 * with its own trained EAGLE-3 head. */
const RUNS = BUNDLED_MODELS.flatMap((n) => {
  const other = BUNDLED_MODELS.find((m) => m !== n)!;
  return [
    [n, "onnx", ["--backend", "onnx"]],
    [n, "native", ["--backend", "native"]],
    [n, "native, draft model", [
      "--backend",
      "native",
      "--speculative",
      "draft",
      "--draft-model",
      `${ROOT}models/${other}`,
    ]],
    [n, "native, EAGLE-3 head", [
      "--backend",
      "native",
      "--speculative",
      "eagle3",
      "--draft-model",
      `${ROOT}models/${n}-eagle3`,
    ]],
  ] as const;
});

for (const [name, backend, flags] of RUNS) {
  Deno.test(`${name} over HTTP (${backend}): in-domain answers and a tool round trip with previous_response_id`, async () => {
    await withBundledServer(name, 4, async (url, model) => {
      const ask = (input: string) => streamed(url, { model: model.modelId, input, temperature: 0 });
      const [capital, sum, product] = await Promise.all([
        ask("What is the capital of France?"),
        ask("What is 12 + 7?"),
        ask("What is 6 times 8?"),
      ]);
      assert.match(outputText(capital), /\bParis\b/);
      assert.match(outputText(sum), /\b19\b/);
      assert.match(outputText(product), /\b48\b/);

      const first = await streamed(url, {
        model: model.modelId,
        input: "What is the weather in Paris?",
        tools: [GET_WEATHER],
        temperature: 0,
      });
      const call = first.output.find((i) => i.type === "function_call");
      assert.ok(call !== undefined, `expected a function_call, got ${JSON.stringify(first.output)}`);
      assert.equal(call["name"], "get_weather");
      assert.deepEqual(JSON.parse(call["arguments"] as string), { city: "Paris" });

      const second = await streamed(url, {
        model: model.modelId,
        previous_response_id: first.id,
        input: [{
          type: "function_call_output",
          call_id: call["call_id"],
          output: JSON.stringify({ temperature: 18, condition: "sunny" }),
        }],
        tools: [GET_WEATHER],
        temperature: 0,
      });
      assert.equal(second.output.some((i) => i.type === "function_call"), false);
      const answer = outputText(second);
      assert.match(answer, /sunny/);
      assert.match(answer, /\b18\b/);
      assert.match(answer, /Paris/);
      if (backend.endsWith("draft model") && model.engine instanceof LlmEngine) {
        const m = model.engine.metrics();
        assert.ok(
          m.draftedTokens > 0 && m.acceptedDrafts > 0,
          `draft model proposals were verified: ${m.acceptedDrafts}`,
        );
      }
    }, flags);
  });
}
