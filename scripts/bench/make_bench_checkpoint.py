#!/usr/bin/python3
"""Writes a random-initialised checkpoint of the Qwen2.5-0.5B shape for `deno task bench native`: the same weights as
a Hugging Face directory (config.json + model.safetensors, fp32, tied embeddings) for the native library and as an
ONNX graph (onnx/model.onnx, weights in external data files since they pass protobuf's 2 GB limit) for ONNX Runtime.

    /usr/bin/python3 scripts/bench/make_bench_checkpoint.py OUT_DIR [--layers N]

The architecture is rill's exporter model (scripts/train/model.py: Llama layout, no q/k/v biases) at Qwen2.5-0.5B's
sizes (hidden 896, 24 layers, 14 heads over 2 KV heads, intermediate 4864, vocabulary 151,936, tied): the biases
Qwen2 adds are 0.03% of the bytes and do not change what decoding reads. Deterministic for a given seed. Writes
OUT_DIR/complete last, so a run that was cut off is redone, not reused.
"""

import json
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "train"))
import export  # noqa: E402
import model as model_mod  # noqa: E402

SEED = 505


def main() -> None:
    args = sys.argv[1:]
    if not args:
        sys.exit("usage: make_bench_checkpoint.py OUT_DIR [--layers N]")
    out = args[0]
    layers = int(args[args.index("--layers") + 1]) if "--layers" in args else 24
    torch.manual_seed(SEED)
    c = model_mod.Config(vocab_size=151936, hidden_size=896, num_hidden_layers=layers, num_attention_heads=14,
                         num_key_value_heads=2, intermediate_size=4864, max_position_embeddings=4096,
                         rms_norm_eps=1e-6, rope_theta=1000000.0)
    m = model_mod.TinyLlama(c).eval()
    with torch.no_grad():
        for name, p in m.named_parameters():
            if name.endswith("norm.weight"):
                p.copy_(1.0 + 0.1 * torch.randn_like(p))
    m.lm_head.weight = m.model.embed_tokens.weight  # tied, as Qwen2.5-0.5B
    os.makedirs(out, exist_ok=True)
    config = {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": c.vocab_size,
        "hidden_size": c.hidden_size, "intermediate_size": c.intermediate_size,
        "num_hidden_layers": c.num_hidden_layers, "num_attention_heads": c.num_attention_heads,
        "num_key_value_heads": c.num_key_value_heads, "head_dim": c.head_dim,
        "max_position_embeddings": c.max_position_embeddings, "rms_norm_eps": c.rms_norm_eps,
        "rope_theta": c.rope_theta, "hidden_act": "silu", "tie_word_embeddings": True, "torch_dtype": "float32",
    }
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    state = {k: v for k, v in m.state_dict().items() if k != "lm_head.weight"}
    export.write_safetensors(state, os.path.join(out, "model.safetensors"))
    del state
    export.export_onnx(m, os.path.join(out, "onnx", "model.onnx"))
    with open(os.path.join(out, "complete"), "w") as f:
        f.write("ok\n")


if __name__ == "__main__":
    main()
