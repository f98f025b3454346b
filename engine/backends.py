"""Choose and build a decoder backend over one model folder.

Every backend implements :class:`Backend` (a ``typing.Protocol``, checked in
``tests/test_backend_numba.py``): ``numpy`` (float32, OpenBLAS), ``numba`` (the 6-bit codes with
dequantization fused into compiled kernels; the default on plain CPUs when numba imports) and
``mlx`` (Metal on Apple Silicon, the default there).
"""

from __future__ import annotations

import logging
import os
import platform
import sys
from pathlib import Path
from typing import Any, Protocol, Sequence, runtime_checkable

import numpy as np

from . import _blas

_blas.preload()

import mlx.core as mx  # noqa: E402

from .model import ModelArgs  # noqa: E402
from .model_io import load_model, load_weights  # noqa: E402

log = logging.getLogger(__name__)


@runtime_checkable
class Backend(Protocol):
    """A decoder with one KV cache of ``capacity`` tokens at window positions ``0..offset-1``.

    Invariants the predictor relies on: ``offset`` is the number of cached tokens; ``hid[i]`` is the
    final normed hidden state after cached token ``i`` (the neural cache reads ``hid[:offset]``).
    """

    name: str
    args: ModelArgs
    config: dict
    capacity: int
    hid: np.ndarray
    """``(capacity, hidden_size)`` float32: final hidden state per cached position."""

    @property
    def offset(self) -> int:
        """Tokens in the KV cache."""

    def forward(self, tokens: Sequence[int], all_positions: bool = False) -> np.ndarray:
        """Run ``tokens`` after the cached ones; ``(hidden_size,)`` of the last, or
        ``(len(tokens), hidden_size)``. Raises ``ValueError`` past ``capacity``."""

    def logits(self, hidden: np.ndarray, ids: np.ndarray | None = None) -> np.ndarray:
        """LM head: ``(vocab,)`` float32 logits, or only the rows ``ids``."""

    def trim(self, n: int) -> int:
        """Drop the last ``n`` cached tokens (rollback); returns how many were dropped."""

    def reset(self) -> None:
        """Empty the KV cache."""

    def shift(self, d: int) -> None:
        """Drop the ``d`` oldest cached tokens, moving the rest to positions ``0..`` (RoPE re-rotated)."""

    def swap(self, state: Any = None) -> Any:
        """Install another KV cache (``None``: a new empty one) and return the one that was live.

        No copy: the returned object is the cache itself (its arrays and ``offset``), kept for
        :meth:`swap` back later (``engine.window_cache`` keeps recent windows this way).
        """


def default_backend() -> str:
    """``mlx`` on Apple Silicon (Metal); elsewhere ``numba`` when it imports, else ``numpy``;
    the environment variable ``LAYA_BACKEND`` overrides the choice.

    Measured with ``laya bench --kernels`` on the 2-core x86_64 dev machine: the 16 projections of a
    decode step take 0.26-0.30 ms on the 6-bit codes (numba) against 0.78-0.83 ms on float32
    (NumPy/OpenBLAS), ~3x.
    """
    forced = os.environ.get("LAYA_BACKEND")
    if forced:  # e.g. LAYA_BACKEND=numpy: the float32 fallback, for side-by-side comparisons
        return forced
    if sys.platform == "darwin" and platform.machine() == "arm64":
        return "mlx"
    import importlib.util

    if importlib.util.find_spec("numba") is None:  # not imported here: ~60 MB (engine.kernels)
        log.warning("numba is not installed: using the slower float32 NumPy backend")
        return "numpy"
    return "numba"


def dequantized_numpy_weights(folder: Path, codes: dict | None = None) -> tuple:
    """``(args, config, {name: float32 ndarray})`` with quantized matrices expanded by ``mx.dequantize``.

    Args:
        codes: if given, also filled with each quantized matrix as
            ``engine.backend_numba.QuantWeights`` (codes one per byte, ``(out, in)``; scales and
            biases ``(out, in / group_size)``), under the same names.
    """
    args, config, weights = load_weights(folder)
    q = config.get("quantization")
    out: dict[str, np.ndarray] = {}
    for name, w in weights.items():
        if name.endswith(".scales") or name.endswith(".biases"):
            continue
        base = name[: -len(".weight")] if name.endswith(".weight") else None
        if q and base is not None and f"{base}.scales" in weights:
            s, b = weights[f"{base}.scales"], weights[f"{base}.biases"]
            if codes is not None:
                from .backend_numba import QuantWeights

                # unpack the codes themselves: dequantize with scale 1 and bias 0
                c = mx.dequantize(w, mx.ones_like(s), mx.zeros_like(b), group_size=q["group_size"], bits=q["bits"])
                codes[name] = QuantWeights(np.array(c.astype(mx.float32)).astype(np.uint8),
                                           np.array(s.astype(mx.float32)), np.array(b.astype(mx.float32)))
            w = mx.dequantize(w, s, b, group_size=q["group_size"], bits=q["bits"])
        out[name] = np.array(w.astype(mx.float32))
        del w
        mx.clear_cache()  # MLX keeps freed buffers for reuse: ~30 MB of peak memory otherwise
    del weights
    mx.clear_cache()
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

    def swap(self, state=None):
        old = (self.cache, self.hid)
        if state is None:
            self.cache = self.model.make_cache()
            self.hid = np.zeros_like(self.hid)
        else:
            self.cache, self.hid = state
        return old

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


