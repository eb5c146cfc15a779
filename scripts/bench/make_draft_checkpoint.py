#!/usr/bin/python3
"""Writes a draft model for `deno task bench native`'s draft-model speculation rows, made from the target checkpoint's
own weights, so it shares the target's vocabulary and tokenizer:

    /usr/bin/python3 scripts/bench/make_draft_checkpoint.py TARGET_DIR OUT_DIR [--layers N] [--bf16]

--layers N keeps the first N decoder layers ("layer skip": the draft runs N of the target's layers, then the target's
final norm and output head); --bf16 stores the weights as bf16 (round to nearest even), so a draft beside an fp32
target reads half the bytes per token (the native library loads each checkpoint in its own dtype unless --dtype says
otherwise). Without --layers every layer is kept. TARGET_DIR holds config.json and a single fp32 or bf16
model.safetensors; OUT_DIR gets config.json (num_hidden_layers = N, torch_dtype, the rest as the target's),
model.safetensors and the target's tokenizer files when present. Writes OUT_DIR/complete last, so a run that was cut
off is redone, not reused.
"""

import json
import os
import re
import shutil
import struct
import sys

LAYER = re.compile(r"^model\.layers\.(\d+)\.")
CHUNK = 64 << 20


def read_header(path: str) -> tuple[dict, int]:
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        return json.loads(f.read(n)), 8 + n


def to_bf16(raw: bytes) -> bytes:
    """fp32 little-endian bytes → bf16, round to nearest even (NaN stays NaN: its payload's top bits are kept)."""
    import numpy as np

    u = np.frombuffer(raw, dtype="<u4").astype(np.uint64)
    rounded = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
    nan = (u & 0x7FFFFFFF) > 0x7F800000
    out = np.where(nan, (u >> 16) | 0x40, rounded).astype("<u2")
    return out.tobytes()


def main() -> None:
    args = sys.argv[1:]
    if len(args) < 2:
        sys.exit("usage: make_draft_checkpoint.py TARGET_DIR OUT_DIR [--layers N] [--bf16]")
    target, out = args[0], args[1]
    with open(os.path.join(target, "config.json")) as f:
        config = json.load(f)
    total = int(config["num_hidden_layers"])
    layers = int(args[args.index("--layers") + 1]) if "--layers" in args else total
    bf16 = "--bf16" in args
    if not 1 <= layers <= total:
        sys.exit(f"--layers {layers}: the target has {total} layers")
    src = os.path.join(target, "model.safetensors")
    header, data_start = read_header(src)
    kept = {}
    for name, meta in header.items():
        if name == "__metadata__":
            continue
        m = LAYER.match(name)
        if m is None or int(m.group(1)) < layers:
            if bf16 and meta["dtype"] not in ("F32", "BF16"):
                sys.exit(f"{src}: tensor {name} is {meta['dtype']}; --bf16 converts F32 only")
            kept[name] = meta
    os.makedirs(out, exist_ok=True)
    complete = os.path.join(out, "complete")
    if os.path.exists(complete):
        os.remove(complete)
    order = sorted(kept, key=lambda k: kept[k]["data_offsets"][0])
    new_header: dict = {"__metadata__": header.get("__metadata__", {"format": "pt"})}
    off = 0
    for name in order:
        a, b = kept[name]["data_offsets"]
        size, dtype = b - a, kept[name]["dtype"]
        if bf16 and dtype == "F32":
            size, dtype = size // 2, "BF16"
        new_header[name] = {"dtype": dtype, "shape": kept[name]["shape"], "data_offsets": [off, off + size]}
        off += size
    h = json.dumps(new_header, separators=(",", ":")).encode("utf-8")
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(src, "rb") as fin, open(os.path.join(out, "model.safetensors"), "wb") as fout:
        fout.write(struct.pack("<Q", len(h)))
        fout.write(h)
        for name in order:
            a, b = kept[name]["data_offsets"]
            convert = bf16 and kept[name]["dtype"] == "F32"
            fin.seek(data_start + a)
            left = b - a
            while left > 0:
                buf = fin.read(min(CHUNK, left))
                if not buf or (convert and len(buf) % 4):
                    sys.exit(f"{src}: truncated in tensor {name}")
                fout.write(to_bf16(buf) if convert else buf)
                left -= len(buf)
    config["num_hidden_layers"] = layers
    if isinstance(config.get("layer_types"), list):
        config["layer_types"] = config["layer_types"][:layers]
    if bf16:
        config["torch_dtype"] = "bfloat16"
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    for extra in ("tokenizer.json", "tokenizer_config.json", "generation_config.json"):
        p = os.path.join(target, extra)
        if os.path.exists(p):
            shutil.copyfile(p, os.path.join(out, extra))
    with open(complete, "w") as f:
        f.write("ok\n")


if __name__ == "__main__":
    main()
