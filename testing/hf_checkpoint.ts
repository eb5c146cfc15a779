/**
 * Test support: writes a Hugging Face checkpoint directory as a download from the Hub holds it — `config.json`,
 * `generation_config.json`, `model.safetensors`, `tokenizer.json`, `tokenizer_config.json` — with small random
 * weights from a seeded generator, for the architectures rill's native library serves (Llama incl. llama3 rope
 * scaling, Mistral, Qwen2 with q/k/v biases, Qwen3 with q/k norms). The same spec and seed give byte-identical files.
 *
 * Weights are uniform with the standard deviation 1/sqrt(fan-in) (embeddings 1, norms 1 ± 0.1), so activations keep
 * about unit size and tied logits spread with a standard deviation near sqrt(hidden): greedy decoding is then far
 * from ties and stable across kernels.
 */

export type CheckpointArchitecture = "llama" | "mistral" | "qwen2" | "qwen3";
export type CheckpointDtype = "F32" | "BF16";

export interface CheckpointSpec {
  readonly architecture: CheckpointArchitecture;
  readonly dtype: CheckpointDtype;
  /** Rows of the embedding (the real models pad past the tokenizer: Qwen 151,936, gpt-oss 201,088). */
  readonly vocabSize: number;
  readonly hiddenSize: number;
  readonly intermediateSize: number;
  readonly layers: number;
  readonly heads: number;
  readonly kvHeads: number;
  /** Written as `head_dim` when set (Qwen3 has head_dim ≠ hidden / heads). */
  readonly headDim?: number;
  readonly tied: boolean;
  readonly maxPositionEmbeddings: number;
  readonly ropeTheta: number;
  readonly ropeScaling?: Record<string, unknown>;
  readonly bosTokenId?: number;
  /** config.json's `eos_token_id` (one id, as the Hub's configs mostly have). */
  readonly eosTokenId: number;
  /** generation_config.json's `eos_token_id` list (Llama 3.1 lists three). */
  readonly generationEosTokenIds: readonly number[];
  /** Extra config.json fields (e.g. `rill: {chat_format}`). */
  readonly extraConfig?: Record<string, unknown>;
}

const ARCHITECTURES: Record<CheckpointArchitecture, string> = {
  llama: "LlamaForCausalLM",
  mistral: "MistralForCausalLM",
  qwen2: "Qwen2ForCausalLM",
  qwen3: "Qwen3ForCausalLM",
};

/** xorshift32 → uniform [0, 1); seeded, so the weights are a function of the spec and the seed. */
function uniform(seed: number): () => number {
  let s = (seed >>> 0) || 0x9e3779b9;
  return () => {
    s ^= s << 13;
    s >>>= 0;
    s ^= s >>> 17;
    s ^= s << 5;
    s >>>= 0;
    return s / 2 ** 32;
  };
}

/**
 * How much larger than the embedding each layer's writes to the residual stream are. With tied embeddings a residual
 * stream dominated by the input embedding makes every token predict itself (greedy output repeats the prompt's last
 * token forever); layers that outweigh it make the continuation depend on the context.
 */
const RESIDUAL_GAIN = 4;

interface Tensor {
  readonly name: string;
  readonly shape: readonly number[];
  readonly values: Float32Array;
}

/** The config.json a Hub download of this architecture carries. */
export function checkpointConfig(spec: CheckpointSpec): Record<string, unknown> {
  const config: Record<string, unknown> = {
    architectures: [ARCHITECTURES[spec.architecture]],
    model_type: spec.architecture,
    vocab_size: spec.vocabSize,
    hidden_size: spec.hiddenSize,
    intermediate_size: spec.intermediateSize,
    num_hidden_layers: spec.layers,
    num_attention_heads: spec.heads,
    num_key_value_heads: spec.kvHeads,
    ...(spec.headDim === undefined ? {} : { head_dim: spec.headDim }),
    max_position_embeddings: spec.maxPositionEmbeddings,
    rms_norm_eps: 1e-6,
    rope_theta: spec.ropeTheta,
    rope_scaling: spec.ropeScaling ?? null,
    hidden_act: "silu",
    tie_word_embeddings: spec.tied,
    torch_dtype: spec.dtype === "BF16" ? "bfloat16" : "float32",
    ...(spec.bosTokenId === undefined ? {} : { bos_token_id: spec.bosTokenId }),
    eos_token_id: spec.eosTokenId,
    use_cache: true,
    ...(spec.architecture === "qwen2" || spec.architecture === "qwen3"
      ? { use_sliding_window: false, sliding_window: null, attention_dropout: 0 }
      : {}),
    ...(spec.architecture === "mistral" ? { sliding_window: null } : {}),
    ...(spec.architecture === "llama" ? { attention_bias: false, mlp_bias: false } : {}),
    ...spec.extraConfig,
  };
  return config;
}

