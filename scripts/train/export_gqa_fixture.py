#!/usr/bin/python3
"""Exports a tiny random grouped-query model (4 query heads sharing 2 KV heads) with rill's exporter and writes the
torch outputs ONNX Runtime must reproduce: the regression check for the exporter's KV-head expansion.

    /usr/bin/python3 scripts/train/export_gqa_fixture.py OUT_DIR
    deno run --allow-read --allow-ffi --allow-env scripts/train/verify_onnx.ts OUT_DIR OUT_DIR/verify.json

Writes OUT_DIR/onnx/model.onnx (opset 17, the bundled models' decoder-with-past I/O) and OUT_DIR/verify.json (the
cases format of verify_onnx.ts: a left-padded 2-sequence prefill with an empty past, a 3-token step on that past, and a
1-token decode after it; past + new lengths 10, 13 and 14, none equal to the repeat factor 2). The committed copy is
tests/fixtures/gqa-onnx/, checked by tests/scripts/train/gqa_export_test.ts.
"""

import json
import math
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import export  # noqa: E402
import model as model_mod  # noqa: E402

SEED = 5


def build() -> model_mod.TinyLlama:
    torch.manual_seed(SEED)
    c = model_mod.Config(vocab_size=64, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                         num_key_value_heads=2, intermediate_size=64, max_position_embeddings=128)
    m = model_mod.TinyLlama(c).eval()
    # Training's init (std 0.02) gives near-uniform logits; fan-in scaling spreads them so a wrong graph shows.
    with torch.no_grad():
        for name, p in m.named_parameters():
            if name.endswith("norm.weight"):
                p.copy_(1.0 + 0.1 * torch.randn_like(p))
            elif name == "model.embed_tokens.weight":
                p.copy_(torch.randn_like(p))
            else:
                p.copy_(torch.randn_like(p) * (3.0 if name == "lm_head.weight" else 1.0) / math.sqrt(p.shape[1]))
    return m


def pack(m, ids, mask, pos, past, logits, presents) -> dict:
    feeds = {"input_ids": ids.tolist(), "attention_mask": mask.tolist(), "position_ids": pos.tolist()}
    for i in range(m.config.num_hidden_layers):
        for j, kv in enumerate(("key", "value")):
            feeds[f"past_key_values.{i}.{kv}"] = {"shape": list(past[i][j].shape), "data": past[i][j].flatten().tolist()}
    return {"feeds": feeds, "logits": {"shape": list(logits.shape), "data": logits.flatten().tolist()},
            "present0_key": presents[0][0].flatten().tolist()}


def main() -> None:
    if len(sys.argv) != 2:
        sys.exit("usage: export_gqa_fixture.py OUT_DIR")
    out = sys.argv[1]
    m = build()
    x = torch.randn(2, 2, 7, 8)
    assert torch.equal(model_mod.repeat_kv(x, 2), x.repeat_interleave(2, dim=1)), "repeat_kv is repeat_interleave"
    export.export_onnx(m, os.path.join(out, "onnx", "model.onnx"))
    g = torch.Generator().manual_seed(SEED)
    seqs = [torch.randint(1, 64, (10,), generator=g).tolist(), torch.randint(1, 64, (5,), generator=g).tolist()]
    cases = []
    with torch.no_grad():
        ids, mask, pos = export._prefill(m, seqs, 0)
        past = m.empty_past(2)
        logits, presents = m(ids, mask, pos, past)
        cases.append(pack(m, ids, mask, pos, past, logits, presents))
        steps = [torch.randint(1, 64, (2, 3), generator=g), torch.randint(1, 64, (2, 1), generator=g)]
        all_ids, all_pos = ids, pos
        for new in steps:
            n = new.shape[1]
            mask = torch.cat([mask, torch.ones(2, n, dtype=torch.long)], dim=1)
            pos = (all_pos[:, -1:] + torch.arange(1, n + 1)).contiguous()
            step_logits, step_presents = m(new, mask, pos, presents)
            cases.append(pack(m, new, mask, pos, presents, step_logits, step_presents))
            all_ids, all_pos = torch.cat([all_ids, new], 1), torch.cat([all_pos, pos], 1)
            # the cached step equals a full recompute
            full, _ = m(all_ids, mask, all_pos, m.empty_past(2))
            assert (full[:, -n:] - step_logits).abs().max().item() < 1e-4
            presents = step_presents
    with open(os.path.join(out, "verify.json"), "w") as f:
        json.dump({"cases": cases}, f, separators=(",", ":"))
        f.write("\n")
    print(f"wrote {out}: {len(cases)} cases, logits std {float(logits.std()):.2f}")


if __name__ == "__main__":
    main()
