/** Test support: rill's real server (createServer over loadServedModel, as `rill serve` builds it) on a bundled model. */
import { parseServeArgs, type ServeConfig } from "../server/cli_options.ts";
import { Logger } from "../server/logger.ts";
import { SqliteStore } from "../api/store/sqlite_store.ts";
import { loadServedModel, type ServedModel } from "../server/serve.ts";
import { createServer } from "../server/server.ts";

const ROOT = new URL("../", import.meta.url).pathname;

export const BUNDLED_MODELS = ["rill-tiny-harmony", "rill-tiny-chatml"] as const;

/** The tool exactly as models/rill-tiny-harmony/README.md documents it (one of the wordings seen in training). */
export const GET_WEATHER = {
  type: "function",
  name: "get_weather",
  description: "Get the current weather for a city.",
  parameters: {
    type: "object",
    properties: { city: { type: "string", description: "The city name." } },
    required: ["city"],
  },
};

/** Serves models/NAME on a free port for the duration of `body`, then shuts everything down. */
export async function withBundledServer(
  name: string,
  maxNumSeqs: number,
  body: (url: string, model: ServedModel) => Promise<void>,
  /** More `rill serve` flags, e.g. `["--backend", "native"]`. */
  extraArgs: readonly string[] = [],
): Promise<void> {
  const config = parseServeArgs(
    [
      `${ROOT}models/${name}`,
      "--port",
      "0",
      "--data-dir",
      ":memory:",
      "--max-num-seqs",
      `${maxNumSeqs}`,
      "--shards",
      "1",
      ...extraArgs,
    ],
    () => undefined,
  ) as ServeConfig;
  const model = await loadServedModel(config, new Logger("text", () => {}));
  const store = SqliteStore.open(":memory:");
  const server = createServer({ ...model, store, port: 0 });
  try {
    await body(server.url, model);
  } finally {
    await server.shutdown(1000);
    await model.engine.close();
    await store.close();
  }
}
