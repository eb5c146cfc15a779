"""Write a trained model in rill's model directory layout (models/ contract): config, generation config, tokenizer,
tokenizer config (chat template), ONNX (opset 17, Optimum decoder-with-past I/O), safetensors and golden logits.
Also writes scripts/train/.out/<name>.verify.json, the cases verify_onnx.ts runs through onnxruntime to check the
export against torch (with an empty past and with a real past, left padding included)."""

from __future__ import annotations

import json
import os
import struct

import torch
import torch.nn as nn

import data

OPSET = 17


class OnnxWrap(nn.Module):
    def __init__(self, m):
        super().__init__()
        self.m = m

    def forward(self, input_ids, attention_mask, position_ids, *past_flat):
        past = [(past_flat[2 * i], past_flat[2 * i + 1]) for i in range(len(past_flat) // 2)]
        logits, presents = self.m(input_ids, attention_mask, position_ids, past)
        out = [logits]
        for k, v in presents:
            out += [k, v]
        return tuple(out)


def write_safetensors(state: dict[str, torch.Tensor], path: str) -> None:
    header: dict = {"__metadata__": {"format": "pt"}}
    blobs, off = [], 0
    for name in sorted(state):
        t = state[name].detach().contiguous().to(torch.float32)
        b = t.numpy().tobytes()
        header[name] = {"dtype": "F32", "shape": list(t.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header, separators=(",", ":")).encode("utf-8")
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def export_onnx(model, path: str) -> None:
    c = model.config
    L = c.num_hidden_layers
    b, t, p = 2, 4, 3
    ids = torch.randint(0, c.vocab_size, (b, t))
    mask = torch.ones(b, p + t, dtype=torch.long)
    pos = torch.arange(p, p + t).unsqueeze(0).expand(b, t).contiguous()
    past = []
    names_in = ["input_ids", "attention_mask", "position_ids"]
    names_out = ["logits"]
    axes = {"input_ids": {0: "batch_size", 1: "sequence_length"},
            "attention_mask": {0: "batch_size", 1: "total_sequence_length"},
            "position_ids": {0: "batch_size", 1: "sequence_length"},
            "logits": {0: "batch_size", 1: "sequence_length"}}
    for i in range(L):
        for kv in ("key", "value"):
            past.append(torch.randn(b, c.num_key_value_heads, p, c.head_dim))
            names_in.append(f"past_key_values.{i}.{kv}")
            names_out.append(f"present.{i}.{kv}")
            axes[f"past_key_values.{i}.{kv}"] = {0: "batch_size", 2: "past_sequence_length"}
            axes[f"present.{i}.{kv}"] = {0: "batch_size", 2: "total_sequence_length"}
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with torch.no_grad():
        torch.onnx.export(OnnxWrap(model), (ids, mask, pos, *past), path, input_names=names_in,
                          output_names=names_out, dynamic_axes=axes, opset_version=OPSET, do_constant_folding=True)
    import onnx
    onnx.checker.check_model(path)  # by path: a graph past 2 GB keeps its weights in external files


def _prefill(model, seqs: list[list[int]], pad_id: int):
    """Left-padded batch prefill with an empty past: returns inputs and torch outputs."""
    t = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), t), pad_id, dtype=torch.long)
    mask = torch.zeros((len(seqs), t), dtype=torch.long)
    for i, s in enumerate(seqs):
        ids[i, t - len(s):] = torch.tensor(s)
        mask[i, t - len(s):] = 1
    pos = (mask.cumsum(-1) - 1).clamp(min=0)
    pos = torch.where(mask == 1, pos, torch.ones_like(pos))
    return ids, mask, pos


