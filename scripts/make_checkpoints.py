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
    gptoss     GptOssForCausalLM in the release layout, BF16 only (gptoss-bf16): MXFP4 experts (U8 _blocks and
               _scales, BF16 _bias), attention sinks, q/k/v/o biases, router with bias, YaRN rope scaling (the
               release's rope settings, truncate false), a sliding layer and a full one, the window 20 positions (shorter
               than the 40-token prompt, not a multiple of the 16-token KV block), hidden 96, head_dim 12, 6 experts
               with 3 per token; reference written from the formulas (see gptoss_forward). Its seed is one whose
               prompts never bring the router within GPTOSS_MIN_MARGIN of a tie (the k-th and k+1-th logits).
Weights are scaled so activations keep unit size through the layers and logits spread with a standard deviation of
about 3 (a flat distribution would hide errors in the sampling tests).
"""

import json
import math
import os
import sys

import torch

from safetensors_file import write_safetensors_file

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


def rope_tables(a, n):
    """cos and sin [n, 1, head_dim] in float64 for positions 0..n-1, laid out for rotate (each half repeated)."""
    angles = torch.arange(n, dtype=torch.float64)[:, None] * rope_inv_freq(a)[None, :]
    cos = torch.cat((angles.cos(), angles.cos()), dim=-1)[:, None, :]
    sin = torch.cat((angles.sin(), angles.sin()), dim=-1)[:, None, :]
    return cos, sin


def forward(a, w, ids):
    """Logits [n, VOCAB] of a prompt run from position 0, in float64."""
    w = {k: v.to(torch.float64) for k, v in w.items()}
    H, KV, D = a["heads"], a["kv_heads"], a["head_dim"]
    n = len(ids)
    x = w["model.embed_tokens.weight"][torch.tensor(ids)]
    cos, sin = rope_tables(a, n)
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
    write_safetensors_file(path, {n: (dtype, t.shape, tensor_bytes(t, dtype)) for n, t in tensors.items()})


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


# ---- gpt-oss (release layout) ----

GPTOSS = dict(
    hidden=96, intermediate=96, layers=2, heads=6, kv_heads=2, head_dim=12, experts=6, per_tok=3, window=20,
    layer_types=["sliding_attention", "full_attention"], rope_theta=150000.0,
    rope_scaling={"rope_type": "yarn", "factor": 32.0, "beta_fast": 32.0, "beta_slow": 1.0,
                  "original_max_position_embeddings": 4096, "truncate": False},
    max_pos=131072, swiglu_limit=7.0, eps=1e-5,
)
GPTOSS_MIN_MARGIN = 0.05
GPTOSS_SEEDS = range(100, 400)
# E2M1 code -> value (bit 3 the sign).
FP4 = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0]


def mxfp4_random(g, experts, rows, cols, std):
    """Random MXFP4 weights of about the given std: uniform codes (std ~2.93), per-block scales around it."""
    nb = cols // 32
    blocks = torch.randint(0, 256, (experts, rows, nb, 16), generator=g, dtype=torch.int64).to(torch.uint8)
    base = 127 + round(math.log2(std / 2.93))
    scales = (base + torch.randint(-1, 2, (experts, rows, nb), generator=g)).to(torch.uint8)
    return blocks, scales


def mxfp4_dequant(blocks, scales):
    """[E, rows, nb, 16] codes and [E, rows, nb] scales -> float64 [E, rows, nb * 32]: element 2j is the low nibble
    of byte j, 2j + 1 the high one; value = E2M1 * 2^(scale - 127)."""
    lut = torch.tensor(FP4, dtype=torch.float64)
    b = blocks.to(torch.int64)
    lo, hi = lut[b & 15], lut[b >> 4]
    vals = torch.stack((lo, hi), dim=-1).reshape(*b.shape[:-1], 32)
    vals = vals * torch.pow(2.0, scales.to(torch.float64) - 127.0)[..., None]
    return vals.reshape(b.shape[0], b.shape[1], -1)


def gptoss_weights(seed):
    """BF16 tensors (as float32 holding bf16 values) and the MXFP4 expert tensors, in the release's names."""
    a = GPTOSS
    g = torch.Generator().manual_seed(seed)

    def normal(*shape, std):
        return (torch.randn(*shape, generator=g, dtype=torch.float32) * std).to(torch.bfloat16).to(torch.float32)

    Hd, NH, KV, D, E, I = a["hidden"], a["heads"], a["kv_heads"], a["head_dim"], a["experts"], a["intermediate"]
    w = {"model.embed_tokens.weight": normal(VOCAB, Hd, std=1.0)}
    u8 = {}
    for i in range(a["layers"]):
        p = f"model.layers.{i}."
        w[p + "input_layernorm.weight"] = 1.0 + normal(Hd, std=0.1)
        w[p + "self_attn.q_proj.weight"] = normal(NH * D, Hd, std=1.0 / math.sqrt(Hd))
        w[p + "self_attn.q_proj.bias"] = normal(NH * D, std=0.2)
        w[p + "self_attn.k_proj.weight"] = normal(KV * D, Hd, std=1.0 / math.sqrt(Hd))
        w[p + "self_attn.k_proj.bias"] = normal(KV * D, std=0.2)
        w[p + "self_attn.v_proj.weight"] = normal(KV * D, Hd, std=1.0 / math.sqrt(Hd))
        w[p + "self_attn.v_proj.bias"] = normal(KV * D, std=0.2)
        w[p + "self_attn.o_proj.weight"] = normal(Hd, NH * D, std=1.0 / math.sqrt(NH * D))
        w[p + "self_attn.o_proj.bias"] = normal(Hd, std=0.2)
        w[p + "self_attn.sinks"] = normal(NH, std=1.0)
        w[p + "post_attention_layernorm.weight"] = 1.0 + normal(Hd, std=0.1)
        w[p + "mlp.router.weight"] = normal(E, Hd, std=3.0 / math.sqrt(Hd))
        w[p + "mlp.router.bias"] = normal(E, std=0.5)
        # gate/up pre-activations with std ~3 (the scales round up), so the clamps at +-7 are reached now and then.
        u8[p + "mlp.experts.gate_up_proj_blocks"], u8[p + "mlp.experts.gate_up_proj_scales"] = mxfp4_random(
            g, E, 2 * I, Hd, 3.0 / math.sqrt(Hd))
        w[p + "mlp.experts.gate_up_proj_bias"] = normal(E, 2 * I, std=0.5)
        u8[p + "mlp.experts.down_proj_blocks"], u8[p + "mlp.experts.down_proj_scales"] = mxfp4_random(
            g, E, Hd, I, 0.3 / math.sqrt(I))
        w[p + "mlp.experts.down_proj_bias"] = normal(E, Hd, std=0.2)
    w["model.norm.weight"] = 1.0 + normal(Hd, std=0.1)
    w["lm_head.weight"] = normal(VOCAB, Hd, std=3.0 / math.sqrt(Hd))
    # The reference sees exactly the stored values (1 + x is rounded to bf16 again).
    return {k: v.to(torch.bfloat16).to(torch.float32) for k, v in w.items()}, u8


