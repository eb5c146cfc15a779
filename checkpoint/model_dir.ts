import { HfTokenizer, HfTokenizerError } from "./hf_tokenizer.ts";

/**
 * Reading and validating a Hugging Face-style model directory (see docs/model-contract.md). Every problem is one
 * `ModelDirError` whose single-line message names the directory, the file and, where it applies, the field:
 * `models/x: config.json: "hidden_size" must be a positive integer`.
 */
export class ModelDirError extends Error {
  override name = "ModelDirError";
}

export type ChatFormatName = "harmony" | "chatml";

/** The fields of config.json rill uses. Optional fields of real exports get their HF defaults. */
export interface ModelConfig {
  readonly modelType: string;
  readonly architectures: readonly string[];
  readonly vocabSize: number;
  readonly hiddenSize: number;
  readonly numHiddenLayers: number;
  readonly numAttentionHeads: number;
  readonly numKeyValueHeads: number;
  readonly headDim: number;
  readonly maxPositionEmbeddings: number | undefined;
  readonly rmsNormEps: number | undefined;
  readonly ropeTheta: number | undefined;
  readonly bosTokenId: number | undefined;
  readonly eosTokenIds: readonly number[];
  readonly torchDtype: string | undefined;
  /** rill's own override: `"rill": {"chat_format": ...}`. */
  readonly chatFormat: ChatFormatName | undefined;
  /** The whole parsed file, for backends that need more. */
  readonly raw: Readonly<Record<string, unknown>>;
}

export interface GenerationConfig {
  readonly eosTokenIds: readonly number[] | undefined;
  readonly temperature: number | undefined;
  readonly topP: number | undefined;
  readonly topK: number | undefined;
  readonly maxNewTokens: number | undefined;
}

export interface TokenizerConfig {
  readonly bosToken: string | undefined;
  readonly eosToken: string | undefined;
  readonly padToken: string | undefined;
  readonly modelMaxLength: number | undefined;
}

export interface ModelDir {
  readonly dir: string;
  readonly config: ModelConfig;
  readonly generationConfig: GenerationConfig | undefined;
  readonly tokenizer: HfTokenizer;
  readonly tokenizerConfig: TokenizerConfig;
  /** The default chat template (chat_template.jinja, else tokenizer_config.json), if any. */
  readonly chatTemplate: string | undefined;
  /** Named templates from a list-form `chat_template` (e.g. "default", "tool_use"). */
  readonly chatTemplates: Readonly<Record<string, string>>;
  readonly weights: WeightFiles;
}

/**
 * The weight files a directory holds, found without reading them: each backend reads only its own (the ONNX graph's
 * external data is resolved by `onnxExternalData` once the ONNX backend is chosen).
 */
export interface WeightFiles {
  /** `onnx/model.onnx`, when present. */
  readonly onnxPath: string | undefined;
  /** `model.safetensors`, or the shards `model.safetensors.index.json` maps tensors to, when present. */
  readonly safetensors: { readonly paths: readonly string[]; readonly bytes: number } | undefined;
}

export interface ReadModelDirOptions {
  /** One line per file read, with what it held and how long it took. */
  readonly onProgress?: (message: string) => void;
}

type Json = Record<string, unknown>;

function isRecord(v: unknown): v is Json {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

function join(dir: string, name: string): string {
  return dir.endsWith("/") ? dir + name : `${dir}/${name}`;
}

async function fileKind(path: string): Promise<"file" | "dir" | "none"> {
  try {
    const st = await Deno.stat(path);
    return st.isDirectory ? "dir" : "file";
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) return "none";
    throw e;
  }
}

/** Field checks that throw with the file's prefix already applied. */
class Fields {
  constructor(readonly prefix: string, readonly obj: Json) {}

  fail(field: string, what: string): never {
    throw new ModelDirError(`${this.prefix}: "${field}" ${what}`);
  }

  positiveInt(field: string): number {
    const v = this.obj[field];
    if (typeof v !== "number" || !Number.isInteger(v) || v <= 0) this.fail(field, "must be a positive integer");
    return v;
  }

  optionalPositiveInt(field: string): number | undefined {
    return this.obj[field] === undefined || this.obj[field] === null ? undefined : this.positiveInt(field);
  }

  optionalNonNegativeInt(field: string): number | undefined {
    const v = this.obj[field];
    if (v === undefined || v === null) return undefined;
    if (typeof v !== "number" || !Number.isInteger(v) || v < 0) this.fail(field, "must be a non-negative integer");
    return v;
  }

