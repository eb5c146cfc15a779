#!/usr/bin/python3
"""Writes small random-initialised Hugging Face checkpoints of every architecture rill's native library serves, with
reference logits from a plain torch forward, for the native forward-pass tests.

Run with Debian's python (torch 1.13; transformers and safetensors are not needed):
    /usr/bin/python3 scripts/make_checkpoints.py OUT_DIR
The committed copy lives in tests/fixtures/checkpoints/ (tests/native/checkpoints_test.ts reads it). Deterministic: a
fixed seed per architecture gives byte-identical files.

Output format, one directory per checkpoint, named <architecture>-<dtype>:
    OUT_DIR/<name>/config.json          Hugging Face config (architectures, model_type, sizes, rope settings, ...)
    OUT_DIR/<name>/model.safetensors    weights in Hugging Face tensor names, dtype F32 or BF16; the "-sharded"
                                        checkpoint instead has model-0000{1,2}-of-00002.safetensors and
                                        model.safetensors.index.json ({"weight_map": {tensor: file}})
    OUT_DIR/<name>/golden/logits.json   {"cases": [{"input_ids": [...], "positions": [0 .. n-1],
                                                    "logits": [[vocab floats] for each position]}]}
                                        (the bundled models' golden format): logits of every position of each prompt
                                        run alone from position 0, computed in float64 from the stored weights
                                        (bf16 weights widened exactly), printed with 9 significant digits
    OUT_DIR/manifest.json               {"checkpoints": [{"name", "architecture", "dtype", "features": [...]}]}

Architectures (all GQA except llama2-tied; all with random, non-zero norm weights and biases):
    llama3     LlamaForCausalLM, rope_scaling llama3 (factor 8, original context 32), untied, sharded in fp32
    llama2     LlamaForCausalLM, as many KV heads as heads, tied embeddings, no rope scaling
    mistral    MistralForCausalLM, untied, sliding_window null
    qwen2      Qwen2ForCausalLM, q/k/v biases, tied embeddings
    qwen3      Qwen3ForCausalLM, q/k RMSNorm per head, head_dim 16 != hidden / heads, untied
Weights are scaled so activations keep unit size through the layers and logits spread with a standard deviation of
about 3 (a flat distribution would hide errors in the sampling tests).
"""

import json
import math
import os
import struct
import sys

import torch

VOCAB = 96
HIDDEN = 32
LAYERS = 2
INTERMEDIATE = 64
MAX_POS = 64
PROMPT_LENGTHS = (1, 9, 40)  # 40 spans three 16-token KV blocks

ARCHS = {
    "llama3": dict(
        architectures=["LlamaForCausalLM"], model_type="llama", heads=4, kv_heads=2, head_dim=8, tied=False,
        rope_theta=500000.0, rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                           "high_freq_factor": 4.0, "original_max_position_embeddings": 32},
        qkv_bias=False, qk_norm=False, features=["gqa", "rope_scaling_llama3", "untied", "sharded"], seed=11,
    ),
    "llama2": dict(
        architectures=["LlamaForCausalLM"], model_type="llama", heads=4, kv_heads=4, head_dim=8, tied=True,
        rope_theta=10000.0, rope_scaling=None, qkv_bias=False, qk_norm=False, features=["mha", "tied"], seed=12,
    ),
    "mistral": dict(
        architectures=["MistralForCausalLM"], model_type="mistral", heads=4, kv_heads=1, head_dim=8, tied=False,
        rope_theta=1000000.0, rope_scaling=None, qkv_bias=False, qk_norm=False, features=["gqa", "untied"], seed=13,
    ),
    "qwen2": dict(
        architectures=["Qwen2ForCausalLM"], model_type="qwen2", heads=4, kv_heads=2, head_dim=8, tied=True,
        rope_theta=1000000.0, rope_scaling=None, qkv_bias=True, qk_norm=False, features=["gqa", "qkv_bias", "tied"],
        seed=14,
    ),
    "qwen3": dict(
        architectures=["Qwen3ForCausalLM"], model_type="qwen3", heads=4, kv_heads=2, head_dim=16, tied=False,
        rope_theta=1000000.0, rope_scaling=None, qkv_bias=False, qk_norm=True,
        features=["gqa", "qk_norm", "head_dim_not_hidden_over_heads", "untied"], seed=15,
    ),
}
RMS_EPS = 1e-6


