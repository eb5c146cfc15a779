/**
 * `rill serve` options: each flag has an `RILL_*` environment variable; the command line wins over the environment,
 * the environment over the default. Errors are one line (CliError), printed without a stack trace.
 */
import { fileURLToPath } from "node:url";
import { parseOrigins } from "./cors.ts";

export class CliError extends Error {
  override readonly name = "CliError";
}

export type LogFormat = "text" | "json";

export interface ServeConfig {
  readonly modelDir: string;
  readonly host: string;
  readonly port: number;
  /** auto: native on safetensors weights when the library is built, else the ONNX graph (choose_backend.ts). */
  readonly backend: "auto" | "onnx" | "native";
  readonly device: "cpu" | "cuda" | "auto";
  /** Intra-op threads per session, or "auto" (from the model's size). */
  readonly threads: number | "auto";
  /** Weight/activation type for backends that choose one; "auto" = the model's own. */
  readonly dtype: "auto" | "fp32" | "bf16" | "int8";
  /** Fed tokens per engine step (prefill chunks + decodes); undefined = the backend's default. */
  readonly maxNumBatchedTokens: number | undefined;
  /** Tokens per KV block. */
  readonly blockSize: number;
  /** KV blocks in the pool; undefined = every sequence at full context. */
  readonly numKvBlocks: number | undefined;
  /** Native CUDA device: fraction of the GPU's free memory for weights, buffers and the KV pool (undefined: 0.9). */
  readonly gpuMemoryFraction: number | undefined;
  /** Share identical prompt-prefix blocks between requests. */
  readonly prefixCache: boolean;
  readonly servedModelName: string | undefined;
  readonly apiKey: string | undefined;
  /** A file holding the API key (keeps it out of the command line, which `deno task` echoes). */
  readonly apiKeyFile: string | undefined;
  /** Where stored responses live (`responses.sqlite`); ":memory:" keeps them in memory only. */
  readonly dataDir: string;
  /** A PostgreSQL URL holding the store (postgres_store.ts) instead of the SQLite file in `dataDir`. */
  readonly store: string | undefined;
  /** Stored responses are deleted this many seconds after creation (0: kept forever). */
  readonly storeTtl: number;
  /** The key sealing `encrypted_content` (reasoning_key.ts), or a file holding it; neither: kept in the data dir. */
  readonly reasoningKey: string | undefined;
  readonly reasoningKeyFile: string | undefined;
  readonly maxNumSeqs: number;
  readonly maxQueue: number;
  readonly maxModelLen: number | undefined;
  /** Connections open at once (more are answered 503), or "auto" (from the descriptor limit). */
  readonly maxConnections: number | "auto";
  /** Seconds a request's head, and its body, may take to arrive; and a connection may sit with no request. */
  readonly headerTimeout: number;
  readonly bodyTimeout: number;
  readonly idleTimeout: number;
  /** Seconds running requests get to finish after SIGTERM/SIGINT. */
  readonly shutdownTimeout: number;
  readonly logFormat: LogFormat;
  readonly logLevel: "debug" | "info" | "warn" | "error";
  readonly speculative: "ngram" | "draft" | "eagle3" | "none";
  /** Checkpoint of the draft model or EAGLE-3 head (`--speculative draft|eagle3`, native backend only). */
  readonly draftModel: string | undefined;
  readonly numSpeculativeTokens: number;
  /** ONNX sessions one step is split across (main thread + workers), or "auto" (see resolveShards). */
  readonly shards: number | "auto";
  /** Origins browsers may call from (`*` for any); empty: no CORS. */
  readonly allowedOrigins: readonly string[];
  /** Serve /metrics without the API key. */
  readonly metricsPublic: boolean;
}

/**
 * The bundled model, resolved against this module rather than the working directory, so `rill serve` finds it from
 * anywhere. In a `deno compile` binary this module and the `--include`d model share the embedded file system, laid
 * out as in the repository, so the same path resolves inside the binary.
 */
export const DEFAULT_MODEL_DIR = fileURLToPath(new URL("../models/rill-tiny-harmony", import.meta.url));

interface OptionSpec {
  readonly flag: string;
  readonly env: string;
  readonly value: string;
  readonly help: string;
  readonly fallback: string | undefined;
  /** A switch: `--flag` alone means true (`--flag=false` to turn it off). */
  readonly boolean?: true;
}

