/**
 * The one place backends are made (`--backend onnx|native`). Every backend comes back as a `Backend`
 * (engine/step_batch.ts): ONNX Runtime wrapped in the host sampler, the native library as it is. The native library
 * is opened only when asked for, so the ONNX path works where it is not built.
 */
import { DEFAULT_CONTEXT_LENGTH, type ModelConfig, type WeightFiles } from "../../checkpoint/model_dir.ts";
import { type ModelDims, OnnxBackend } from "./onnx_backend.ts";
import { createBlockPool } from "./block_pool.ts";
import type { Backend } from "../step_batch.ts";
import { ShardedBackend, WorkerBackend } from "./worker_backend.ts";
import { HostSampledBackend } from "./host_sampled_backend.ts";
import { NativeBackend } from "./native_backend.ts";
import type { LogitsBackend } from "./logits_backend.ts";
import { parameterCount, resolveThreading } from "./threading.ts";

export type BackendKind = "onnx" | "native";
export type DeviceKind = "cpu" | "cuda" | "auto";

/** A backend cannot be made as asked (unknown device, missing native library): a one-line message for the user. */
export class BackendUnavailableError extends Error {
  override readonly name = "BackendUnavailableError";
}

/** What a backend needs to know about the model (from the one model description, engine/model_dir.ts). */
export interface BackendModel {
  readonly dir: string;
  readonly config: ModelConfig;
  /** The directory's weight files: the ONNX backend needs `onnx/model.onnx` unless given `modelBytes`. */
  readonly weights: Pick<WeightFiles, "onnxPath">;
}

export interface BackendOptions {
  readonly kind?: BackendKind;
  readonly device?: DeviceKind;
  /** Intra-op threads per session, or "auto" (from the model's size; see threading.ts). */
  readonly threads?: number | "auto";
  /** ONNX sessions a step is split across, or "auto". */
  readonly shards?: number | "auto";
  /** Weight/activation type for backends that choose one ("auto": the model's own). ONNX runs the graph's types. */
  readonly dtype?: string;
  /** Most sequences in one step. */
  readonly maxNumSeqs: number;
  /** Context length the engine will use. */
  readonly maxModelLen: number;
  /** Fed tokens per step (default: see defaultMaxBatchTokens). */
  readonly maxNumBatchedTokens?: number;
  /** Tokens per KV block (default 16). */
  readonly blockSize?: number;
  /** KV blocks in the pool (default: every sequence at full context, i.e. never the limit on ONNX). */
  readonly numKvBlocks?: number;
  /** Native CUDA device: fraction of the GPU's free memory for weights, buffers and KV (default 0.9). */
  readonly gpuMemoryFraction?: number;
  /**
   * Let sequences share identical prefix blocks, so the engine runs a prefix cache (default true). ONNX keeps a copy of
   * each full block's KV for it, in memory all its sessions share (block_pool.ts), so it works across shards.
   */
  readonly prefixCache?: boolean;
  /** Most drafts verified per step (default 4). */
  readonly maxDrafts?: number;
  /**
   * A draft model's checkpoint directory (same vocabulary): the native backend loads it next to the target and
   * proposes drafts inside each step (the engine's `speculative: "draft"`). ONNX refuses it.
   */
  readonly draftModelDir?: string;
  /**
   * What draftModelDir holds (default "model"): a draft model, or an EAGLE-3 head (`speculative: "eagle3"`), which
   * the native library recognises by its config.json; a directory of the other kind is refused in one line.
   */
  readonly draftKind?: "model" | "eagle3";
  /** The ONNX graph's bytes instead of reading onnxPath (a self-contained model embedded in a binary). */
  readonly modelBytes?: Uint8Array;
  /** Cores to plan threads for (default navigator.hardwareConcurrency). */
  readonly cores?: number;
}

/** Most top alternatives a request may ask for (OpenAI's top_logprobs limit). */
export const MAX_TOP_LOGPROBS = 20;

