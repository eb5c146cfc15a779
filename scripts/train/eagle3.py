"""Train an EAGLE-3 draft head for one of rill's bundled models, in the public checkpoint layout.

    /usr/bin/python3 scripts/train/eagle3.py --model harmony    # -> models/rill-tiny-harmony-eagle3/
    /usr/bin/python3 scripts/train/eagle3.py --model chatml     # -> models/rill-tiny-chatml-eagle3/

Debian's python3 with python3-torch 1.13, python3-regex and libopenblas0-openmp (the reference BLAS is ~15x slower);
two threads, about 17 minutes per model (2000 steps over 2400 prompts: on harmony's held-out prompts 3.66 accepted
tokens per step at k = 3, where 400 steps over 1200 stopped at 2.85). Seeded: data (random.Random), weights and batch
order (torch.manual_seed); float results can differ in the last bits across BLAS builds and thread counts.

Data: conversations from data.py drawn with a seed the model was not trained on, rendered as rill renders prompts,
and completed by the model itself (greedy, as rill decodes at temperature 0): the head learns the model's own
outputs. The target runs each transcript once (no grad) and gives, per position, its residual stream at the tapped
layers and its next-token distribution.

The head (eagle3_head.h): fc over the concatenated taps; one decoder layer fed [input_layernorm(embedding of the next
token) | hidden_norm(hidden)]; norm; lm_head over a draft vocabulary of the 256 tokens most frequent in the model's own
completions, with d2t mapping them to target ids (t2d marks them); the target's embeddings (no embed_tokens: the
hidden sizes match). Small on purpose: on a 4-layer target a head as wide as a target layer costs most of a target
step over three proposals. Tapped layers are pinned in eagle_config.eagle_aux_hidden_state_layer_ids as
target layer outputs (0, 2, 3): early, middle and the last layer's output.

Training matches what rill_step runs (training-time test): round 0 is the layer over every pair (g_{p-1}, token p)
with causal attention; round j > 0 of the chain starting at pair i feeds round j - 1's pre-norm hidden state with the
token j positions later, and attends to round-0 keys 0..i plus its own chain's keys of rounds 1..j (the head's KV
slots P + 1 .. P + j during a step). Each round's loss is the cross-entropy to the target's distribution at the
position it predicts (restricted to the draft vocabulary and renormalised), on completion positions only, rounds
weighted 1, 0.8, 0.64.

Output: models/<name>-eagle3/{config.json, model.safetensors (F32, with d2t and t2d), README.md} with
held-out figures: per-round greedy agreement with the model and the mean accepted tokens per step at k = 2, 3, 4
(acceptance stops at the first wrong draft).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import struct
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import bpe as bpe_mod  # noqa: E402
import data  # noqa: E402
from evaluate import greedy_batch  # noqa: E402
from model import Config, TinyLlama, repeat_kv, rotate_half  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
SETTINGS = {
    "harmony": dict(name="rill-tiny-harmony", seed=1234),
    "chatml": dict(name="rill-tiny-chatml", seed=4321),
}
LAYER_IDS = [0, 2, 3]  # target layer outputs: the residual stream at the input of layers 1, 3 and 4 (after the last)
# The head is sized to cost a fraction of the 4-layer target per proposal: 3 query heads sharing 1 KV head of 32,
# SwiGLU 256, and an lm_head over the DRAFT_VOCAB tokens the model emits most (d2t maps them to target ids).
HEADS, KV_HEADS, HEAD_DIM, INTER, DRAFT_VOCAB = 3, 1, 32, 256, 256
ROUNDS = 3
ROUND_WEIGHTS = [1.0, 0.8, 0.64]
EPS = 1e-5


def read_safetensors(path: str) -> dict[str, torch.Tensor]:
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        blob = f.read()
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        assert t["dtype"] == "F32", name
        a, b = t["data_offsets"]
        out[name] = torch.frombuffer(bytearray(blob[a:b]), dtype=torch.float32).reshape(t["shape"]).clone()
    return out


def write_safetensors(state: dict[str, torch.Tensor], path: str) -> None:
    header: dict = {"__metadata__": {"format": "pt"}}
    blobs, off = [], 0
    for name in sorted(state):
        t = state[name].detach().contiguous()
        if t.dtype == torch.int64:
            b, dtype = t.numpy().astype("<i8").tobytes(), "I64"
        elif t.dtype == torch.bool:
            b, dtype = t.numpy().astype("u1").tobytes(), "BOOL"
        else:
            b, dtype = t.to(torch.float32).numpy().astype("<f4").tobytes(), "F32"
        header[name] = {"dtype": dtype, "shape": list(t.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header, separators=(",", ":")).encode("utf-8")
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def load_target(model_dir: str):
    with open(os.path.join(model_dir, "config.json")) as f:
        c = json.load(f)
    cfg = Config(vocab_size=c["vocab_size"], hidden_size=c["hidden_size"], num_hidden_layers=c["num_hidden_layers"],
                 num_attention_heads=c["num_attention_heads"], num_key_value_heads=c["num_key_value_heads"],
                 intermediate_size=c["intermediate_size"], max_position_embeddings=c["max_position_embeddings"],
                 rms_norm_eps=c["rms_norm_eps"], rope_theta=c["rope_theta"])
    model = TinyLlama(cfg)
    model.load_state_dict(read_safetensors(os.path.join(model_dir, "model.safetensors")))
    model.eval()
    with open(os.path.join(model_dir, "tokenizer.json")) as f:
        tj = json.load(f)
    specials = [t["content"] for t in sorted(tj["added_tokens"], key=lambda t: t["id"])]
    tok = bpe_mod.BPE([tuple(m.split(" ")) for m in tj["model"]["merges"]], specials)
    eos = c["eos_token_id"] if isinstance(c["eos_token_id"], list) else [c["eos_token_id"]]
    return model, cfg, tok, set(eos), c.get("pad_token_id", eos[0])


@torch.no_grad()
def transcripts(model, tok, fmt: str, seed: int, n: int, stop: set[int], pad: int, batch: int) -> list[list[int]]:
    """n prompts drawn with `seed`, each followed by the model's greedy completion: [(prompt ids, completion ids)]."""
    r = random.Random(seed)
    prompts = [tok.encode(data.render(data.sample_conv(r, fmt), fmt)[0]) for _ in range(n)]
    out = []
    for i in range(0, n, batch):
        part = prompts[i:i + batch]
        for p, c in zip(part, greedy_batch(model, part, stop, pad, max_new=96)):
            out.append((p, c))
    return out