const SPECS: readonly OptionSpec[] = [
  { flag: "host", env: "RILL_HOST", value: "HOST", help: "Address to listen on.", fallback: "127.0.0.1" },
  { flag: "port", env: "RILL_PORT", value: "PORT", help: "Port to listen on (0 = any free port).", fallback: "8000" },
  {
    flag: "backend",
    env: "RILL_BACKEND",
    value: "auto|onnx|native",
    help: "Inference backend: rill's native library (safetensors weights) or ONNX Runtime (onnx/model.onnx, sampled " +
      "on the host); auto = native when the library is built and the directory has safetensors weights it can " +
      "serve, else ONNX.",
    fallback: "auto",
  },
  { flag: "device", env: "RILL_DEVICE", value: "cpu|cuda|auto", help: "Device the backend runs on.", fallback: "auto" },
  {
    flag: "threads",
    env: "RILL_THREADS",
    value: "N|auto",
    help: "Threads per backend session. auto = 1 for small models (< 50M parameters), else all cores shared " +
      "among the sessions.",
    fallback: "auto",
  },
  {
    flag: "dtype",
    env: "RILL_DTYPE",
    value: "auto|fp32|bf16|int8",
    help:
      "Weights as the native backend holds them (auto = the checkpoint's own, bf16 for bf16 checkpoints; ONNX runs the graph's types).",
    fallback: "auto",
  },
  {
    flag: "max-num-batched-tokens",
    env: "RILL_MAX_NUM_BATCHED_TOKENS",
    value: "N",
    help: "Tokens fed per engine step (prompt chunks + decodes); long prompts are prefilled in chunks of this budget " +
      "(default: the backend's).",
    fallback: undefined,
  },
  { flag: "block-size", env: "RILL_BLOCK_SIZE", value: "N", help: "Tokens per KV-cache block.", fallback: "16" },
  {
    flag: "num-kv-blocks",
    env: "RILL_NUM_KV_BLOCKS",
    value: "N",
    help: "KV-cache blocks in the pool; sequences take blocks as they grow and the newest is preempted when they " +
      "run out (default: --max-num-seqs sequences at full context).",
    fallback: undefined,
  },
  {
    flag: "gpu-memory-fraction",
    env: "RILL_GPU_MEMORY_FRACTION",
    value: "F",
    help: "Native CUDA device: fraction (0..1] of the GPU's free memory for weights, buffers and KV blocks; the KV " +
      "pool takes what is left (default 0.9; --num-kv-blocks overrides).",
    fallback: undefined,
  },
  {
    flag: "prefix-cache",
    env: "RILL_PREFIX_CACHE",
    value: "on|off",
    help: "Reuse the KV of identical prompt prefixes across requests (the ONNX backend keeps a copy of each full " +
      "block's KV for it, in memory all its shards share).",
    fallback: "on",
  },
  {
    flag: "served-model-name",
    env: "RILL_SERVED_MODEL_NAME",
    value: "NAME",
    help: "Model name clients send in `model` (default: the model directory's name).",
    fallback: undefined,
  },
  {
    flag: "api-key",
    env: "RILL_API_KEY",
    value: "KEY",
    help: "Require `Authorization: Bearer KEY` on every route except /health. Prefer RILL_API_KEY or " +
      "--api-key-file: a command line is visible to other users (ps) and `deno task` echoes it.",
    fallback: undefined,
  },
  {
    flag: "api-key-file",
    env: "RILL_API_KEY_FILE",
    value: "PATH",
    help: "Read the API key from this file (surrounding whitespace ignored).",
    fallback: undefined,
  },
  {
    flag: "data-dir",
    env: "RILL_DATA_DIR",
    value: "DIR",
    help: "Directory of the stored-responses database (responses.sqlite); ':memory:' for none on disk.",
    fallback: ".data",
  },
  {
    flag: "store",
    env: "RILL_STORE",
    value: "URL",
    help: "postgres://USER:PASS@HOST:PORT/DB: keep stored responses, conversations and background work in " +
      "PostgreSQL, shared by every replica (default: the SQLite file in the data directory).",
    fallback: undefined,
  },
  {
    flag: "store-ttl",
    env: "RILL_STORE_TTL",
    value: "DURATION",
    help: "How long stored responses are kept (e.g. 3600, 90m, 12h, 30d; 0 = forever).",
    fallback: "30d",
  },
  {
    flag: "reasoning-key",
    env: "RILL_REASONING_KEY",
    value: "KEY",
    help: "Key (32 bytes: 64 hex digits or base64) sealing `encrypted_content` of reasoning and compaction items " +
      "(default: generated once and kept in the data directory as reasoning.key).",
    fallback: undefined,
  },
  {
    flag: "reasoning-key-file",
    env: "RILL_REASONING_KEY_FILE",
    value: "PATH",
    help: "Read the reasoning key from this file.",
    fallback: undefined,
  },
  {
    flag: "max-num-seqs",
    env: "RILL_MAX_NUM_SEQS",
    value: "N",
    help: "Most sequences per engine step.",
    fallback: "32",
  },
  {
    flag: "max-queue",
    env: "RILL_MAX_QUEUE",
    value: "N",
    help: "Most requests waiting for a batch slot; more are answered 429.",
    fallback: "256",
  },
  {
    flag: "max-connections",
    env: "RILL_MAX_CONNECTIONS",
    value: "N|auto",
    help: "Most open client connections; more are answered 503. auto = (open-file limit - 128) / 3, at most 4096.",
    fallback: "auto",
  },
  {
    flag: "header-timeout",
    env: "RILL_HEADER_TIMEOUT",
    value: "SECONDS",
    help: "A request's headers must arrive within this of their first byte (slow clients are dropped).",
    fallback: "10",
  },
  {
    flag: "body-timeout",
    env: "RILL_BODY_TIMEOUT",
    value: "SECONDS",
    help: "A request's body must arrive within this of its headers.",
    fallback: "60",
  },
  {
    flag: "idle-timeout",
    env: "RILL_IDLE_TIMEOUT",
    value: "SECONDS",
    help: "A connection with no request in progress is closed after this.",
    fallback: "60",
  },
  {
    flag: "max-model-len",
    env: "RILL_MAX_MODEL_LEN",
    value: "N",
    help: "Context length (prompt + output); default: the model's.",
    fallback: undefined,
  },
  {
    flag: "shutdown-timeout",
    env: "RILL_SHUTDOWN_TIMEOUT",
    value: "SECONDS",
    help: "On SIGTERM/SIGINT, how long running requests may finish before they are aborted.",
    fallback: "30",
  },
  { flag: "log-format", env: "RILL_LOG_FORMAT", value: "text|json", help: "Log line format.", fallback: "text" },
  {
    flag: "log-level",
    env: "RILL_LOG_LEVEL",
    value: "debug|info|warn|error",
    help: "Least severe level logged (health probes log at debug).",
    fallback: "info",
  },
  {
    flag: "speculative",
    env: "RILL_SPECULATIVE",
    value: "ngram|draft|eagle3|none",
    help: "Speculative decoding method: prompt-lookup n-gram drafts, a draft model, or an EAGLE-3 head reading the " +
      "target's hidden states (both --draft-model, native backend).",
    fallback: "none",
  },
  {
    flag: "draft-model",
    env: "RILL_DRAFT_MODEL",
    value: "DIR",
    help: "Checkpoint directory of a smaller model with the same tokenizer that proposes the drafts of " +
      "--speculative draft, or of an EAGLE-3 head (LlamaForCausalLMEagle3 layout) for --speculative eagle3 " +
      "(native backend).",
    fallback: undefined,
  },
  {
    flag: "num-speculative-tokens",
    env: "RILL_NUM_SPECULATIVE_TOKENS",
    value: "N",
    help: "Draft tokens per step when speculating.",
    fallback: "4",
  },
  {
    flag: "shards",
    env: "RILL_SHARDS",
    value: "N|auto",
    help: "ONNX sessions each step's batch is split across, run at once on separate cores (the main thread plus " +
      "N-1 workers, each holding its own copy of the weights). auto = 2 for small models (< 50M parameters) when " +
      "--max-num-seqs > 8 and the machine has 2+ cores, else 1.",
    fallback: "auto",
  },
  {
    flag: "allowed-origins",
    env: "RILL_ALLOWED_ORIGINS",
    value: "ORIGINS",
    help: "Comma-separated origins browsers may call from (CORS), or * for any; default none.",
    fallback: undefined,
  },
  {
    flag: "metrics-public",
    env: "RILL_METRICS_PUBLIC",
    value: "",
    help: "Serve /metrics without the API key.",
    fallback: "false",
    boolean: true,
  },
];