/**
 * Default step budget in fed tokens: the ONNX graph returns logits for every fed position of a prefill, so a step
 * holds tokens × vocab floats; ~256 MB bounds it (at least 512 tokens, at most 8192), plus room for every sequence's
 * decode with drafts.
 */
export function defaultMaxBatchTokens(vocabSize: number, maxNumSeqs: number, maxDrafts: number): number {
  const prefill = Math.max(512, Math.min(8192, Math.floor(64e6 / vocabSize)));
  return Math.max(prefill, maxNumSeqs * (maxDrafts + 1));
}

/** ONNX dimensions from config.json. */
export function onnxDims(config: ModelConfig): ModelDims {
  return {
    vocabSize: config.vocabSize,
    maxPositions: config.maxPositionEmbeddings ?? DEFAULT_CONTEXT_LENGTH,
    numLayers: config.numHiddenLayers,
    kvHeads: config.numKeyValueHeads,
    headDim: config.headDim,
  };
}

const descriptions = new WeakMap<Backend, string>();

/** How the factory set a backend up (sessions, threads), for the startup log. */
export function describeBackend(backend: Backend): string {
  return descriptions.get(backend) ?? "custom backend";
}

export async function createBackend(model: BackendModel, options: BackendOptions): Promise<Backend> {
  const kind = options.kind ?? "onnx";
  switch (kind) {
    case "onnx":
      return await createOnnxBackend(model, options);
    case "native":
      return await createNativeBackend(model, options);
    default: {
      const never: never = kind;
      throw new BackendUnavailableError(`unknown backend ${String(never)}`);
    }
  }
}

async function createOnnxBackend(model: BackendModel, options: BackendOptions): Promise<Backend> {
  const device = options.device ?? "auto";
  if (device === "cuda") {
    throw new BackendUnavailableError("--backend onnx runs on the CPU only; use --device cpu or auto");
  }
  if (options.draftModelDir !== undefined) {
    throw new BackendUnavailableError(
      options.draftKind === "eagle3"
        ? "--speculative eagle3 needs --backend native (ONNX runs no EAGLE-3 head)"
        : "--speculative draft needs --backend native (ONNX runs no draft model)",
    );
  }
  const dtype = options.dtype ?? "auto";
  if (dtype !== "auto") {
    throw new BackendUnavailableError(`--dtype ${dtype}: --backend onnx runs the graph's own types; use --dtype auto`);
  }
  const blockSize = options.blockSize ?? 16;
  const maxDrafts = options.maxDrafts ?? 4;
  const { maxNumSeqs, maxModelLen } = options;
  const { shards, threads } = resolveThreading({
    params: parameterCount(model.config),
    maxNumSeqs,
    shards: options.shards ?? 1,
    threads: options.threads ?? "auto",
    cores: options.cores ?? navigator.hardwareConcurrency,
  });
  const dims = onnxDims(model.config);
  const source: string | Uint8Array | undefined = options.modelBytes ?? model.weights.onnxPath;
  if (source === undefined) throw new BackendUnavailableError(`${model.dir}: onnx/model.onnx: file not found`);
  if (typeof source === "string" && !(await isFile(source))) {
    throw new BackendUnavailableError(`${source}: file not found`);
  }
  const share = options.prefixCache ?? true;
  const numBlocks = options.numKvBlocks ?? maxNumSeqs * Math.ceil(Math.min(maxModelLen, dims.maxPositions) / blockSize);
  const sessionOptions = {
    intraOpNumThreads: threads,
    ...(share ? { prefixPool: createBlockPool({ blockSize, numBlocks, ...dims }) } : {}),
  };
  const main = await OnnxBackend.create(source, sessionOptions, dims);
  let inner: LogitsBackend = main;
  if (shards > 1) {
    const workers: LogitsBackend[] = [];
    try {
      for (let i = 1; i < shards; i++) workers.push(await WorkerBackend.create(source, sessionOptions, dims));
    } catch (e) {
      await Promise.all([main, ...workers].map((b) => b.close()));
      throw e;
    }
    inner = new ShardedBackend([main, ...workers]);
  }
  const backend = new HostSampledBackend(inner, {
    blockSize,
    numBlocks,
    maxBatchTokens: options.maxNumBatchedTokens ?? defaultMaxBatchTokens(inner.vocabSize, maxNumSeqs, maxDrafts),
    maxSeqs: maxNumSeqs,
    maxDrafts,
    maxTopLogprobs: MAX_TOP_LOGPROBS,
  });
  descriptions.set(
    backend,
    `${shards} ONNX session${shards === 1 ? "" : "s"} × ${threads} thread${threads === 1 ? "" : "s"}, host sampler` +
      (share ? ", prefix cache" : ""),
  );
  return backend;
}

