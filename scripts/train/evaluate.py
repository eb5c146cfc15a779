"""Held-out evaluation with greedy decoding, and the model README.

Held-out prompts come from a different seed; any prompt whose rendered text also occurs in the training set is
skipped. Every prompt is decoded greedily (batched, left padded: the same masking path the ONNX graph uses) until the
format's stop token. A final answer counts as correct when it ends with the right stop token, contains no tool call
and matches the skill's expectation (the right number as the last number of the answer; the capital; the exact
repetition; the weather condition and temperature from the tool result). A tool call counts when it is the
`get_weather` function call in the format's syntax, its arguments parse as JSON and `city` is the asked city.
"""

from __future__ import annotations

import json
import os
import random
import re
import time

import torch

import data

KINDS = ["add", "sub", "mul", "units", "capital", "repeat", "weather", "weather_result"]

H_FINAL = re.compile(r"^<\|channel\|>analysis<\|message\|>[^<]*<\|end\|><\|start\|>assistant<\|channel\|>final"
                     r"<\|message\|>(.*)<\|return\|>$", re.S)
H_CALL = re.compile(r"^<\|channel\|>analysis<\|message\|>[^<]*<\|end\|><\|start\|>assistant"
                    r"(?: to=functions\.get_weather<\|channel\|>commentary|<\|channel\|>commentary "
                    r"to=functions\.get_weather) ?<\|constrain\|>json<\|message\|>(.*)<\|call\|>$", re.S)
C_FINAL = re.compile(r"^<think>\n[^<]*\n</think>\n\n([^<]*)<\|im_end\|>$", re.S)
C_CALL = re.compile(r"^<think>\n[^<]*\n</think>\n\n<tool_call>(.*)</tool_call><\|im_end\|>$", re.S)


@torch.no_grad()
def greedy_batch(model, prompts: list[list[int]], stop: set[int], pad_id: int, max_new: int = 96):
    b = len(prompts)
    t = max(len(p) for p in prompts)
    ids = torch.full((b, t), pad_id, dtype=torch.long)
    mask = torch.zeros((b, t), dtype=torch.long)
    for i, p in enumerate(prompts):
        ids[i, t - len(p):] = torch.tensor(p)
        mask[i, t - len(p):] = 1
    pos = (mask.cumsum(-1) - 1).clamp(min=0)
    logits, past = model(ids, mask, pos, model.empty_past(b))
    last_pos = pos[:, -1:]
    outs: list[list[int]] = [[] for _ in range(b)]
    done = [False] * b
    for _ in range(max_new):
        nxt = logits[:, -1].argmax(-1)
        for i in range(b):
            if not done[i]:
                outs[i].append(int(nxt[i]))
                done[i] = int(nxt[i]) in stop
        if all(done):
            break
        mask = torch.cat([mask, torch.ones(b, 1, dtype=torch.long)], 1)
        last_pos = last_pos + 1
        logits, past = model(nxt.unsqueeze(1), mask, last_pos, past)
    return outs


def check(fmt: str, conv: data.Conv, text: str) -> tuple[str, bool]:
    """Returns (category, ok): category is "call" for prompts that need a tool call, else "answer"."""
    final_re, call_re = (H_FINAL, H_CALL) if fmt == "harmony" else (C_FINAL, C_CALL)
    if conv.call_city is not None:
        m = call_re.match(text)
        if not m:
            return "call", False
        try:
            body = json.loads(m.group(1))
        except json.JSONDecodeError:
            return "call", False
        if fmt == "chatml":
            if body.get("name") != "get_weather" or not isinstance(body.get("arguments"), dict):
                return "call", False
            body = body["arguments"]
        return "call", isinstance(body, dict) and body.get("city") == conv.call_city
    m = final_re.match(text)
    if not m:
        return "answer", False
    ans = m.group(1)
    e = conv.expect
    if "number" in e:
        nums = re.findall(r"-?\d+", ans)
        return "answer", bool(nums) and int(nums[-1]) == e["number"]
    if "exact" in e:
        return "answer", ans.strip() == e["exact"]
    return "answer", e["text"] in ans


def evaluate(model, tok, fmt: str, seed: int, n: int, train_prompts: set[str]) -> dict:
    r = random.Random(seed)
    convs: list[data.Conv] = []
    skipped = 0
    while len(convs) < n:
        c = data.sample_conv(r, fmt, KINDS[len(convs) % len(KINDS)])
        if data.render(c, fmt)[0] in train_prompts:
            skipped += 1
            continue
        convs.append(c)
    stop = {tok.specials[s] for s in (["<|return|>", "<|call|>"] if fmt == "harmony" else ["<|im_end|>"])}
    pad = tok.specials["<|endoftext|>"]
    t0 = time.time()
    per: dict[str, list[int]] = {}
    cat: dict[str, list[int]] = {"answer": [0, 0], "call": [0, 0]}
    failures = []
    for s in range(0, len(convs), 40):
        chunk = convs[s:s + 40]
        outs = greedy_batch(model, [tok.encode(data.render(c, fmt)[0]) for c in chunk], stop, pad)
        for c, o in zip(chunk, outs):
            text = tok.decode(o)
            k, ok = check(fmt, c, text)
            key = c.kind if c.tools or not c.kind.startswith("weather") else "weather_no_tool"
            per.setdefault(key, [0, 0])
            per[key][0] += ok
            per[key][1] += 1
            cat[k][0] += ok
            cat[k][1] += 1
            if not ok and len(failures) < 12:
                failures.append({"prompt_tail": data.render(c, fmt)[0][-120:], "output": text})
    rep = {
        "n": len(convs), "skipped_in_train": skipped, "seconds": round(time.time() - t0, 1),
        "answers": cat["answer"], "calls": cat["call"], "per_skill": per, "failures": failures,
    }
    print(f"eval {fmt}: answers {cat['answer'][0]}/{cat['answer'][1]} "
          f"({100 * cat['answer'][0] / max(1, cat['answer'][1]):.1f}%), tool calls {cat['call'][0]}/{cat['call'][1]} "
          f"({100 * cat['call'][0] / max(1, cat['call'][1]):.1f}%)", flush=True)
    for k, (a, b) in sorted(per.items()):
        print(f"  {k}: {a}/{b}", flush=True)
    for f in failures:
        print("  FAIL", json.dumps(f), flush=True)
    return rep