class NumbaUpgrade:
    """The numba backend of a model that is served by the NumPy backend until this machine's
    ahead-of-time kernels are built (``engine.kernels.prepare`` said ``"building"``): a server
    that is ready at once, instead of compiling the JIT kernels for ~10 s of CPU at its first
    start after an install (and holding ~100 MB of LLVM for good). ``Predictor.idle_step`` polls
    :meth:`state` and installs :meth:`build` (``Predictor.use_backend``)."""

    def __init__(self, args: ModelArgs, config: dict, weights: dict, codes: dict, capacity: int):
        """Keeps the dequantized ``weights`` (shared with the NumPy backend) and the 6-bit
        ``codes`` (``dequantized_numpy_weights``) of the model, so the switch reads no file."""
        from . import kernels

        self._args, self._config, self._weights, self._codes = args, config, weights, codes
        self._capacity = capacity
        self._build_folder = kernels.aot_folder()

    def state(self) -> str:
        """``"built"``, ``"building"`` or ``"failed"`` (then the NumPy backend stays)."""
        from . import kernels

        state = kernels.build_state(self._build_folder) if self._build_folder is not None else "none"
        return "failed" if state == "none" else state  # "none": its process died

    def build(self) -> Backend | None:
        """The numba backend over the same weights (~15 ms here, ~45 ms on a loaded machine), on
        the kernels of the build that :meth:`state` saw (None when they cannot be loaded: never
        the JIT, which would compile for seconds on the caller's thread)."""
        from . import kernels
        from .backend_numba import NumbaBackend

        if self._build_folder is None or kernels.load_built(self._build_folder) is None:
            return None
        return NumbaBackend(self._args, self._weights, self._codes, self._capacity, self._config)


def _numpy_until_built(folder: Path, capacity: int) -> Backend | None:
    """The NumPy backend with a :class:`NumbaUpgrade` as its ``upgrade`` attribute while this
    machine's numba kernels are being built; None when they need no waiting (or only the JIT
    can give them)."""
    from . import kernels

    if kernels.prepare() != "building":
        return None
    from .backend_numpy import NumpyBackend

    codes: dict = {}
    args, config, weights = dequantized_numpy_weights(folder, codes)
    b = NumpyBackend(args, weights, capacity, config)
    b.upgrade = NumbaUpgrade(args, config, weights, codes, capacity)
    log.info("numba kernels are being built for this machine: the NumPy backend serves until they are ready")
    return b


def make_backend(folder: Path, kind: str, capacity: int, defer_jit: bool = False) -> Backend:
    """Build ``kind`` (``numpy``, ``numba``, ``mlx`` or ``auto``) over ``folder``.

    Args:
        defer_jit: when ``auto`` chooses numba but its kernels are still being compiled ahead of
            time for this machine (the first start after an install), return the NumPy backend
            with a :class:`NumbaUpgrade` as its ``upgrade`` attribute instead of compiling the
            JIT kernels in this process (a caller with idle time to switch: the language server).

    Raises:
        ModelLoadError: the folder is missing, corrupt or mismatched (message names the file).
        ValueError: unknown backend name.
    """
    if kind == "auto":
        kind = default_backend()
        if defer_jit and kind == "numba" and not os.environ.get("LAYA_BACKEND"):
            b = _numpy_until_built(folder, capacity)
            if b is not None:
                return b
    if kind == "numpy":
        from .backend_numpy import NumpyBackend

        args, config, weights = dequantized_numpy_weights(folder)
        return NumpyBackend(args, weights, capacity, config)
    if kind == "numba":
        from .backend_numba import NumbaBackend

        codes: dict = {}
        args, config, weights = dequantized_numpy_weights(folder, codes)
        return NumbaBackend(args, weights, codes, capacity, config)
    if kind == "mlx":
        return MLXBackend(folder, capacity)
    raise ValueError(f"unknown backend {kind!r} (expected numpy, numba, mlx or auto)")
