#!/usr/bin/env python3
"""
rill's CUDA device checked on a GPU machine (nvcc, torch, transformers; no Deno needed):

  python3 scripts/gpu_check.py [--skip-8b] [--skip-bench] [--prebuilt] [--only A,B] [--deadline S] [--workdir DIR]
                               [--log FILE] [--out DIR]

Each step runs in its own process with a time limit (a crash, a hang or a sticky CUDA error costs that step alone);
the steps' whole output goes to build/gpu_check/steps.log (--log), the table to standard output.

1. builds the native library (ffi/src and ffi/devices/*/*.c with cc, ffi/devices/cuda with nvcc, sm_80/89/90a + PTX) into build/gpu_check/;
2. makes random-initialised bf16 checkpoints with transformers (Llama-3.2-1B, Qwen3-0.6B and Qwen3-8B shapes) and
   compares the CUDA device's logits with transformers' (fp32 forward over the same bf16 weights) for a mixed-length
   prefill paged across shuffled blocks and 32 decode steps;
3. compares the CUDA device with the CPU device on the bundled models (bf16 weights and KV on both);
4. greedy decoding with and without speculation (drafts verified in the step) gives the same tokens;
5. batch invariance: a sequence's decode logits are bitwise the same alone and in a batch of 8; decode and verify
   steps replayed from CUDA graphs give bitwise the logits of the same steps run eagerly (RILL_CUDA_GRAPHS=0);
6. compute-sanitizer memcheck, racecheck and synccheck over prefill, decode and verify steps of the bundled model and
   the gpt-oss fixture;
7. benchmarks on the Qwen3-8B shape: decode tokens/s at batch 1, 8, 64, 256 with 1k-token contexts, prefill tokens/s
   for 1k and 8k prompts, start-up time, and each decode figure as a fraction of the roofline (bytes read per step
   divided by the device-to-device copy bandwidth measured in the same run), speculation at batch 1 with every
   draft right (a repetitive task's upper bound; target 2x), and an ncu profile of decode steps at
   batch 1, 8 and 64 (time and DRAM bytes per kernel; the raw CSVs go to --out);
8. the gpt-oss-20b shape (random weights in the release layout, MXFP4 experts kept packed): start-up, prefill, decode
   at batch 1 against the roofline of the bytes it reads (4 experts a layer; target 75%) and at batch 8;
9. bench/gpu/skinny_variants.cu: launch variants of the weight-streaming kernel for 1 to 16 tokens, timed and checked
   bit for bit against the launch the library makes.

It prints one table and exits 1 when any check or target misses. The library is driven over ctypes through the C ABI
(ffi/include/rill.h); the structs below mirror it field for field.
"""

import argparse
import ctypes as C
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "build" / "gpu_check"
LIB = OUT / "librill.so"

# ---- the C ABI (ffi/include/rill.h) ----


class Options(C.Structure):
    _fields_ = [
        ("device", C.c_char_p), ("dtype", C.c_char_p), ("kv_dtype", C.c_char_p), ("draft_model_dir", C.c_char_p),
        ("threads", C.c_int32), ("block_size", C.c_int32), ("num_blocks", C.c_int32), ("kv_bytes", C.c_int64),
        ("max_seqs", C.c_int32), ("max_batch_tokens", C.c_int32), ("max_drafts", C.c_int32),
        ("max_top_logprobs", C.c_int32), ("max_model_len", C.c_int32), ("gpu_memory_fraction", C.c_float),
        ("num_sliding_blocks", C.c_int32), ("sliding_kv_in_main", C.c_int32),
    ]


class Info(C.Structure):
    _fields_ = [(n, C.c_int32) for n in (
        "abi_version", "vocab_size", "max_positions", "block_size", "num_blocks", "max_batch_tokens", "max_seqs",
        "max_drafts", "max_top_logprobs", "shares_prefix_blocks", "num_layers", "hidden_size", "num_heads",
        "num_kv_heads", "head_dim", "threads")] + [
        ("weight_bytes", C.c_int64), ("kv_bytes", C.c_int64), ("device", C.c_char * 32), ("isa", C.c_char * 32),
        ("dtype", C.c_char * 16), ("kv_dtype", C.c_char * 16), ("architecture", C.c_char * 64),
        ("draft_weight_bytes", C.c_int64), ("sliding_window", C.c_int32), ("num_sliding_blocks", C.c_int32),
        ("sliding_kv_bytes", C.c_int64)]


I32P, F32P, U8P, U64P, U32P = (C.POINTER(C.c_int32), C.POINTER(C.c_float), C.POINTER(C.c_uint8),
                               C.POINTER(C.c_uint64), C.POINTER(C.c_uint32))


# rill_step_batch's pointer fields by pointee type (the library's rill_step_batch_signature names them).
POINTEE = {"int32_t": I32P, "uint8_t": U8P, "uint32_t": U32P, "uint64_t": U64P, "float": F32P}
# The fields Engine._batch fills (the others stay NULL, which the library accepts only where rill.h allows it).
FILLED = {"seq_ids", "tokens", "positions", "query_start", "context_lens", "draft_counts", "sample_flags",
          "block_tables", "temperature", "top_p", "top_k", "min_p", "presence_penalty", "frequency_penalty",
          "repetition_penalty", "seeds", "logprobs", "mask_row_start", "history_start", "history_prompt_lens",
          "bias_start", "allowed_mask", "history", "bias_ids", "bias_values", "propose_counts",
          "sliding_block_tables"}


def step_batch_type(signature):
    """rill_step_batch as a ctypes struct, field for field from the library's own description of it (counts, then
    pointers), so this script follows the struct wherever rill.h moves it; a field it would not fill is an error."""
    counts, pointers = signature.split(";")
    fields = [(n, C.c_int32) for n in counts.split(",") if n]
    for entry in (e for e in pointers.split(",") if e):
        name, pointee = entry.split(":")
        if pointee not in POINTEE:
            raise RuntimeError(f"rill_step_batch.{name}: pointee {pointee} unknown to this script")
        if name not in FILLED:
            raise RuntimeError(f"rill_step_batch.{name}: a field Engine._batch does not fill; update this script")
        fields.append((name, POINTEE[pointee]))
    return type("StepBatch", (C.Structure,), {"_fields_": fields})


StepBatch = None  # set by load_library


class StepResult(C.Structure):
    _fields_ = [("counts", I32P), ("tokens", I32P), ("logprobs", F32P), ("top_ids", I32P), ("top_logprobs", F32P),
                ("proposed_counts", I32P), ("proposed", I32P)]


ABI_VERSION = 4  # the rill.h these structs mirror


def load_library(path=None):
    global StepBatch
    lib = C.CDLL(str(path or LIB))
    if lib.rill_abi_version() != ABI_VERSION:
        raise RuntimeError(f"library ABI {lib.rill_abi_version()}, this script mirrors ABI {ABI_VERSION}: update it")
    lib.rill_step_batch_signature.restype = C.c_char_p
    StepBatch = step_batch_type(lib.rill_step_batch_signature().decode())
    lib.rill_engine_create.argtypes = [C.c_char_p, C.POINTER(Options), C.POINTER(C.c_void_p)]
    lib.rill_engine_create.restype = C.c_int
    lib.rill_engine_destroy.argtypes = [C.c_void_p]
    lib.rill_engine_info.argtypes = [C.c_void_p, C.POINTER(Info)]
    lib.rill_step.argtypes = [C.c_void_p, C.POINTER(StepBatch), C.POINTER(StepResult)]
    lib.rill_forward_logits.argtypes = [C.c_void_p, C.POINTER(StepBatch), F32P]
    lib.rill_last_error.argtypes = [C.c_void_p]
    lib.rill_last_error.restype = C.c_char_p
    lib.rill_global_error.restype = C.c_char_p
    return lib