def _pct(x: list[int]) -> str:
    return f"{100 * x[0] / max(1, x[1]):.1f}% ({x[0]}/{x[1]})"


def write_readme(out_dir: str, name: str, fmt: str, rep: dict, cfg, n_params: int, args, seed: int) -> None:
    size = 0
    for root, _, files in os.walk(out_dir):
        size += sum(os.path.getsize(os.path.join(root, f)) for f in files)
    p2 = getattr(args, "phase2_steps", 0)
    phase2 = (f", then {p2} steps with a fresh AdamW at lr {args.phase2_lr} cosine to 10% (phase 2)" if p2 else "")
    rows = "\n".join(f"| {k} | {_pct(v)} |" for k, v in sorted(rep["per_skill"].items()))
    if fmt == "harmony":
        fmt_text = ("harmony (rendered per `harmony.md` §1: system message with date and `Reasoning:` line, developer "
                    "message with `# Instructions` and the `functions` namespace when tools are given). The model "
                    "reasons on `analysis`, answers on `final` ending `<|return|>`, and calls tools as "
                    "`<|start|>assistant to=functions.get_weather<|channel|>commentary <|constrain|>json<|message|>"
                    "{\"city\":\"Paris\"}<|call|>` (recipient before channel, the form harmony's renderer writes "
                    "history in).")
    else:
        fmt_text = ("ChatML with the Qwen3-style chat template in `tokenizer_config.json` (tools listed as JSON inside "
                    "`<tools>`; tool results as `<tool_response>` in a user turn). The model writes "
                    "`<think>\\n…\\n</think>\\n\\n` and then either the answer or `<tool_call>{\"name\": \"get_weather\", "
                    "\"arguments\": {\"city\": \"Paris\"}}</tool_call>`, ending `<|im_end|>`.")
    text = f"""# {name}

A tiny Llama-style model trained from scratch by `scripts/train/train.py --model {fmt}` (seed {seed}) on synthetic
conversations. It exists so rill can serve a real model with no download: it is not a general assistant.

Format: {fmt_text}

## Skills (what it was trained on)

- arithmetic: `a + b`, `a - b` (0..99, digit by digit in the reasoning), `a * b` (1..10);
- unit conversions: km/m, m/cm, kg/g, L/mL (both ways, exact multiples), C to F (0, 10, ..., 100), km to miles
  (multiples of 8 km);
- capitals of a fixed table of 40 countries;
- repeating a phrase N times (2..6), space separated;
- weather through the `get_weather` function tool: `{{"name": "get_weather", "description": "Get the current weather
  for a city.", "parameters": {{"type": "object", "properties": {{"city": {{"type": "string", "description": "The city
  name."}}}}, "required": ["city"]}}}}`. Tool results it reads: `{{"temperature": 18, "condition": "sunny"}}`
  (also compact, or `{{"city": ..., "temp_c": 18, "conditions": "sunny"}}`, or `sunny, 18 C`); it answers
  `It is sunny and 18 C in Paris.` Without tools it says it cannot check the weather.

Prompt variations seen in training: with and without function tools (three wordings of the `get_weather` tool),
optional instructions (harmony: developer `# Instructions`; ChatML: a system message), the current date present in 90%
of harmony prompts and a `Reasoning:` line in 95%, one earlier finished turn in 15% of prompts, and the tool loop with
and without the call's reasoning kept in the history.

Reproduce: `/usr/bin/python3 scripts/train/train.py --model {fmt}` from the repository root (see its docstring);
`--eval-only` re-runs export and evaluation from the saved checkpoint.

## Held-out accuracy (greedy, {rep['n']} prompts, none seen in training)

- final answers correct: **{_pct(rep['answers'])}**
- tool calls with valid JSON naming the right city: **{_pct(rep['calls'])}**

| skill | correct |
|---|---|
{rows}

## Model

Llama-style decoder: vocab {cfg.vocab_size} (own byte-level BPE, no merges across digits), hidden
{cfg.hidden_size}, {cfg.num_hidden_layers} layers, {cfg.num_attention_heads} heads (head_dim {cfg.head_dim}),
SwiGLU {cfg.intermediate_size}, RMSNorm, RoPE (theta {cfg.rope_theta:g}), untied embeddings; {n_params:,}
parameters, float32. Trained {args.steps} steps of batch {args.batch} (AdamW, lr {args.lr} cosine to 10%, loss on the
completion only){phase2}, on {args.threads} CPU thread(s). Directory size {size / 1e6:.1f} MB.

Files: `config.json`, `generation_config.json`, `tokenizer.json`, `tokenizer_config.json`, `onnx/model.onnx` (opset
17, decoder-with-past), `model.safetensors`, `golden/logits.json` (torch logits of the last 3 positions of 3 prompts).
"""
    with open(os.path.join(out_dir, "README.md"), "w") as f:
        f.write(text)
