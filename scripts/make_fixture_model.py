#!/usr/bin/python3
"""Builds tests/fixtures/tiny-random/: a tiny random-weight Llama-style model in rill's model directory layout.

The fixture exists so engine tests run in milliseconds without the bundled trained models. It follows
docs/model-contract.md exactly (config.json, generation_config.json, byte-level tokenizer.json, tokenizer_config.json,
onnx/model.onnx in the Optimum decoder-with-past layout, model.safetensors, golden/logits.json), so code that loads it
loads real models unchanged. onnx-external/ holds the same graph with its weights in external data (model.onnx_data).

Run with Debian's python (it has torch 1.13 and onnx):  /usr/bin/python3 scripts/make_fixture_model.py [out_dir]
Deterministic: a fixed torch seed gives byte-identical weights (the ONNX protobuf may differ only in producer fields).

For benchmarking the engine on a bigger random model (not committed), the sizes can be overridden:
    /usr/bin/python3 scripts/make_fixture_model.py /tmp/rand-192 --hidden 192 --layers 4 --heads 6 --kv-heads 6 \
        --intermediate 512 --vocab 1500
(--vocab pads the embedding/head beyond the 265 tokenizer entries; such ids never appear in prompts.)
"""

import argparse
import json
import math
import os
import struct
import sys

import torch
from torch import nn

SEED = 1234
HIDDEN = 32
LAYERS = 2
HEADS = 4
KV_HEADS = 2  # grouped-query attention, so the fixture exercises kv_heads != heads
HEAD_DIM = HIDDEN // HEADS
INTERMEDIATE = 64
MAX_POS = 512
ROPE_THETA = 10000.0
RMS_EPS = 1e-5
SPECIALS = [
    "<|startoftext|>",
    "<|endoftext|>",
    "<|start|>",
    "<|end|>",
    "<|message|>",
    "<|channel|>",
    "<|constrain|>",
    "<|return|>",
    "<|call|>",
]
VOCAB = 256 + len(SPECIALS)