export function serveHelp(): string {
  const usage = (s: OptionSpec) => s.value === "" ? `--${s.flag}` : `--${s.flag} ${s.value}`;
  const width = Math.max(...SPECS.map((s) => usage(s).length));
  const lines = [
    "Usage: rill serve [MODEL_DIR] [OPTIONS]",
    "",
    "Serves a model directory over the OpenAI Responses and Chat Completions APIs.",
    "MODEL_DIR defaults to the bundled model, models/rill-tiny-harmony next to the program (env RILL_MODEL_DIR).",
    "",
    "Options (each also settable by the environment variable shown):",
  ];
  for (const s of SPECS) {
    const left = usage(s).padEnd(width);
    const def = s.fallback === undefined ? "" : ` [default: ${s.fallback}]`;
    lines.push(`  ${left}  ${s.help}${def} (${s.env})`);
  }
  lines.push(`  ${"--help".padEnd(width)}  Show this help.`);
  return lines.join("\n");
}

function integer(name: string, text: string, min: number): number {
  if (!/^\d+$/.test(text) || Number(text) < min) {
    throw new CliError(`--${name} must be an integer ≥ ${min}, got '${text}'`);
  }
  return Number(text);
}

function fraction(name: string, text: string): number {
  const v = Number(text);
  if (!/^\d*\.?\d+$/.test(text) || !(v > 0 && v <= 1)) {
    throw new CliError(`--${name} must be a number in (0, 1], got '${text}'`);
  }
  return v;
}

