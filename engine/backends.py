"""Choose and build a decoder backend over one model folder.

Both backends expose the same small interface: ``forward(tokens) -> hidden (hidden_size,)``,
``logits(hidden, ids=None)``, ``trim(n)``, ``reset()`` and ``offset`` (tokens cached).
"""

from __future__ import annotations

import platform
import sys
from pathlib import Path

import numpy as np

from . import _blas

_blas.preload()

import mlx.core as mx  # noqa: E402

from .model_io import load_model, load_weights  # noqa: E402


def default_backend() -> str:
    """``mlx`` on Apple Silicon (Metal), ``numpy`` elsewhere."""
    return "mlx" if sys.platform == "darwin" and platform.machine() == "arm64" else "numpy"


def dequantized_numpy_weights(folder: Path) -> tuple:
    """``(args, config, {name: float32 ndarray})`` with quantized matrices expanded by ``mx.dequantize``."""
    args, config, weights = load_weights(folder)
    q = config.get("quantization")
    out: dict[str, np.ndarray] = {}
    for name, w in weights.items():
        if name.endswith(".scales") or name.endswith(".biases"):
            continue
        base = name[: -len(".weight")] if name.endswith(".weight") else None
        if q and base is not None and f"{base}.scales" in weights:
            w = mx.dequantize(w, weights[f"{base}.scales"], weights[f"{base}.biases"],
                              group_size=q["group_size"], bits=q["bits"])
        out[name] = np.array(w.astype(mx.float32))
    return args, config, out


class MLXBackend:
    """The MLX :class:`~engine.model.Model` with its KV cache (Metal on Apple Silicon)."""

    name = "mlx"

    def __init__(self, folder: Path, capacity: int, dequantize: bool | None = None):
        """
        Args:
            dequantize: expand quantized weights to float32 at load. Default: when Metal is not
                available. Measured on the 2-core x86_64 dev machine (MLX-cpu, OpenBLAS bound): a
                decode step took 3.5-4.0 ms with 6-bit weights and 2.0-2.2 ms dequantized.
        """
        if dequantize is None:
            dequantize = not mx.metal.is_available()
        if dequantize:
            from .model import Model

            args, config, weights = dequantized_numpy_weights(folder)
            self.model = Model(args)
            self.model.load_weights([(k, mx.array(v)) for k, v in weights.items()])
            mx.eval(self.model.parameters())
            self.config = config
        else:
            self.model, self.config = load_model(folder)
        self.args = self.model.args
        self.capacity = capacity
        self.cache = self.model.make_cache()
        self.hid = np.zeros((capacity, self.args.hidden_size), np.float32)  # final hidden per position
        self._emb = None

    @property
    def offset(self) -> int:
        return self.cache[0].offset

    def forward(self, tokens, all_positions: bool = False) -> np.ndarray:
        if self.offset + len(tokens) > self.capacity:
            raise ValueError(f"KV cache holds {self.capacity} tokens; {self.offset} cached + {len(tokens)} new is too many")
        off = self.offset
        h = np.array(self.model.hidden(mx.array([list(tokens)], dtype=mx.int32), self.cache)[0].astype(mx.float32))
        self.hid[off : off + len(tokens)] = h
        return h if all_positions else h[-1]

    def logits(self, hidden: np.ndarray, ids: np.ndarray | None = None) -> np.ndarray:
        out = self.model.model.embed_tokens.as_linear(mx.array(hidden[None, None, :]))[0, 0]
        out = np.array(out.astype(mx.float32))
        return out if ids is None else out[ids]

    def trim(self, n: int) -> int:
        n = min(n, self.offset)
        for c in self.cache:
            c.trim(n)
        return n

    def reset(self) -> None:
        self.cache = self.model.make_cache()
        mx.clear_cache()

    def shift(self, d: int) -> None:
        """Context shift (see ``NumpyBackend.shift``): drop ``d`` oldest tokens, re-rotate keys."""
        hd = self.args.head_dim
        half = hd // 2
        inv = self.args.rope_theta ** (-np.arange(0, hd, 2, dtype=np.float64) / hd)
        c = mx.array(np.cos(d * inv).astype(np.float32))
        s = mx.array(-np.sin(d * inv).astype(np.float32))
        for cache in self.cache:
            off = cache.offset
            d_ = min(d, off)
            k = cache.keys[..., d_:off, :]
            k1, k2 = k[..., :half], k[..., half:]
            cache.keys[..., : off - d_, :] = mx.concatenate([k1 * c - k2 * s, k1 * s + k2 * c], axis=-1)
            cache.values[..., : off - d_, :] = cache.values[..., d_:off, :]
            cache.offset = off - d_
        n = max(0, self.offset)
        self.hid[:n] = self.hid[d : d + n].copy()


def make_backend(folder: Path, kind: str, capacity: int):
    """Build ``kind`` (``numpy``, ``mlx`` or ``auto``) over ``folder``.

    Raises:
        ModelLoadError: the folder is missing, corrupt or mismatched (message names the file).
        ValueError: unknown backend name.
    """
    if kind == "auto":
        kind = default_backend()
    if kind == "numpy":
        from .backend_numpy import NumpyBackend

        args, config, weights = dequantized_numpy_weights(folder)
        b = NumpyBackend(args, weights, capacity)
        b.config = config
        return b
    if kind == "mlx":
        return MLXBackend(folder, capacity)
    raise ValueError(f"unknown backend {kind!r} (expected numpy, mlx or auto)")
