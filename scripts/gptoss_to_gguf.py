"""A gpt-oss checkpoint in the release layout (config.json, *.safetensors with MXFP4 experts, tokenizer.json) as a GGUF
file that llama.cpp loads as architecture "gpt-oss", for the side-by-side benchmark (bench/gptoss_bench.ts).

    python3 scripts/gptoss_to_gguf.py [--q8] MODEL_DIR OUT.gguf

What it writes, and why:
- Experts stay MXFP4 (ggml type 39, block {u8 e; u8 qs[16]}, element j in the low nibble of qs[j] and element j + 16 in
  the high one). The release stores element 2j in the low nibble of byte j and 2j + 1 in the high one, so the nibbles
  are regrouped; the scale byte carries over unchanged: ggml reads e as 2^(e - 128) times a table of doubled E2M1
  values, which is the release's E2M1 · 2^(s - 127). gate_up's rows interleave gate (even) and up (odd) units; they
  become ffn_gate_exps and ffn_up_exps.
- Matrices held in BF16 by rill's bf16 run (attention, embedding, head) stay BF16; with --q8 they become Q8_0 (ggml
  type 8: per 32 weights an fp16 scale max|w|/127 and 32 rounded int8), what rill holds under --dtype int8 (the same
  34-byte blocks). The router, which rill holds in fp32 either way, and every 1-D tensor (norms, biases, sinks) are
  written F32.
- GGUF dims are numpy's shape reversed (ne[0] innermost), so a [rows, cols] matrix is [cols, rows].
- The o200k_harmony vocabulary as a byte-level BPE (tokenizer.ggml.model gpt2, pre gpt-4o): the base vocabulary and
  merges from tokenizer.json, its added tokens as control tokens, and the ids the model has beyond them (up to
  vocab_size) as `<|reserved_N|>` control tokens, as the harmony encoding names them.
- rope: YaRN (factor, original context) from config.json. llama.cpp always rounds YaRN's ramp bounds (floor / ceil),
  which is transformers' truncate=true; gpt-oss ships truncate=false, so on gpt-oss's own config llama.cpp's rope
  differs slightly from the reference (the speed is unaffected; the correctness check sets truncate=true on both).
"""

import json
import os
import struct
import sys

import numpy as np

ALIGN = 32
GGML_F32, GGML_Q8_0, GGML_BF16, GGML_MXFP4 = 0, 8, 30, 39
FTYPE_MOSTLY_MXFP4_MOE = 38
Q8_ROWS = 4096  # rows quantised at a time (bounds the float copies of the vocabulary-sized matrices)
TOKEN_NORMAL, TOKEN_CONTROL = 1, 3

# GGUF metadata value types
T_U32, T_I32, T_F32, T_BOOL, T_STRING, T_ARRAY = 4, 5, 6, 7, 8, 9


class Shards:
    """The checkpoint's tensors by name, read through memory maps of its safetensors files."""

    def __init__(self, model_dir):
        index = os.path.join(model_dir, "model.safetensors.index.json")
        if os.path.exists(index):
            with open(index) as f:
                files = sorted(set(json.load(f)["weight_map"].values()))
        else:
            files = ["model.safetensors"]
        self.where = {}
        for name in files:
            path = os.path.join(model_dir, name)
            with open(path, "rb") as f:
                (n,) = struct.unpack("<Q", f.read(8))
                header = json.loads(f.read(n))
            header.pop("__metadata__", None)
            for key, info in header.items():
                self.where[key] = (path, 8 + n, info)

    def raw(self, name):
        """(dtype, shape, uint8 array) of a tensor."""
        path, base, info = self.where[name]
        start, end = info["data_offsets"]
        data = np.memmap(path, dtype=np.uint8, mode="r", offset=base + start, shape=(end - start,))
        return info["dtype"], tuple(info["shape"]), data

    def f32(self, name):
        dtype, shape, data = self.raw(name)
        if dtype == "BF16":
            bits = data.view(np.uint16).astype(np.uint32) << 16
            return bits.view(np.float32).reshape(shape)
        if dtype == "F32":
            return data.view(np.float32).reshape(shape)
        raise ValueError(f"{name}: {dtype} where BF16 or F32 was expected")

    def bf16_bytes(self, name):
        dtype, shape, data = self.raw(name)
        if dtype != "BF16":
            raise ValueError(f"{name}: {dtype} where BF16 was expected")
        return shape, data


