/**
 * `rill serve`: load the model, open the response store, start the HTTP server, and shut down gracefully on
 * SIGTERM/SIGINT (stop accepting, let running requests finish up to --shutdown-timeout, abort the rest, exit 0).
 */
import type { ChatFormat } from "../engine/chat_format.ts";
import type { Engine } from "../engine/engine.ts";
import { BackendUnavailableError, describeBackend } from "../engine/backends/create_backend.ts";
import { loadModel } from "../engine/load_model.ts";
import { ModelDirError } from "../engine/model_dir.ts";
import { openEngine } from "../engine/open_engine.ts";
import { CliError, type ServeConfig } from "./cli_options.ts";
import { Logger } from "./logger.ts";
import { compiledRoot, engineModelDir, isEmbedded } from "./model_source.ts";
import { ResponseStore } from "./response_store.ts";
import type { SamplingDefaults } from "./responses_request.ts";
import { readDoSample, samplingDefaults } from "./sampling_defaults.ts";
import { createServer } from "./server.ts";

/** A ready engine and what the server needs to know about its model. */
export interface ServedModel {
  readonly engine: Engine;
  readonly format: ChatFormat;
  /** The default model name (the directory's base name). */
  readonly modelId: string;
  readonly defaults: SamplingDefaults;
}

/** Loads MODEL_DIR into an engine. Problems with the directory are one-line CliErrors. */
export async function loadServedModel(config: ServeConfig, logger: Logger): Promise<ServedModel> {
  try {
    const stat = await Deno.stat(config.modelDir).catch(() => null);
    if (stat === null) throw new CliError(`Model directory '${config.modelDir}' does not exist`);
    if (!stat.isDirectory) throw new CliError(`Model path '${config.modelDir}' is not a directory`);
    const loaded = await loadModel(config.modelDir, { onProgress: (message) => logger.info(message) });
    // A longer context than the model has would be capped by the engine; saying so beats serving a smaller one.
    if (config.maxModelLen !== undefined && config.maxModelLen > loaded.maxModelLen) {
      throw maxModelLenTooLong(config.maxModelLen, loaded.maxModelLen);
    }
    const defaults = samplingDefaults(loaded.generationConfig, await readDoSample(config.modelDir));
    // A model embedded in a compiled binary is invisible to onnxruntime's native file reads. A self-contained one is
    // handed over as bytes; one with external data (resolved by path next to the graph) still needs a real copy.
    const embedded = isEmbedded(config.modelDir);
    const modelBytes = embedded && loaded.onnxDataPaths.length === 0 ? await Deno.readFile(loaded.onnxPath) : undefined;
    const source = modelBytes !== undefined
      ? { dir: config.modelDir, copied: false, release: () => Promise.resolve() }
      : await engineModelDir(config.modelDir, loaded.onnxDataPaths);
    if (modelBytes !== undefined) logger.info("model is embedded in the binary; the backend reads it from memory");
    if (source.copied) logger.info("model is embedded in the binary; the backend reads a copy", { dir: source.dir });
    const shards = compiledRoot() !== undefined && config.shards === "auto"
      ? 1 // the compile task does not embed engine/onnx_worker.ts, so a binary cannot start workers
      : config.shards;
    const started = performance.now();
    const engine = await openEngine({
      modelDir: source.dir,
      model: { ...loaded, onnxPath: `${source.dir}/onnx/model.onnx` },
      tokenizer: loaded.tokenizer,
      modelId: config.servedModelName ?? loaded.modelId,
      maxNumSeqs: config.maxNumSeqs,
      maxQueue: config.maxQueue,
      maxModelLen: config.maxModelLen ?? loaded.maxModelLen,
      speculative: config.speculative,
      numSpeculativeTokens: config.numSpeculativeTokens,
      eosTokenIds: loaded.eosTokenIds,
      ...(config.maxNumBatchedTokens === undefined ? {} : { maxNumBatchedTokens: config.maxNumBatchedTokens }),
      backend: {
        kind: config.backend,
        device: config.device,
        threads: config.threads,
        shards,
        dtype: config.dtype,
        blockSize: config.blockSize,
        prefixCache: config.prefixCache,
        ...(config.numKvBlocks === undefined ? {} : { numKvBlocks: config.numKvBlocks }),
        ...(modelBytes === undefined ? {} : { modelBytes }),
      },
    }).finally(() => source.release());
    // The backend may know a shorter limit than config.json (the graph's own position bound).
    if (config.maxModelLen !== undefined && config.maxModelLen > engine.maxModelLen) {
      await engine.close();
      throw maxModelLenTooLong(config.maxModelLen, engine.maxModelLen);
    }
    const info = engine.backend.info;
    logger.info(
      `${config.backend} backend: ${describeBackend(engine.backend)}, max ${info.maxSeqs} sequences and ` +
        `${info.maxBatchTokens} tokens per step, KV ${info.numBlocks} blocks of ${info.blockSize}, speculative ` +
        `${config.speculative} (${Math.round(performance.now() - started)} ms)`,
    );
    return { engine, format: loaded.format, modelId: loaded.modelId, defaults };
  } catch (error) {
    if (error instanceof CliError) throw error;
    if (error instanceof BackendUnavailableError) throw new CliError(error.message);
    if (error instanceof ModelDirError) throw new CliError(error.message.split("\n")[0]!);
    throw new CliError(`Cannot load model '${config.modelDir}': ${error instanceof Error ? error.message : error}`);
  }
}

