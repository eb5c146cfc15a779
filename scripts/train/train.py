"""Train, export and evaluate one of rill's bundled models from scratch.

    /usr/bin/python3 scripts/train/train.py --model harmony    # -> models/rill-tiny-harmony/
    /usr/bin/python3 scripts/train/train.py --model chatml     # -> models/rill-tiny-chatml/
    deno run --allow-read --allow-ffi scripts/train/verify_onnx.ts models/<name> scripts/train/.out/<name>.verify.json

Run from the repository root with Debian's python3 (apt: python3-torch 1.13, python3-onnx, python3-regex,
python3-jinja2; also libopenblas0-openmp, or torch uses the reference BLAS and trains ~30x slower). Each model takes
about 45 minutes on one thread of the shared 2-core machine (both were trained at the same time, one thread each).

Determinism: data (random.Random(seed)), tokenizer (deterministic BPE over the generated corpus), weights
(torch.manual_seed), batch order and a fixed number of steps are all seeded; float results can differ in the last
bits across BLAS builds, so a rerun elsewhere gives an equivalent model, not necessarily identical bytes.

Pipeline:
- data.py generates synthetic conversations rendered exactly as rill renders prompts (harmony per harmony.md §1; ChatML
  via the chat template it writes into tokenizer_config.json, checked against jinja2 and @huggingface/jinja);
- bpe.py trains a byte-level BPE (1024 ids incl. specials, no merges touching digits) and writes tokenizer.json;
- model.py is the Llama-style decoder (hidden 192, 4 layers, 6 heads, SwiGLU 512; 2.16M parameters);
- phase 1: 1400 steps of batch 48, AdamW lr 3e-3 with warmup and cosine decay, loss on the completion only;
  phase 2 (ChatML only, SETTINGS["chatml"]["phase2"]): 700 steps with a fresh AdamW at lr 8e-4 on fresh conversations
  weighted towards arithmetic (PHASE2_WEIGHTS), which phase 1 had left at 59-81% for ChatML;
- export.py writes config, generation config, tokenizer, tokenizer config, onnx/model.onnx (opset 17, decoder with
  past), model.safetensors, golden/logits.json, golden/prompts.json (rendered prompts with their PromptInput, for
  renderer tests) and .out/<name>.verify.json (cases verify_onnx.ts runs through onnxruntime-node);
- evaluate.py decodes 600 held-out prompts greedily and writes models/<name>/README.md with the figures.

Results (held-out, greedy): harmony 97.0% correct final answers, 100% valid get_weather calls; ChatML 97.0% and 100%.
ONNX vs torch: max |logit diff| about 1e-5 with and without past. `--eval-only` re-runs export and evaluation from the
saved checkpoint (scripts/train/.out/<name>.pt, not committed).
"""

from __future__ import annotations

import argparse
import math
import os
import random
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import bpe as bpe_mod  # noqa: E402
import data  # noqa: E402
from model import Config, TinyLlama  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

SETTINGS = {
    # phase2: steps of the arithmetic-heavy second phase (harmony met its targets after phase 1 alone).
    "harmony": dict(name="rill-tiny-harmony", specials=data.HARMONY_SPECIALS, seed=1234, phase2=0),
    "chatml": dict(name="rill-tiny-chatml", specials=data.CHATML_SPECIALS, seed=4321, phase2=700),
}


def build_dataset(fmt: str, seed: int, n: int):
    r = random.Random(seed)
    convs = [data.sample_conv(r, fmt) for _ in range(n)]
    return convs, [data.render(c, fmt) for c in convs]


PHASE2_WEIGHTS = {"add": 25, "sub": 25, "mul": 12, "units": 8, "capital": 6, "repeat": 8, "weather": 8,
                  "weather_result": 8}


def build_phase2(fmt: str, seed: int, n: int):
    """Phase-2 data: fresh conversations, weighted towards the digit-by-digit arithmetic phase 1 leaves weakest."""
    r = random.Random(seed)
    kinds = sorted(PHASE2_WEIGHTS)
    weights = [PHASE2_WEIGHTS[k] for k in kinds]
    return [data.render(data.sample_conv(r, fmt, r.choices(kinds, weights)[0]), fmt) for _ in range(n)]


def tokenize_pairs(tok, pairs, max_len):
    out = []
    for p, c in pairs:
        pi, ci = tok.encode(p), tok.encode(c)
        if len(pi) + len(ci) > max_len:
            continue
        out.append((pi, ci))
    return out


def batches(samples, bsz, rng):
    idx = list(range(len(samples)))
    rng.shuffle(idx)
    chunk = bsz * 32
    groups = []
    for s in range(0, len(idx), chunk):
        part = sorted(idx[s:s + chunk], key=lambda i: len(samples[i][0]) + len(samples[i][1]))
        groups += [part[j:j + bsz] for j in range(0, len(part), bsz)]
    rng.shuffle(groups)
    return groups


def collate(samples, ids, pad_id):
    seqs = [samples[i][0] + samples[i][1] for i in ids]
    t = max(len(s) for s in seqs)
    x = torch.full((len(ids), t), pad_id, dtype=torch.long)
    y = torch.full((len(ids), t), -100, dtype=torch.long)
    for b, i in enumerate(ids):
        p, c = samples[i]
        s = p + c
        x[b, :len(s)] = torch.tensor(s)
        # predict completion tokens: position k predicts token k+1
        y[b, len(p) - 1:len(s) - 1] = torch.tensor(c)
    return x, y


