#!/usr/bin/python3
"""Writes two random EAGLE-3 heads in the public checkpoint layout for the random target
tests/fixtures/checkpoints/llama3-fp32, and the head's proposals and logits computed in float64 by a plain torch
forward, for ffi/tests/test_eagle3.c (the native head against an independent reference).

Run with Debian's python (torch 1.13; transformers and safetensors are not needed):
    /usr/bin/python3 scripts/eagle3_reference.py OUT_DIR
The committed copy lives in tests/fixtures/eagle3/. Deterministic: fixed seeds give byte-identical files.

Output:
    OUT_DIR/head-a/{config.json, model.safetensors}  hidden 32 (the target's), draft vocabulary 64 with d2t, the
                                                     target's embeddings, default tapped layers, no RoPE scaling
    OUT_DIR/head-b/{config.json, model.safetensors}  hidden 24, its own embed_tokens, the full vocabulary,
                                                     eagle_aux_hidden_state_layer_ids [0, 1, 1], llama3 RoPE
    OUT_DIR/reference.json  {"prompt": [...], "heads": {"head-a": {"accepted": id, "rounds": [{"logits": [draft
                            vocab floats], "proposed": target id}, ...]}, ...}}

What the reference computes (the EAGLE-3 draft step as vLLM and SGLang run it):
  - the target runs the prompt (positions 0..n-1) and keeps its residual stream at the input of the tapped layers
    (0: the embeddings; 2: after the last of its two layers); "accepted" is its greedy token a after the prompt;
  - g_p = fc(concat of the three taps at p); the head caches keys/values of the pairs (g_{p-1}, token p) at RoPE
    position p - 1 for p = 1..n-1; round 0 feeds (g_{n-1}, a) at position n - 1; round j feeds (the previous round's
    pre-norm hidden state, the previous proposal) at position n - 1 + j;
  - one decoder layer: x = [input_layernorm(embedding) | hidden_norm(hidden)], attention with its own cache, residual
    from the fed hidden state, post_attention_layernorm, SiLU MLP, residual; logits = lm_head(norm(h)); the proposal
    is d2t-mapped argmax over the draft vocabulary.
"""

import json
import math
import os
import struct
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_checkpoints import rope_inv_freq, rope_tables, rotate  # noqa: E402
from safetensors_file import write_safetensors_file  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGET = os.path.join(ROOT, "tests/fixtures/checkpoints/llama3-fp32")
ROUNDS = 3
PROMPT = [5, 17, 42, 8, 91, 33, 60, 2, 77, 14, 50]

HEADS = {
    "head-a": dict(hidden=32, inter=48, heads=4, kv_heads=2, head_dim=8, draft_vocab=64, own_embed=False, ids=None,
                   rope_theta=10000.0, rope_scaling=None, seed=21),
    "head-b": dict(hidden=24, inter=40, heads=3, kv_heads=1, head_dim=8, draft_vocab=96, own_embed=True,
                   ids=[0, 1, 1], rope_theta=500000.0,
                   rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                 "high_freq_factor": 4.0, "original_max_position_embeddings": 16}, seed=22),
}
HEAD_EPS = 1e-5


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        assert t["dtype"] == "F32", name
        a, b = t["data_offsets"]
        out[name] = torch.frombuffer(bytearray(data[a:b]), dtype=torch.float32).reshape(t["shape"]).clone()
    return out


def encoded(t):
    """(dtype, shape, bytes) of t in the layout of the released heads: I64 d2t, BOOL t2d, F32 weights."""
    if t.dtype == torch.int64:
        return "I64", t.shape, t.contiguous().numpy().astype("<i8").tobytes()
    if t.dtype == torch.bool:
        return "BOOL", t.shape, t.contiguous().numpy().astype("u1").tobytes()
    return "F32", t.shape, t.contiguous().to(torch.float32).numpy().astype("<f4").tobytes()


def write_safetensors(path, tensors):
    write_safetensors_file(path, {n: encoded(t) for n, t in tensors.items()})