def gptoss_inv_freq():
    """YaRN inverse frequencies and concentration in float64 (the gpt-oss reference's formulas; truncate false: the
    ramp bounds are not rounded)."""
    a, rs = GPTOSS, GPTOSS["rope_scaling"]
    D, base, factor, L0 = a["head_dim"], a["rope_theta"], rs["factor"], rs["original_max_position_embeddings"]
    half = D // 2
    freq = base ** (torch.arange(0, D, 2, dtype=torch.float64) / D)
    low = half * math.log(L0 / (rs["beta_fast"] * 2 * math.pi)) / math.log(base)
    high = half * math.log(L0 / (rs["beta_slow"] * 2 * math.pi)) / math.log(base)
    ramp = ((torch.arange(half, dtype=torch.float64) - low) / (high - low)).clamp(0, 1)
    mask = 1 - ramp
    inv = (1.0 / (factor * freq)) * (1 - mask) + (1.0 / freq) * mask
    return inv, 0.1 * math.log(factor) + 1.0


def gptoss_forward(w, u8, ids, stats=None):
    """Logits [n, VOCAB] in float64 of a prompt from position 0; stats (a dict) collects the smallest router margin
    and how often the SwiGLU clamps bit."""
    a = GPTOSS
    w = {k: v.to(torch.float64) for k, v in w.items()}
    Hd, NH, KV, D, E, K, I = (a["hidden"], a["heads"], a["kv_heads"], a["head_dim"], a["experts"], a["per_tok"],
                              a["intermediate"])
    lim = a["swiglu_limit"]
    n = len(ids)

    def norm(x, weight):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + a["eps"]) * weight

    inv, conc = gptoss_inv_freq()
    ang = torch.arange(n, dtype=torch.float64)[:, None] * inv[None, :]
    cos, sin = (ang.cos() * conc)[:, None, :], (ang.sin() * conc)[:, None, :]

    def rope(x):  # NeoX halves
        x1, x2 = x[..., : D // 2], x[..., D // 2:]
        return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1)

    x = w["model.embed_tokens.weight"][torch.tensor(ids)]
    qi = torch.arange(n)[:, None]
    kj = torch.arange(n)[None, :]
    for i in range(a["layers"]):
        p = f"model.layers.{i}."
        h = norm(x, w[p + "input_layernorm.weight"])
        q = (h @ w[p + "self_attn.q_proj.weight"].T + w[p + "self_attn.q_proj.bias"]).view(n, NH, D)
        k = (h @ w[p + "self_attn.k_proj.weight"].T + w[p + "self_attn.k_proj.bias"]).view(n, KV, D)
        v = (h @ w[p + "self_attn.v_proj.weight"].T + w[p + "self_attn.v_proj.bias"]).view(n, KV, D)
        q, k = rope(q), rope(k)
        group = NH // KV
        k = k[:, :, None, :].expand(n, KV, group, D).reshape(n, NH, D)
        v = v[:, :, None, :].expand(n, KV, group, D).reshape(n, NH, D)
        allowed = kj <= qi
        if a["layer_types"][i] == "sliding_attention":
            allowed = allowed & (kj > qi - a["window"])
        scores = torch.einsum("qhd,khd->hqk", q, k) / math.sqrt(D)
        scores = scores.masked_fill(~allowed[None], float("-inf"))
        sinks = w[p + "self_attn.sinks"][:, None, None].expand(NH, n, 1)
        probs = torch.cat((scores, sinks), dim=-1).softmax(-1)[..., :-1]  # the sink column joins, then is dropped
        attn = torch.einsum("hqk,khd->qhd", probs, v).reshape(n, NH * D)
        x = x + attn @ w[p + "self_attn.o_proj.weight"].T + w[p + "self_attn.o_proj.bias"]
        h = norm(x, w[p + "post_attention_layernorm.weight"])
        logits = h @ w[p + "mlp.router.weight"].T + w[p + "mlp.router.bias"]
        top = logits.topk(K + 1, dim=-1, sorted=True)
        if stats is not None:
            stats["margin"] = min(stats.get("margin", float("inf")), float((top.values[:, K - 1] - top.values[:, K]).min()))
        sel, weights = top.indices[:, :K], top.values[:, :K].softmax(-1)
        w1 = mxfp4_dequant(u8[p + "mlp.experts.gate_up_proj_blocks"], u8[p + "mlp.experts.gate_up_proj_scales"])
        w2 = mxfp4_dequant(u8[p + "mlp.experts.down_proj_blocks"], u8[p + "mlp.experts.down_proj_scales"])
        b1, b2 = w[p + "mlp.experts.gate_up_proj_bias"], w[p + "mlp.experts.down_proj_bias"]
        moe = torch.zeros_like(x)
        for t in range(n):
            for r in range(K):
                e = int(sel[t, r])
                hh = w1[e] @ h[t] + b1[e]
                gate, up = hh[0::2], hh[1::2]  # interleaved rows: 2i gate, 2i + 1 up
                if stats is not None:
                    stats["clamped"] = stats.get("clamped", 0) + int((gate > lim).sum() + (up.abs() > lim).sum())
                    stats["activations"] = stats.get("activations", 0) + 2 * I
                gate = gate.clamp(max=lim)
                up = up.clamp(-lim, lim)
                act = (up + 1) * gate * torch.sigmoid(1.702 * gate)
                moe[t] += weights[t, r] * (w2[e] @ act + b2[e])
        x = x + moe
    x = norm(x, w["model.norm.weight"])
    return x @ w["lm_head.weight"].T