async function createNativeBackend(model: BackendModel, options: BackendOptions): Promise<Backend> {
  const device = options.device ?? "auto";
  const threads = options.threads === "auto" || options.threads === undefined ? 0 : options.threads;
  const dtype = options.dtype === undefined || options.dtype === "auto" ? undefined : options.dtype;
  if (options.draftModelDir !== undefined) await checkDraftKind(options.draftModelDir, options.draftKind ?? "model");
  let backend: NativeBackend;
  try {
    backend = await NativeBackend.create(model.dir, {
      device,
      ...(dtype === undefined ? {} : { dtype }),
      threads,
      blockSize: options.blockSize ?? 16,
      ...(options.numKvBlocks === undefined ? {} : { numBlocks: options.numKvBlocks }),
      ...(options.gpuMemoryFraction === undefined ? {} : { gpuMemoryFraction: options.gpuMemoryFraction }),
      maxSeqs: options.maxNumSeqs,
      maxBatchTokens: options.maxNumBatchedTokens ??
        Math.max(2048, options.maxNumSeqs * ((options.maxDrafts ?? 4) + 1)),
      maxDrafts: options.maxDrafts ?? 4,
      maxTopLogprobs: MAX_TOP_LOGPROBS,
      maxModelLen: options.maxModelLen,
      ...(options.draftModelDir === undefined ? {} : { draftModelDir: options.draftModelDir }),
    });
  } catch (e) {
    const message = e instanceof Error ? e.message.split("\n")[0]! : String(e);
    throw new BackendUnavailableError(message.startsWith("native backend") ? message : `native backend: ${message}`);
  }
  const i = backend.info;
  descriptions.set(
    backend,
    `native ${i.device} (${i.isa}), ${i.dtype} weights, ${i.kvDtype} KV, ${i.threads} thread${
      i.threads === 1 ? "" : "s"
    }` +
      (i.draftWeightBytes > 0
        ? `, ${options.draftKind === "eagle3" ? "EAGLE-3 head" : "draft model"} ${options.draftModelDir} ` +
          `(${i.draftWeightBytes} weight bytes)`
        : ""),
  );
  return backend;
}

/** True when dir/config.json names an EAGLE-3 architecture (as the native library decides); false when unreadable. */
export async function isEagle3Head(dir: string): Promise<boolean> {
  try {
    const config: unknown = JSON.parse(await Deno.readTextFile(`${dir}/config.json`));
    const archs = typeof config === "object" && config !== null && "architectures" in config
      ? config.architectures
      : undefined;
    return Array.isArray(archs) && archs.some((a) => typeof a === "string" && a.includes("Eagle3"));
  } catch {
    return false;
  }
}

/** The native library loads whichever kind the directory holds; the user's --speculative must name the same. */
async function checkDraftKind(dir: string, kind: "model" | "eagle3"): Promise<void> {
  const head = await isEagle3Head(dir);
  if (kind === "eagle3" && !head) {
    throw new BackendUnavailableError(
      `--speculative eagle3: ${dir} is not an EAGLE-3 head (its config.json names no *Eagle3 architecture)`,
    );
  }
  if (kind === "model" && head) {
    throw new BackendUnavailableError(`--speculative draft: ${dir} is an EAGLE-3 head; use --speculative eagle3`);
  }
}

async function isFile(path: string): Promise<boolean> {
  try {
    return (await Deno.stat(path)).isFile;
  } catch {
    return false;
  }
}