def rms_norm(x, weight, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight


def load_target():
    with open(os.path.join(TARGET, "config.json")) as f:
        cfg = json.load(f)
    with open(os.path.join(TARGET, "model.safetensors.index.json")) as f:
        files = sorted(set(json.load(f)["weight_map"].values()))
    w = {}
    for name in files:
        w.update(read_safetensors(os.path.join(TARGET, name)))
    return cfg, {k: v.to(torch.float64) for k, v in w.items()}


def target_forward(cfg, w, ids):
    """Logits [n, V] and the residual stream at the input of every layer (index L: after the last), float64."""
    H, KV, D, eps = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"], cfg["rms_norm_eps"]
    a = {"head_dim": D, "rope_theta": cfg["rope_theta"], "rope_scaling": cfg.get("rope_scaling")}
    n = len(ids)
    x = w["model.embed_tokens.weight"][torch.tensor(ids)]
    cos, sin = rope_tables(a, n)
    causal = torch.full((n, n), float("-inf"), dtype=torch.float64).triu(1)
    resid = [x]
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        h = rms_norm(x, w[p + "input_layernorm.weight"], eps)
        q = (h @ w[p + "self_attn.q_proj.weight"].T).view(n, H, D)
        k = (h @ w[p + "self_attn.k_proj.weight"].T).view(n, KV, D)
        v = (h @ w[p + "self_attn.v_proj.weight"].T).view(n, KV, D)
        q, k = rotate(q, cos, sin), rotate(k, cos, sin)
        group = H // KV
        k = k[:, :, None, :].expand(n, KV, group, D).reshape(n, H, D)
        v = v[:, :, None, :].expand(n, KV, group, D).reshape(n, H, D)
        scores = torch.einsum("qhd,khd->hqk", q, k) / math.sqrt(D) + causal
        attn = torch.einsum("hqk,khd->qhd", scores.softmax(-1), v).reshape(n, H * D)
        x = x + attn @ w[p + "self_attn.o_proj.weight"].T
        h = rms_norm(x, w[p + "post_attention_layernorm.weight"], eps)
        x = x + (torch.nn.functional.silu(h @ w[p + "mlp.gate_proj.weight"].T) * (h @ w[p + "mlp.up_proj.weight"].T)) \
            @ w[p + "mlp.down_proj.weight"].T
        resid.append(x)
    logits = rms_norm(x, w["model.norm.weight"], eps) @ w["lm_head.weight"].T
    return logits, resid


def make_head(spec, vocab, target_hidden):
    g = torch.Generator().manual_seed(spec["seed"])
    Hd, I, QD, KD = spec["hidden"], spec["inter"], spec["heads"] * spec["head_dim"], spec["kv_heads"] * spec["head_dim"]

    def u(*shape, scale, center=0.0):
        return center + scale * (torch.rand(*shape, generator=g, dtype=torch.float32) * 2 - 1)

    w = {
        "fc.weight": u(Hd, 3 * target_hidden, scale=1.0 / math.sqrt(3 * target_hidden)),
        "midlayer.input_layernorm.weight": u(Hd, scale=0.2, center=1.0),
        "midlayer.hidden_norm.weight": u(Hd, scale=0.2, center=1.0),
        "midlayer.self_attn.q_proj.weight": u(QD, 2 * Hd, scale=1.5 / math.sqrt(2 * Hd)),
        "midlayer.self_attn.k_proj.weight": u(KD, 2 * Hd, scale=1.5 / math.sqrt(2 * Hd)),
        "midlayer.self_attn.v_proj.weight": u(KD, 2 * Hd, scale=1.0 / math.sqrt(2 * Hd)),
        "midlayer.self_attn.o_proj.weight": u(Hd, QD, scale=1.0 / math.sqrt(QD)),
        "midlayer.post_attention_layernorm.weight": u(Hd, scale=0.2, center=1.0),
        "midlayer.mlp.gate_proj.weight": u(I, Hd, scale=1.0 / math.sqrt(Hd)),
        "midlayer.mlp.up_proj.weight": u(I, Hd, scale=1.0 / math.sqrt(Hd)),
        "midlayer.mlp.down_proj.weight": u(Hd, I, scale=1.0 / math.sqrt(I)),
        "norm.weight": u(Hd, scale=0.2, center=1.0),
        "lm_head.weight": u(spec["draft_vocab"], Hd, scale=3.0 / math.sqrt(Hd)),
    }
    if spec["own_embed"]:
        w["embed_tokens.weight"] = u(vocab, Hd, scale=1.0)
    if spec["draft_vocab"] < vocab:
        # Draft id i is a random subset's i-th target id (sorted); t2d marks the subset, as the released heads do.
        keep = torch.randperm(vocab, generator=g)[: spec["draft_vocab"]].sort().values
        w["d2t"] = keep - torch.arange(spec["draft_vocab"])
        t2d = torch.zeros(vocab, dtype=torch.bool)
        t2d[keep] = True
        w["t2d"] = t2d
    return w


def head_config(spec, vocab):
    cfg = {
        "architectures": ["LlamaForCausalLMEagle3"], "model_type": "llama", "hidden_size": spec["hidden"],
        "intermediate_size": spec["inter"], "num_hidden_layers": 1, "num_attention_heads": spec["heads"],
        "num_key_value_heads": spec["kv_heads"], "head_dim": spec["head_dim"], "hidden_act": "silu",
        "rms_norm_eps": HEAD_EPS, "vocab_size": vocab, "draft_vocab_size": spec["draft_vocab"],
        "max_position_embeddings": 64, "rope_theta": spec["rope_theta"], "rope_scaling": spec["rope_scaling"],
        "tie_word_embeddings": False, "attention_bias": False, "mlp_bias": False, "torch_dtype": "float32",
    }
    if spec["ids"] is not None:
        cfg["eagle_config"] = {"eagle_aux_hidden_state_layer_ids": spec["ids"], "use_aux_hidden_state": True}
    return cfg


def head_reference(spec, hw, tcfg, tw, ids):
    L, V = tcfg["num_hidden_layers"], tcfg["vocab_size"]
    taps = [min(max(t, 0), L) for t in (2, L // 2, L - 3)] if spec["ids"] is None else [j + 1 for j in spec["ids"]]
    logits_t, resid = target_forward(tcfg, tw, ids)
    accepted = int(logits_t[-1].argmax())
    w = {k: v.to(torch.float64) for k, v in hw.items() if v.is_floating_point()}
    feats = torch.cat([resid[t] for t in taps], dim=-1) @ w["fc.weight"].T  # g_p, [n, hidden]
    embed = w["embed_tokens.weight"] if spec["own_embed"] else tw["model.embed_tokens.weight"]
    d2t = hw["d2t"] if "d2t" in hw else torch.zeros(spec["draft_vocab"], dtype=torch.int64)
    NH, KV, D = spec["heads"], spec["kv_heads"], spec["head_dim"]
    inv = rope_inv_freq({"head_dim": D, "rope_theta": spec["rope_theta"], "rope_scaling": spec["rope_scaling"]})
    keys, values = [], []

    def layer(hidden, token, pos):
        x = torch.cat((rms_norm(embed[token], w["midlayer.input_layernorm.weight"], HEAD_EPS),
                       rms_norm(hidden, w["midlayer.hidden_norm.weight"], HEAD_EPS)))
        ang = pos * inv
        cos, sin = torch.cat((ang.cos(), ang.cos())), torch.cat((ang.sin(), ang.sin()))
        q = rotate((w["midlayer.self_attn.q_proj.weight"] @ x).view(NH, D), cos, sin)
        keys.append(rotate((w["midlayer.self_attn.k_proj.weight"] @ x).view(KV, D), cos, sin))
        values.append((w["midlayer.self_attn.v_proj.weight"] @ x).view(KV, D))
        k, v = torch.stack(keys), torch.stack(values)  # [m, KV, D]
        out = []
        for h in range(NH):
            kv = h // (NH // KV)
            p = ((k[:, kv, :] @ q[h]) / math.sqrt(D)).softmax(0)
            out.append(p @ v[:, kv, :])
        r = hidden + w["midlayer.self_attn.o_proj.weight"] @ torch.cat(out)
        m = rms_norm(r, w["midlayer.post_attention_layernorm.weight"], HEAD_EPS)
        r = r + w["midlayer.mlp.down_proj.weight"] @ (torch.nn.functional.silu(w["midlayer.mlp.gate_proj.weight"] @ m)
                                                     * (w["midlayer.mlp.up_proj.weight"] @ m))
        return r, w["lm_head.weight"] @ rms_norm(r, w["norm.weight"], HEAD_EPS)

    n = len(ids)
    for p in range(1, n):
        layer(feats[p - 1], ids[p], p - 1)
    rounds = []
    hidden, token = feats[n - 1], accepted
    for j in range(ROUNDS):
        hidden, logits = layer(hidden, token, n - 1 + j)
        draft = int(logits.argmax())
        token = draft + int(d2t[draft])
        rounds.append({"logits": [float(f"{v:.9g}") for v in logits.tolist()], "proposed": token})
    return {"accepted": accepted, "rounds": rounds}


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: eagle3_reference.py OUT_DIR")
    out = sys.argv[1]
    tcfg, tw = load_target()
    result = {"target": "tests/fixtures/checkpoints/llama3-fp32", "prompt": PROMPT, "heads": {}}
    for name, spec in HEADS.items():
        d = os.path.join(out, name)
        os.makedirs(d, exist_ok=True)
        hw = make_head(spec, tcfg["vocab_size"], tcfg["hidden_size"])
        write_safetensors(os.path.join(d, "model.safetensors"), hw)
        with open(os.path.join(d, "config.json"), "w") as f:
            json.dump(head_config(spec, tcfg["vocab_size"]), f, indent=2)
            f.write("\n")
        result["heads"][name] = head_reference(spec, hw, tcfg, tw, PROMPT)
        print(name, "accepted", result["heads"][name]["accepted"], "proposals",
              [r["proposed"] for r in result["heads"][name]["rounds"]])
    with open(os.path.join(out, "reference.json"), "w") as f:
        json.dump(result, f, separators=(",", ":"))
        f.write("\n")


if __name__ == "__main__":
    main()
