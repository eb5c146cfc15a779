/**
 * rill's command line: `rill serve [MODEL_DIR] [OPTIONS]` (see `rill serve --help`).
 */
import { CliError, parseServeArgs, serveHelp } from "./server/cli_options.ts";
import { Logger } from "./server/logger.ts";
import { loadServedModel, serveModel } from "./server/serve.ts";

async function main(args: readonly string[]): Promise<number> {
  const [command, ...rest] = args;
  if (command === undefined || command === "--help" || command === "-h" || command === "help") {
    console.log(serveHelp());
    return command === undefined ? 2 : 0;
  }
  if (command !== "serve") throw new CliError(`Unknown command '${command}'; the only command is 'serve'`);
  const config = parseServeArgs(rest, (name) => Deno.env.get(name));
  if (config === "help") {
    console.log(serveHelp());
    return 0;
  }
  const logger = new Logger(config.logFormat, undefined, config.logLevel);
  try {
    return await serveModel(config, await loadServedModel(config, logger), logger);
  } catch (error) {
    // Once the log format is known, a fatal error is a log line like any other (a JSON object with `json`).
    if (!(error instanceof CliError) || config.logFormat !== "json") throw error;
    logger.error(error.message);
    return 1;
  }
}

if (import.meta.main) {
  try {
    Deno.exit(await main(Deno.args));
  } catch (error) {
    if (!(error instanceof CliError)) throw error;
    console.error(`rill: ${error.message}`);
    Deno.exit(1);
  }
}