def gptoss_config():
    a = GPTOSS
    return {
        "architectures": ["GptOssForCausalLM"], "model_type": "gpt_oss", "vocab_size": VOCAB,
        "hidden_size": a["hidden"], "intermediate_size": a["intermediate"], "num_hidden_layers": a["layers"],
        "num_attention_heads": a["heads"], "num_key_value_heads": a["kv_heads"], "head_dim": a["head_dim"],
        "num_local_experts": a["experts"], "num_experts_per_tok": a["per_tok"], "experts_per_token": a["per_tok"],
        "layer_types": a["layer_types"], "sliding_window": a["window"], "max_position_embeddings": a["max_pos"],
        "initial_context_length": 4096, "rms_norm_eps": a["eps"], "rope_theta": a["rope_theta"],
        "rope_scaling": a["rope_scaling"], "swiglu_limit": a["swiglu_limit"], "attention_bias": True,
        "attention_dropout": 0.0, "hidden_act": "silu", "tie_word_embeddings": False, "router_aux_loss_coef": 0.9,
        "output_router_logits": False, "use_cache": True, "torch_dtype": "bfloat16",
        "quantization_config": {"modules_to_not_convert": ["model.layers.*.self_attn", "model.layers.*.mlp.router",
                                                           "model.embed_tokens", "lm_head"], "quant_method": "mxfp4"},
        "bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 0,
    }