class Engine:
    """One engine; batches are built from plain Python lists of sequences."""

    def __init__(self, lib, model_dir, device, **opts):
        self.lib = lib
        o = Options()
        o.device = device.encode()
        o.dtype = b"bf16"
        o.kv_dtype = b"bf16"
        for k, v in opts.items():
            setattr(o, k, v)
        # Sliding layers (gpt-oss) keep a pool of their own; the checks hand them the main tables' block ids, so that
        # pool gets as many blocks as the main one.
        cfg = json.loads((Path(model_dir) / "config.json").read_text())
        if "sliding_attention" in (cfg.get("layer_types") or []) and o.num_blocks > 0 and o.num_sliding_blocks == 0:
            o.num_sliding_blocks = o.num_blocks
        h = C.c_void_p()
        t0 = time.perf_counter()
        s = lib.rill_engine_create(str(model_dir).encode(), C.byref(o), C.byref(h))
        self.startup_s = time.perf_counter() - t0
        if s != 0:
            raise RuntimeError(f"create {model_dir} on {device}: {lib.rill_global_error().decode()}")
        self.h = h
        self.info = Info()
        lib.rill_engine_info(h, C.byref(self.info))

    def close(self):
        if self.h:
            self.lib.rill_engine_destroy(self.h)
            self.h = None

    def _batch(self, seqs):
        """seqs: dicts with tokens (fed), start (position of the first fed token), table (block ids), drafts,
        sample (bool)."""
        import numpy as np
        B = len(seqs)
        T = sum(len(s["tokens"]) for s in seqs)
        stride = max(len(s["table"]) for s in seqs)
        a = {}
        a["seq_ids"] = np.array([s.get("id", i) for i, s in enumerate(seqs)], np.int32)
        a["tokens"] = np.array([t for s in seqs for t in s["tokens"]], np.int32)
        a["positions"] = np.array([s["start"] + j for s in seqs for j in range(len(s["tokens"]))], np.int32)
        qs = [0]
        for s in seqs:
            qs.append(qs[-1] + len(s["tokens"]))
        a["query_start"] = np.array(qs, np.int32)
        a["context_lens"] = np.array([s["start"] + len(s["tokens"]) for s in seqs], np.int32)
        a["draft_counts"] = np.array([s.get("drafts", 0) for s in seqs], np.int32)
        a["sample_flags"] = np.array([1 if s.get("sample", True) else 0 for s in seqs], np.uint8)
        tab = np.full((B, stride), -1, np.int32)
        for i, s in enumerate(seqs):
            tab[i, :len(s["table"])] = s["table"]
        a["block_tables"] = tab.reshape(-1)
        a["temperature"] = np.zeros(B, np.float32)
        a["top_p"] = np.ones(B, np.float32)
        a["top_k"] = np.zeros(B, np.int32)
        a["min_p"] = np.zeros(B, np.float32)
        a["presence_penalty"] = np.zeros(B, np.float32)
        a["frequency_penalty"] = np.zeros(B, np.float32)
        a["repetition_penalty"] = np.ones(B, np.float32)
        a["seeds"] = np.arange(B, dtype=np.uint64)
        a["logprobs"] = np.full(B, -1, np.int32)
        a["mask_row_start"] = np.full(B, -1, np.int32)
        a["history_start"] = np.zeros(B + 1, np.int32)
        a["history_prompt_lens"] = np.zeros(B, np.int32)
        a["bias_start"] = np.zeros(B + 1, np.int32)
        b = StepBatch()
        b.num_seqs, b.num_tokens, b.block_table_stride, b.num_mask_rows, b.history_len, b.bias_len = B, T, stride, 0, 0, 0
        ctypes_of = {np.int32: I32P, np.float32: F32P, np.uint8: U8P, np.uint64: U64P}
        for k, v in a.items():
            setattr(b, k, v.ctypes.data_as(ctypes_of[v.dtype.type]))
        b.allowed_mask = None
        b.history = None
        b.bias_ids = None
        b.bias_values = None
        b.propose_counts = None
        b.sliding_block_tables = None
        if self.info.sliding_window > 0:
            a["sliding_block_tables"] = a["block_tables"].copy()
            b.sliding_block_tables = a["sliding_block_tables"].ctypes.data_as(I32P)
        return b, a, T

    def logits(self, seqs):
        import numpy as np
        b, keep, T = self._batch(seqs)
        out = np.empty((T, self.info.vocab_size), np.float32)
        s = self.lib.rill_forward_logits(self.h, C.byref(b), out.ctypes.data_as(F32P))
        if s != 0:
            raise RuntimeError(self.lib.rill_last_error(self.h).decode())
        del keep
        return out

    def prepare(self, seqs):
        """A step's batch and result buffers, built once (so benchmarks time the step, not Python)."""
        import numpy as np
        b, keep, _ = self._batch(seqs)
        B, K1, L = len(seqs), self.info.max_drafts + 1, self.info.max_top_logprobs
        bufs = (np.zeros(B, np.int32), np.zeros(B * K1, np.int32), np.zeros(B * K1, np.float32),
                np.zeros(B * K1 * max(L, 1), np.int32), np.zeros(B * K1 * max(L, 1), np.float32))
        r = StepResult(bufs[0].ctypes.data_as(I32P), bufs[1].ctypes.data_as(I32P), bufs[2].ctypes.data_as(F32P),
                       bufs[3].ctypes.data_as(I32P), bufs[4].ctypes.data_as(F32P), None, None)
        return (b, keep, bufs, r, B, K1)

    def run(self, prepared):
        b, _keep, bufs, r, B, K1 = prepared
        s = self.lib.rill_step(self.h, C.byref(b), C.byref(r))
        if s != 0:
            raise RuntimeError(self.lib.rill_last_error(self.h).decode())
        counts, toks = bufs[0], bufs[1]
        return [list(toks[i * K1:i * K1 + counts[i]]) for i in range(B)]

    def step(self, seqs):
        """Greedy step; returns the accepted tokens of each sequence."""
        return self.run(self.prepare(seqs))


# ---- build ----

def run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, cmd))}\n{r.stdout}{r.stderr}")
    return r


def find_nvcc():
    """NVCC, else nvcc on the PATH, else the toolkit's default place."""
    nvcc = os.environ.get("NVCC") or shutil.which("nvcc")
    if nvcc is None and Path("/usr/local/cuda/bin/nvcc").exists():
        nvcc = "/usr/local/cuda/bin/nvcc"
    if nvcc is None:
        raise RuntimeError("nvcc not found (set NVCC)")
    return nvcc


def build():
    """The same sources and flags as scripts/build_ffi.ts, without Deno."""
    nvcc = find_nvcc()
    cc = os.environ.get("CC", "cc")
    obj = OUT / "obj"
    obj.mkdir(parents=True, exist_ok=True)
    inc = ["-I", str(ROOT / "ffi/include"), "-I", str(ROOT / "ffi/src"), "-I", str(ROOT / "ffi/devices")]
    cflags = ["-std=c17", "-Wall", "-Wextra", "-Werror", "-pthread", "-O2", "-fPIC", "-fvisibility=hidden", *inc]
    nvflags = ["-std=c++17", "-O3", "-Xcompiler", "-fPIC,-fvisibility=hidden,-Wall,-Wextra,-Werror", "--Werror",
               "all-warnings", *inc,
               "-gencode", "arch=compute_80,code=sm_80", "-gencode", "arch=compute_89,code=sm_89",
               "-gencode", "arch=compute_90a,code=sm_90a", "-gencode", "arch=compute_90,code=compute_90"]
    jobs = []
    c_sources = [*(ROOT / "ffi/src").rglob("*.c"), *(ROOT / "ffi/devices/cpu").rglob("*.c"),
                 *(p for p in (ROOT / "ffi/devices/cuda").glob("*.c") if p.name != "no_cuda.c")]
    for i, src in enumerate(sorted(c_sources)):
        jobs.append([cc, *cflags, "-c", str(src), "-o", str(obj / f"c{i}_{src.stem}.o")])
    for src in sorted((ROOT / "ffi/devices/cuda").glob("*.cu")):
        jobs.append([nvcc, *nvflags, "-c", str(src), "-o", str(obj / f"cu_{src.stem}.o")])
    with ThreadPoolExecutor(os.cpu_count() or 4) as ex:
        list(ex.map(run, jobs))
    objs = sorted(str(p) for p in obj.glob("*.o"))
    run([nvcc, "-shared", *objs, "-o", str(LIB), "-lm", "-lpthread", "-cudart", "static", "-ldl", "-lrt"])
    return nvcc


