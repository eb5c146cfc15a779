/**
 * `rill serve`: load the model, open the response store, start the HTTP server, and shut down gracefully on
 * SIGTERM/SIGINT (stop accepting, let running requests finish up to --shutdown-timeout, abort the rest, exit 0).
 */
import type { ChatFormat } from "../prompt/chat_format.ts";
import type { Engine } from "../engine/engine.ts";
import { type BackendKind, BackendUnavailableError, describeBackend } from "../engine/backends/create_backend.ts";
import { backendCandidates } from "../engine/backends/choose_backend.ts";
import { nativeLibraryBuilt } from "../ffi/binding/library.ts";
import type { LlmEngine } from "../engine/llm_engine.ts";
import { type LoadedModel, loadModel } from "../prompt/load_model.ts";
import { describeSafetensors, ModelDirError, onnxExternalData } from "../checkpoint/model_dir.ts";
import { openEngine } from "../engine/open_engine.ts";
import { CliError, type ServeConfig } from "./cli_options.ts";
import { Logger } from "./logger.ts";
import { compiledRoot, engineModelDir, isEmbedded } from "./model_source.ts";
import { openStore } from "./open_store.ts";
import type { SamplingDefaults } from "../api/sampling_defaults.ts";
import { readDoSample, samplingDefaults } from "../api/sampling_defaults.ts";
import { createServer } from "./server.ts";
import { deploymentReasoningKey } from "./reasoning_key.ts";

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
    const candidates = backendCandidates(
      config.backend,
      config.modelDir,
      loaded.weights,
      await nativeLibraryBuilt(),
    );
    let engine: LlmEngine | undefined;
    for (const [i, candidate] of candidates.entries()) {
      logger.info(`backend: ${candidate.kind} (${candidate.why})`);
      try {
        engine = await openServedEngine(config, loaded, candidate.kind, logger);
        break;
      } catch (error) {
        const next = candidates[i + 1];
        if (!(error instanceof BackendUnavailableError) || next === undefined) throw error;
        logger.warn(`${candidate.kind} backend cannot serve this model, trying ${next.kind}: ${error.message}`);
      }
    }
    if (engine === undefined) throw new CliError(`Cannot load model '${config.modelDir}'`);
    // The backend may know a shorter limit than config.json (the graph's own position bound).
    if (config.maxModelLen !== undefined && config.maxModelLen > engine.maxModelLen) {
      await engine.close();
      throw maxModelLenTooLong(config.maxModelLen, engine.maxModelLen);
    }
    return { engine, format: loaded.format, modelId: loaded.modelId, defaults };
  } catch (error) {
    if (error instanceof CliError) throw error;
    if (error instanceof BackendUnavailableError) throw new CliError(error.message);
    if (error instanceof ModelDirError) throw new CliError(error.message.split("\n")[0]!);
    throw new CliError(`Cannot load model '${config.modelDir}': ${error instanceof Error ? error.message : error}`);
  }
}

/** Opens `kind` on the loaded model, logging the weight files that backend reads (and only those). */
async function openServedEngine(
  config: ServeConfig,
  loaded: LoadedModel,
  kind: BackendKind,
  logger: Logger,
): Promise<LlmEngine> {
  const dir = config.modelDir;
  const embedded = isEmbedded(dir);
  let weightFiles: string[];
  let modelBytes: Uint8Array | undefined;
  switch (kind) {
    case "onnx": {
      const onnxPath = loaded.weights.onnxPath;
      if (onnxPath === undefined) throw new BackendUnavailableError(`${dir}: onnx/model.onnx: file not found`);
      const data = await onnxExternalData(dir, onnxPath);
      logger.info(
        `onnx/model.onnx: ${(data.bytes / 1048576).toFixed(1)} MB${
          data.paths.length > 0 ? ` with external data ${data.paths.map((p) => p.split("/").pop()).join(", ")}` : ""
        }`,
      );
      // A self-contained graph embedded in a binary is handed over as bytes; one with external data (resolved by
      // path next to the graph) still needs a real copy.
      if (embedded && data.paths.length === 0) modelBytes = await Deno.readFile(onnxPath);
      weightFiles = [onnxPath, ...data.paths];
      break;
    }
    case "native": {
      const st = loaded.weights.safetensors;
      if (st === undefined) throw new BackendUnavailableError(`${dir}: no safetensors weights`);
      logger.info(describeSafetensors(st));
      weightFiles = [...st.paths];
      break;
    }
    default: {
      const never: never = kind;
      throw new BackendUnavailableError(`unknown backend ${String(never)}`);
    }
  }
  const source = modelBytes !== undefined
    ? { dir, copied: false, release: () => Promise.resolve() }
    : await engineModelDir(dir, weightFiles);
  if (modelBytes !== undefined) logger.info("model is embedded in the binary; the backend reads it from memory");
  if (source.copied) logger.info("model is embedded in the binary; the backend reads a copy", { dir: source.dir });
  const shards = compiledRoot() !== undefined && config.shards === "auto"
    ? 1 // the compile task does not embed engine/backends/onnx_worker.ts, so a binary cannot start workers
    : config.shards;
  const started = performance.now();
  const engine = await openEngine({
    modelDir: source.dir,
    model: {
      ...loaded,
      weights: { ...loaded.weights, onnxPath: kind === "onnx" ? `${source.dir}/onnx/model.onnx` : undefined },
    },
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
      kind,
      device: config.device,
      threads: config.threads,
      shards,
      dtype: config.dtype,
      blockSize: config.blockSize,
      prefixCache: config.prefixCache,
      ...(config.numKvBlocks === undefined ? {} : { numKvBlocks: config.numKvBlocks }),
      ...(config.gpuMemoryFraction === undefined ? {} : { gpuMemoryFraction: config.gpuMemoryFraction }),
      ...(config.draftModel === undefined ? {} : {
        draftModelDir: config.draftModel,
        draftKind: config.speculative === "eagle3" ? "eagle3" as const : "model" as const,
      }),
      ...(modelBytes === undefined ? {} : { modelBytes }),
    },
  }).finally(() => source.release());
  const info = engine.backend.info;
  logger.info(
    `${kind} backend: ${describeBackend(engine.backend)}, max ${info.maxSeqs} sequences and ` +
      `${info.maxBatchTokens} tokens per step, KV ${info.numBlocks} blocks of ${info.blockSize}, speculative ` +
      `${config.speculative} (${Math.round(performance.now() - started)} ms)`,
  );
  return engine;
}