def make_weights(a):
    """Random weights in Hugging Face names (float32), fan-in scaled; norms near 1, biases small but non-zero."""
    g = torch.Generator().manual_seed(a["seed"])

    def normal(*shape, std):
        return torch.randn(*shape, generator=g, dtype=torch.float32) * std

    H, KV, D = a["heads"], a["kv_heads"], a["head_dim"]
    # A tied matrix is the head too: its scale sets the logits' spread (std ~ 0.55 * sqrt(HIDDEN) ~ 3).
    w = {"model.embed_tokens.weight": normal(VOCAB, HIDDEN, std=0.55 if a["tied"] else 1.0)}
    for i in range(LAYERS):
        p = f"model.layers.{i}."
        w[p + "input_layernorm.weight"] = 1.0 + normal(HIDDEN, std=0.1)
        w[p + "self_attn.q_proj.weight"] = normal(H * D, HIDDEN, std=1.0 / math.sqrt(HIDDEN))
        w[p + "self_attn.k_proj.weight"] = normal(KV * D, HIDDEN, std=1.0 / math.sqrt(HIDDEN))
        w[p + "self_attn.v_proj.weight"] = normal(KV * D, HIDDEN, std=1.0 / math.sqrt(HIDDEN))
        if a["qkv_bias"]:
            w[p + "self_attn.q_proj.bias"] = normal(H * D, std=0.2)
            w[p + "self_attn.k_proj.bias"] = normal(KV * D, std=0.2)
            w[p + "self_attn.v_proj.bias"] = normal(KV * D, std=0.2)
        if a["qk_norm"]:
            w[p + "self_attn.q_norm.weight"] = 1.0 + normal(D, std=0.1)
            w[p + "self_attn.k_norm.weight"] = 1.0 + normal(D, std=0.1)
        w[p + "self_attn.o_proj.weight"] = normal(HIDDEN, H * D, std=1.0 / math.sqrt(H * D))
        w[p + "post_attention_layernorm.weight"] = 1.0 + normal(HIDDEN, std=0.1)
        w[p + "mlp.gate_proj.weight"] = normal(INTERMEDIATE, HIDDEN, std=1.0 / math.sqrt(HIDDEN))
        w[p + "mlp.up_proj.weight"] = normal(INTERMEDIATE, HIDDEN, std=1.0 / math.sqrt(HIDDEN))
        w[p + "mlp.down_proj.weight"] = normal(HIDDEN, INTERMEDIATE, std=1.0 / math.sqrt(INTERMEDIATE))
    w["model.norm.weight"] = 1.0 + normal(HIDDEN, std=0.1)
    if not a["tied"]:
        w["lm_head.weight"] = normal(VOCAB, HIDDEN, std=3.0 / math.sqrt(HIDDEN))
    return w


def rope_inv_freq(a):
    """Inverse frequencies in float64, with Llama 3's scaling when configured (as transformers computes it)."""
    D = a["head_dim"]
    inv = 1.0 / (a["rope_theta"] ** (torch.arange(0, D, 2, dtype=torch.float64) / D))
    rs = a["rope_scaling"]
    if rs is None:
        return inv
    factor, low, high = rs["factor"], rs["low_freq_factor"], rs["high_freq_factor"]
    old = rs["original_max_position_embeddings"]
    low_wavelen, high_wavelen = old / low, old / high
    wavelen = 2 * math.pi / inv
    scaled = torch.where(wavelen > low_wavelen, inv / factor, inv)
    smooth = (old / wavelen - low) / (high - low)
    smoothed = (1 - smooth) * scaled / factor + smooth * scaled
    medium = ~(wavelen < high_wavelen) & ~(wavelen > low_wavelen)
    return torch.where(medium, smoothed, scaled)