function tensors(spec: CheckpointSpec, seed: number): Tensor[] {
  const next = uniform(seed);
  const out: Tensor[] = [];
  const add = (name: string, shape: number[], std: number, mean = 0) => {
    const n = shape.reduce((a, b) => a * b, 1);
    const values = new Float32Array(n);
    const half = std * Math.sqrt(3);
    for (let i = 0; i < n; i++) values[i] = mean + (2 * next() - 1) * half;
    out.push({ name, shape, values });
  };
  const H = spec.hiddenSize;
  const D = spec.headDim ?? H / spec.heads;
  const q = spec.heads * D;
  const kv = spec.kvHeads * D;
  add("model.embed_tokens.weight", [spec.vocabSize, H], 1);
  for (let l = 0; l < spec.layers; l++) {
    const p = `model.layers.${l}`;
    add(`${p}.input_layernorm.weight`, [H], 0.1, 1);
    add(`${p}.self_attn.q_proj.weight`, [q, H], 1 / Math.sqrt(H));
    add(`${p}.self_attn.k_proj.weight`, [kv, H], 1 / Math.sqrt(H));
    add(`${p}.self_attn.v_proj.weight`, [kv, H], 1 / Math.sqrt(H));
    if (spec.architecture === "qwen2") {
      add(`${p}.self_attn.q_proj.bias`, [q], 0.1);
      add(`${p}.self_attn.k_proj.bias`, [kv], 0.1);
      add(`${p}.self_attn.v_proj.bias`, [kv], 0.1);
    }
    if (spec.architecture === "qwen3") {
      add(`${p}.self_attn.q_norm.weight`, [D], 0.1, 1);
      add(`${p}.self_attn.k_norm.weight`, [D], 0.1, 1);
    }
    add(`${p}.self_attn.o_proj.weight`, [H, q], RESIDUAL_GAIN / Math.sqrt(q));
    add(`${p}.post_attention_layernorm.weight`, [H], 0.1, 1);
    add(`${p}.mlp.gate_proj.weight`, [spec.intermediateSize, H], 1 / Math.sqrt(H));
    add(`${p}.mlp.up_proj.weight`, [spec.intermediateSize, H], 1 / Math.sqrt(H));
    add(`${p}.mlp.down_proj.weight`, [H, spec.intermediateSize], RESIDUAL_GAIN / Math.sqrt(spec.intermediateSize));
  }
  add("model.norm.weight", [H], 0.1, 1);
  if (!spec.tied) add("lm_head.weight", [spec.vocabSize, H], 1 / Math.sqrt(H));
  return out;
}

/** float32 → bfloat16 bits, rounding to nearest even (as torch's `.to(torch.bfloat16)`). */
function bf16Bits(bits: number): number {
  return ((bits + 0x7fff + ((bits >>> 16) & 1)) >>> 16) & 0xffff;
}

/** The safetensors bytes: an 8-byte little-endian header length, the JSON header (space-padded to 8), the data. */
export function safetensorsBytes(list: readonly Tensor[], dtype: CheckpointDtype): Uint8Array {
  const width = dtype === "F32" ? 4 : 2;
  const header: Record<string, unknown> = { __metadata__: { format: "pt" } };
  let offset = 0;
  for (const t of list) {
    const bytes = t.values.length * width;
    header[t.name] = { dtype, shape: t.shape, data_offsets: [offset, offset + bytes] };
    offset += bytes;
  }
  let json = JSON.stringify(header);
  json += " ".repeat((8 - ((8 + json.length) % 8)) % 8);
  const headerBytes = new TextEncoder().encode(json);
  const out = new Uint8Array(8 + headerBytes.length + offset);
  const view = new DataView(out.buffer);
  view.setBigUint64(0, BigInt(headerBytes.length), true);
  out.set(headerBytes, 8);
  let at = 8 + headerBytes.length;
  for (const t of list) {
    const bits = new Uint32Array(t.values.buffer, t.values.byteOffset, t.values.length);
    if (dtype === "F32") {
      for (let i = 0; i < bits.length; i++, at += 4) view.setUint32(at, bits[i]!, true);
    } else {
      for (let i = 0; i < bits.length; i++, at += 2) view.setUint16(at, bf16Bits(bits[i]!), true);
    }
  }
  return out;
}

export interface TokenizerFiles {
  /** The texts of tokenizer.json and tokenizer_config.json, written as they are. */
  readonly tokenizerJson: string;
  readonly tokenizerConfig: string;
}

/** Writes the whole directory into `dir` (which must exist). */
export async function writeCheckpoint(
  dir: string,
  spec: CheckpointSpec,
  seed: number,
  tokenizer: TokenizerFiles,
): Promise<void> {
  await Deno.writeTextFile(`${dir}/config.json`, JSON.stringify(checkpointConfig(spec), null, 2));
  await Deno.writeTextFile(
    `${dir}/generation_config.json`,
    JSON.stringify(
      {
        ...(spec.bosTokenId === undefined ? {} : { bos_token_id: spec.bosTokenId }),
        eos_token_id: spec.generationEosTokenIds,
        do_sample: true,
        temperature: 0.6,
        top_p: 0.9,
      },
      null,
      2,
    ),
  );
  await Deno.writeTextFile(`${dir}/tokenizer.json`, tokenizer.tokenizerJson);
  await Deno.writeTextFile(`${dir}/tokenizer_config.json`, tokenizer.tokenizerConfig);
  await Deno.writeFile(`${dir}/model.safetensors`, safetensorsBytes(tensors(spec, seed), spec.dtype));
}