function choice<T extends string>(name: string, text: string, allowed: readonly T[]): T {
  if (!(allowed as readonly string[]).includes(text)) {
    throw new CliError(`--${name} must be one of ${allowed.join(", ")}, got '${text}'`);
  }
  return text as T;
}

const DURATION_UNITS: Readonly<Record<string, number>> = { "": 1, s: 1, m: 60, h: 3600, d: 86400 };

/** Seconds of a duration: an integer with an optional unit s, m, h or d. */
function durationSeconds(name: string, text: string): number {
  const m = /^(\d+)([smhd]?)$/.exec(text);
  if (m === null) throw new CliError(`--${name} must be a duration like 3600, 90m, 12h or 30d, got '${text}'`);
  return Number(m[1]) * DURATION_UNITS[m[2]!]!;
}

function autoOrCount(name: string, text: string): number | "auto" {
  if (text === "auto") return "auto";
  if (!/^\d+$/.test(text) || Number(text) < 1) {
    throw new CliError(`--${name} must be 'auto' or an integer ≥ 1, got '${text}'`);
  }
  return Number(text);
}

function switchValue(name: string, text: string): boolean {
  if (text === "true" || text === "1") return true;
  if (text === "false" || text === "0") return false;
  throw new CliError(`--${name} must be true or false, got '${text}'`);
}