@torch.no_grad()
def target_pass(model, ids: torch.Tensor, mask: torch.Tensor):
    """Right-padded batch [B, T]: taps [B, T, 3H] (residual stream at the input of layers j + 1) and the target's
    log-probabilities [B, T, V] of the token after each position."""
    b, t = ids.shape
    pos = torch.arange(t).unsqueeze(0).expand(b, t)
    freqs = pos.unsqueeze(-1).to(torch.float32) * model.inv_freq
    emb = torch.cat([freqs, freqs], dim=-1)
    cos, sin = emb.cos().unsqueeze(1), emb.sin().unsqueeze(1)
    causal = torch.arange(t).unsqueeze(0) <= torch.arange(t).unsqueeze(1)
    allowed = causal.unsqueeze(0).unsqueeze(0) & (mask == 1).unsqueeze(1).unsqueeze(1)
    x = model.model.embed_tokens(ids)
    resid = [x]
    for layer, (pk, pv) in zip(model.model.layers, model.empty_past(b)):
        x, _, _ = layer(x, cos, sin, allowed, pk, pv)
        resid.append(x)
    logp = F.log_softmax(model.lm_head(model.model.norm(x)), dim=-1)
    return torch.cat([resid[j + 1] for j in LAYER_IDS], dim=-1), logp


class RMSNorm(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + EPS) * self.weight