function maxModelLenTooLong(requested: number, modelMax: number): CliError {
  return new CliError(`--max-model-len ${requested} exceeds the model's context length of ${modelMax} tokens`);
}

/** The API key: --api-key (or RILL_API_KEY), or the contents of --api-key-file; never both. */
export function resolveApiKey(config: ServeConfig): string | undefined {
  if (config.apiKeyFile === undefined) return config.apiKey;
  if (config.apiKey !== undefined) throw new CliError("Give the API key once: --api-key or --api-key-file, not both");
  let key: string;
  try {
    key = Deno.readTextFileSync(config.apiKeyFile).trim();
  } catch (error) {
    throw new CliError(
      `Cannot read --api-key-file '${config.apiKeyFile}': ${error instanceof Error ? error.message : error}`,
    );
  }
  if (key === "") throw new CliError(`--api-key-file '${config.apiKeyFile}' is empty`);
  return key;
}

/**
 * Serves `model` until SIGTERM/SIGINT, then drains and resolves with the exit code (0). Used by `rill serve` and by
 * test entries that bring their own engine.
 */
export async function serveModel(config: ServeConfig, model: ServedModel, logger: Logger): Promise<number> {
  const apiKey = resolveApiKey(config);
  const store = await openStore(config, (event) => {
    switch (event.kind) {
      case "renewal_failed":
        logger.warn("store lease renewal failed; retried at the next beat", { error: event.error });
        break;
      case "took_over":
        logger.warn("failed the in-flight responses of a server whose lease expired", {
          owner: event.owner,
          renewedMsAgo: event.renewedMsAgo,
          responses: event.ids.length,
          ids: event.ids.slice(0, 8).join(","),
        });
        break;
      default:
        event satisfies never;
    }
  });
  const reasoningKey = await deploymentReasoningKey(config, store).catch(async (error) => {
    await store.close();
    throw error;
  });
  // Rows a crashed server left in flight are failed now, not when someone happens to read them.
  const recovered = await store.startLease();
  if (recovered > 0) logger.warn("recovered responses left running by a stopped server", { failed: recovered });
  const modelId = config.servedModelName ?? model.modelId;
  let server;
  let lastAcceptError = -Infinity;
  try {
    server = createServer({
      engine: model.engine,
      format: model.format,
      modelId,
      store,
      hostname: config.host,
      port: config.port,
      defaults: model.defaults,
      reasoningKey,
      ...(apiKey === undefined ? {} : { apiKey }),
      ...(config.maxConnections === "auto" ? {} : { maxConnections: config.maxConnections }),
      headerTimeoutMs: config.headerTimeout * 1000,
      bodyTimeoutMs: config.bodyTimeout * 1000,
      idleTimeoutMs: config.idleTimeout * 1000,
      onConnectionEvent: (event) => {
        // Accept errors come in bursts (every accept fails while descriptors are out): one line a second.
        if (event.type !== "accept_error" || performance.now() - lastAcceptError < 1000) return;
        lastAcceptError = performance.now();
        logger.warn("accept failed; retrying", { error: event.error });
      },
      // Health probes come every few seconds from supervisors and load balancers: debug, not info.
      onRequest: (entry) =>
        logger.log(entry.route === "/health" ? "debug" : "info", "request", {
          ...entry,
          ms: Math.round(entry.ms * 10) / 10,
        }),
      allowedOrigins: config.allowedOrigins,
      metricsPublic: config.metricsPublic,
      onError: (error) =>
        logger.error("internal error", {
          error: error instanceof Error ? error.stack ?? error.message : String(error),
        }),
    });
  } catch (error) {
    await store.close();
    if (error instanceof Deno.errors.AddrInUse) {
      throw new CliError(`Address ${config.host}:${config.port} is already in use`);
    }
    throw new CliError(
      `Cannot listen on ${config.host}:${config.port}: ${error instanceof Error ? error.message : error}`,
    );
  }
  // Scripts wait for this stdout line; under --log-format json it is a JSON object like every other line.
  const serving = `serving model '${modelId}' (${model.format.name}, context ${model.engine.maxModelLen}) at ` +
    server.url;
  console.log(logger.format === "json" ? logger.line("info", serving, { url: server.url }) : `rill: ${serving}`);
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
  await store.close();
  logger.info("stopped");
  return 0;
}