def write_gptoss(out):
    """Writes out/gptoss-bf16 (two shards with an index, as released) and returns its manifest entry."""
    for seed in GPTOSS_SEEDS:
        w, u8 = gptoss_weights(seed)
        stats = {}
        logits = [gptoss_forward(w, u8, ids, stats) for ids in prompts()]
        if stats["margin"] >= GPTOSS_MIN_MARGIN:
            break
    else:
        sys.exit("gptoss: no seed keeps the router away from ties")
    name = "gptoss-bf16"
    d = os.path.join(out, name)
    os.makedirs(os.path.join(d, "golden"), exist_ok=True)
    names = sorted(list(w) + list(u8))
    first = [n for n in names if n.startswith("model.layers.0.") or n == "model.embed_tokens.weight"]
    parts = {"model-00000-of-00001.safetensors": first,
             "model-00001-of-00001.safetensors": [n for n in names if n not in first]}
    weight_map = {}
    for file, part in parts.items():
        write_safetensors_mixed(os.path.join(d, file), {n: w[n] for n in part if n in w},
                                {n: u8[n] for n in part if n in u8})
        weight_map.update({n: file for n in part})
    with open(os.path.join(d, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {}, "weight_map": dict(sorted(weight_map.items()))}, f, indent=2)
        f.write("\n")
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(gptoss_config(), f, indent=2)
        f.write("\n")
    cases = [{"input_ids": ids, "positions": list(range(len(ids))),
              "logits": [[float(f"{v:.9g}") for v in row] for row in lg.tolist()]} for ids, lg in zip(prompts(), logits)]
    with open(os.path.join(d, "golden", "logits.json"), "w") as f:
        json.dump({"cases": cases}, f, separators=(",", ":"))
        f.write("\n")
    spread = float(torch.cat(logits).std())
    print(f"{name}: seed {seed}, logit std {spread:.2f}, smallest router margin {stats['margin']:.3f}, "
          f"clamped {stats['clamped']}/{stats['activations']} activations")
    return {"name": name, "architecture": "GptOssForCausalLM", "dtype": "bf16",
            "features": ["gqa", "moe_mxfp4", "attention_sinks", "sliding_window", "rope_scaling_yarn", "qkvo_bias",
                         "untied", "sharded"],
            "logit_std": round(spread, 3), "seed": seed, "router_margin": round(stats["margin"], 4)}


def write_safetensors_mixed(path, bf16, u8):
    """A safetensors file of BF16 tensors (float values that are bf16) and U8 tensors."""
    tensors = {n: ("BF16", t.shape, tensor_bytes(t, "BF16")) for n, t in bf16.items()}
    tensors.update({n: ("U8", t.shape, t.contiguous().numpy().tobytes()) for n, t in u8.items()})
    write_safetensors_file(path, tensors)


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
    manifest.append(write_gptoss(out))
    with open(os.path.join(out, "manifest.json"), "w") as f:
        json.dump({"checkpoints": manifest}, f, indent=2)
        f.write("\n")


if __name__ == "__main__":
    main()