  optionalNumber(field: string, check: (n: number) => boolean, what: string): number | undefined {
    const v = this.obj[field];
    if (v === undefined || v === null) return undefined;
    if (typeof v !== "number" || !Number.isFinite(v) || !check(v)) this.fail(field, `must be ${what}`);
    return v;
  }

  optionalString(field: string): string | undefined {
    const v = this.obj[field];
    if (v === undefined || v === null) return undefined;
    if (typeof v !== "string") this.fail(field, "must be a string");
    return v;
  }

  /** `eos_token_id` style: an integer or a non-empty list of integers. */
  optionalIdList(field: string): number[] | undefined {
    const v = this.obj[field];
    if (v === undefined || v === null) return undefined;
    const list = Array.isArray(v) ? v : [v];
    if (list.length === 0 || !list.every((x) => typeof x === "number" && Number.isInteger(x) && x >= 0)) {
      this.fail(field, "must be a token id or a non-empty list of token ids");
    }
    return list as number[];
  }

  /** tokenizer_config's special tokens: a string or an AddedToken object `{content: ...}`. */
  optionalTokenText(field: string): string | undefined {
    const v = this.obj[field];
    if (v === undefined || v === null) return undefined;
    if (typeof v === "string") return v;
    if (isRecord(v) && typeof v.content === "string") return v.content;
    this.fail(field, `must be a string or {"content": string}`);
  }
}

async function readJson(dir: string, name: string, required: boolean): Promise<Json | undefined> {
  const path = join(dir, name);
  let text: string;
  try {
    text = await Deno.readTextFile(path);
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) {
      if (!required) return undefined;
      throw new ModelDirError(`${dir}: ${name}: file not found`);
    }
    throw new ModelDirError(`${dir}: ${name}: cannot read: ${(e as Error).message}`);
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (e) {
    throw new ModelDirError(`${dir}: ${name}: invalid JSON: ${(e as Error).message.split("\n")[0]}`);
  }
  if (!isRecord(parsed)) throw new ModelDirError(`${dir}: ${name}: must be a JSON object`);
  return parsed;
}

function parseConfig(dir: string, json: Json): ModelConfig {
  const f: Fields = new Fields(`${dir}: config.json`, json);
  const modelType = f.optionalString("model_type");
  if (modelType === undefined || modelType === "") f.fail("model_type", "must be a non-empty string");
  const archRaw = json.architectures ?? [];
  if (!Array.isArray(archRaw) || !archRaw.every((a) => typeof a === "string")) {
    f.fail("architectures", "must be a list of strings");
  }
  const vocabSize = f.positiveInt("vocab_size");
  const hiddenSize = f.positiveInt("hidden_size");
  const numHiddenLayers = f.positiveInt("num_hidden_layers");
  const numAttentionHeads = f.positiveInt("num_attention_heads");
  const numKeyValueHeads = f.optionalPositiveInt("num_key_value_heads") ?? numAttentionHeads;
  if (numAttentionHeads % numKeyValueHeads !== 0) {
    f.fail("num_key_value_heads", `(${numKeyValueHeads}) must divide "num_attention_heads" (${numAttentionHeads})`);
  }
  let headDim = f.optionalPositiveInt("head_dim");
  if (headDim === undefined) {
    if (hiddenSize % numAttentionHeads !== 0) {
      f.fail("head_dim", `is missing and "hidden_size" is not a multiple of "num_attention_heads"`);
    }
    headDim = hiddenSize / numAttentionHeads;
  }
  const eosTokenIds = f.optionalIdList("eos_token_id") ?? [];
  const bosTokenId = f.optionalNonNegativeInt("bos_token_id");
  for (
    const [field, ids] of [["eos_token_id", eosTokenIds], [
      "bos_token_id",
      bosTokenId === undefined ? [] : [bosTokenId],
    ]] as const
  ) {
    const bad = ids.find((id) => id >= vocabSize);
    if (bad !== undefined) f.fail(field, `(${bad}) must be below "vocab_size" (${vocabSize})`);
  }
  let chatFormat: ChatFormatName | undefined;
  if (json.rill !== undefined) {
    if (!isRecord(json.rill)) f.fail("rill", "must be an object");
    const cf = json.rill.chat_format;
    if (cf !== undefined && cf !== "harmony" && cf !== "chatml") {
      f.fail("rill.chat_format", `must be "harmony" or "chatml"`);
    }
    chatFormat = cf;
  }
  return {
    modelType,
    architectures: archRaw as string[],
    vocabSize,
    hiddenSize,
    numHiddenLayers,
    numAttentionHeads,
    numKeyValueHeads,
    headDim,
    maxPositionEmbeddings: f.optionalPositiveInt("max_position_embeddings"),
    rmsNormEps: f.optionalNumber("rms_norm_eps", (n) => n > 0, "a positive number"),
    ropeTheta: f.optionalNumber("rope_theta", (n) => n > 0, "a positive number"),
    bosTokenId,
    eosTokenIds,
    torchDtype: f.optionalString("torch_dtype"),
    chatFormat,
    raw: json,
  };
}