function maxModelLenTooLong(requested: number, modelMax: number): CliError {
  return new CliError(`--max-model-len ${requested} exceeds the model's context length of ${modelMax} tokens`);
}

function openStore(dataDir: string): ResponseStore {
  if (dataDir === ":memory:") return ResponseStore.open(":memory:");
  try {
    Deno.mkdirSync(dataDir, { recursive: true });
    return ResponseStore.open(`${dataDir}/responses.sqlite`);
  } catch (error) {
    throw new CliError(
      `Cannot open the response store in '${dataDir}': ${error instanceof Error ? error.message : error}`,
    );
  }
}

/**
 * Serves `model` until SIGTERM/SIGINT, then drains and resolves with the exit code (0). Used by `rill serve` and by
 * test entries that bring their own engine.
 */
export async function serveModel(config: ServeConfig, model: ServedModel, logger: Logger): Promise<number> {
  const store = openStore(config.dataDir);
  const modelId = config.servedModelName ?? model.modelId;
  let server;
  try {
    server = createServer({
      engine: model.engine,
      format: model.format,
      modelId,
      store,
      hostname: config.host,
      port: config.port,
      defaults: model.defaults,
      ...(config.apiKey === undefined ? {} : { apiKey: config.apiKey }),
      onRequest: (entry) => logger.info("request", { ...entry, ms: Math.round(entry.ms * 10) / 10 }),
      onError: (error) =>
        logger.error("internal error", {
          error: error instanceof Error ? error.stack ?? error.message : String(error),
        }),
    });
  } catch (error) {
    store.close();
    if (error instanceof Deno.errors.AddrInUse) {
      throw new CliError(`Address ${config.host}:${config.port} is already in use`);
    }
    throw new CliError(
      `Cannot listen on ${config.host}:${config.port}: ${error instanceof Error ? error.message : error}`,
    );
  }
  console.log(
    `rill: serving model '${modelId}' (${model.format.name}, context ${model.engine.maxModelLen}) at ${server.url}`,
  );
  logger.info("listening", { url: server.url, model: modelId, format: model.format.name });

  const { promise: signalled, resolve: onSignal } = Promise.withResolvers<Deno.Signal>();
  const signals: Deno.Signal[] = ["SIGTERM", "SIGINT"];
  const handlers = signals.map((signal) => {
    const handler = () => onSignal(signal);
    Deno.addSignalListener(signal, handler);
    return [signal, handler] as const;
  });
  const signal = await Promise.race([signalled, server.finished.then(() => null)]);
  for (const [s, h] of handlers) Deno.removeSignalListener(s, h);
  if (signal !== null) {
    logger.info("shutting down", { signal, active: server.active(), timeout_s: config.shutdownTimeout });
    await server.shutdown(config.shutdownTimeout * 1000);
  }
  await model.engine.close();
  store.close();
  logger.info("stopped");
  return 0;
}
