"""Tiny Llama-style decoder (RMSNorm, RoPE from position_ids, SwiGLU, hand-written attention, KV cache).

The forward signature is the ONNX contract (models/ README, Optimum decoder-with-past): the causal mask is built from
`attention_mask` with absolute positions (query i may see key j iff mask[j] == 1 and j <= past + i), masked scores are
finfo.min so a fully padded row stays finite.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F


@dataclass
class Config:
    vocab_size: int
    hidden_size: int = 192
    num_hidden_layers: int = 4
    num_attention_heads: int = 6
    num_key_value_heads: int = 6
    intermediate_size: int = 512
    max_position_embeddings: int = 1024
    rms_norm_eps: float = 1e-5
    rope_theta: float = 10000.0

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_attention_heads


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


def repeat_kv(x: torch.Tensor, rep: int) -> torch.Tensor:
    """[B, kvh, S, D] -> [B, kvh * rep, S, D], query head j reading KV head j // rep (repeat_interleave on dim 1).

    Written as expand + reshape because torch 1.13's ONNX lowering of repeat_interleave bakes in the traced lengths:
    the exported graph is right only when past + new length equals the repeat factor, and ONNX Runtime fails on
    anything else ("left operand cannot broadcast on dim 1").
    """
    if rep == 1:
        return x
    b, kvh, s, d = x.shape
    return x.unsqueeze(2).expand(b, kvh, rep, s, d).reshape(b, kvh * rep, s, d)


class Attention(nn.Module):
    def __init__(self, c: Config):
        super().__init__()
        self.h, self.kvh, self.d = c.num_attention_heads, c.num_key_value_heads, c.head_dim
        self.q_proj = nn.Linear(c.hidden_size, self.h * self.d, bias=False)
        self.k_proj = nn.Linear(c.hidden_size, self.kvh * self.d, bias=False)
        self.v_proj = nn.Linear(c.hidden_size, self.kvh * self.d, bias=False)
        self.o_proj = nn.Linear(self.h * self.d, c.hidden_size, bias=False)

    def forward(self, x, cos, sin, allowed, past_k, past_v):
        b, t, _ = x.shape
        q = self.q_proj(x).view(b, t, self.h, self.d).transpose(1, 2)
        k = self.k_proj(x).view(b, t, self.kvh, self.d).transpose(1, 2)
        v = self.v_proj(x).view(b, t, self.kvh, self.d).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        k = torch.cat([past_k, k], dim=2)
        v = torch.cat([past_v, v], dim=2)
        kk, vv = repeat_kv(k, self.h // self.kvh), repeat_kv(v, self.h // self.kvh)
        scores = torch.matmul(q, kk.transpose(2, 3)) * (self.d ** -0.5)
        scores = torch.where(allowed, scores, torch.tensor(torch.finfo(torch.float32).min))
        probs = torch.softmax(scores, dim=-1)
        out = torch.matmul(probs, vv).transpose(1, 2).reshape(b, t, self.h * self.d)
        return self.o_proj(out), k, v


class MLP(nn.Module):
    def __init__(self, c: Config):
        super().__init__()
        self.gate_proj = nn.Linear(c.hidden_size, c.intermediate_size, bias=False)
        self.up_proj = nn.Linear(c.hidden_size, c.intermediate_size, bias=False)
        self.down_proj = nn.Linear(c.intermediate_size, c.hidden_size, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class Layer(nn.Module):
    def __init__(self, c: Config):
        super().__init__()
        self.self_attn = Attention(c)
        self.mlp = MLP(c)
        self.input_layernorm = RMSNorm(c.hidden_size, c.rms_norm_eps)
        self.post_attention_layernorm = RMSNorm(c.hidden_size, c.rms_norm_eps)

    def forward(self, x, cos, sin, allowed, past_k, past_v):
        a, k, v = self.self_attn(self.input_layernorm(x), cos, sin, allowed, past_k, past_v)
        x = x + a
        x = x + self.mlp(self.post_attention_layernorm(x))
        return x, k, v


class Inner(nn.Module):
    def __init__(self, c: Config):
        super().__init__()
        self.embed_tokens = nn.Embedding(c.vocab_size, c.hidden_size)
        self.layers = nn.ModuleList([Layer(c) for _ in range(c.num_hidden_layers)])
        self.norm = RMSNorm(c.hidden_size, c.rms_norm_eps)


class TinyLlama(nn.Module):
    def __init__(self, c: Config):
        super().__init__()
        self.config = c
        self.model = Inner(c)
        self.lm_head = nn.Linear(c.hidden_size, c.vocab_size, bias=False)
        inv = 1.0 / (c.rope_theta ** (torch.arange(0, c.head_dim, 2, dtype=torch.float32) / c.head_dim))
        self.register_buffer("inv_freq", inv, persistent=False)
        self.apply(self._init)

    @staticmethod
    def _init(m):
        if isinstance(m, (nn.Linear, nn.Embedding)):
            nn.init.normal_(m.weight, std=0.02)

    def empty_past(self, batch: int):
        c = self.config
        z = torch.zeros(batch, c.num_key_value_heads, 0, c.head_dim)
        return [(z, z) for _ in range(c.num_hidden_layers)]

    def forward(self, input_ids, attention_mask, position_ids, past):
        """past: list of (key, value) [B, kvh, P, D]. Returns logits and the list of presents."""
        t = input_ids.shape[1]
        p = past[0][0].shape[2]
        total = attention_mask.shape[1]
        freqs = position_ids.unsqueeze(-1).to(torch.float32) * self.inv_freq
        emb = torch.cat([freqs, freqs], dim=-1)
        cos, sin = emb.cos().unsqueeze(1), emb.sin().unsqueeze(1)
        q_pos = torch.arange(t, device=input_ids.device) + p
        k_pos = torch.arange(total, device=input_ids.device)
        causal = k_pos.unsqueeze(0) <= q_pos.unsqueeze(1)  # [t, total]
        allowed = causal.unsqueeze(0).unsqueeze(0) & (attention_mask == 1).unsqueeze(1).unsqueeze(1)
        x = self.model.embed_tokens(input_ids)
        presents = []
        for layer, (pk, pv) in zip(self.model.layers, past):
            x, k, v = layer(x, cos, sin, allowed, pk, pv)
            presents.append((k, v))
        return self.lm_head(self.model.norm(x)), presents