def rms_norm(x, weight):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + RMS_EPS) * weight


def rotate(x, cos, sin):
    """Hugging Face's rotate_half convention: dimension i pairs with i + D/2."""
    half = x.shape[-1] // 2
    rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
    return x * cos + rotated * sin


def forward(a, w, ids):
    """Logits [n, VOCAB] of a prompt run from position 0, in float64."""
    w = {k: v.to(torch.float64) for k, v in w.items()}
    H, KV, D = a["heads"], a["kv_heads"], a["head_dim"]
    n = len(ids)
    x = w["model.embed_tokens.weight"][torch.tensor(ids)]
    angles = torch.arange(n, dtype=torch.float64)[:, None] * rope_inv_freq(a)[None, :]
    cos = torch.cat((angles.cos(), angles.cos()), dim=-1)[:, None, :]
    sin = torch.cat((angles.sin(), angles.sin()), dim=-1)[:, None, :]
    causal = torch.full((n, n), float("-inf"), dtype=torch.float64).triu(1)
    for i in range(LAYERS):
        p = f"model.layers.{i}."
        h = rms_norm(x, w[p + "input_layernorm.weight"])
        q = h @ w[p + "self_attn.q_proj.weight"].T
        k = h @ w[p + "self_attn.k_proj.weight"].T
        v = h @ w[p + "self_attn.v_proj.weight"].T
        if a["qkv_bias"]:
            q = q + w[p + "self_attn.q_proj.bias"]
            k = k + w[p + "self_attn.k_proj.bias"]
            v = v + w[p + "self_attn.v_proj.bias"]
        q, k, v = q.view(n, H, D), k.view(n, KV, D), v.view(n, KV, D)
        if a["qk_norm"]:
            q = rms_norm(q, w[p + "self_attn.q_norm.weight"])
            k = rms_norm(k, w[p + "self_attn.k_norm.weight"])
        q, k = rotate(q, cos, sin), rotate(k, cos, sin)
        group = H // KV  # query head j reads KV head j // group
        k = k[:, :, None, :].expand(n, KV, group, D).reshape(n, H, D)
        v = v[:, :, None, :].expand(n, KV, group, D).reshape(n, H, D)
        scores = torch.einsum("qhd,khd->hqk", q, k) / math.sqrt(D) + causal
        attn = torch.einsum("hqk,khd->qhd", scores.softmax(-1), v).reshape(n, H * D)
        x = x + attn @ w[p + "self_attn.o_proj.weight"].T
        h = rms_norm(x, w[p + "post_attention_layernorm.weight"])
        gate = h @ w[p + "mlp.gate_proj.weight"].T
        up = h @ w[p + "mlp.up_proj.weight"].T
        x = x + (torch.nn.functional.silu(gate) * up) @ w[p + "mlp.down_proj.weight"].T
    x = rms_norm(x, w["model.norm.weight"])
    head = w["model.embed_tokens.weight"] if a["tied"] else w["lm_head.weight"]
    return x @ head.T


def tensor_bytes(t, dtype):
    if dtype == "F32":
        return t.contiguous().to(torch.float32).numpy().astype("<f4").tobytes()
    # bfloat16: round to nearest even, as torch does; stored as little-endian 16-bit words.
    return t.contiguous().to(torch.bfloat16).view(torch.int16).numpy().astype("<i2").tobytes()