/** Parses the arguments after `serve`. Returns "help" for --help. */
export function parseServeArgs(
  args: readonly string[],
  env: (name: string) => string | undefined,
): ServeConfig | "help" {
  const given = new Map<string, string>();
  const positional: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const arg = args[i]!;
    if (arg === "--help" || arg === "-h") return "help";
    if (!arg.startsWith("--")) {
      positional.push(arg);
      continue;
    }
    const eq = arg.indexOf("=");
    const name = arg.slice(2, eq < 0 ? undefined : eq);
    const spec = SPECS.find((s) => s.flag === name);
    if (spec === undefined) throw new CliError(`Unknown option --${name} (see rill serve --help)`);
    let value: string | undefined;
    if (eq >= 0) value = arg.slice(eq + 1);
    else if (spec.boolean === true) value = "true";
    else {
      value = args[++i];
      if (value === undefined) throw new CliError(`--${name} needs a value`);
    }
    given.set(name, value);
  }
  if (positional.length > 1) {
    throw new CliError(`Expected one MODEL_DIR, got ${positional.length}: ${positional.join(" ")}`);
  }
  const get = (flag: string): string | undefined => {
    const spec = SPECS.find((s) => s.flag === flag)!;
    const fromEnv = env(spec.env);
    return given.get(flag) ?? (fromEnv === undefined || fromEnv === "" ? undefined : fromEnv) ?? spec.fallback;
  };
  const maxModelLen = get("max-model-len");
  const maxNumBatchedTokens = get("max-num-batched-tokens");
  const numKvBlocks = get("num-kv-blocks");
  const gpuMemoryFraction = get("gpu-memory-fraction");
  const port = integer("port", get("port")!, 0);
  const speculative = choice("speculative", get("speculative")!, ["ngram", "draft", "eagle3", "none"] as const);
  const draftModel = get("draft-model");
  const withDraft = speculative === "draft" || speculative === "eagle3";
  if (withDraft && draftModel === undefined) {
    throw new CliError(`--speculative ${speculative} needs --draft-model DIR`);
  }
  if (!withDraft && draftModel !== undefined) {
    throw new CliError(
      `--draft-model is used only with --speculative draft or eagle3 (got --speculative ${speculative})`,
    );
  }
  if (port > 65535) throw new CliError(`--port must be at most 65535, got ${port}`);
  return {
    modelDir: positional[0] ?? env("RILL_MODEL_DIR") ?? DEFAULT_MODEL_DIR,
    host: get("host")!,
    port,
    backend: choice("backend", get("backend")!, ["auto", "onnx", "native"] as const),
    device: choice("device", get("device")!, ["cpu", "cuda", "auto"] as const),
    threads: autoOrCount("threads", get("threads")!),
    dtype: choice("dtype", get("dtype")!, ["auto", "fp32", "bf16", "int8"] as const),
    maxNumBatchedTokens: maxNumBatchedTokens === undefined
      ? undefined
      : integer("max-num-batched-tokens", maxNumBatchedTokens, 1),
    blockSize: integer("block-size", get("block-size")!, 1),
    numKvBlocks: numKvBlocks === undefined ? undefined : integer("num-kv-blocks", numKvBlocks, 1),
    gpuMemoryFraction: gpuMemoryFraction === undefined ? undefined : fraction("gpu-memory-fraction", gpuMemoryFraction),
    prefixCache: choice("prefix-cache", get("prefix-cache")!, ["on", "off"] as const) === "on",
    servedModelName: get("served-model-name"),
    apiKey: get("api-key"),
    apiKeyFile: get("api-key-file"),
    dataDir: get("data-dir")!,
    store: storeUrl(get("store")),
    storeTtl: durationSeconds("store-ttl", get("store-ttl")!),
    reasoningKey: get("reasoning-key"),
    reasoningKeyFile: get("reasoning-key-file"),
    maxNumSeqs: integer("max-num-seqs", get("max-num-seqs")!, 1),
    maxQueue: integer("max-queue", get("max-queue")!, 0),
    maxModelLen: maxModelLen === undefined ? undefined : integer("max-model-len", maxModelLen, 1),
    shutdownTimeout: integer("shutdown-timeout", get("shutdown-timeout")!, 0),
    headerTimeout: integer("header-timeout", get("header-timeout")!, 1),
    bodyTimeout: integer("body-timeout", get("body-timeout")!, 1),
    idleTimeout: integer("idle-timeout", get("idle-timeout")!, 1),
    logFormat: choice("log-format", get("log-format")!, ["text", "json"] as const),
    logLevel: choice("log-level", get("log-level")!, ["debug", "info", "warn", "error"] as const),
    speculative,
    draftModel,
    numSpeculativeTokens: integer("num-speculative-tokens", get("num-speculative-tokens")!, 1),
    shards: autoOrCount("shards", get("shards")!),
    maxConnections: get("max-connections") === "auto" ? "auto" : integer("max-connections", get("max-connections")!, 1),
    allowedOrigins: parseOrigins(get("allowed-origins")),
    metricsPublic: switchValue("metrics-public", get("metrics-public")!),
  };
}

/** `--store`: a postgres:// (or postgresql://) URL naming a host and a database. */
function storeUrl(value: string | undefined): string | undefined {
  if (value === undefined) return undefined;
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new CliError("--store must be a URL: postgres://USER:PASS@HOST:PORT/DB");
  }
  if (url.protocol !== "postgres:" && url.protocol !== "postgresql:") {
    throw new CliError(`--store must be a postgres:// URL, got '${url.protocol}'`);
  }
  if (url.hostname === "" || url.pathname.length <= 1) {
    throw new CliError("--store must name a host and a database: postgres://USER:PASS@HOST:PORT/DB");
  }
  return value;
}