def mxfp4_blocks(blocks, scales):
    """ggml block_mxfp4 bytes from the release's blocks [..., nb, 16] and scales [..., nb]: per block the scale byte,
    then 16 bytes with element j low and element j + 16 high."""
    lo = blocks & 0x0F
    hi = blocks >> 4
    codes = np.stack((lo, hi), axis=-1).reshape(blocks.shape[:-1] + (32,))  # element order
    qs = codes[..., :16] | (codes[..., 16:] << 4)
    return np.concatenate((scales[..., None], qs), axis=-1).astype(np.uint8)


def q8_0_blocks(x):
    """ggml block_q8_0 bytes of rows x [rows, cols] (cols a multiple of 32): per block the fp16 scale d = max|x| / 127,
    then the 32 values x / d rounded to int8."""
    rows, cols = x.shape
    b = x.reshape(rows, cols // 32, 32).astype(np.float32)
    d = np.abs(b).max(axis=-1) / 127.0
    inv = np.divide(1.0, d, out=np.zeros_like(d), where=d > 0)
    q = np.clip(np.rint(b * inv[..., None]), -127, 127).astype(np.int8)
    d16 = d.astype("<f2")
    return np.concatenate((d16[..., None].view(np.uint8).reshape(rows, cols // 32, 2), q.view(np.uint8)), axis=-1)


class Writer:
    def __init__(self):
        self.kv = []
        self.tensors = []  # (name, ggml type, ne, nbytes, produce)

    def add(self, key, vtype, value):
        self.kv.append((key, vtype, value))

    def tensor(self, name, ggml_type, ne, nbytes, produce):
        self.tensors.append((name, ggml_type, list(ne), nbytes, produce))

    @staticmethod
    def _str(s):
        b = s.encode("utf-8")
        return struct.pack("<Q", len(b)) + b

    def _value(self, vtype, value):
        if vtype == T_U32:
            return struct.pack("<I", value)
        if vtype == T_I32:
            return struct.pack("<i", value)
        if vtype == T_F32:
            return struct.pack("<f", value)
        if vtype == T_BOOL:
            return struct.pack("<B", 1 if value else 0)
        if vtype == T_STRING:
            return self._str(value)
        if vtype == T_ARRAY:
            etype, items = value
            head = struct.pack("<IQ", etype, len(items))
            if etype == T_STRING:
                return head + b"".join(self._str(s) for s in items)
            if etype == T_I32:
                return head + np.asarray(items, dtype="<i4").tobytes()
            raise ValueError(f"array of type {etype}")
        raise ValueError(f"value type {vtype}")

    def write(self, path):
        with open(path, "wb") as f:
            f.write(struct.pack("<4sIQQ", b"GGUF", 3, len(self.tensors), len(self.kv)))
            for key, vtype, value in self.kv:
                f.write(self._str(key) + struct.pack("<I", vtype) + self._value(vtype, value))
            offset = 0
            for name, ggml_type, ne, nbytes, _ in self.tensors:
                f.write(self._str(name) + struct.pack("<I", len(ne)) + struct.pack(f"<{len(ne)}Q", *ne))
                f.write(struct.pack("<IQ", ggml_type, offset))
                offset += (nbytes + ALIGN - 1) // ALIGN * ALIGN
            f.write(b"\0" * ((-f.tell()) % ALIGN))
            for name, _, _, nbytes, produce in self.tensors:
                data = produce()
                if len(data) != nbytes:
                    raise ValueError(f"{name}: {len(data)} bytes, {nbytes} expected")
                f.write(data)
                f.write(b"\0" * ((-nbytes) % ALIGN))


def add_vocab(w, model_dir, vocab_size, cfg):
    with open(os.path.join(model_dir, "tokenizer.json")) as f:
        tok = json.load(f)
    model = tok["model"]
    if model["type"] != "BPE":
        raise ValueError(f"tokenizer.json: model type {model['type']}, BPE expected")
    names = [None] * vocab_size
    types = [TOKEN_NORMAL] * vocab_size
    for text, i in model["vocab"].items():
        if i < vocab_size:
            names[i] = text
    for t in tok["added_tokens"]:
        if t["id"] < vocab_size:
            names[t["id"]] = t["content"]
            types[t["id"]] = TOKEN_CONTROL if t.get("special", False) else TOKEN_NORMAL
    for i in range(vocab_size):
        if names[i] is None:
            names[i] = f"<|reserved_{i}|>"
            types[i] = TOKEN_CONTROL
    merges = [m if isinstance(m, str) else f"{m[0]} {m[1]}" for m in model["merges"]]
    w.add("tokenizer.ggml.model", T_STRING, "gpt2")
    w.add("tokenizer.ggml.pre", T_STRING, "gpt-4o")
    w.add("tokenizer.ggml.tokens", T_ARRAY, (T_STRING, names))
    w.add("tokenizer.ggml.token_type", T_ARRAY, (T_I32, types))
    w.add("tokenizer.ggml.merges", T_ARRAY, (T_STRING, merges))
    w.add("tokenizer.ggml.bos_token_id", T_U32, 199998)
    eos = cfg.get("eos_token_id", 200002)
    w.add("tokenizer.ggml.eos_token_id", T_U32, eos[0] if isinstance(eos, list) else eos)
    w.add("tokenizer.ggml.padding_token_id", T_U32, cfg.get("pad_token_id", 199999))
    w.add("tokenizer.ggml.add_bos_token", T_BOOL, False)


def convert(model_dir, out, q8=False):
    with open(os.path.join(model_dir, "config.json")) as f:
        cfg = json.load(f)
    if cfg.get("model_type") != "gpt_oss":
        raise ValueError(f"config.json: model_type {cfg.get('model_type')}, gpt_oss expected")
    H, I, L = cfg["hidden_size"], cfg["intermediate_size"], cfg["num_hidden_layers"]
    heads, kv_heads, D = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"]
    E, K, V = cfg["num_local_experts"], cfg.get("experts_per_token", cfg.get("num_experts_per_tok")), cfg["vocab_size"]
    types = cfg.get("layer_types", [])
    for i, t in enumerate(types):
        if t != ("sliding_attention" if i % 2 == 0 else "full_attention"):
            raise ValueError(f"layer {i} is {t}: llama.cpp's gpt-oss alternates sliding (even) and full (odd)")
    rs = cfg.get("rope_scaling") or {}
    st = Shards(model_dir)

    w = Writer()
    a = "gpt-oss"
    w.add("general.architecture", T_STRING, a)
    w.add("general.name", T_STRING, os.path.basename(os.path.normpath(model_dir)))
    w.add("general.quantization_version", T_U32, 2)
    w.add("general.file_type", T_U32, FTYPE_MOSTLY_MXFP4_MOE)  # the experts' type; llama.cpp reads each tensor's own
    w.add(f"{a}.context_length", T_U32, cfg.get("max_position_embeddings", 131072))
    w.add(f"{a}.embedding_length", T_U32, H)
    w.add(f"{a}.block_count", T_U32, L)
    w.add(f"{a}.feed_forward_length", T_U32, I)
    w.add(f"{a}.expert_feed_forward_length", T_U32, I)
    w.add(f"{a}.attention.head_count", T_U32, heads)
    w.add(f"{a}.attention.head_count_kv", T_U32, kv_heads)
    w.add(f"{a}.attention.key_length", T_U32, D)
    w.add(f"{a}.attention.value_length", T_U32, D)
    w.add(f"{a}.attention.layer_norm_rms_epsilon", T_F32, cfg.get("rms_norm_eps", 1e-5))
    w.add(f"{a}.attention.sliding_window", T_U32, cfg["sliding_window"])
    w.add(f"{a}.rope.dimension_count", T_U32, D)
    w.add(f"{a}.rope.freq_base", T_F32, cfg.get("rope_theta", 150000.0))
    if rs.get("rope_type", rs.get("type")) == "yarn":
        w.add(f"{a}.rope.scaling.type", T_STRING, "yarn")
        w.add(f"{a}.rope.scaling.factor", T_F32, rs["factor"])
        w.add(f"{a}.rope.scaling.original_context_length", T_U32, rs["original_max_position_embeddings"])
        w.add(f"{a}.rope.scaling.yarn_beta_fast", T_F32, rs.get("beta_fast", 32.0))
        w.add(f"{a}.rope.scaling.yarn_beta_slow", T_F32, rs.get("beta_slow", 1.0))
    w.add(f"{a}.expert_count", T_U32, E)
    w.add(f"{a}.expert_used_count", T_U32, K)
    add_vocab(w, model_dir, V, cfg)

    def bf16(gname, name, expect):
        """A matrix as BF16, or with --q8 as Q8_0."""
        shape, data = st.bf16_bytes(name)
        if tuple(shape) != tuple(expect):
            raise ValueError(f"{name}: shape {shape}, {expect} expected")
        if not q8:
            w.tensor(gname, GGML_BF16, reversed(shape), data.size, lambda: data.tobytes())
            return
        rows, cols = shape
        if cols % 32 != 0:
            raise ValueError(f"{name}: {cols} columns, Q8_0 needs a multiple of 32")

        def produce():
            x = st.f32(name)
            return b"".join(q8_0_blocks(x[r:r + Q8_ROWS]).tobytes() for r in range(0, rows, Q8_ROWS))

        w.tensor(gname, GGML_Q8_0, reversed(shape), rows * (cols // 32) * 34, produce)

    def f32(gname, name, expect, rows=None):
        """F32 from BF16; rows selects every other row (slice) of the first dimension after the reshape."""
        _, shape, _ = st.raw(name)
        if tuple(shape) != tuple(expect):
            raise ValueError(f"{name}: shape {shape}, {expect} expected")
        out_shape = list(shape)
        if rows is not None:
            out_shape[-1] //= 2
        n = int(np.prod(out_shape))
        w.tensor(gname, GGML_F32, reversed(out_shape), 4 * n,
                 lambda: np.ascontiguousarray(st.f32(name)[..., rows] if rows is not None else st.f32(name))
                 .astype("<f4").tobytes())

    def experts(gname, prefix, rows, cols, pick):
        _, bshape, _ = st.raw(prefix + "_blocks")
        _, sshape, _ = st.raw(prefix + "_scales")
        if bshape != (E, rows, cols // 32, 16) or sshape != (E, rows, cols // 32):
            raise ValueError(f"{prefix}: blocks {bshape}, scales {sshape} for {E} experts of {rows}x{cols}")
        out_rows = rows if pick is None else rows // 2

        def produce():
            _, _, b = st.raw(prefix + "_blocks")
            _, _, s = st.raw(prefix + "_scales")
            b = b.reshape(bshape)
            s = s.reshape(sshape)
            if pick is not None:
                b, s = b[:, pick], s[:, pick]
            return mxfp4_blocks(np.asarray(b), np.asarray(s)).tobytes()

        w.tensor(gname, GGML_MXFP4, [cols, out_rows, E], E * out_rows * (cols // 32) * 17, produce)

    bf16("token_embd.weight", "model.embed_tokens.weight", (V, H))
    for l in range(L):
        p, g = f"model.layers.{l}.", f"blk.{l}."
        f32(g + "attn_norm.weight", p + "input_layernorm.weight", (H,))
        f32(g + "post_attention_norm.weight", p + "post_attention_layernorm.weight", (H,))
        for name, gname, rows, cols in (("q_proj", "attn_q", heads * D, H), ("k_proj", "attn_k", kv_heads * D, H),
                                        ("v_proj", "attn_v", kv_heads * D, H), ("o_proj", "attn_output", H, heads * D)):
            bf16(f"{g}{gname}.weight", f"{p}self_attn.{name}.weight", (rows, cols))
            f32(f"{g}{gname}.bias", f"{p}self_attn.{name}.bias", (rows,))
        f32(g + "attn_sinks.weight", p + "self_attn.sinks", (heads,))
        f32(g + "ffn_gate_inp.weight", p + "mlp.router.weight", (E, H))
        f32(g + "ffn_gate_inp.bias", p + "mlp.router.bias", (E,))
        gu = p + "mlp.experts.gate_up_proj"
        experts(g + "ffn_gate_exps.weight", gu, 2 * I, H, slice(0, None, 2))
        experts(g + "ffn_up_exps.weight", gu, 2 * I, H, slice(1, None, 2))
        f32(g + "ffn_gate_exps.bias", gu + "_bias", (E, 2 * I), slice(0, None, 2))
        f32(g + "ffn_up_exps.bias", gu + "_bias", (E, 2 * I), slice(1, None, 2))
        experts(g + "ffn_down_exps.weight", p + "mlp.experts.down_proj", H, I, None)
        f32(g + "ffn_down_exps.bias", p + "mlp.experts.down_proj_bias", (E, H))
    f32("output_norm.weight", "model.norm.weight", (H,))
    bf16("output.weight", "lm_head.weight", (V, H))
    tmp = out + ".partial"
    w.write(tmp)
    os.replace(tmp, out)


if __name__ == "__main__":
    args = sys.argv[1:]
    q8 = "--q8" in args
    args = [a for a in args if a != "--q8"]
    if len(args) != 2:
        sys.exit("usage: gptoss_to_gguf.py [--q8] MODEL_DIR OUT.gguf")
    convert(args[0], args[1], q8)