function parseGenerationConfig(dir: string, json: Json, vocabSize: number): GenerationConfig {
  const f: Fields = new Fields(`${dir}: generation_config.json`, json);
  const eosTokenIds = f.optionalIdList("eos_token_id");
  const bad = eosTokenIds?.find((id) => id >= vocabSize);
  if (bad !== undefined) f.fail("eos_token_id", `(${bad}) must be below config.json "vocab_size" (${vocabSize})`);
  return {
    eosTokenIds,
    temperature: f.optionalNumber("temperature", (n) => n >= 0, "a number >= 0"),
    topP: f.optionalNumber("top_p", (n) => n > 0 && n <= 1, "a number in (0, 1]"),
    topK: f.optionalNonNegativeInt("top_k"),
    maxNewTokens: f.optionalPositiveInt("max_new_tokens"),
  };
}

interface Templates {
  chatTemplate: string | undefined;
  chatTemplates: Record<string, string>;
}

function parseChatTemplate(dir: string, json: Json): Templates {
  const f: Fields = new Fields(`${dir}: tokenizer_config.json`, json);
  const v = json.chat_template;
  if (v === undefined || v === null) return { chatTemplate: undefined, chatTemplates: {} };
  if (typeof v === "string") return { chatTemplate: v, chatTemplates: { default: v } };
  if (!Array.isArray(v)) f.fail("chat_template", "must be a string or a list of {name, template}");
  const chatTemplates: Record<string, string> = {};
  v.forEach((t, i) => {
    if (!isRecord(t) || typeof t.name !== "string" || typeof t.template !== "string") {
      f.fail(`chat_template[${i}]`, "must be {name: string, template: string}");
    }
    chatTemplates[t.name] = t.template;
  });
  // HF picks "default" when the list has one; a single unnamed-default entry is the template too.
  const names = Object.keys(chatTemplates);
  const chatTemplate = chatTemplates.default ?? (names.length === 1 ? chatTemplates[names[0]!] : undefined);
  if (chatTemplate === undefined) f.fail("chat_template", `list has no "default" entry`);
  return { chatTemplate, chatTemplates };
}

/**
 * The external-data locations an ONNX file references. TensorProto.external_data is a list of StringStringEntryProto
 * {key, value}; each serialises as `0a 08 "location" 12 <varint len> <value>`, so a byte scan finds them without a
 * protobuf parser. Only small graph files are scanned: a file too large to scan holds its weights inline anyway
 * (ONNX protobufs cannot exceed 2 GB, and models near that size keep weights external with a small graph file).
 */
export function externalDataLocations(bytes: Uint8Array): string[] {
  const key = [0x0a, 0x08, 0x6c, 0x6f, 0x63, 0x61, 0x74, 0x69, 0x6f, 0x6e, 0x12];
  const found = new Set<string>();
  const dec = new TextDecoder();
  outer: for (let i = bytes.indexOf(0x0a); i >= 0 && i + key.length < bytes.length; i = bytes.indexOf(0x0a, i + 1)) {
    for (let k = 1; k < key.length; k++) if (bytes[i + k] !== key[k]) continue outer;
    let p = i + key.length, len = 0, shift = 0;
    for (;;) {
      const b = bytes[p++];
      if (b === undefined || shift > 28) continue outer;
      len |= (b & 0x7f) << shift;
      if ((b & 0x80) === 0) break;
      shift += 7;
    }
    if (len === 0 || p + len > bytes.length) continue;
    found.add(dec.decode(bytes.subarray(p, p + len)));
  }
  return [...found];
}

