/**
 * Test-only entry: `rill serve` exactly as main.ts runs it (same options, store, signals, logs), but over the
 * ScriptedEngine instead of a model directory, so process-level tests (SIGTERM drain, restart persistence) always
 * run. `RILL_TEST_STEP_DELAY_MS` slows the engine down so a request can be in flight when a signal arrives.
 * With `RILL_TEST_STEPS=S` (and `RILL_TEST_TOKENS_PER_STEP=K`) it serves a PacedEngine whose answer is S
 * time-stamped steps of exactly K tokens, for the HTTP benchmark. --max-model-len, --max-num-seqs and --max-queue
 * bound the scripted engine as they bound the real one. With `RILL_TEST_LONG_WORDS=N`, a request whose last user
 * message contains `[long]` is answered with N words (cross-replica tails and cancellations need a long response).
 */
import { CliError, parseServeArgs } from "../server/cli_options.ts";
import { Logger } from "../server/logger.ts";
import { serveModel } from "../server/serve.ts";
import { OPENAI_DEFAULTS } from "../api/sampling_defaults.ts";
import { createHarmonyFormat } from "../prompt/harmony_format.ts";
import { answerText, defaultScript, MODEL, tokenizer } from "./test_server.ts";
import { ScriptedEngine } from "./scripted_engine.ts";
import { PacedEngine, stampedScript } from "./paced_engine.ts";

if (import.meta.main) {
  try {
    const config = parseServeArgs(Deno.args.slice(1), (name) => Deno.env.get(name));
    if (config === "help") Deno.exit(0);
    const tok = tokenizer();
    const stepMs = Number(Deno.env.get("RILL_TEST_STEP_DELAY_MS") ?? "0");
    const steps = Deno.env.get("RILL_TEST_STEPS");
    const longWords = Number(Deno.env.get("RILL_TEST_LONG_WORDS") ?? "0");
    const script = defaultScript(tok);
    const long = tok.encode(answerText(Array.from({ length: longWords }, (_, i) => `word${i}`).join(" ")));
    const scripted: typeof script = (request) => {
      const prompt = tok.decode(request.promptTokens);
      const lastUser = prompt.slice(prompt.lastIndexOf("<|start|>user"));
      return longWords > 0 && lastUser.includes("[long]") ? long : script(request);
    };
    const engine = steps === undefined
      ? new ScriptedEngine({
        tokenizer: tok,
        script: scripted,
        chunking: "one",
        modelId: MODEL,
        stepDelayMs: stepMs,
        // The engine's limits as rill serve sets them: a batch of --max-num-seqs plus --max-queue waiting.
        queueSize: config.maxNumSeqs + config.maxQueue,
        ...(config.maxModelLen === undefined ? {} : { maxModelLen: config.maxModelLen }),
      })
      : new PacedEngine({
        tokenizer: tok,
        script: stampedScript(tok, Number(steps)),
        tokensPerStep: Number(Deno.env.get("RILL_TEST_TOKENS_PER_STEP") ?? "1"),
        stepMs,
        modelId: MODEL,
        ...(config.maxModelLen === undefined ? {} : { maxModelLen: config.maxModelLen }),
      });
    const logger = new Logger(config.logFormat, undefined, config.logLevel);
    const model = { engine, format: createHarmonyFormat(tok), modelId: MODEL, defaults: OPENAI_DEFAULTS };
    Deno.exit(await serveModel(config, model, logger));
  } catch (error) {
    if (!(error instanceof CliError)) throw error;
    console.error(`rill: ${error.message}`);
    Deno.exit(1);
  }
}
