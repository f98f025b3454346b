"""Helpers for the GGUF tests: read an exported file back, and run it the way llama.cpp's ``llama``
architecture does (RoPE on adjacent feature pairs, ``output`` tied to ``token_embd``), in NumPy.

The reference forward reads only the GGUF file, so agreeing with Laya's NumPy backend checks the
export (names, layouts, the q/k row permutation, metadata) without llama.cpp installed.
"""

from __future__ import annotations

import inspect
from pathlib import Path

import numpy as np


def held_out_ids(n: int) -> list[int]:
    """``n`` Laya token ids of pygls's ``workspace/text_document.py`` (a dependency in no corpus
    split, the text ``laya demo`` types)."""
    import pygls.workspace.text_document as td

    from engine.model_io import DEFAULT_MODEL_DIR
    from engine.tokenizer import load_tokenizer

    text = Path(inspect.getsourcefile(td)).read_text("utf-8")
    ids = load_tokenizer(DEFAULT_MODEL_DIR / "tokenizer.json").encode(text).ids
    assert len(ids) >= n, f"{len(ids)} tokens"
    return ids[:n]


def read_gguf(path: Path) -> tuple[dict, dict[str, np.ndarray]]:
    """``(metadata {key: python value}, {tensor name: float32 array in (out, in) layout})``."""
    import gguf

    r = gguf.GGUFReader(str(path))
    meta = {}
    for key, f in r.fields.items():
        if key.startswith("GGUF."):
            continue
        meta[key] = f.contents()
    tensors = {}
    for t in r.tensors:
        a = np.asarray(t.data)
        if t.tensor_type not in (gguf.GGMLQuantizationType.F32,):
            a = gguf.quants.dequantize(a, t.tensor_type)
        tensors[t.name] = np.asarray(a, dtype=np.float32).reshape([int(x) for x in reversed(t.shape)])
    return meta, tensors


def _rms(x, w, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def reference_logits(meta: dict, t: dict[str, np.ndarray], ids: list[int]) -> np.ndarray:
    """``(len(ids), vocab)`` float32 logits of llama.cpp's ``llama`` graph (LLAMA_ROPE_TYPE_NORM:
    features ``2i, 2i+1`` rotated together by angle ``pos * base^(-2i/head_dim)``)."""
    h = meta["llama.attention.head_count"]
    kvh = meta["llama.attention.head_count_kv"]
    eps = meta["llama.attention.layer_norm_rms_epsilon"]
    base = meta["llama.rope.freq_base"]
    n_layers = meta["llama.block_count"]
    emb = t["token_embd.weight"]
    x = emb[np.asarray(ids)].astype(np.float64)
    L, d = x.shape
    hd = d // h
    inv = base ** (-np.arange(0, hd, 2, dtype=np.float64) / hd)
    ang = np.arange(L)[:, None] * inv[None, :]
    cos, sin = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]

    def rope(v):  # (L, heads, hd), adjacent pairs
        a, b = v[..., 0::2], v[..., 1::2]
        out = np.empty_like(v)
        out[..., 0::2] = a * cos - b * sin
        out[..., 1::2] = a * sin + b * cos
        return out

    mask = np.triu(np.full((L, L), -np.inf), k=1)
    for i in range(n_layers):
        p = f"blk.{i}."
        y = _rms(x, t[p + "attn_norm.weight"], eps)
        q = rope((y @ t[p + "attn_q.weight"].T).reshape(L, h, hd))
        k = rope((y @ t[p + "attn_k.weight"].T).reshape(L, kvh, hd))
        v = (y @ t[p + "attn_v.weight"].T).reshape(L, kvh, hd)
        k, v = np.repeat(k, h // kvh, axis=1), np.repeat(v, h // kvh, axis=1)
        s = np.einsum("qhd,khd->hqk", q, k) / np.sqrt(hd) + mask
        s = np.exp(s - s.max(-1, keepdims=True))
        s /= s.sum(-1, keepdims=True)
        x = x + np.einsum("hqk,khd->qhd", s, v).reshape(L, d) @ t[p + "attn_output.weight"].T
        y = _rms(x, t[p + "ffn_norm.weight"], eps)
        g, u = y @ t[p + "ffn_gate.weight"].T, y @ t[p + "ffn_up.weight"].T
        x = x + (g / (1 + np.exp(-g)) * u) @ t[p + "ffn_down.weight"].T
    x = _rms(x, t["output_norm.weight"], eps)
    return (x @ t.get("output.weight", emb).T).astype(np.float32)


def laya_logits(ids: list[int]) -> np.ndarray:
    """``(len(ids), vocab)`` logits of Laya's NumPy backend on the shipped model, one prefill."""
    from engine.backends import make_backend
    from engine.model_io import DEFAULT_MODEL_DIR

    b = make_backend(DEFAULT_MODEL_DIR, "numpy", len(ids))
    hid = b.forward(ids, all_positions=True)
    return hid @ b.emb.T