const MAX_SCANNED_ONNX = 256 * 1024 * 1024;

function ms(t0: number): string {
  return `${Math.round(performance.now() - t0)} ms`;
}

/** Used when neither config.json nor tokenizer_config.json bounds the context. */
export const DEFAULT_CONTEXT_LENGTH = 2048;

/**
 * The model's context length, computed here and nowhere else: config.json's `max_position_embeddings`, stretched by
 * its rope scaling where that scaling extends positions past it (`linear`/`dynamic`: × factor; `yarn`:
 * original_max_position_embeddings × factor when given; `llama3` and others already state the extended length).
 * tokenizer_config.json's `model_max_length` counts only when config.json has no bound: tokenizer files are often
 * copied between models (the gpt-oss release ships a 4096-token tokenizer limit beside a 131072-position config).
 * Else 2048.
 */
export function contextLength(m: Pick<ModelDir, "config" | "tokenizerConfig">): number {
  const fromConfig = m.config.maxPositionEmbeddings;
  if (fromConfig === undefined) return m.tokenizerConfig.modelMaxLength ?? DEFAULT_CONTEXT_LENGTH;
  const scaling = m.config.raw.rope_scaling;
  if (!isRecord(scaling)) return fromConfig;
  const type = scaling.rope_type ?? scaling.type;
  const factor = typeof scaling.factor === "number" && Number.isFinite(scaling.factor) && scaling.factor > 1
    ? scaling.factor
    : 1;
  switch (type) {
    case "linear":
    case "dynamic":
      return Math.floor(fromConfig * factor);
    case "yarn": {
      const original = scaling.original_max_position_embeddings;
      return typeof original === "number" && Number.isInteger(original) && original > 0
        ? Math.max(fromConfig, Math.floor(original * factor))
        : fromConfig;
    }
    default:
      return fromConfig;
  }
}

/** EOS ids from generation_config.json and config.json, deduplicated (a chat format's stop tokens may add more). */
export function eosTokenIds(m: Pick<ModelDir, "config" | "generationConfig">): number[] {
  return [...new Set([...(m.generationConfig?.eosTokenIds ?? []), ...m.config.eosTokenIds])];
}

/** Reads, validates and builds everything in a model directory except the ONNX session. */
export async function readModelDir(dir: string, options: ReadModelDirOptions = {}): Promise<ModelDir> {
  const progress = options.onProgress ?? (() => {});
  const kind = await fileKind(dir);
  if (kind !== "dir") throw new ModelDirError(`${dir}: ${kind === "none" ? "directory not found" : "not a directory"}`);

  let t0 = performance.now();
  const config = parseConfig(dir, (await readJson(dir, "config.json", true))!);
  progress(`config.json: ${config.modelType}, ${config.numHiddenLayers} layers, vocab ${config.vocabSize} (${ms(t0)})`);

  t0 = performance.now();
  const genJson = await readJson(dir, "generation_config.json", false);
  const generationConfig = genJson === undefined ? undefined : parseGenerationConfig(dir, genJson, config.vocabSize);
  if (generationConfig !== undefined) progress(`generation_config.json: read (${ms(t0)})`);

  t0 = performance.now();
  const tokJson = (await readJson(dir, "tokenizer.json", true))!;
  let tokenizer: HfTokenizer;
  try {
    tokenizer = HfTokenizer.fromJSON(tokJson);
  } catch (e) {
    if (e instanceof HfTokenizerError) throw new ModelDirError(`${dir}: tokenizer.json: ${e.message}`);
    throw e;
  }
  if (tokenizer.vocabSize > config.vocabSize) {
    throw new ModelDirError(
      `${dir}: tokenizer.json: has ${tokenizer.vocabSize} token ids but config.json "vocab_size" is ${config.vocabSize}`,
    );
  }
  progress(`tokenizer.json: ${tokenizer.vocabSize} tokens, ${tokenizer.style} (${ms(t0)})`);

  t0 = performance.now();
  const tcJson = await readJson(dir, "tokenizer_config.json", false) ?? {};
  const tc: Fields = new Fields(`${dir}: tokenizer_config.json`, tcJson);
  const tokenizerConfig: TokenizerConfig = {
    bosToken: tc.optionalTokenText("bos_token"),
    eosToken: tc.optionalTokenText("eos_token"),
    padToken: tc.optionalTokenText("pad_token"),
    // HF writes a huge sentinel (1e30) when there is no limit; treat anything absurd as unset.
    modelMaxLength: typeof tcJson.model_max_length === "number" && Number.isInteger(tcJson.model_max_length) &&
        tcJson.model_max_length > 0 && tcJson.model_max_length < 2 ** 31
      ? tcJson.model_max_length
      : undefined,
  };
  let { chatTemplate, chatTemplates } = parseChatTemplate(dir, tcJson);
  const jinjaPath = join(dir, "chat_template.jinja");
  if (await fileKind(jinjaPath) === "file") {
    // transformers saves the template here (and not in tokenizer_config.json) since v4.50; it wins when present.
    chatTemplate = await Deno.readTextFile(jinjaPath);
    chatTemplates = { ...chatTemplates, default: chatTemplate };
  }
  progress(
    `tokenizer_config.json: ${chatTemplate === undefined ? "no chat template" : "chat template"} (${ms(t0)})`,
  );

  const weights = await findWeights(dir);
  return {
    dir,
    config,
    generationConfig,
    tokenizer,
    tokenizerConfig,
    chatTemplate,
    chatTemplates,
    weights,
  };
}

