"""A small byte-level BPE (GPT-2 style) trained from scratch, written out as a Hugging Face `tokenizer.json`.

Encoding matches Hugging Face `tokenizers` for this layout: special tokens are matched first, the rest is split with
the GPT-2 regex, each piece is mapped byte -> GPT-2 unicode char and merged by merge rank. Merges never involve a digit,
so numbers stay one token per digit (the arithmetic skills work digit by digit).
"""

from __future__ import annotations

import collections
import json

import regex

GPT2_PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
_SPLIT = regex.compile(GPT2_PATTERN)


def bytes_to_unicode() -> dict[int, str]:
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


B2U = bytes_to_unicode()
U2B = {v: k for k, v in B2U.items()}


def _pieces(text: str) -> list[str]:
    return ["".join(B2U[b] for b in p.encode("utf-8")) for p in _SPLIT.findall(text)]


class BPE:
    def __init__(self, merges: list[tuple[str, str]], specials: list[str]):
        self.merges = merges
        self.ranks = {m: i for i, m in enumerate(merges)}
        self.vocab: dict[str, int] = {B2U[b]: b for b in range(256)}
        for a, b in merges:
            self.vocab[a + b] = len(self.vocab)
        self.specials = {s: len(self.vocab) + i for i, s in enumerate(specials)}
        self.id_to_tok = {i: t for t, i in self.vocab.items()}
        self.id_to_special = {i: s for s, i in self.specials.items()}
        self._special_re = regex.compile("(" + "|".join(regex.escape(s) for s in sorted(specials, key=len,
                                                                                       reverse=True)) + ")")
        self._cache: dict[str, list[int]] = {}

    @property
    def size(self) -> int:
        return len(self.vocab) + len(self.specials)

    def _bpe(self, piece: str) -> list[int]:
        hit = self._cache.get(piece)
        if hit is not None:
            return hit
        parts = list(piece)
        while len(parts) > 1:
            best, best_rank = -1, None
            for i in range(len(parts) - 1):
                r = self.ranks.get((parts[i], parts[i + 1]))
                if r is not None and (best_rank is None or r < best_rank):
                    best, best_rank = i, r
            if best < 0:
                break
            parts[best:best + 2] = [parts[best] + parts[best + 1]]
        ids = [self.vocab[p] for p in parts]
        self._cache[piece] = ids
        return ids

    def encode(self, text: str) -> list[int]:
        ids: list[int] = []
        for chunk in self._special_re.split(text):
            if not chunk:
                continue
            if chunk in self.specials:
                ids.append(self.specials[chunk])
                continue
            for p in _pieces(chunk):
                ids.extend(self._bpe(p))
        return ids

    def decode(self, ids: list[int]) -> str:
        out, buf = [], bytearray()
        for i in ids:
            if i in self.id_to_special:
                out.append(buf.decode("utf-8", errors="replace"))
                buf = bytearray()
                out.append(self.id_to_special[i])
            else:
                buf.extend(U2B[c] for c in self.id_to_tok[i])
        out.append(buf.decode("utf-8", errors="replace"))
        return "".join(out)

    def to_hf_json(self) -> dict:
        return {
            "version": "1.0",
            "truncation": None,
            "padding": None,
            "added_tokens": [{"id": i, "content": s, "single_word": False, "lstrip": False, "rstrip": False,
                              "normalized": False, "special": True} for s, i in self.specials.items()],
            "normalizer": None,
            "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
            "post_processor": None,
            "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
            "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                      "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                      "vocab": self.vocab, "merges": [f"{a} {b}" for a, b in self.merges]},
        }


def train_bpe(texts: list[str], n_merges: int, specials: list[str]) -> BPE:
    """Greedy BPE: repeatedly merge the most frequent adjacent pair (ties broken by the pair itself, so the result
    is deterministic). Pairs touching a digit are never merged."""
    special_re = regex.compile("(" + "|".join(regex.escape(s) for s in specials) + ")")
    words: collections.Counter[str] = collections.Counter()
    for t in texts:
        for chunk in special_re.split(t):
            if chunk and chunk not in specials:
                words.update(_pieces(chunk))
    seqs = [(list(w), f) for w, f in words.items()]
    digit = {B2U[b] for b in b"0123456789"}
    merges: list[tuple[str, str]] = []
    for _ in range(n_merges):
        counts: collections.Counter[tuple[str, str]] = collections.Counter()
        for parts, f in seqs:
            for i in range(len(parts) - 1):
                counts[(parts[i], parts[i + 1])] += f
        best = None
        for pair, f in counts.items():
            if any(ch in digit for ch in pair[0] + pair[1]):
                continue
            if best is None or f > best[1] or (f == best[1] and pair < best[0]):
                best = (pair, f)
        if best is None or best[1] < 2:
            break
        (a, b), _f = best
        merges.append((a, b))
        for parts, _ in seqs:
            i = 0
            while i < len(parts) - 1:
                if parts[i] == a and parts[i + 1] == b:
                    parts[i:i + 2] = [a + b]
                i += 1
    return BPE(merges, specials)


def save_tokenizer(bpe: BPE, path: str) -> None:
    with open(path, "w", encoding="utf-8") as f:
        json.dump(bpe.to_hf_json(), f, ensure_ascii=False, indent=1)
