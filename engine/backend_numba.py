"""Plain-CPU decoder on the shipped integer weights: the decode step as one numba-compiled call.

Why: a float32 step streams the whole 14.7 MB of dequantized weights through the memory bus for
every token (~0.5 ms at this machine's ~27 GB/s, and about 30 NumPy calls per layer on top). The
model ships 6-bit codes with a float scale and bias per group of 64 inputs (mlx-lm's affine
quantization, ``w = q * scale + bias``). Here the codes are kept one per byte (``uint8``, 3.7 MB,
which fits this CPU's L3) and dequantization is fused into the product::

    y[o] = sum_g scale[o, g] * (q[o, g, :] . x[g, :]) + bias[o, g] * sum(x[g, :])

That is the 6-bit model's own arithmetic, not a second quantization: logits equal the float32
reference up to summation order (``tests/test_backend_numba.py``). The whole single-token step
(RMSNorm, fused ``q|k|v`` and ``gate|up`` products, RoPE, attention over the cache, SiLU, residuals)
is one compiled function, so a step makes one Python call instead of ~120 NumPy calls.

Prefill of many tokens at once stays on :class:`~engine.backend_numpy.NumpyBackend`'s float32
matrix-matrix path (compute-bound, where OpenBLAS beats a hand loop); up to ``STEP_MAX`` new
tokens run through the compiled kernels (one by one, or from ``BATCH_MIN`` on together). The
KV-cache layout, ``trim``, ``shift`` and ``hid`` are the NumPy backend's. The kernels live in
``engine.kernels_numba``; ``engine.kernels`` loads them compiled ahead of time when it can (no
numba or LLVM in memory), else JIT-compiled (cached next to the file, numba ``cache=True``, so
only the first start after an install pays ~2-4 s).
"""

from __future__ import annotations

import os

import numpy as np

from . import kernels

from .backend_numpy import NumpyBackend
from .model import ModelArgs

STEP_MAX = int(os.environ.get("LAYA_STEP_MAX", "24"))
"""Up to this many new tokens run through the compiled kernels; more go through NumPy's float32
prefill (``LAYA_STEP_MAX``: for side-by-side comparisons). In process, NumPy's prefill of 18
tokens is about as fast (2.5-3.5 ms), but inside the server it took 10-40 ms now and then (traced
per decision; not the garbage collector, not fresh KV pages; the compiled kernels take the GIL
back once per call, not once per BLAS call). The cause is the GIL: each BLAS call releases it and
must win it back from any other busy Python thread (a convoy); in process, a 48-token NumPy
prefill measured 4.2 ms at the median alone and 13-41 ms beside a thread parsing JSON in a loop (2026-12-02; the workspace counting, which
was such a thread in the server, now runs in a child process). Through the server, 64 here instead
of 24 measured within the noise (typing p99 5.0-8.6 against 5.0-8.2 ms in three side-by-side runs). Two servers side by side, typing after jumps (2026-11-30, nothing else running),
first keystroke after a jump p50 / p90 / p99: NumPy above 8 tokens 1.85 / 2.69 / 3.43 ms,
compiled up to 24: 1.75 / 2.26 / 2.58 ms."""
BATCH_MIN = 3
"""From this many new tokens on, they go through the compiled kernels together (``steps``: each
code row read once for all of them), below one ``step`` each. Shuffled among llama.cpp runners
(``laya bench --peers``' workload, 2026-11-30): +3 tokens 1.11 vs 1.21 ms one by one, +4 1.35 vs
1.47, +2 0.90 vs 0.88; with warm caches two tokens together were 1.2x slower, 3-24 equal to
1.06x faster."""