const SAFETENSORS_INDEX = "model.safetensors.index.json";

/** The weight files in `dir` (see WeightFiles); a sharded index that names a missing shard is an error. */
export async function findWeights(dir: string): Promise<WeightFiles> {
  const onnx = join(dir, "onnx/model.onnx");
  const onnxPath = await fileKind(onnx) === "file" ? onnx : undefined;
  let paths: string[] | undefined;
  const single = join(dir, "model.safetensors");
  if (await fileKind(single) === "file") {
    paths = [single];
  } else if (await fileKind(join(dir, SAFETENSORS_INDEX)) === "file") {
    const index = (await readJson(dir, SAFETENSORS_INDEX, true))!;
    const f: Fields = new Fields(`${dir}: ${SAFETENSORS_INDEX}`, index);
    if (!isRecord(index.weight_map)) f.fail("weight_map", "must be an object of tensor name -> file");
    const shards = new Set<string>();
    for (const [tensor, file] of Object.entries(index.weight_map)) {
      if (typeof file !== "string" || file === "" || file.includes("/") || file.startsWith(".")) {
        f.fail(`weight_map.${tensor}`, "must be a file name next to the index");
      }
      shards.add(file);
    }
    if (shards.size === 0) f.fail("weight_map", "names no tensors");
    paths = [...shards].sort().map((file) => join(dir, file));
    for (const p of paths) {
      if (await fileKind(p) !== "file") {
        throw new ModelDirError(`${dir}: ${SAFETENSORS_INDEX}: shard ${p.slice(p.lastIndexOf("/") + 1)} not found`);
      }
    }
  }
  let bytes = 0;
  for (const p of paths ?? []) bytes += (await Deno.stat(p)).size;
  return { onnxPath, safetensors: paths === undefined ? undefined : { paths, bytes } };
}

/** The start-up log's line for safetensors weights: `model.safetensors: 8.3 MB` or `3 safetensors shards: 41.0 MB`. */
export function describeSafetensors(st: NonNullable<WeightFiles["safetensors"]>): string {
  const mb = `${(st.bytes / 1048576).toFixed(1)} MB`;
  const first = st.paths[0] ?? "";
  return st.paths.length === 1
    ? `${first.slice(first.lastIndexOf("/") + 1)}: ${mb}`
    : `${st.paths.length} safetensors shards: ${mb}`;
}

/**
 * The external-data files `onnx/model.onnx` references, each checked to exist next to it. Only small graph files are
 * scanned (see externalDataLocations).
 */
export async function onnxExternalData(dir: string, onnxPath: string): Promise<{ paths: string[]; bytes: number }> {
  const { size } = await Deno.stat(onnxPath);
  const paths: string[] = [];
  let bytes = size;
  if (size <= MAX_SCANNED_ONNX) {
    for (const loc of externalDataLocations(await Deno.readFile(onnxPath))) {
      const p = join(join(dir, "onnx"), loc);
      if (loc.startsWith("/") || loc.split("/").includes("..") || await fileKind(p) !== "file") {
        throw new ModelDirError(`${dir}: onnx/model.onnx: external data file "${loc}" not found next to it`);
      }
      paths.push(p);
      bytes += (await Deno.stat(p)).size;
    }
  }
  return { paths, bytes };
}
