import assert from "node:assert/strict";
import { CliError, parseServeArgs, type ServeConfig } from "../../server/cli_options.ts";
import { Logger } from "../../server/logger.ts";
import { loadServedModel } from "../../server/serve.ts";

// tests/fixtures/tiny-random declares a 512-token context (config.json and tokenizer_config.json).
const DIR = "tests/fixtures/tiny-random";

function config(maxModelLen: string): ServeConfig {
  const parsed = parseServeArgs([DIR, "--max-model-len", maxModelLen, "--data-dir", ":memory:"], () => undefined);
  return parsed as ServeConfig;
}

Deno.test("--max-model-len above the model's context is a one-line CliError naming both numbers", async () => {
  await assert.rejects(
    () => loadServedModel(config("513"), new Logger("text", () => {})),
    (e: unknown) => {
      assert.ok(e instanceof CliError, String(e));
      assert.doesNotMatch(e.message, /\n/);
      assert.match(e.message, /--max-model-len 513\b/);
      assert.match(e.message, /\b512\b/);
      return true;
    },
  );
});

Deno.test("--max-model-len at or below the model's context is served as given", async () => {
  for (const [flag, expected] of [["512", 512], ["100", 100]] as const) {
    const model = await loadServedModel(config(flag), new Logger("text", () => {}));
    try {
      assert.equal(model.engine.maxModelLen, expected);
    } finally {
      await model.engine.close();
    }
  }
});