def verify_cases(model, tok, fmt: str, pad_id: int) -> dict:
    import random
    r = random.Random(7)
    seqs = [tok.encode(data.render(data.sample_conv(r, fmt), fmt)[0]) for _ in range(3)]
    seqs[1] = seqs[1][:len(seqs[1]) // 2]
    L = model.config.num_hidden_layers
    cases = []
    with torch.no_grad():
        ids, mask, pos = _prefill(model, seqs, pad_id)
        past = model.empty_past(len(seqs))
        logits, presents = model(ids, mask, pos, past)

        def pack(ids, mask, pos, past, logits, presents):
            feeds = {"input_ids": ids.tolist(), "attention_mask": mask.tolist(), "position_ids": pos.tolist()}
            for i in range(L):
                feeds[f"past_key_values.{i}.key"] = {"shape": list(past[i][0].shape),
                                                    "data": past[i][0].flatten().tolist()}
                feeds[f"past_key_values.{i}.value"] = {"shape": list(past[i][1].shape),
                                                      "data": past[i][1].flatten().tolist()}
            return {"feeds": feeds, "logits": {"shape": list(logits.shape), "data": logits.flatten().tolist()},
                    "present0_key": presents[0][0].flatten().tolist()}

        cases.append(pack(ids, mask, pos, past, logits, presents))
        # a second step with a real past: 2 new tokens per sequence (speculative-verify shape)
        nxt = logits[:, -1].argmax(-1)
        ids2 = torch.stack([nxt, nxt], dim=1)
        mask2 = torch.cat([mask, torch.ones(len(seqs), 2, dtype=torch.long)], dim=1)
        pos2 = (pos[:, -1:] + torch.arange(1, 3)).contiguous()
        logits2, presents2 = model(ids2, mask2, pos2, presents)
        cases.append(pack(ids2, mask2, pos2, presents, logits2, presents2))
        # torch self-check: the cached step equals a full recompute without cache
        full_ids = torch.cat([ids, ids2], 1)
        full_pos = torch.cat([pos, pos2], 1)
        lf, _ = model(full_ids, mask2, full_pos, model.empty_past(len(seqs)))
        diff = (lf[:, -2:] - logits2).abs().max().item()
        print(f"torch cached vs full recompute max |diff| {diff:.2e}", flush=True)
        assert diff < 1e-4
    return {"cases": cases}


def golden(model, tok, fmt: str) -> dict:
    import random
    r = random.Random(11)
    cases = []
    prompts = [data.render(data.sample_conv(r, fmt, k), fmt)[0] for k in ("add", "capital", "weather")]
    with torch.no_grad():
        for p in prompts:
            ids = tok.encode(p)
            x = torch.tensor([ids])
            logits, _ = model(x, torch.ones_like(x), torch.arange(len(ids)).unsqueeze(0), model.empty_past(1))
            n = len(ids)
            positions = [n - 3, n - 2, n - 1]
            cases.append({"input_ids": ids, "positions": positions,
                          "logits": [[round(v, 6) for v in logits[0, i].tolist()] for i in positions]})
    return {"cases": cases}


def prompt_input(c: data.Conv) -> dict:
    """The conversation as rill's PromptInput (prompt/conversation.ts), plus the date the system message shows."""
    msgs: list[dict] = []
    for m in c.messages:
        if m.role == "user":
            msgs.append({"role": "user", "content": m.content})
        elif m.role == "assistant":
            d: dict = {"role": "assistant", "content": m.content}
            if m.reasoning:
                d["reasoning"] = m.reasoning
            if m.tool_call:
                d["toolCalls"] = [{"callId": "call_1", "name": m.tool_call["name"],
                                   "arguments": m.tool_call["arguments"]}]
            msgs.append(d)
        else:
            msgs.append({"role": "tool", "callId": "call_1", "name": "get_weather", "content": m.content})
    out: dict = {"messages": msgs, "tools": c.tools, "toolChoice": "auto"}
    if c.instructions:
        out["instructions"] = c.instructions
    if c.effort:
        out["reasoningEffort"] = c.effort
    return {"input": out, "date": c.date}


def prompt_cases(tok, fmt: str) -> dict:
    """Rendered training-format prompts, for renderer tests: what the model was trained to see."""
    import random
    r = random.Random(13)
    cases = []
    for i in range(16):
        c = data.sample_conv(r, fmt, ["add", "capital", "repeat", "weather", "weather_result", "units"][i % 6])
        if fmt == "harmony" and (c.effort is None or c.date is None):
            c.effort, c.date = c.effort or "medium", c.date or "2026-01-01"
        p, comp = data.render(c, fmt)
        case = prompt_input(c)
        case.update({"text": p, "input_ids": tok.encode(p), "completion": comp})
        if fmt == "chatml":
            case["template_messages"] = data.chatml_messages(c)
            case["template_tools"] = data.chatml_tools(c)
        cases.append(case)
    return {"cases": cases}


def export_all(model, tok, fmt: str, out_dir: str, seed: int) -> None:
    import bpe as bpe_mod
    c = model.config
    sp = tok.specials
    if fmt == "harmony":
        bos, eos, gen_eos = sp["<|startoftext|>"], [sp["<|return|>"], sp["<|call|>"]], \
            [sp["<|return|>"], sp["<|call|>"], sp["<|endoftext|>"]]
        tcfg = {"bos_token": "<|startoftext|>", "eos_token": "<|return|>", "pad_token": "<|endoftext|>"}
    else:
        bos, eos, gen_eos = sp["<|endoftext|>"], [sp["<|im_end|>"], sp["<|endoftext|>"]], \
            [sp["<|im_end|>"], sp["<|endoftext|>"]]
        tcfg = {"bos_token": None, "eos_token": "<|im_end|>", "pad_token": "<|endoftext|>",
                "chat_template": data.CHATML_TEMPLATE}
    config = {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": c.vocab_size,
        "hidden_size": c.hidden_size, "intermediate_size": c.intermediate_size,
        "num_hidden_layers": c.num_hidden_layers, "num_attention_heads": c.num_attention_heads,
        "num_key_value_heads": c.num_key_value_heads, "head_dim": c.head_dim,
        "max_position_embeddings": c.max_position_embeddings, "rms_norm_eps": c.rms_norm_eps,
        "rope_theta": c.rope_theta, "hidden_act": "silu", "tie_word_embeddings": False,
        "bos_token_id": bos, "eos_token_id": eos, "pad_token_id": sp["<|endoftext|>"], "torch_dtype": "float32",
        "rill": {"chat_format": fmt, "training_seed": seed},
    }
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    with open(os.path.join(out_dir, "generation_config.json"), "w") as f:
        # Greedy by default: the models were evaluated greedily and sampling at temperature 1 makes tiny models
        # wrong far more often; requests can still ask for a temperature.
        json.dump({"bos_token_id": bos, "eos_token_id": gen_eos, "pad_token_id": sp["<|endoftext|>"],
                   "do_sample": False, "max_new_tokens": 256}, f, indent=2)
    bpe_mod.save_tokenizer(tok, os.path.join(out_dir, "tokenizer.json"))
    tcfg.update({"tokenizer_class": "PreTrainedTokenizerFast", "model_max_length": c.max_position_embeddings,
                 "clean_up_tokenization_spaces": False,
                 "added_tokens_decoder": {str(i): {"content": s, "special": True, "lstrip": False, "rstrip": False,
                                                   "normalized": False, "single_word": False}
                                          for s, i in sp.items()}})
    with open(os.path.join(out_dir, "tokenizer_config.json"), "w") as f:
        json.dump(tcfg, f, indent=2, ensure_ascii=False)
    export_onnx(model, os.path.join(out_dir, "onnx", "model.onnx"))
    write_safetensors(model.state_dict(), os.path.join(out_dir, "model.safetensors"))
    os.makedirs(os.path.join(out_dir, "golden"), exist_ok=True)
    with open(os.path.join(out_dir, "golden", "logits.json"), "w") as f:
        json.dump(golden(model, tok, fmt), f, separators=(",", ":"))
    with open(os.path.join(out_dir, "golden", "prompts.json"), "w") as f:
        json.dump(prompt_cases(tok, fmt), f, indent=1)
    vdir = os.path.join(os.path.dirname(os.path.abspath(__file__)), ".out")
    os.makedirs(vdir, exist_ok=True)
    with open(os.path.join(vdir, f"{os.path.basename(out_dir)}.verify.json"), "w") as f:
        json.dump(verify_cases(model, tok, fmt, sp["<|endoftext|>"]), f)
    print("exported", out_dir, flush=True)