class Head(nn.Module):
    def __init__(self, hidden: int, inter: int, heads: int, kv_heads: int, head_dim: int, keep: torch.Tensor,
                 theta: float):
        super().__init__()
        self.register_buffer("keep", keep, persistent=False)  # draft id -> target id, increasing
        vocab = len(keep)
        self.h, self.kv, self.d = heads, kv_heads, head_dim
        self.fc = nn.Linear(3 * hidden, hidden, bias=False)
        self.input_layernorm = RMSNorm(hidden)
        self.hidden_norm = RMSNorm(hidden)
        self.q_proj = nn.Linear(2 * hidden, heads * head_dim, bias=False)
        self.k_proj = nn.Linear(2 * hidden, kv_heads * head_dim, bias=False)
        self.v_proj = nn.Linear(2 * hidden, kv_heads * head_dim, bias=False)
        self.o_proj = nn.Linear(heads * head_dim, hidden, bias=False)
        self.post_attention_layernorm = RMSNorm(hidden)
        self.gate_proj = nn.Linear(hidden, inter, bias=False)
        self.up_proj = nn.Linear(hidden, inter, bias=False)
        self.down_proj = nn.Linear(inter, hidden, bias=False)
        self.norm = RMSNorm(hidden)
        self.lm_head = nn.Linear(hidden, vocab, bias=False)
        inv = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim))
        self.register_buffer("inv_freq", inv, persistent=False)

    def rope(self, x, pos):
        freqs = pos.unsqueeze(-1).to(torch.float32) * self.inv_freq
        emb = torch.cat([freqs, freqs], dim=-1).unsqueeze(1)  # [B, 1, N, D]
        return x * emb.cos() + rotate_half(x) * emb.sin()

    def qkv(self, emb, hidden, pos):
        b, n, _ = hidden.shape
        x = torch.cat([self.input_layernorm(emb), self.hidden_norm(hidden)], dim=-1)
        q = self.rope(self.q_proj(x).view(b, n, self.h, self.d).transpose(1, 2), pos)
        k = self.rope(self.k_proj(x).view(b, n, self.kv, self.d).transpose(1, 2), pos)
        v = self.v_proj(x).view(b, n, self.kv, self.d).transpose(1, 2)
        return q, repeat_kv(k, self.h // self.kv), repeat_kv(v, self.h // self.kv)

    def finish(self, hidden, attn):
        b, _, n, _ = attn.shape
        r = hidden + self.o_proj(attn.transpose(1, 2).reshape(b, n, self.h * self.d))
        m = self.post_attention_layernorm(r)
        return r + self.down_proj(F.silu(self.gate_proj(m)) * self.up_proj(m))

    def logits(self, r):
        return self.lm_head(self.norm(r))

    def forward(self, embed, taps, ids):
        """Rounds 0..ROUNDS-1 over pairs i = 0..T-2 (pair i: features of position i, token i + 1, RoPE position i);
        round j of chain i feeds token i + 1 + j and predicts the token at i + 2 + j. Returns per-round pre-norm
        hidden states [B, T - 1, hidden] (rows past the sequence are garbage; the caller masks them)."""
        b, t, _ = taps.shape
        n = t - 1
        g = self.fc(taps[:, :n])
        pos = torch.arange(n).unsqueeze(0).expand(b, n)
        q0, k0, v0 = self.qkv(embed(ids[:, 1:]), g, pos)
        causal = torch.arange(n).unsqueeze(0) <= torch.arange(n).unsqueeze(1)  # [query i, key s]: s <= i
        scale = self.d ** -0.5
        s0 = torch.matmul(q0, k0.transpose(2, 3)) * scale
        hidden = self.finish(g, torch.matmul(s0.masked_fill(~causal, float("-inf")).softmax(-1), v0))
        out = [hidden]
        chain_k, chain_v = [], []
        for j in range(1, ROUNDS):
            nxt = torch.cat([ids[:, 1 + j:], ids.new_zeros(b, j)], dim=1)[:, :n]
            q, k, v = self.qkv(embed(nxt), hidden, pos + j)
            chain_k.append(k)
            chain_v.append(v)
            base = torch.matmul(q, k0.transpose(2, 3)).mul(scale).masked_fill(~causal, float("-inf"))
            diag = torch.stack([(q * ck).sum(-1) * scale for ck in chain_k], dim=-1)  # [B, H, N, j]
            p = torch.cat([base, diag], dim=-1).softmax(-1)
            attn = torch.matmul(p[..., :n], v0) + sum(p[..., n + r:n + r + 1] * cv for r, cv in enumerate(chain_v))
            hidden = self.finish(hidden, attn)
            out.append(hidden)
        return out


def collate(pairs):
    t = max(len(p) + len(c) for p, c in pairs)
    ids = torch.zeros(len(pairs), t, dtype=torch.long)
    mask = torch.zeros(len(pairs), t, dtype=torch.long)
    completion = torch.zeros(len(pairs), t, dtype=torch.bool)
    for i, (p, c) in enumerate(pairs):
        s = p + c
        ids[i, :len(s)] = torch.tensor(s)
        mask[i, :len(s)] = 1
        completion[i, len(p):len(s)] = True  # these tokens are the model's own outputs
    return ids, mask, completion


def round_losses(head, model, ids, mask, completion):
    """Per round: (soft cross-entropy sum, count, greedy agreements) over predicted tokens inside the completion."""
    taps, logp = target_pass(model, ids, mask)
    outs = head(model.model.embed_tokens, taps, ids)
    b, t = ids.shape
    res = []
    for j, hidden in enumerate(outs):
        # Row i predicts the token at i + 2 + j, whose distribution is the target's at position i + 1 + j; only rows
        # predicting a completion token pay for lm_head.
        lim = t - 2 - j
        if lim <= 0:
            res.append((torch.tensor(0.0), 0, 0))
            continue
        sel = completion[:, 2 + j:2 + j + lim] & (mask[:, 2 + j:2 + j + lim] == 1)
        full = logp[:, 1 + j:1 + j + lim][sel]
        want = F.softmax(full[:, head.keep], dim=-1)
        got = F.log_softmax(head.logits(hidden[:, :lim][sel]), dim=-1)
        ce = -(want * got).sum(-1)
        agree = head.keep[got.argmax(-1)] == full.argmax(-1)
        res.append((ce.sum(), int(sel.sum()), int(agree.sum())))
    return res


@torch.no_grad()
def acceptance(head, model, pairs, batch: int) -> dict:
    """Mean accepted tokens per step at k = 2, 3, 4 when drafting at every completion position: 1 + the number of
    leading rounds whose greedy draft equals the model's token (chains longer than the trained rounds reuse the last
    round's hidden-state feedback, exactly as rill_step does)."""
    global ROUNDS
    head_rounds = ROUNDS
    totals = {k: [0, 0] for k in (2, 3, 4)}
    agree_rounds = [0] * 4
    count_rounds = [0] * 4
    ROUNDS = 4
    try:
        for i in range(0, len(pairs), batch):
            ids, mask, completion = collate(pairs[i:i + batch])
            taps, logp = target_pass(model, ids, mask)
            outs = head(model.model.embed_tokens, taps, ids)
            b, t = ids.shape
            n = t - 1
            ok = torch.zeros(4, b, n, dtype=torch.bool)
            for j, hidden in enumerate(outs):
                logits = head.logits(hidden)
                lim = max(0, t - 2 - j)
                nxt = torch.cat([ids[:, 2 + j:], ids.new_full((b, 2 + j), -1)], dim=1)[:, :n]
                ok[j] = (head.keep[logits.argmax(-1)] == nxt) & torch.cat([completion[:, 2 + j:], torch.zeros(b, 2 + j,
                                                                                             dtype=torch.bool)], 1)[:, :n]
                valid = torch.cat([completion[:, 2 + j:], torch.zeros(b, 2 + j, dtype=torch.bool)], 1)[:, :n]
                agree_rounds[j] += int(ok[j][:, :lim].sum())
                count_rounds[j] += int(valid[:, :lim].sum())
            # A step's chain starts at pair i (token i + 1 just accepted); it is drafted when token i + 2 is in the
            # completion.
            start = torch.cat([completion[:, 2:], torch.zeros(b, 2, dtype=torch.bool)], 1)[:, :n]
            for k in totals:
                run = torch.ones(b, n, dtype=torch.long)
                alive = torch.ones(b, n, dtype=torch.bool)
                for j in range(k):
                    alive = alive & ok[j]
                    run += alive.long()
                totals[k][0] += int(run[start].sum())
                totals[k][1] += int(start.sum())
    finally:
        ROUNDS = head_rounds
    return {
        "accepted_per_step": {k: totals[k][0] / max(1, totals[k][1]) for k in totals},
        "round_agreement": [agree_rounds[j] / max(1, count_rounds[j]) for j in range(4)],
        "steps": totals[2][1],
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", choices=sorted(SETTINGS), required=True)
    ap.add_argument("--prompts", type=int, default=2400)
    ap.add_argument("--held-out", type=int, default=150)
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--batch", type=int, default=12)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    s = SETTINGS[args.model]
    torch.set_num_threads(args.threads)
    model_dir = os.path.join(ROOT, "models", s["name"])
    out_dir = os.path.join(ROOT, "models", s["name"] + "-eagle3")
    os.makedirs(out_dir, exist_ok=True)
    model, cfg, tok, stop, pad = load_target(model_dir)
    for p in model.parameters():
        p.requires_grad_(False)

    t0 = time.time()
    # Seeds the model never saw: training used seed, seed + 3 (phase 2) and seed + 99 (evaluation).
    cache = os.path.join(ROOT, "scripts", "train", ".out", f"{s['name']}.eagle3-transcripts-{args.prompts}-{args.held_out}.json")
    if os.path.exists(cache):
        with open(cache) as f:
            train, held = json.load(f)
    else:
        train = transcripts(model, tok, args.model, s["seed"] + 1000, args.prompts, stop, pad, 64)
        held = transcripts(model, tok, args.model, s["seed"] + 2000, args.held_out, stop, pad, 64)
        os.makedirs(os.path.dirname(cache), exist_ok=True)
        with open(cache, "w") as f:
            json.dump([train, held], f)
    print(f"transcripts {len(train)} + {len(held)} held out in {time.time() - t0:.0f}s", flush=True)

    torch.manual_seed(s["seed"])
    H = cfg.hidden_size
    counts = torch.zeros(cfg.vocab_size, dtype=torch.long)
    for _, c in train:
        counts += torch.bincount(torch.tensor(c, dtype=torch.long), minlength=cfg.vocab_size)
    keep = counts.argsort(descending=True)[:DRAFT_VOCAB].sort().values
    coverage = float(counts[keep].sum()) / float(counts.sum())
    print(f"draft vocabulary {DRAFT_VOCAB}: {100 * coverage:.2f}% of completion tokens", flush=True)
    head = Head(H, INTER, HEADS, KV_HEADS, HEAD_DIM, keep, cfg.rope_theta)
    with torch.no_grad():
        for m in head.modules():
            if isinstance(m, nn.Linear):
                nn.init.normal_(m.weight, std=0.02)
        # lm_head and norm start as the target's read-out; the layer's outputs start small.
        head.lm_head.weight.copy_(model.lm_head.weight[keep])
        head.norm.weight.copy_(model.model.norm.weight)
        head.o_proj.weight.mul_(0.1)
        head.down_proj.weight.mul_(0.1)
    opt = torch.optim.AdamW(head.parameters(), lr=args.lr, weight_decay=0.0)
    rng = random.Random(s["seed"] + 1)
    order = list(range(len(train)))
    t0 = time.time()
    for step in range(args.steps):
        if step % (len(order) // args.batch) == 0:
            rng.shuffle(order)
        k = step % (len(order) // args.batch)
        batch = [train[i] for i in order[k * args.batch:(k + 1) * args.batch]]
        lr = args.lr * min(1.0, (step + 1) / 30) * 0.5 * (1 + math.cos(math.pi * step / args.steps))
        for group in opt.param_groups:
            group["lr"] = lr
        ids, mask, completion = collate(batch)
        res = round_losses(head, model, ids, mask, completion)
        loss = sum(ROUND_WEIGHTS[j] * ce / max(1, cnt) for j, (ce, cnt, _) in enumerate(res))
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(head.parameters(), 1.0)
        opt.step()
        if step % 50 == 0 or step == args.steps - 1:
            agree = " ".join(f"{a / max(1, c):.2f}" for _, c, a in res)
            print(f"step {step} loss {float(loss):.3f} agreement {agree} ({time.time() - t0:.0f}s)", flush=True)
    head.eval()
    report = acceptance(head, model, held, 16)
    print(json.dumps(report), flush=True)

    state = {
        "fc.weight": head.fc.weight,
        "midlayer.input_layernorm.weight": head.input_layernorm.weight,
        "midlayer.hidden_norm.weight": head.hidden_norm.weight,
        "midlayer.self_attn.q_proj.weight": head.q_proj.weight,
        "midlayer.self_attn.k_proj.weight": head.k_proj.weight,
        "midlayer.self_attn.v_proj.weight": head.v_proj.weight,
        "midlayer.self_attn.o_proj.weight": head.o_proj.weight,
        "midlayer.post_attention_layernorm.weight": head.post_attention_layernorm.weight,
        "midlayer.mlp.gate_proj.weight": head.gate_proj.weight,
        "midlayer.mlp.up_proj.weight": head.up_proj.weight,
        "midlayer.mlp.down_proj.weight": head.down_proj.weight,
        "norm.weight": head.norm.weight,
        "lm_head.weight": head.lm_head.weight,
        "d2t": keep - torch.arange(DRAFT_VOCAB),
        "t2d": torch.zeros(cfg.vocab_size, dtype=torch.bool).index_fill(0, keep, True),
    }
    write_safetensors(state, os.path.join(out_dir, "model.safetensors"))
    config = {
        "architectures": ["LlamaForCausalLMEagle3"], "model_type": "llama", "hidden_size": H,
        "intermediate_size": INTER, "num_hidden_layers": 1, "num_attention_heads": HEADS, "num_key_value_heads": KV_HEADS,
        "head_dim": HEAD_DIM, "hidden_act": "silu", "rms_norm_eps": EPS, "vocab_size": cfg.vocab_size,
        "draft_vocab_size": DRAFT_VOCAB, "max_position_embeddings": cfg.max_position_embeddings,
        "rope_theta": cfg.rope_theta, "rope_scaling": None, "tie_word_embeddings": False, "attention_bias": False,
        "mlp_bias": False, "torch_dtype": "float32",
        "eagle_config": {"eagle_aux_hidden_state_layer_ids": LAYER_IDS, "use_aux_hidden_state": True,
                         "use_input_layernorm_in_first_layer": True, "use_last_layernorm": True},
        "rill": {"target": s["name"], "training_seed": s["seed"]},
    }
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
        f.write("\n")
    n_params = sum(p.numel() for p in head.parameters())
    a = report["accepted_per_step"]
    with open(os.path.join(out_dir, "README.md"), "w") as f:
        f.write(f"""# {s['name']}-eagle3

An EAGLE-3 draft head for [{s['name']}](../{s['name']}), in the public checkpoint layout
(`LlamaForCausalLMEagle3`: `fc`, `midlayer.*`, `norm`, `lm_head` over a draft vocabulary of {DRAFT_VOCAB} tokens
({100 * coverage:.1f}% of the model's completion tokens) with `d2t`/`t2d`; no `embed_tokens`: the target's embeddings
serve). Serve with:

    deno task serve models/{s['name']} --backend native --speculative eagle3 --draft-model models/{s['name']}-eagle3

Trained by `scripts/train/eagle3.py --model {args.model}` ({n_params} parameters, {args.steps} steps of batch
{args.batch}, seed {s['seed']}) on the model's own greedy completions of {args.prompts} prompts drawn like its training
set; tapped target layers (outputs) {LAYER_IDS}.

Held-out ({args.held_out} fresh prompts, greedy, drafting at every completion position; acceptance stops at the first
wrong draft):

| k (draft tokens) | mean accepted tokens per step |
| ---------------- | ----------------------------- |
| 2                | {a[2]:.2f}                          |
| 3                | {a[3]:.2f}                          |
| 4                | {a[4]:.2f}                          |

Greedy agreement with the model per round: {", ".join(f"{x:.2f}" for x in report["round_agreement"])}.
""")
    print(f"wrote {out_dir}", flush=True)


if __name__ == "__main__":
    main()