class QuantWeights:
    """One projection as 6-bit codes (one per byte) with float32 scale and bias per group."""

    __slots__ = ("codes", "scales", "biases")

    def __init__(self, codes: np.ndarray, scales: np.ndarray, biases: np.ndarray):
        self.codes = np.ascontiguousarray(codes, dtype=np.uint8)
        self.scales = np.ascontiguousarray(scales, dtype=np.float32)
        self.biases = np.ascontiguousarray(biases, dtype=np.float32)

    def rows(self, idx) -> "QuantWeights":
        return QuantWeights(self.codes[idx], self.scales[idx], self.biases[idx])

    def scaled(self, f: float) -> "QuantWeights":
        return QuantWeights(self.codes, self.scales * f, self.biases * f)

    @staticmethod
    def concat(parts: list["QuantWeights"]) -> "QuantWeights":
        return QuantWeights(np.concatenate([p.codes for p in parts]), np.concatenate([p.scales for p in parts]),
                            np.concatenate([p.biases for p in parts]))


    def transposed(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(codes (in, out), scales (groups, out), biases (groups, out))``, the kernels' layout."""
        return (np.ascontiguousarray(self.codes.T), np.ascontiguousarray(self.scales.T),
                np.ascontiguousarray(self.biases.T))


def _stack(ws: list[QuantWeights]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-layer matrices stacked in the kernels' transposed layout, ``(layers, ...)``."""
    ts = [w.transposed() for w in ws]
    return tuple(np.stack([t[k] for t in ts]) for k in range(3))


class NumbaBackend(NumpyBackend):
    """:class:`NumpyBackend` whose decode steps and LM head run on the 6-bit codes (see module doc)."""

    name = "numba"

    def __init__(self, args: ModelArgs, weights: dict[str, np.ndarray], quant: dict[str, QuantWeights],
                 capacity: int, config: dict | None = None):
        """
        Args:
            args: model hyper-parameters.
            weights: float32 arrays under mlx-lm names (dequantized; the prefill path uses them).
            quant: the quantized matrices under the same names (``engine.backends.quantized_weights``).
            capacity: most tokens the KV cache holds.
            config: the model folder's ``config.json``.

        Raises:
            ValueError: a matrix the step needs is not quantized, its quantization group is not a
                multiple of 8 inputs (the batched products take 8 code rows per pass; mlx-lm's are 32,
                64 or 128), or the head size is not a multiple of 4.
        """
        super().__init__(args, weights, capacity, config)
        self._k = kernels.load()
        h, kvh, hd = self.h, self.kvh, self.hd
        if hd % 4:
            raise ValueError(f"the numba backend needs a head size that is a multiple of 4, not {hd}")
        half = hd // 2
        perm = np.empty(hd, np.int64)
        perm[0::2] = np.arange(half)
        perm[1::2] = np.arange(half, hd)
        qperm = (np.arange(h)[:, None] * hd + perm[None, :]).reshape(-1)
        kperm = (np.arange(kvh)[:, None] * hd + perm[None, :]).reshape(-1)
        qkv, o, gu, dn, ln1, ln2 = [], [], [], [], [], []
        for i in range(args.num_hidden_layers):
            p = f"model.layers.{i}."
            try:
                qkv.append(QuantWeights.concat([quant[p + "self_attn.q_proj.weight"].rows(qperm).scaled(hd**-0.5),
                                                quant[p + "self_attn.k_proj.weight"].rows(kperm),
                                                quant[p + "self_attn.v_proj.weight"]]))
                o.append(quant[p + "self_attn.o_proj.weight"])
                gu.append(QuantWeights.concat([quant[p + "mlp.gate_proj.weight"], quant[p + "mlp.up_proj.weight"]]))
                dn.append(quant[p + "mlp.down_proj.weight"])
            except KeyError as e:
                raise ValueError(f"the numba backend needs quantized weights; {e} is not quantized") from e
            ln1.append(weights[p + "input_layernorm.weight"].astype(np.float32))
            ln2.append(weights[p + "post_attention_layernorm.weight"].astype(np.float32))
        for w in (*qkv, *o, *gu, *dn):
            n_in, ng = w.codes.shape[1], w.scales.shape[1]
            if ng == 0 or n_in % ng or (n_in // ng) % 8:
                raise ValueError(f"the numba backend needs groups of a multiple of 8 inputs; a matrix has "
                                 f"{n_in} inputs in {ng} groups")
        self._q = (np.stack(ln1), *_stack(qkv), *_stack(o), np.stack(ln2), *_stack(gu), *_stack(dn))
        head = quant.get("model.embed_tokens.weight")
        self.head = head.transposed() if head is not None else None
        self._cos = np.ascontiguousarray(self.rot.real, dtype=np.float32)
        self._sin = np.ascontiguousarray(self.rot.imag, dtype=np.float32)
        self._eps = np.float32(self.eps)
        self._logits = np.empty(args.vocab_size, np.float32)

    def forward(self, tokens, all_positions: bool = False) -> np.ndarray:
        L = len(tokens)
        if L > STEP_MAX or L == 0:
            return super().forward(tokens, all_positions)
        if self.offset + L > self.capacity:
            raise ValueError(f"KV cache holds {self.capacity} tokens; {self.offset} cached + {L} new is too many")
        off = self.offset
        if L < BATCH_MIN:
            for t in tokens:
                out = self._step(int(t))
            return self.hid[off : off + L].copy() if all_positions else out
        x = self.emb[np.asarray(tokens, dtype=np.int64)].astype(np.float32)  # a copy: updated in place
        hs = np.empty((L, self.d), np.float32)
        self._k.steps(x, off, *self._q, self.norm, self.kT, self.v, self._cos, self._sin, self.h, self.kvh,
                      self._eps, hs)
        self.offset = off + L
        self.hid[off : off + L] = hs
        return hs if all_positions else hs[-1].copy()

    def _step(self, token: int) -> np.ndarray:
        off = self.offset
        x = self.emb[token].copy()
        out = np.empty(self.d, np.float32)
        self._k.step(x, off, *self._q, self.norm, self.kT, self.v, self._cos, self._sin, self.h, self.kvh,
              self._eps, out)
        self.offset = off + 1
        self.hid[off] = out
        return out

    def logits(self, hidden: np.ndarray, ids: np.ndarray | None = None) -> np.ndarray:
        """LM head on the tied embedding's codes (``(vocab,)``), or the float rows ``ids``."""
        if ids is not None or self.head is None:
            return super().logits(hidden, ids)
        out = np.empty(self.head[0].shape[1], np.float32)
        self._k.qgemv(*self.head, np.ascontiguousarray(hidden, np.float32), out)
        return out