def bytes_to_unicode():
    """GPT-2's reversible byte -> printable unicode map (byte-level BPE alphabet)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("\xa1"), ord("\xac") + 1)) + list(
        range(ord("\xae"), ord("\xff") + 1)
    )
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


class RMSNorm(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        var = x.pow(2).mean(-1, keepdim=True)
        return x * torch.rsqrt(var + RMS_EPS) * self.weight


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class Layer(nn.Module):
    def __init__(self):
        super().__init__()
        self.input_layernorm = RMSNorm(HIDDEN)
        self.q_proj = nn.Linear(HIDDEN, HEADS * HEAD_DIM, bias=False)
        self.k_proj = nn.Linear(HIDDEN, KV_HEADS * HEAD_DIM, bias=False)
        self.v_proj = nn.Linear(HIDDEN, KV_HEADS * HEAD_DIM, bias=False)
        self.o_proj = nn.Linear(HEADS * HEAD_DIM, HIDDEN, bias=False)
        self.post_attention_layernorm = RMSNorm(HIDDEN)
        self.gate_proj = nn.Linear(HIDDEN, INTERMEDIATE, bias=False)
        self.up_proj = nn.Linear(HIDDEN, INTERMEDIATE, bias=False)
        self.down_proj = nn.Linear(INTERMEDIATE, HIDDEN, bias=False)

    def forward(self, x, cos, sin, allowed, past_k, past_v):
        b, s, _ = x.shape
        h = self.input_layernorm(x)
        q = self.q_proj(h).view(b, s, HEADS, HEAD_DIM).transpose(1, 2)
        k = self.k_proj(h).view(b, s, KV_HEADS, HEAD_DIM).transpose(1, 2)
        v = self.v_proj(h).view(b, s, KV_HEADS, HEAD_DIM).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        k = torch.cat([past_k, k], dim=2)
        v = torch.cat([past_v, v], dim=2)
        present_k, present_v = k, v
        group = HEADS // KV_HEADS
        t = k.shape[2]
        k = k[:, :, None].expand(b, KV_HEADS, group, t, HEAD_DIM).reshape(b, HEADS, t, HEAD_DIM)
        v = v[:, :, None].expand(b, KV_HEADS, group, t, HEAD_DIM).reshape(b, HEADS, t, HEAD_DIM)
        scores = torch.matmul(q, k.transpose(2, 3)) / math.sqrt(HEAD_DIM)
        # finfo.min rather than -inf: a fully masked row (a padding query) softmaxes to uniform, never NaN.
        scores = torch.where(allowed, scores, torch.tensor(torch.finfo(torch.float32).min))
        attn = torch.softmax(scores, dim=-1)
        out = torch.matmul(attn, v).transpose(1, 2).reshape(b, s, HEADS * HEAD_DIM)
        x = x + self.o_proj(out)
        h = self.post_attention_layernorm(x)
        x = x + self.down_proj(nn.functional.silu(self.gate_proj(h)) * self.up_proj(h))
        return x, present_k, present_v


class TinyLlama(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed_tokens = nn.Embedding(VOCAB, HIDDEN)
        self.layers = nn.ModuleList([Layer() for _ in range(LAYERS)])
        self.norm = RMSNorm(HIDDEN)
        self.lm_head = nn.Linear(HIDDEN, VOCAB, bias=False)
        inv_freq = 1.0 / (ROPE_THETA ** (torch.arange(0, HEAD_DIM, 2).float() / HEAD_DIM))
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    def forward(self, input_ids, attention_mask, position_ids, *past):
        s = input_ids.shape[1]
        p = past[0].shape[2]
        t = attention_mask.shape[1]
        # Absolute-slot causal mask: query i sits at slot p + i and may see key j iff j <= p + i and mask[j] == 1.
        q_slots = torch.arange(s, device=input_ids.device)[:, None] + p
        k_slots = torch.arange(t, device=input_ids.device)[None, :]
        causal = k_slots <= q_slots
        allowed = causal[None, None, :, :] & (attention_mask[:, None, None, :] == 1)
        freqs = position_ids[:, :, None].float() * self.inv_freq[None, None, :]
        emb = torch.cat([freqs, freqs], dim=-1)
        cos = emb.cos()[:, None]
        sin = emb.sin()[:, None]
        x = self.embed_tokens(input_ids)
        presents = []
        for i, layer in enumerate(self.layers):
            x, pk, pv = layer(x, cos, sin, allowed, past[2 * i], past[2 * i + 1])
            presents += [pk, pv]
        return (self.lm_head(self.norm(x)), *presents)


def init_weights(model):
    g = torch.Generator().manual_seed(SEED)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("layernorm.weight") or name == "norm.weight":
                p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=g))
            elif name == "embed_tokens.weight":
                p.copy_(torch.randn(p.shape, generator=g))
            else:
                # Larger than usual init so logits are well separated: greedy tests then never hinge on near-ties.
                p.copy_(torch.randn(p.shape, generator=g) * (1.5 / math.sqrt(p.shape[1])))


def empty_past(batch):
    return [torch.zeros(batch, KV_HEADS, 0, HEAD_DIM) for _ in range(2 * LAYERS)]


def write_safetensors(path, model):
    tensors = {"model." + k if not k.startswith("lm_head") else k: v.detach().contiguous() for k, v in
               model.state_dict().items()}
    header = {}
    offset = 0
    blobs = []
    for name in sorted(tensors):
        data = tensors[name].numpy().astype("<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(tensors[name].shape), "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
        blobs.append(data)
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * ((8 - len(raw) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(raw)))
        f.write(raw)
        for b in blobs:
            f.write(b)


def write_external_variant(onnx_path, out_dir):
    """Writes the same graph with every weight moved to external data (`model.onnx` + `model.onnx_data`), the layout
    large Optimum exports use, so tests can load a model whose weights live outside the protobuf."""
    import onnx
    os.makedirs(out_dir, exist_ok=True)
    model = onnx.load(onnx_path)
    onnx.save_model(model, os.path.join(out_dir, "model.onnx"), save_as_external_data=True,
                    all_tensors_to_one_file=True, location="model.onnx_data", size_threshold=0)


def main():
    global HIDDEN, LAYERS, HEADS, KV_HEADS, HEAD_DIM, INTERMEDIATE, VOCAB
    ap = argparse.ArgumentParser()
    ap.add_argument("out", nargs="?", default=os.path.join(os.path.dirname(__file__), "..", "tests", "fixtures",
                                                           "tiny-random"))
    ap.add_argument("--hidden", type=int, default=HIDDEN)
    ap.add_argument("--layers", type=int, default=LAYERS)
    ap.add_argument("--heads", type=int, default=HEADS)
    ap.add_argument("--kv-heads", type=int, default=KV_HEADS)
    ap.add_argument("--intermediate", type=int, default=INTERMEDIATE)
    ap.add_argument("--vocab", type=int, default=VOCAB)
    args = ap.parse_args()
    out = args.out
    HIDDEN, LAYERS, HEADS, KV_HEADS = args.hidden, args.layers, args.heads, args.kv_heads
    HEAD_DIM, INTERMEDIATE, VOCAB = HIDDEN // HEADS, args.intermediate, max(args.vocab, 256 + len(SPECIALS))
    os.makedirs(os.path.join(out, "onnx"), exist_ok=True)
    os.makedirs(os.path.join(out, "golden"), exist_ok=True)
    torch.manual_seed(SEED)
    model = TinyLlama().eval()
    init_weights(model)

    b2u = bytes_to_unicode()
    vocab = {b2u[b]: b for b in range(256)}
    added = [{"id": 256 + i, "content": s, "single_word": False, "lstrip": False, "rstrip": False, "normalized": False,
              "special": True} for i, s in enumerate(SPECIALS)]
    tokenizer = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": None,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
        "post_processor": None,
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": vocab, "merges": []},
    }
    eos = [SPECIALS.index("<|return|>") + 256, SPECIALS.index("<|endoftext|>") + 256, SPECIALS.index("<|call|>") + 256]
    config = {
        "model_type": "llama",
        "architectures": ["LlamaForCausalLM"],
        "vocab_size": VOCAB,
        "hidden_size": HIDDEN,
        "intermediate_size": INTERMEDIATE,
        "num_hidden_layers": LAYERS,
        "num_attention_heads": HEADS,
        "num_key_value_heads": KV_HEADS,
        "head_dim": HEAD_DIM,
        "max_position_embeddings": MAX_POS,
        "rms_norm_eps": RMS_EPS,
        "rope_theta": ROPE_THETA,
        "hidden_act": "silu",
        "tie_word_embeddings": False,
        "bos_token_id": 256,
        "eos_token_id": eos,
        "torch_dtype": "float32",
        "rill": {"chat_format": "harmony"},
    }
    files = {
        "config.json": config,
        "generation_config.json": {"eos_token_id": eos, "temperature": 1.0, "top_p": 1.0},
        "tokenizer.json": tokenizer,
        "tokenizer_config.json": {"bos_token": "<|startoftext|>", "eos_token": "<|return|>",
                                  "pad_token": "<|endoftext|>", "model_max_length": MAX_POS},
    }
    for name, obj in files.items():
        with open(os.path.join(out, name), "w") as f:
            json.dump(obj, f, indent=1, ensure_ascii=False)
            f.write("\n")
    write_safetensors(os.path.join(out, "model.safetensors"), model)

    # Trace with a non-empty past so the exporter keeps the past length symbolic.
    names_past = []
    names_present = []
    for i in range(LAYERS):
        names_past += [f"past_key_values.{i}.key", f"past_key_values.{i}.value"]
        names_present += [f"present.{i}.key", f"present.{i}.value"]
    dyn = {"input_ids": {0: "batch_size", 1: "sequence_length"},
           "attention_mask": {0: "batch_size", 1: "total_sequence_length"},
           "position_ids": {0: "batch_size", 1: "sequence_length"},
           "logits": {0: "batch_size", 1: "sequence_length"}}
    for n in names_past:
        dyn[n] = {0: "batch_size", 2: "past_sequence_length"}
    for n in names_present:
        dyn[n] = {0: "batch_size", 2: "total_sequence_length"}
    b, s, p = 2, 4, 3
    dummy = (torch.randint(0, VOCAB, (b, s)), torch.ones(b, p + s, dtype=torch.int64),
             torch.arange(p, p + s).repeat(b, 1),
             *[torch.randn(b, KV_HEADS, p, HEAD_DIM) for _ in range(2 * LAYERS)])
    onnx_path = os.path.join(out, "onnx", "model.onnx")
    torch.onnx.export(model, dummy, onnx_path, input_names=["input_ids", "attention_mask", "position_ids", *names_past],
                      output_names=["logits", *names_present], dynamic_axes=dyn, opset_version=17,
                      do_constant_folding=True)
    write_external_variant(onnx_path, os.path.join(out, "onnx-external"))

    prompts = ["Hello, world!", "<|start|>user<|message|>hi", "repeat repeat repeat", "Zürich ☃ 7+5=12"]
    cases = []
    special_ids = {s: 256 + i for i, s in enumerate(SPECIALS)}
    for text in prompts:
        ids = []
        rest = text
        while rest:
            hit = next((s for s in SPECIALS if rest.startswith(s)), None)
            if hit:
                ids.append(special_ids[hit])
                rest = rest[len(hit):]
            else:
                ids += list(rest[0].encode("utf-8"))
                rest = rest[1:]
        n = len(ids)
        with torch.no_grad():
            logits = model(torch.tensor([ids]), torch.ones(1, n, dtype=torch.int64),
                           torch.arange(n)[None], *empty_past(1))[0][0]
        positions = list(range(max(0, n - 3), n))
        cases.append({"text": text, "input_ids": ids, "positions": positions,
                      "logits": [[float(v) for v in logits[pos].tolist()] for pos in positions]})
    with open(os.path.join(out, "golden", "logits.json"), "w") as f:
        json.dump({"cases": cases}, f)
        f.write("\n")
    print("wrote", os.path.abspath(out))


if __name__ == "__main__":
    main()
