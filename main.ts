/**
 * rill's command line: `rill serve [MODEL_DIR] [OPTIONS]` (see `rill serve --help`).
 */
import { CliError, parseServeArgs, serveHelp } from "./api/cli_options.ts";
import { Logger } from "./api/logger.ts";
import { loadServedModel, serveModel } from "./api/serve.ts";

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
  const logger = new Logger(config.logFormat);
  return await serveModel(config, await loadServedModel(config, logger), logger);
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