# ---- checkpoints ----

SHAPES = {
    # Llama-3.2-1B: tied embeddings, rope_scaling llama3.
    "llama3-1b": dict(arch="llama", hidden_size=2048, intermediate_size=8192, num_hidden_layers=16,
                      num_attention_heads=32, num_key_value_heads=8, head_dim=64, vocab_size=128256,
                      max_position_embeddings=131072, rope_theta=500000.0, rms_norm_eps=1e-5,
                      tie_word_embeddings=True,
                      rope_scaling={"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0,
                                    "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}),
    "qwen3-0.6b": dict(arch="qwen3", hidden_size=1024, intermediate_size=3072, num_hidden_layers=28,
                       num_attention_heads=16, num_key_value_heads=8, head_dim=128, vocab_size=151936,
                       max_position_embeddings=40960, rope_theta=1000000.0, rms_norm_eps=1e-6,
                       tie_word_embeddings=True),
    "qwen3-8b": dict(arch="qwen3", hidden_size=4096, intermediate_size=12288, num_hidden_layers=36,
                     num_attention_heads=32, num_key_value_heads=8, head_dim=128, vocab_size=151936,
                     max_position_embeddings=40960, rope_theta=1000000.0, rms_norm_eps=1e-6,
                     tie_word_embeddings=False),
}


def make_checkpoint(name, workdir):
    import torch
    import transformers
    d = Path(workdir) / name
    if (d / "config.json").exists():
        return d
    spec = dict(SHAPES[name])
    arch = spec.pop("arch")
    cfg = (transformers.LlamaConfig if arch == "llama" else transformers.Qwen3Config)(**spec)
    torch.manual_seed(1234)
    torch.set_default_dtype(torch.bfloat16)
    try:
        with torch.device("cuda"):
            model = transformers.AutoModelForCausalLM.from_config(cfg)
    finally:
        torch.set_default_dtype(torch.float32)
    model.save_pretrained(d, safe_serialization=True)
    # rill reads rope_theta / rope_scaling at the top level (as transformers 4 wrote them); newer versions may nest
    # them in rope_parameters.
    path = d / "config.json"
    saved = json.loads(path.read_text())
    rp = saved.get("rope_parameters")
    if isinstance(rp, dict):
        saved.setdefault("rope_theta", rp.get("rope_theta", spec.get("rope_theta")))
        if rp.get("rope_type", "default") != "default" and not saved.get("rope_scaling"):
            saved["rope_scaling"] = rp
    path.write_text(json.dumps(saved, indent=2))
    del model
    torch.cuda.empty_cache()
    return d


# openai/gpt-oss-20b's shape (its config.json, the layer count aside).
GPTOSS_20B = dict(hidden=2880, intermediate=2880, heads=64, kv_heads=8, head_dim=64, experts=32, per_tok=4,
                  window=128, vocab=201088)


def gptoss_config(layers):
    a = GPTOSS_20B
    return {
        "architectures": ["GptOssForCausalLM"], "model_type": "gpt_oss", "vocab_size": a["vocab"],
        "hidden_size": a["hidden"], "intermediate_size": a["intermediate"], "num_hidden_layers": layers,
        "num_attention_heads": a["heads"], "num_key_value_heads": a["kv_heads"], "head_dim": a["head_dim"],
        "num_local_experts": a["experts"], "num_experts_per_tok": a["per_tok"], "experts_per_token": a["per_tok"],
        "layer_types": ["sliding_attention" if i % 2 == 0 else "full_attention" for i in range(layers)],
        "sliding_window": a["window"], "max_position_embeddings": 131072, "initial_context_length": 4096,
        "rms_norm_eps": 1e-5, "rope_theta": 150000,
        "rope_scaling": {"rope_type": "yarn", "factor": 32.0, "beta_fast": 32.0, "beta_slow": 1.0,
                         "original_max_position_embeddings": 4096, "truncate": False},
        "swiglu_limit": 7.0, "attention_bias": True, "hidden_act": "silu", "tie_word_embeddings": False,
        "eos_token_id": 200002, "pad_token_id": 199999,
        "quantization_config": {"modules_to_not_convert": ["model.layers.*.self_attn", "model.layers.*.mlp.router",
                                                           "model.embed_tokens", "lm_head"], "quant_method": "mxfp4"},
    }


def make_gptoss_checkpoint(workdir, layers=24):
    """A gpt-oss-20b-shaped checkpoint in the release layout with random weights: MXFP4 experts (U8 blocks and
    scales), everything else BF16, one shard per layer plus one for the embedding, head and final norm, and the index.
    Drawn on the GPU when there is one (13.8 GB at 24 layers)."""
    import torch
    sys.path.insert(0, str(ROOT / "scripts"))
    from safetensors_file import write_safetensors_file
    d = Path(workdir) / f"gpt-oss-20b-shape-{layers}"
    if (d / "config.json").exists():
        return d
    d.mkdir(parents=True, exist_ok=True)
    a = GPTOSS_20B
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    g = torch.Generator(device=dev).manual_seed(20)
    H, I, E, QD, KD = a["hidden"], a["intermediate"], a["experts"], a["heads"] * a["head_dim"], a["kv_heads"] * a["head_dim"]

    def bf16(*shape, std, mean=0.0):
        t = (torch.randn(*shape, generator=g, device=dev) * std + mean).to(torch.bfloat16)
        return ("BF16", shape, t.view(torch.int16).cpu().numpy().tobytes())

    def u8(*shape, lo, hi):
        t = torch.randint(lo, hi, shape, generator=g, device=dev, dtype=torch.int32).to(torch.uint8)
        return ("U8", shape, t.cpu().numpy().tobytes())

    weight_map = {}
    files = []
    for i in range(layers):
        p = f"model.layers.{i}."
        t = {
            p + "input_layernorm.weight": bf16(H, std=0.1, mean=1.0),
            p + "post_attention_layernorm.weight": bf16(H, std=0.1, mean=1.0),
            p + "self_attn.q_proj.weight": bf16(QD, H, std=H ** -0.5), p + "self_attn.q_proj.bias": bf16(QD, std=0.2),
            p + "self_attn.k_proj.weight": bf16(KD, H, std=H ** -0.5), p + "self_attn.k_proj.bias": bf16(KD, std=0.2),
            p + "self_attn.v_proj.weight": bf16(KD, H, std=H ** -0.5), p + "self_attn.v_proj.bias": bf16(KD, std=0.2),
            p + "self_attn.o_proj.weight": bf16(H, QD, std=QD ** -0.5), p + "self_attn.o_proj.bias": bf16(H, std=0.2),
            p + "self_attn.sinks": bf16(a["heads"], std=1.0),
            p + "mlp.router.weight": bf16(E, H, std=3.0 * H ** -0.5), p + "mlp.router.bias": bf16(E, std=0.5),
            # Scales near 2^-6: gate/up pre-activations of a few units, so the ±7 clamps bite now and then.
            p + "mlp.experts.gate_up_proj_blocks": u8(E, 2 * I, H // 32, 16, lo=0, hi=256),
            p + "mlp.experts.gate_up_proj_scales": u8(E, 2 * I, H // 32, lo=119, hi=122),
            p + "mlp.experts.gate_up_proj_bias": bf16(E, 2 * I, std=0.5),
            p + "mlp.experts.down_proj_blocks": u8(E, H, I // 32, 16, lo=0, hi=256),
            p + "mlp.experts.down_proj_scales": u8(E, H, I // 32, lo=116, hi=119),
            p + "mlp.experts.down_proj_bias": bf16(E, H, std=0.2),
        }
        files.append((f"model-{i:05d}-of-{layers:05d}.safetensors", t))
    # Written one shard at a time, so at most one layer's bytes are held.
    head = {"model.embed_tokens.weight": bf16(a["vocab"], H, std=1.0), "model.norm.weight": bf16(H, std=0.1, mean=1.0),
            "lm_head.weight": bf16(a["vocab"], H, std=3.0 * H ** -0.5)}
    write_safetensors_file(str(d / f"model-{layers:05d}-of-{layers:05d}.safetensors"), head)
    weight_map.update({n: f"model-{layers:05d}-of-{layers:05d}.safetensors" for n in head})
    del head
    for name, t in files:
        write_safetensors_file(str(d / name), t)
        weight_map.update({n: name for n in t})
    (d / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}, indent=1))
    (d / "config.json").write_text(json.dumps(gptoss_config(layers), indent=2))
    return d


def gptoss_step_bytes(layers, experts_read, ctx):
    """Bytes a gpt-oss-20b-shaped decode step reads on the CUDA device (bf16 attention, router and head, MXFP4 experts
    at 17 bytes per 32 weights, bf16 KV): each layer's attention and router, `experts_read` experts of each layer
    (their biases too), the head, and one sequence's KV (full layers all `ctx` positions, sliding ones the window)."""
    a = GPTOSS_20B
    H, I, QD, KD = a["hidden"], a["intermediate"], a["heads"] * a["head_dim"], a["kv_heads"] * a["head_dim"]
    attention = 2 * (QD * H + 2 * KD * H + H * QD + QD + 2 * KD + H + a["heads"]) + 2 * (a["experts"] * (H + 1))
    expert = (2 * I * H + H * I) // 32 * 17 + 2 * (2 * I + H)
    return layers * (attention + experts_read * expert) + 2 * a["vocab"] * H + gptoss_kv_bytes(layers, ctx)


def gptoss_kv_bytes(layers, ctx):
    """Bytes of bf16 keys and values one sequence's decode step reads at context ctx (even layers slide)."""
    a = GPTOSS_20B
    per_position = 2 * a["kv_heads"] * a["head_dim"] * 2
    return sum(per_position * (min(ctx, a["window"]) if i % 2 == 0 else ctx) for i in range(layers))


def bench_gptoss(lib, model_dir, table, bw, layers):
    """Decode of the gpt-oss-20b shape at batch 1 and 8 with 1k-token contexts: tokens/s, and at batch 1 the fraction
    of the roofline of the bytes it reads (4 experts a layer); at batch 8 the bounds with 4 and with all 32 experts."""
    e = Engine(lib, model_dir, "cuda", max_seqs=8, max_batch_tokens=2048, max_model_len=4096)
    try:
        i = e.info
        table.add("gpt-oss-20b shape: start-up (read + upload + graphs)", f"{e.startup_s:.1f} s", "info", True)
        V, bs, ctx = i.vocab_size, i.block_size, 1024
        rng = random.Random(4)
        shared = list(range(ctx // bs))
        t0 = time.perf_counter()
        e.step([{"tokens": [rng.randrange(V) for _ in range(ctx)], "start": 0, "table": shared}])
        table.add("gpt-oss-20b shape: prefill 1024 tokens", f"{ctx / (time.perf_counter() - t0):,.0f} tok/s", "info",
                  True)
        for B in (1, 8):
            tabs = [shared + list(range(len(shared) + s * 4, len(shared) + (s + 1) * 4)) for s in range(B)]
            steps = 32
            dt = decode_step_seconds(e, tabs, ctx, rng, steps)
            if B == 1:
                roof = gptoss_step_bytes(layers, GPTOSS_20B["per_tok"], ctx + steps // 2) / bw / dt
                table.add("gpt-oss-20b shape: decode batch 1 (1k context)",
                          f"{1 / dt:,.0f} tok/s, {dt * 1e3:.2f} ms/step, {roof:.0%} of roofline", ">= 75% of roofline",
                          roof >= 0.75)
            else:
                kv = (B - 1) * gptoss_kv_bytes(layers, ctx)
                lo = (gptoss_step_bytes(layers, GPTOSS_20B["per_tok"], ctx) + kv) / bw / dt
                hi = (gptoss_step_bytes(layers, GPTOSS_20B["experts"], ctx) + kv) / bw / dt
                table.add(f"gpt-oss-20b shape: decode batch {B} (1k context)",
                          f"{B / dt:,.0f} tok/s, {dt * 1e3:.2f} ms/step, {lo:.0%}–{hi:.0%} of roofline", "info", True)
    finally:
        e.close()


def hf_reference(model_dir, sequences, dtype):
    """Logits (as fp32) of each full token sequence, computed by transformers in `dtype` from the same bf16 weights:
    float32 is the reference, bfloat16 the yardstick (what transformers itself gives in the weights' precision)."""
    import torch
    import transformers
    model = transformers.AutoModelForCausalLM.from_pretrained(model_dir, dtype=dtype).cuda().eval()
    outs = []
    with torch.no_grad():
        for seq in sequences:
            ids = torch.tensor([seq], device="cuda")
            outs.append(model(ids).logits[0].float().cpu().numpy())
    del model
    torch.cuda.empty_cache()
    return outs


# ---- checks ----

class Table:
    """The result rows; in a step's own process each row is also appended to the parent's rows file as it is added,
    so the rows before a crash survive it."""

    def __init__(self, rows_file=None):
        self.rows = []
        self.rows_file = rows_file

    def add(self, what, value, target, ok):
        self.rows.append((what, value, target, "ok" if ok else "MISS"))
        print(f"  {what}: {value} (target {target}) {'ok' if ok else 'MISS'}", flush=True)
        if self.rows_file is not None:
            with open(self.rows_file, "a") as f:
                f.write(json.dumps([what, str(value), str(target), bool(ok)]) + "\n")

    def print(self):
        w = [max(len(str(r[i])) for r in self.rows + [("check", "value", "target", "")]) for i in range(4)]
        line = lambda r: " | ".join(str(c).ljust(w[i]) for i, c in enumerate(r))
        print()
        print(line(("check", "value", "target", "")))
        print("-+-".join("-" * x for x in w))
        for r in self.rows:
            print(line(r))
        return all(r[3] == "ok" for r in self.rows)


def rel_err(a, b):
    import numpy as np
    return float(np.abs(a - b).max() / max(np.abs(b).max(), 1e-6))


def paged(lengths, block_size, rng):
    """Shuffled, distinct block ids for sequences of the given final lengths."""
    need = [(n + block_size - 1) // block_size for n in lengths]
    ids = list(range(sum(need)))
    rng.shuffle(ids)
    tables, at = [], 0
    for k in need:
        tables.append(ids[at:at + k])
        at += k
    return tables


def check_vs_transformers(lib, model_dir, name, table, tol):
    """Mixed-length prefill across shuffled blocks, then 32 decode steps, against transformers' fp32 forward. The bound
    is tol, or transformers' own bf16 forward's distance from its fp32 one where that is larger: rill keeps bf16 KV
    and multiplies bf16-rounded activations above 16 tokens, so on deep shapes it is measured against what the same
    precision gives in transformers."""
    import torch
    rng = random.Random(7)
    lengths = [700, 37, 129]
    decode = 32
    cfg = json.loads((Path(model_dir) / "config.json").read_text())
    V = cfg["vocab_size"]
    seqs = [[rng.randrange(V) for _ in range(n + decode)] for n in lengths]
    ref = hf_reference(model_dir, seqs, torch.float32)
    low = hf_reference(model_dir, seqs, torch.bfloat16)
    yard_prefill = max(rel_err(lo[:n], r[:n]) for lo, r, n in zip(low, ref, lengths))
    yard_decode = max(rel_err(lo[n:], r[n:]) for lo, r, n in zip(low, ref, lengths))
    e = Engine(lib, model_dir, "cuda", max_seqs=8, max_batch_tokens=2048, gpu_memory_fraction=0.5, max_model_len=4096)
    try:
        tables = paged([n + decode for n in lengths], e.info.block_size, rng)
        got = e.logits([{"tokens": s[:n], "start": 0, "table": t} for s, n, t in zip(seqs, lengths, tables)])
        worst, at = 0.0, 0
        for s, n, r in zip(seqs, lengths, ref):
            worst = max(worst, rel_err(got[at:at + n], r[:n]))
            at += n
        bound = max(tol, yard_prefill)
        table.add(f"{name}: GEMM above 16 tokens", gemm_of(e.info.isa.decode()), "info", True)
        table.add(f"{name}: prefill logits vs transformers fp32 (rel)",
                  f"{worst:.2e} (transformers bf16: {yard_prefill:.2e})", f"<= {bound:.2e}", worst <= bound)
        worst = 0.0
        for k in range(decode):
            out = e.logits([{"tokens": [s[n + k]], "start": n + k, "table": t}
                            for s, n, t in zip(seqs, lengths, tables)])
            for i, (n, r) in enumerate(zip(lengths, ref)):
                worst = max(worst, rel_err(out[i:i + 1], r[n + k:n + k + 1]))
        bound = max(tol, yard_decode)
        table.add(f"{name}: 32 decode steps vs transformers fp32 (rel)",
                  f"{worst:.2e} (transformers bf16: {yard_decode:.2e})", f"<= {bound:.2e}", worst <= bound)
    finally:
        e.close()


# Steps above 16 fed tokens multiply bf16-rounded activations (cuBLASLt or the tiled kernel; the CPU device keeps them
# fp32): their logits, and the decodes over the keys and values they wrote, sit further from the CPU device's, by
# about one bf16 rounding (2^-8 relative) per input compounded over the layers. test_cuda_emu measures up to 1.6e-2 on
# the bundled shapes and bounds it by 3.2e-2; this is the same bound.
CPU_TOL = 3.2e-2


def find_cublaslt():
    """The folder holding libcublasLt.so* from the pip nvidia packages (nvidia-cublas-cu12/13), or None."""
    try:
        import nvidia.cublas  # noqa: F401
        for base in nvidia.cublas.__path__:
            if any((Path(base) / "lib").glob("libcublasLt.so*")):
                return str(Path(base) / "lib")
    except ImportError:
        pass
    import site
    for sp in [*site.getsitepackages(), site.getusersitepackages()]:
        for hit in sorted(Path(sp).glob("nvidia/**/libcublasLt.so*")):
            return str(hit.parent)
    return None


def check_cublaslt_enums(table):
    """The enum values ffi/devices/cuda/gemm_lt.cu passes to cuBLASLt (it has no cuBLAS headers where it is built) against the
    real cublasLt.h / cublas_api.h / library_types.h of this machine's CUDA installs (pip nvidia packages, the toolkit)."""
    import re
    import site
    roots = [Path(p) for p in [*site.getsitepackages(), site.getusersitepackages()]]
    roots += [Path("/usr/local/cuda/include"), Path(os.environ.get("CUDA_HOME", "/usr/local/cuda")) / "include"]
    headers = {}
    for name in ("cublasLt.h", "cublas_api.h", "library_types.h"):
        for root in roots:
            hits = sorted(root.glob(f"**/{name}")) if root.is_dir() else []
            if hits:
                headers[name] = hits[0].read_text(errors="replace")
                break
    missing = [n for n in ("cublasLt.h", "cublas_api.h", "library_types.h") if n not in headers]
    if missing:
        table.add("cuBLASLt enum values vs headers", f"headers not found: {', '.join(missing)}", "found", False)
        return
    text = "\n".join(headers.values())

    def value(sym):
        m = re.search(rf"\b{sym}\s*=\s*(\d+)", text)
        return int(m.group(1)) if m else None
    want = {"CUBLAS_COMPUTE_32F": 68, "CUBLASLT_MATMUL_DESC_TRANSA": 3, "CUBLASLT_MATMUL_DESC_TRANSB": 4,
            "CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES": 1, "CUBLAS_OP_N": 0, "CUBLAS_OP_T": 1, "CUBLASLT_ORDER_COL": 0,
            "CUDA_R_16BF": 14, "CUDA_R_32F": 0}
    src = (ROOT / "ffi/devices/cuda/gemm_lt.cu").read_text()
    wrong = []
    for sym, v in want.items():
        # The value gemm_lt.cu documents beside its constant must be the one it uses and the header's.
        if not re.search(rf"{sym}\s*=\s*{v}\b", src) and sym not in ("CUDA_R_16BF", "CUDA_R_32F"):
            wrong.append(f"{sym}: gemm_lt.cu does not say {v}")
        got = value(sym)
        if got != v:
            wrong.append(f"{sym}: header {got}, rill {v}")
    table.add("cuBLASLt enum values vs headers", "; ".join(wrong) if wrong else f"{len(want)} equal", "equal",
              not wrong)


def check_vs_cpu(lib, model_dir, table):
    rng = random.Random(3)
    cpu = Engine(lib, model_dir, "cpu", max_seqs=8, max_batch_tokens=512, num_blocks=256)
    gpu = Engine(lib, model_dir, "cuda", max_seqs=8, max_batch_tokens=512, num_blocks=256)
    try:
        V, P = cpu.info.vocab_size, cpu.info.max_positions
        lengths = [min(P - 8, 40), 7, min(P - 8, 23)]
        tables = paged([n + 8 for n in lengths], cpu.info.block_size, rng)
        seqs = [{"tokens": [rng.randrange(V) for _ in range(n)], "start": 0, "table": t}
                for n, t in zip(lengths, tables)]
        worst = rel_err(gpu.logits(seqs), cpu.logits(seqs))
        for k in range(4):
            dec = [{"tokens": [rng.randrange(V)], "start": n + k, "table": t} for n, t in zip(lengths, tables)]
            worst = max(worst, rel_err(gpu.logits(dec), cpu.logits(dec)))
        name = Path(model_dir).name
        isa = gpu.info.isa.decode()
        tol = CPU_TOL
        table.add(f"{name}: GEMM above 16 tokens", gemm_of(isa), "info", True)
        table.add(f"{name}: cuda vs cpu logits (rel)", f"{worst:.2e}", f"<= {tol:g}", worst <= tol)
    finally:
        cpu.close()
        gpu.close()


steps_taken = [0]


def greedy(e, prompt, n, table_ids, drafts_from=None, k=4, corrupt=True):
    """Greedy continuation of n tokens; with drafts_from, each step proposes the next k tokens of that list (a
    perfect proposer, corrupted every third step so rejections happen too, unless corrupt is False)."""
    out = []
    steps_taken[0] = 0
    feed = list(prompt)
    start = 0
    step = 0
    while len(out) < n:
        drafts = []
        # Drafts ride on decode steps only, never on a prompt (engine/scheduler.ts): a prompt above 16 tokens goes
        # through cuBLASLt, whose rounding may depend on the step's row count.
        if drafts_from is not None and step > 0:
            drafts = list(drafts_from[len(out):len(out) + k])
            if corrupt and step % 3 == 2 and drafts:
                drafts[-1] = (drafts[-1] + 1) % e.info.vocab_size
        toks = e.step([{"tokens": feed + drafts, "start": start, "table": table_ids, "drafts": len(drafts)}])[0]
        step += 1
        out.extend(toks)
        steps_taken[0] += 1
        # KV now holds everything fed before the drafts plus the accepted drafts; the last token is fed next.
        start = start + len(feed) + len(toks) - 1
        feed = [toks[-1]]
    return out[:n]


def check_speculation(lib, model_dir, table):
    rng = random.Random(5)
    e = Engine(lib, model_dir, "cuda", max_seqs=8, max_batch_tokens=512, num_blocks=64, max_drafts=4)
    try:
        prompt = [rng.randrange(e.info.vocab_size) for _ in range(21)]
        tab = list(range(16))
        plain = greedy(e, prompt, 48, tab)
        plain_steps = steps_taken[0]
        spec = greedy(e, prompt, 48, tab, drafts_from=plain)
        ok = plain == spec and steps_taken[0] < plain_steps
        part = next((i for i, (a, b) in enumerate(zip(plain, spec)) if a != b), None)
        where = "" if part is None else f", first differs at token {part}"
        table.add(f"{Path(model_dir).name}: greedy equal with speculation on/off",
                  f"{plain == spec} ({plain_steps} vs {steps_taken[0]} steps{where})", "True, fewer steps", ok)
    finally:
        e.close()


def check_batch_invariance(lib, model_dir, table):
    import numpy as np
    rng = random.Random(9)
    e = Engine(lib, model_dir, "cuda", max_seqs=16, max_batch_tokens=1024, num_blocks=512)
    try:
        V = e.info.vocab_size
        tables = paged([64] * 8, e.info.block_size, rng)
        prompts = [[rng.randrange(V) for _ in range(40 + i)] for i in range(8)]
        e.logits([{"tokens": p, "start": 0, "table": t} for p, t in zip(prompts, tables)])
        tok = rng.randrange(V)
        alone = e.logits([{"tokens": [tok], "start": len(prompts[0]), "table": tables[0]}])
        batch = e.logits([{"tokens": [tok if i == 0 else rng.randrange(V)], "start": len(p), "table": t}
                          for i, (p, t) in enumerate(zip(prompts, tables))])
        same = bool(np.array_equal(alone[0], batch[0]))
        table.add(f"{Path(model_dir).name}: decode logits alone == in a batch of 8", str(same), "True (bitwise)", same)
    finally:
        e.close()


def check_graphs(lib, model_dir, table):
    """Decode and verify steps replayed from CUDA graphs (padded to their bucket) against the same steps run eagerly
    (RILL_CUDA_GRAPHS=0 at create): bitwise the same logits, over batches of different sizes sharing buckets."""
    import numpy as np
    rng = random.Random(11)
    os.environ["RILL_CUDA_GRAPHS"] = "0"
    try:
        eager = Engine(lib, model_dir, "cuda", max_seqs=16, max_batch_tokens=1024, num_blocks=512)
    finally:
        del os.environ["RILL_CUDA_GRAPHS"]
    graphs = Engine(lib, model_dir, "cuda", max_seqs=16, max_batch_tokens=1024, num_blocks=512)
    try:
        table.add(f"{Path(model_dir).name}: CUDA graphs captured at start-up",
                  graphs.info.isa.decode().rsplit(" g", 1)[-1], "> 0", not graphs.info.isa.decode().endswith(" g0"))
        V = graphs.info.vocab_size
        tables = paged([96] * 8, graphs.info.block_size, rng)
        lens = [30 + 3 * i for i in range(8)]
        prompts = [{"tokens": [rng.randrange(V) for _ in range(n)], "start": 0, "table": t}
                   for n, t in zip(lens, tables)]
        same = bool(np.array_equal(graphs.logits(prompts), eager.logits(prompts)))
        for size, fed in [(3, 1), (5, 1), (8, 1), (2, 4), (3, 3), (1, 2)]:
            step = [{"tokens": [rng.randrange(V) for _ in range(fed)], "start": lens[i], "table": tables[i]}
                    for i in range(size)]
            same = same and bool(np.array_equal(graphs.logits(step), eager.logits(step)))
            for i in range(size):
                lens[i] += fed
        table.add(f"{Path(model_dir).name}: graph-replayed steps == eager steps", str(same), "True (bitwise)", same)
    finally:
        graphs.close()
        eager.close()


def use_cublaslt():
    """Point the CUDA device at the pip nvidia-cublas package's libcublasLt (it loads it at create, RILL_CUBLASLT_DIR
    first); the default search path may hold none."""
    lt_dir = os.environ.get("RILL_CUBLASLT_DIR") or find_cublaslt()
    if lt_dir is not None:
        os.environ["RILL_CUBLASLT_DIR"] = lt_dir


def loads(path):
    """Whether the library at path loads and speaks this script's ABI (a build from another machine may not)."""
    r = subprocess.run([sys.executable, "-c", f"import ctypes; print(ctypes.CDLL({str(path)!r}).rill_abi_version())"],
                       capture_output=True, text=True)
    return r.returncode == 0 and r.stdout.strip() == str(ABI_VERSION)


def check_sanitizer(tool, table):
    """compute-sanitizer's memcheck, racecheck or synccheck over prefill, decode and verify steps on the bundled
    model and the gpt-oss fixture (graphs captured and replayed, cuBLASLt above 16 tokens, MoE, sinks, windows)."""
    sanitizer = shutil.which("compute-sanitizer") or str(Path(find_nvcc()).resolve().parent / "compute-sanitizer")
    if not Path(sanitizer).exists():
        table.add(f"compute-sanitizer {tool}", "not found", "0 errors", False)
        return
    extra = ["--racecheck-report", "all"] if tool == "racecheck" else []
    r = subprocess.run([sanitizer, "--tool", tool, *extra, "--error-exitcode", "9", sys.executable, __file__,
                        "--sanitizer-child"], capture_output=True, text=True, timeout=1800)
    text = r.stdout + r.stderr
    print(text[-6000:], flush=True)
    clean = r.returncode == 0 and ("ERROR SUMMARY: 0 errors" in text or "RACECHECK SUMMARY: 0 hazards" in text)
    summary = [ln for ln in text.splitlines() if "SUMMARY" in ln] or text.strip().splitlines()[-1:] or [""]
    table.add(f"compute-sanitizer {tool} (chatml and gpt-oss)", summary[-1].strip()[:80], "0 errors", clean)


def sanitizer_child():
    lib = load_library()
    for model in (ROOT / "models/rill-tiny-chatml", ROOT / "tests/fixtures/checkpoints/gptoss-bf16"):
        sanitized_steps(lib, model)


def sanitized_steps(lib, model):
    e = Engine(lib, model, "cuda", max_seqs=4, max_batch_tokens=256, num_blocks=64, max_drafts=4)
    try:
        e.logits([{"tokens": list(range(1, 40)), "start": 0, "table": [0, 1, 2, 3]},
                  {"tokens": list(range(5, 12)), "start": 0, "table": [4, 5]}])
        for k in range(4):
            e.step([{"tokens": [7], "start": 39 + k, "table": [0, 1, 2, 3]},
                    {"tokens": [9], "start": 7 + k, "table": [4, 5]}])
        e.step([{"tokens": [7, 8, 9, 10], "start": 43, "table": [0, 1, 2, 3], "drafts": 3}])
    finally:
        e.close()


# ---- benchmarks ----

def copy_bandwidth():
    """Device-to-device copy bandwidth in bytes/s (read + write), best of a few 2 GiB copies."""
    import torch
    n = 1 << 31
    a = torch.empty(n, dtype=torch.uint8, device="cuda")
    b = torch.empty_like(a)
    b.copy_(a)
    torch.cuda.synchronize()
    best = 0.0
    for _ in range(5):
        t0 = time.perf_counter()
        b.copy_(a)
        torch.cuda.synchronize()
        best = max(best, 2 * n / (time.perf_counter() - t0))
    del a, b
    torch.cuda.empty_cache()
    return best


def gemm_of(isa):
    """The GEMM path in rill_info.isa ("sm_90 cublasLt g10": the GEMM path between the arch and the graph count)."""
    return isa.split(" ", 1)[-1].rsplit(" g", 1)[0]


def decode_step_seconds(e, tabs, ctx, rng, steps):
    """Mean seconds of `steps` decode steps of len(tabs) sequences (block tables tabs) at positions ctx, ctx + 1, ….
    Fed tokens are fixed in advance (the timing is the same whatever is fed), so the batches are built untimed."""
    V = e.info.vocab_size
    batches = [e.prepare([{"tokens": [rng.randrange(V)], "start": ctx + k, "table": t} for t in tabs])
               for k in range(steps)]
    e.run(batches[0])  # warm-up at this batch size; rewrites the first slot of each sequence only
    t0 = time.perf_counter()
    for prepared in batches:
        e.run(prepared)
    return (time.perf_counter() - t0) / steps


def bench(lib, model_dir, table, bw):
    e = Engine(lib, model_dir, "cuda", max_seqs=256, max_batch_tokens=8192, max_drafts=4, max_model_len=9216)
    try:
        i = e.info
        table.add("8B: start-up (read weights + upload + buffers + graph capture)", f"{e.startup_s:.1f} s", "<= 20 s",
                  e.startup_s <= 20)
        table.add("8B: CUDA graphs (decode/verify buckets)", i.isa.decode().rsplit(" g", 1)[-1], "info", True)
        table.add("8B: KV pool", f"{i.num_blocks} blocks, {i.kv_bytes / 2**30:.1f} GiB", "info", True)
        V, bs = i.vocab_size, i.block_size
        tied = json.loads((Path(model_dir) / "config.json").read_text()).get("tie_word_embeddings", False)
        rng = random.Random(1)
        kv_per_token = 2 * i.num_layers * i.num_kv_heads * i.head_dim * 2
        for plen in (1024, 8192):
            t = list(range((plen + bs - 1) // bs))
            prompt = [rng.randrange(V) for _ in range(plen)]
            e.logits([{"tokens": prompt[:64], "start": 0, "table": t, "sample": False}])  # warm-up
            t0 = time.perf_counter()
            e.step([{"tokens": prompt, "start": 0, "table": t}])
            dt = time.perf_counter() - t0
            table.add(f"8B: prefill {plen} tokens", f"{plen / dt:,.0f} tok/s", "info", True)
        ctx = 1024
        # One 1k-token prefill whose blocks every sequence lists (prefix sharing), then each sequence's own blocks for
        # its decoded tokens: each still reads 1k tokens of KV per step, without 256 separate prefills.
        shared = list(range(ctx // bs))
        own = (64 + bs - 1) // bs
        e.step([{"tokens": [rng.randrange(V) for _ in range(ctx)], "start": 0, "table": shared}])
        for B in (1, 8, 64, 256):
            if len(shared) + B * own > i.num_blocks:
                table.add(f"8B: decode batch {B}", "KV pool too small", "fits", False)
                continue
            base = len(shared)
            tabs = [shared + list(range(base + s * own, base + (s + 1) * own)) for s in range(B)]
            steps = 32
            dt = decode_step_seconds(e, tabs, ctx, rng, steps)
            # A decode step reads every weight but the embedding table (only B rows of it), and each sequence's KV.
            embed = 0 if tied else V * i.hidden_size * 2
            bytes_step = i.weight_bytes - embed + B * (ctx + steps // 2) * kv_per_token
            roof = bytes_step / bw / dt
            line = f"{B / dt:,.0f} tok/s, {dt * 1e3:.2f} ms/step, {roof:.0%} of roofline"
            if B == 1:
                table.add("8B: decode batch 1 (1k context)", line, ">= 85% of roofline", roof >= 0.85)
            elif B == 256:
                table.add("8B: decode batch 256 (1k context)", line, ">= 10,000 tok/s", B / dt >= 10000)
            else:
                table.add(f"8B: decode batch {B} (1k context)", line, "info", True)
        # Speculation at batch 1 on a task the proposer gets right (a repetitive one: every draft accepted, 4 a
        # step), against plain greedy decoding of the same 64 tokens, each timed from the prompt on.
        tab = list(range(i.num_blocks - 8, i.num_blocks))
        prompt = [rng.randrange(V) for _ in range(64)]
        greedy(e, prompt, 8, tab)  # warm-up
        t0 = time.perf_counter()
        plain = greedy(e, prompt, 64, tab)
        t_plain = time.perf_counter() - t0
        t0 = time.perf_counter()
        spec = greedy(e, prompt, 64, tab, drafts_from=plain, corrupt=False)
        t_spec = time.perf_counter() - t0
        table.add("8B: speculation at batch 1, every draft right (K = 4)",
                  f"{t_plain / t_spec:.2f}x ({steps_taken[0]} steps for 64 tokens, equal: {plain == spec})",
                  ">= 2x", t_plain / t_spec >= 2.0 and plain == spec)
    finally:
        e.close()


def profile_child(workdir, B):
    """Under ncu: the 8B shape's decode steps at batch B (1k-token contexts, eager launches), profiled between
    cudaProfilerStart and Stop so the load and the prefill stay out."""
    import torch
    lib = load_library()
    model = make_checkpoint("qwen3-8b", workdir)
    os.environ["RILL_CUDA_GRAPHS"] = "0"
    e = Engine(lib, model, "cuda", max_seqs=max(B, 8), max_batch_tokens=2048, max_model_len=2048, num_blocks=4096)
    try:
        bs, V, ctx = e.info.block_size, e.info.vocab_size, 1024
        rng = random.Random(2)
        shared = list(range(ctx // bs))
        e.step([{"tokens": [rng.randrange(V) for _ in range(ctx)], "start": 0, "table": shared}])
        tabs = [shared + [len(shared) + s] for s in range(B)]
        batches = [e.prepare([{"tokens": [rng.randrange(V)], "start": ctx + k, "table": tabs[s]} for s in range(B)])
                   for k in range(3)]
        e.run(batches[0])
        torch.cuda.synchronize()
        torch.cuda.profiler.start()
        e.run(batches[1])
        torch.cuda.synchronize()
        torch.cuda.profiler.stop()
    finally:
        e.close()


def check_profile(workdir, table, out_dir):
    """ncu's kernel durations and DRAM bytes for decode steps of the 8B shape at batch 1, 8 and 64: per kernel, its
    launches, time and achieved read bandwidth per step (the raw CSV goes to out_dir)."""
    import csv
    import io
    ncu = shutil.which("ncu") or next((str(p) for p in sorted(Path("/opt/nvidia").glob("nsight-compute/*/ncu"))), None)
    ncu = ncu or ("/usr/local/cuda/bin/ncu" if Path("/usr/local/cuda/bin/ncu").exists() else None)
    if ncu is None:
        table.add("ncu profile", "ncu not found", "runs", False)
        return
    for B in (1, 8, 64):
        r = subprocess.run([ncu, "--clock-control", "none", "--profile-from-start", "off", "--csv", "--print-units", "base",
                            "--metrics", "gpu__time_duration.sum,dram__bytes_read.sum",
                            sys.executable, __file__, "--profile-child", str(B), "--workdir", workdir],
                           capture_output=True, text=True, timeout=600)
        Path(out_dir).mkdir(parents=True, exist_ok=True)
        (Path(out_dir) / f"ncu_decode_b{B}.csv").write_text(r.stdout)
        lines = r.stdout[r.stdout.find('"ID"'):] if '"ID"' in r.stdout else ""
        per = {}
        for row in csv.DictReader(io.StringIO(lines)):
            name = row.get("Kernel Name", "?").removeprefix("void ").replace("(anonymous namespace)::", "")
            name = name.replace("<unnamed>::", "").split("(")[0]
            k = per.setdefault(name, {"n": 0, "ns": 0.0, "bytes": 0.0})
            v = float(row["Metric Value"].replace(",", "")) if row.get("Metric Value") else 0.0
            unit = row.get("Metric Unit", "")
            if row.get("Metric Name") == "gpu__time_duration.sum":
                k["n"] += 1
                k["ns"] += v * {"nsecond": 1, "ns": 1, "usecond": 1e3, "us": 1e3, "msecond": 1e6, "ms": 1e6, "second": 1e9}.get(unit, 1)
            elif row.get("Metric Name") == "dram__bytes_read.sum":
                k["bytes"] += v * {"byte": 1, "Kbyte": 1e3, "Mbyte": 1e6, "Gbyte": 1e9}.get(unit, 1)
        if not per:
            table.add(f"ncu decode batch {B}", f"no kernels: {(r.stdout + r.stderr).strip()[-160:]}", "runs", False)
            continue
        # The child profiles exactly one decode step, so each total is per step.
        total = sum(k["ns"] for k in per.values())
        table.add(f"ncu decode batch {B}: kernel time per step", f"{total / 1e3:,.0f} us", "info", True)
        for name, k in sorted(per.items(), key=lambda kv: -kv[1]["ns"])[:6]:
            gbs = k["bytes"] / k["ns"] if k["ns"] else 0.0
            table.add(f"  b{B} {name[:40]}", f"{k['n']}/step, {k['ns'] / 1e3:,.0f} us, "
                      f"{gbs:,.0f} GB/s read", "info", True)


def check_skinny_variants(table, out_dir):
    """bench/gpu/skinny_variants.cu: the weight-streaming kernel's launch variants on the Qwen3-8B projections, each
    checked bit for bit against the launch as built; its table goes to out_dir and the log."""
    exe = OUT / "skinny_variants"
    run([find_nvcc(), "-O3", "-std=c++17", "-gencode", "arch=compute_90a,code=sm_90a", "-I", str(ROOT / "ffi/include"),
         "-I", str(ROOT / "ffi/src"), "-I", str(ROOT / "ffi/devices"), str(ROOT / "bench/gpu/skinny_variants.cu"),
         "-o", str(exe)])
    r = subprocess.run([str(exe)], capture_output=True, text=True, timeout=240)
    print(r.stdout + r.stderr, flush=True)
    Path(out_dir).mkdir(parents=True, exist_ok=True)
    (Path(out_dir) / "skinny_variants.txt").write_text(r.stdout + r.stderr)
    last = (r.stdout.strip().splitlines() or [r.stderr.strip()[-100:]])[-1]
    table.add("weight-streaming kernel launch variants (bits equal)", last[:80], "same bits", r.returncode == 0)


def step_list(lib_holder, args, table):
    """Every check and benchmark in the order they run: (name, function, seconds allowed). Correctness first (the 8B
    shape's too), so a short lease still gets them; the figures last."""
    workdir = args.workdir

    def lib():
        if lib_holder[0] is None:
            lib_holder[0] = load_library()
        return lib_holder[0]

    steps = [("cublaslt-enums", lambda: check_cublaslt_enums(table), 60)]
    bundled = [ROOT / "models/rill-tiny-chatml", *sorted((ROOT / "tests/fixtures/checkpoints").glob("*-bf16"))]
    for m in bundled:
        steps.append((f"cpu-vs-cuda-{m.name}", lambda m=m: check_vs_cpu(lib(), m, table), 90))
    steps.append(("speculation", lambda: check_speculation(lib(), bundled[0], table), 90))
    steps.append(("batch-invariance", lambda: check_batch_invariance(lib(), bundled[0], table), 90))
    steps.append(("cuda-graphs", lambda: check_graphs(lib(), bundled[0], table), 90))
    steps.append(("sanitizer-memcheck", lambda: check_sanitizer("memcheck", table), 240))
    shapes = ["llama3-1b", "qwen3-0.6b"] + ([] if args.skip_8b else ["qwen3-8b"])
    for name in shapes:
        steps.append((f"transformers-{name}",
                      lambda name=name: check_vs_transformers(lib(), make_checkpoint(name, workdir), name, table,
                                                              2e-2), 300))
    for tool in ("racecheck", "synccheck"):
        steps.append((f"sanitizer-{tool}", lambda tool=tool: check_sanitizer(tool, table), 240))
    if not args.skip_8b:
        steps.append(("speculation-8b", lambda: check_speculation(lib(), make_checkpoint("qwen3-8b", workdir), table),
                      180))
        steps.append(("batch-invariance-8b",
                      lambda: check_batch_invariance(lib(), make_checkpoint("qwen3-8b", workdir), table), 180))
    if not args.skip_bench and not args.skip_8b:
        def run_bench():
            bw = copy_bandwidth()
            table.add("copy bandwidth (device to device, read + write)", f"{bw / 1e9:,.0f} GB/s", "info", True)
            bench(lib(), make_checkpoint("qwen3-8b", workdir), table, bw)
        steps.append(("benchmarks", run_bench, 420))
        steps.append(("profile-8b", lambda: check_profile(workdir, table, args.out or str(OUT)), 300))

        def run_gptoss():
            bw = copy_bandwidth()
            bench_gptoss(lib(), make_gptoss_checkpoint(workdir), table, bw, 24)
        steps.append(("gptoss-20b", run_gptoss, 300))
    if not args.skip_bench:
        steps.append(("skinny-variants", lambda: check_skinny_variants(table, args.out or str(OUT)), 300))
    return steps


def run_child(name, args, rows_file, log_file, timeout):
    """One step in its own process: a crash, a hang or a sticky CUDA error ends that step alone."""
    cmd = [sys.executable, __file__, "--step", name, "--workdir", args.workdir, "--rows", str(rows_file)]
    if args.out:
        cmd += ["--out", args.out]
    if args.skip_8b:
        cmd.append("--skip-8b")
    if args.skip_bench:
        cmd.append("--skip-bench")
    t0 = time.perf_counter()
    with open(log_file, "a") as log:
        log.write(f"\n===== {name} =====\n")
        log.flush()
        try:
            r = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, timeout=timeout)
            code = r.returncode
        except subprocess.TimeoutExpired:
            code = "timeout"
    return code, time.perf_counter() - t0


def tail_of(log_file, marker, n=3):
    text = Path(log_file).read_text(errors="replace")
    part = text[text.rfind(marker):] if marker in text else text
    lines = [ln for ln in part.strip().splitlines() if ln.strip()]
    return " / ".join(lines[-n:])[:200]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--workdir", default=None, help="where checkpoints go (default: a temporary folder)")
    ap.add_argument("--skip-8b", action="store_true")
    ap.add_argument("--skip-bench", action="store_true")
    ap.add_argument("--prebuilt", action="store_true",
                    help="use build/gpu_check/librill.so as it is when it loads (built elsewhere); build otherwise")
    ap.add_argument("--only", default=None, help="comma-separated step names (prefixes) to run")
    ap.add_argument("--deadline", type=float, default=None,
                    help="seconds from the start after which no further step starts (the table still prints)")
    ap.add_argument("--log", default=None, help="the steps' full output (default: build/gpu_check/steps.log)")
    ap.add_argument("--step", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--rows", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--out", default=None, help="where the ncu profiles go (default: build/gpu_check)")
    ap.add_argument("--sanitizer-child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--profile-child", type=int, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.sanitizer_child:
        sanitizer_child()
        return 0
    if args.profile_child is not None:
        profile_child(args.workdir, args.profile_child)
        return 0
    use_cublaslt()
    if args.step is not None:
        table = Table(args.rows)
        holder = [None]
        fn = dict((n, f) for n, f, _ in step_list(holder, args, table))[args.step]
        print(f"[{args.step}]", flush=True)
        try:
            fn()
        except Exception as ex:  # a failing check is a row in the table; the traceback goes to the log
            import traceback
            traceback.print_exc()
            table.add(args.step, f"error: {' '.join(str(ex).split())[:240]}", "runs", False)
            return 3
        return 0
    t_start = time.perf_counter()
    table = Table()
    import torch
    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no GPU"
    print(f"rill gpu_check on {gpu}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}", flush=True)
    # Checkpoints in memory where it has room (the 8B shape is 16 GB): written and read back at memory speed.
    shm = Path("/dev/shm")
    fast = shm.is_dir() and shutil.disk_usage(shm).free > 48 * 2**30
    args.workdir = args.workdir or tempfile.mkdtemp(prefix="rill-gpu-check-", dir=str(shm) if fast else None)
    log_file = Path(args.log or OUT / "steps.log")
    log_file.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    built = "prebuilt"
    if not (args.prebuilt and LIB.exists() and loads(LIB)):
        build()
        built = f"{time.perf_counter() - t0:.0f} s"
    table.add("build (cc + nvcc, sm_80/89/90a + PTX)", built, "builds and loads", loads(LIB))
    table.add("cuBLASLt library (RILL_CUBLASLT_DIR)", os.environ.get("RILL_CUBLASLT_DIR", "not found: tiled GEMM"),
              "info", True)
    steps = step_list([None], args, table)
    wanted = args.only.split(",") if args.only else None
    for name, _fn, allowed in steps:
        if wanted is not None and not any(name.startswith(w) for w in wanted):
            continue
        left = None if args.deadline is None else args.deadline - (time.perf_counter() - t_start)
        if left is not None and left < 10:
            table.add(name, "not run: past the deadline", "runs", False)
            continue
        rows_file = Path(args.workdir) / f"rows-{name}.json"
        rows_file.unlink(missing_ok=True)
        print(f"[{name}]", flush=True)
        code, took = run_child(name, args, rows_file, log_file, allowed if left is None else min(allowed, left))
        for row in (json.loads(ln) for ln in (rows_file.read_text().splitlines() if rows_file.exists() else [])):
            table.add(*row)
        if code not in (0, 3):  # 3: the step reported its own error as a row
            table.add(name, f"{'timed out' if code == 'timeout' else f'exit {code}'} after {took:.0f} s: "
                      f"{tail_of(log_file, f'===== {name} =====')}", "runs", False)
    ok = table.print()
    print(f"\n{gpu}, {time.strftime('%Y-%m-%d', time.gmtime())}: {'all checks passed' if ok else 'MISSES above'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