def write_safetensors(path, tensors, dtype):
    header = {}
    blobs = []
    offset = 0
    for name in sorted(tensors):
        data = tensor_bytes(tensors[name], dtype)
        header[name] = {"dtype": dtype, "shape": list(tensors[name].shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    header["__metadata__"] = {"format": "pt"}
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)


def config_json(a, dtype):
    c = {
        "architectures": a["architectures"],
        "model_type": a["model_type"],
        "vocab_size": VOCAB,
        "hidden_size": HIDDEN,
        "intermediate_size": INTERMEDIATE,
        "num_hidden_layers": LAYERS,
        "num_attention_heads": a["heads"],
        "num_key_value_heads": a["kv_heads"],
        "head_dim": a["head_dim"],
        "max_position_embeddings": MAX_POS,
        "rms_norm_eps": RMS_EPS,
        "rope_theta": a["rope_theta"],
        "rope_scaling": a["rope_scaling"],
        "hidden_act": "silu",
        "tie_word_embeddings": a["tied"],
        "torch_dtype": "float32" if dtype == "F32" else "bfloat16",
        "bos_token_id": 1,
        "eos_token_id": 2,
    }
    if a["model_type"] == "mistral":
        c["sliding_window"] = None
    if a["model_type"] in ("qwen2", "qwen3"):
        c["use_sliding_window"] = False
        c["sliding_window"] = MAX_POS
    if a["model_type"] == "qwen3":
        c["attention_bias"] = False
    return c


def prompts():
    g = torch.Generator().manual_seed(7)
    return [torch.randint(0, VOCAB, (n,), generator=g).tolist() for n in PROMPT_LENGTHS]


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: make_checkpoints.py OUT_DIR")
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    manifest = []
    for arch, a in ARCHS.items():
        weights32 = make_weights(a)
        for dtype in ("F32", "BF16"):
            name = f"{arch}-{'fp32' if dtype == 'F32' else 'bf16'}"
            d = os.path.join(out, name)
            os.makedirs(os.path.join(d, "golden"), exist_ok=True)
            # The reference sees exactly the stored values: bf16 weights widened back to float.
            stored = weights32 if dtype == "F32" else {k: v.to(torch.bfloat16).to(torch.float32) for k, v in weights32.items()}
            sharded = "sharded" in a["features"] and dtype == "F32"
            if sharded:
                names = sorted(weights32)
                first = [n for n in names if n.startswith("model.layers.0.") or n == "model.embed_tokens.weight"]
                parts = {"model-00001-of-00002.safetensors": first,
                         "model-00002-of-00002.safetensors": [n for n in names if n not in first]}
                weight_map = {}
                for file, part in parts.items():
                    write_safetensors(os.path.join(d, file), {n: weights32[n] for n in part}, dtype)
                    weight_map.update({n: file for n in part})
                with open(os.path.join(d, "model.safetensors.index.json"), "w") as f:
                    json.dump({"metadata": {}, "weight_map": dict(sorted(weight_map.items()))}, f, indent=2)
                    f.write("\n")
            else:
                write_safetensors(os.path.join(d, "model.safetensors"), weights32, dtype)
            with open(os.path.join(d, "config.json"), "w") as f:
                json.dump(config_json(a, dtype), f, indent=2)
                f.write("\n")
            cases = []
            for ids in prompts():
                logits = forward(a, stored, ids)
                cases.append({
                    "input_ids": ids,
                    "positions": list(range(len(ids))),
                    "logits": [[float(f"{v:.9g}") for v in row] for row in logits.tolist()],
                })
            with open(os.path.join(d, "golden", "logits.json"), "w") as f:
                json.dump({"cases": cases}, f, separators=(",", ":"))
                f.write("\n")
            spread = float(torch.cat([forward(a, stored, ids) for ids in prompts()]).std())
            manifest.append({"name": name, "architecture": a["architectures"][0], "dtype": name.split("-")[-1],
                             "features": [f for f in a["features"] if f != "sharded" or sharded],
                             "logit_std": round(spread, 3)})
            print(f"{name}: logit std {spread:.2f}")
    with open(os.path.join(out, "manifest.json"), "w") as f:
        json.dump({"checkpoints": manifest}, f, indent=2)
        f.write("\n")


if __name__ == "__main__":
    main()
