/**
 * Test-only entry: `rill serve` exactly as main.ts runs it (same options, store, signals, logs), but over the
 * ScriptedEngine instead of a model directory, so process-level tests (SIGTERM drain, restart persistence) always
 * run. `RILL_TEST_STEP_DELAY_MS` slows the engine down so a request can be in flight when a signal arrives.
 * With `RILL_TEST_STEPS=S` (and `RILL_TEST_TOKENS_PER_STEP=K`) it serves a PacedEngine whose answer is S
 * time-stamped steps of exactly K tokens, for the HTTP benchmark.
 */
import { CliError, parseServeArgs } from "../../api/cli_options.ts";
import { Logger } from "../../api/logger.ts";
import { serveModel } from "../../api/serve.ts";
import { createHarmonyFormat } from "../../engine/harmony_format.ts";
import { defaultScript, MODEL, tokenizer } from "../api/test_server.ts";
import { ScriptedEngine } from "../support/scripted_engine.ts";
import { PacedEngine, stampedScript } from "./paced_engine.ts";

if (import.meta.main) {
  try {
    const config = parseServeArgs(Deno.args.slice(1), (name) => Deno.env.get(name));
    if (config === "help") Deno.exit(0);
    const tok = tokenizer();
    const stepMs = Number(Deno.env.get("RILL_TEST_STEP_DELAY_MS") ?? "0");
    const steps = Deno.env.get("RILL_TEST_STEPS");
    const engine = steps === undefined
      ? new ScriptedEngine({
        tokenizer: tok,
        script: defaultScript(tok),
        chunking: "one",
        modelId: MODEL,
        stepDelayMs: stepMs,
      })
      : new PacedEngine({
        tokenizer: tok,
        script: stampedScript(tok, Number(steps)),
        tokensPerStep: Number(Deno.env.get("RILL_TEST_TOKENS_PER_STEP") ?? "1"),
        stepMs,
        modelId: MODEL,
      });
    const logger = new Logger(config.logFormat);
    const defaults = { temperature: 1, topP: 1, topK: 0 };
    Deno.exit(await serveModel(config, { engine, format: createHarmonyFormat(tok), modelId: MODEL, defaults }, logger));
  } catch (error) {
    if (!(error instanceof CliError)) throw error;
    console.error(`rill: ${error.message}`);
    Deno.exit(1);
  }
}