def train_phase(model, samples, pad_id, steps, bsz, lr0, warm, rng, ckpt):
    """AdamW, linear warmup then cosine decay to 10% of lr0; loss on completion tokens only."""
    opt = torch.optim.AdamW(model.parameters(), lr=lr0, betas=(0.9, 0.95), weight_decay=0.01)
    order: list = []
    t1 = time.time()
    model.train()
    for step in range(steps):
        if not order:
            order = batches(samples, bsz, rng)
        ids = order.pop()
        x, y = collate(samples, ids, pad_id)
        lr = lr0 * min(1.0, (step + 1) / warm) * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * step / steps)))
        for g in opt.param_groups:
            g["lr"] = lr
        b, t = x.shape
        pos = torch.arange(t).unsqueeze(0).expand(b, t)
        logits, _ = model(x, torch.ones_like(x), pos, model.empty_past(b))
        loss = torch.nn.functional.cross_entropy(logits.view(-1, logits.shape[-1]), y.view(-1), ignore_index=-100)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if step % 200 == 199:
            torch.save(model.state_dict(), ckpt)
        if step % 50 == 0 or step == steps - 1:
            el = time.time() - t1
            print(f"step {step} loss {loss.item():.4f} lr {lr:.2e} {el:.0f}s "
                  f"eta {el / (step + 1) * (steps - step - 1):.0f}s", flush=True)
    print(f"phase trained in {time.time() - t1:.0f}s", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", choices=sorted(SETTINGS), required=True)
    ap.add_argument("--steps", type=int, default=1400)
    ap.add_argument("--batch", type=int, default=48)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--n-train", type=int, default=80000)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--phase2-steps", type=int, help="default: per model (SETTINGS)")
    ap.add_argument("--phase2-lr", type=float, default=8e-4)
    ap.add_argument("--from-phase1", help="start from these phase-1 weights and run only phase 2")
    ap.add_argument("--eval-only", action="store_true")
    ap.add_argument("--ckpt", help="checkpoint to load with --eval-only (default: scripts/train/.out/<name>.pt)")
    ap.add_argument("--eval-n", type=int, default=600)
    args = ap.parse_args()
    s = SETTINGS[args.model]
    fmt, seed = args.model, s["seed"]
    if args.phase2_steps is None:
        args.phase2_steps = s["phase2"]
    torch.set_num_threads(args.threads)
    out_dir = os.path.join(ROOT, "models", s["name"])
    ck_dir = os.path.join(ROOT, "scripts", "train", ".out")
    os.makedirs(out_dir, exist_ok=True)
    os.makedirs(ck_dir, exist_ok=True)
    ckpt = os.path.join(ck_dir, f"{s['name']}.pt")

    t0 = time.time()
    convs, pairs = build_dataset(fmt, seed, args.n_train)
    tok = bpe_mod.train_bpe([p + c for p, c in pairs[:4000]], 1024 - 256 - len(s["specials"]), s["specials"])
    print(f"data+tokenizer {time.time() - t0:.1f}s vocab={tok.size}", flush=True)
    cfg = Config(vocab_size=tok.size)
    torch.manual_seed(seed)
    model = TinyLlama(cfg)
    n_params = sum(p.numel() for p in model.parameters())
    print(f"params {n_params}", flush=True)

    if not args.eval_only:
        samples = tokenize_pairs(tok, pairs, 320)
        lens = [len(p) + len(c) for p, c in samples]
        print(f"samples {len(samples)} mean len {sum(lens) / len(lens):.1f} max {max(lens)}", flush=True)
        pad_id = tok.specials["<|endoftext|>"]
        phase1 = os.path.join(ck_dir, f"{s['name']}.phase1.pt")
        if args.from_phase1:
            model.load_state_dict(torch.load(args.from_phase1))
        else:
            train_phase(model, samples, pad_id, args.steps, args.batch, args.lr, 100, random.Random(seed + 1), ckpt)
            torch.save(model.state_dict(), phase1)
        if args.phase2_steps:
            # Phase 2: a fresh optimizer on fresh, arithmetic-heavy conversations (PHASE2_WEIGHTS): phase 1 leaves
            # the digit-by-digit sums and digit copying noisy while the other skills are already learned.
            samples2 = tokenize_pairs(tok, build_phase2(fmt, seed + 3, args.phase2_steps * args.batch), 320)
            train_phase(model, samples2, pad_id, args.phase2_steps, args.batch, args.phase2_lr, 20,
                        random.Random(seed + 2), ckpt)
        torch.save(model.state_dict(), ckpt)
    else:
        model.load_state_dict(torch.load(args.ckpt or ckpt))
    model.eval()

    import evaluate
    import export
    export.export_all(model, tok, fmt, out_dir, seed)
    pairs2 = build_phase2(fmt, seed + 3, args.phase2_steps * args.batch) if args.phase2_steps else []
    train_prompts = {p for p, _ in pairs} | {p for p, _ in pairs2}
    report = evaluate.evaluate(model, tok, fmt, seed + 99, args.eval_n, train_prompts)
    evaluate.write_readme(out_dir, s["name"], fmt, report, cfg, n_params, args, seed)


if __name__ == "__main__":
    main()
