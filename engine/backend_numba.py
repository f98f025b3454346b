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
tokens run as compiled steps. The KV-cache layout, ``trim``, ``shift`` and ``hid`` are the NumPy
backend's. Compiled code is cached next to this file (numba ``cache=True``), so only the first
start after an install pays the ~2-4 s of compilation.
"""

from __future__ import annotations

import numba
import numpy as np

from .backend_numpy import NumpyBackend
from .model import ModelArgs

STEP_MAX = 8
"""Up to this many new tokens are run one compiled step each; more go through the float32 prefill."""


@numba.njit(fastmath=True, cache=True, nogil=True)
def _qgemv(codes_t, scales_t, biases_t, x, out):
    """``out = dequant(codes, scales, biases) @ x``, all stored transposed: ``codes_t (n_in, n_out)``
    uint8, ``scales_t/biases_t (n_in / group, n_out)`` float32, ``x (n_in,)`` float32.

    Transposed, the inner loop is an axpy over outputs (no horizontal reduction), which LLVM turns
    into 8-wide FMAs on AVX2: ~2-3x faster than the row-dot form on this CPU (12 vs 23-35 us for
    1024x256).
    """
    n_in, n_out = codes_t.shape
    ng = scales_t.shape[0]
    gs = n_in // ng
    acc = np.empty(n_out, np.float32)
    for o in range(n_out):
        out[o] = 0.0
    for g in range(ng):
        for o in range(n_out):
            acc[o] = 0.0
        xs = np.float32(0.0)
        for i in range(g * gs, (g + 1) * gs):
            xi = x[i]
            xs += xi
            for o in range(n_out):
                acc[o] += np.float32(codes_t[i, o]) * xi
        for o in range(n_out):
            out[o] += scales_t[g, o] * acc[o] + biases_t[g, o] * xs


@numba.njit(fastmath=True, cache=True, nogil=True)
def _rms_scale(x, w, eps, out):
    n = x.shape[0]
    ss = np.float32(0.0)
    for i in range(n):
        ss += x[i] * x[i]
    r = np.float32(1.0) / np.sqrt(ss / n + eps)
    for i in range(n):
        out[i] = x[i] * r * w[i]


@numba.njit(fastmath=True, cache=True, nogil=True)
def _step(x, off, ln1, qkv_c, qkv_s, qkv_b, o_c, o_s, o_b, ln2, gu_c, gu_s, gu_b, d_c, d_s, d_b,
          norm, kT, v, cos, sin, n_heads, n_kv, eps, out):
    """One token through every layer. ``x (d,)`` is its embedding (updated in place as the residual
    stream); keys/values are written at cache position ``off``; ``out`` gets the final normed state."""
    d = x.shape[0]
    hd = kT.shape[2]
    half = hd // 2
    inter = gu_c.shape[2] // 2
    nq = n_heads * hd
    nk = n_kv * hd
    end = off + 1
    group = n_heads // n_kv
    xn = np.empty(d, np.float32)
    qkv = np.empty(qkv_c.shape[2], np.float32)
    att = np.empty(nq, np.float32)
    tmp = np.empty(d, np.float32)
    gu = np.empty(gu_c.shape[2], np.float32)
    act = np.empty(inter, np.float32)
    sc = np.empty(end, np.float32)
    for layer in range(qkv_c.shape[0]):
        _rms_scale(x, ln1[layer], eps, xn)
        _qgemv(qkv_c[layer], qkv_s[layer], qkv_b[layer], xn, qkv)
        # RoPE on q and k: features are interleaved (re, im) pairs (see NumpyBackend)
        for hh in range(n_heads + n_kv):
            base = hh * hd
            for j in range(half):
                re = qkv[base + 2 * j]
                im = qkv[base + 2 * j + 1]
                c = cos[off, j]
                s = sin[off, j]
                qkv[base + 2 * j] = re * c - im * s
                qkv[base + 2 * j + 1] = re * s + im * c
        for kh in range(n_kv):
            for i in range(hd):
                kT[layer, kh, i, off] = qkv[nq + kh * hd + i]
                v[layer, kh, off, i] = qkv[nq + nk + kh * hd + i]
        for hh in range(n_heads):
            kh = hh // group
            for p in range(end):
                sc[p] = 0.0
            for i in range(hd):
                qi = qkv[hh * hd + i]
                for p in range(end):
                    sc[p] += qi * kT[layer, kh, i, p]
            m = sc[0]
            for p in range(1, end):
                if sc[p] > m:
                    m = sc[p]
            tot = np.float32(0.0)
            for p in range(end):
                e = np.exp(sc[p] - m)
                sc[p] = e
                tot += e
            for i in range(hd):
                att[hh * hd + i] = 0.0
            for p in range(end):
                wgt = sc[p] / tot
                for i in range(hd):
                    att[hh * hd + i] += wgt * v[layer, kh, p, i]
        _qgemv(o_c[layer], o_s[layer], o_b[layer], att, tmp)
        for i in range(d):
            x[i] += tmp[i]
        _rms_scale(x, ln2[layer], eps, xn)
        _qgemv(gu_c[layer], gu_s[layer], gu_b[layer], xn, gu)
        for i in range(inter):
            g = gu[i]
            act[i] = g / (np.float32(1.0) + np.exp(-g)) * gu[inter + i]
        _qgemv(d_c[layer], d_s[layer], d_b[layer], act, tmp)
        for i in range(d):
            x[i] += tmp[i]
    _rms_scale(x, norm, eps, out)


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
            ValueError: a matrix the step needs is not quantized, or the group size does not divide it.
        """
        super().__init__(args, weights, capacity, config)
        h, kvh, hd = self.h, self.kvh, self.hd
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
        for t in tokens:
            out = self._step(int(t))
        return self.hid[off : off + L].copy() if all_positions else out

    def _step(self, token: int) -> np.ndarray:
        off = self.offset
        x = self.emb[token].copy()
        out = np.empty(self.d, np.float32)
        _step(x, off, *self._q, self.norm, self.kT, self.v, self._cos, self._sin, self.h, self.kvh,
              self._eps, out)
        self.offset = off + 1
        self.hid[off] = out
        return out

    def logits(self, hidden: np.ndarray, ids: np.ndarray | None = None) -> np.ndarray:
        """LM head on the tied embedding's codes (``(vocab,)``), or the float rows ``ids``."""
        if ids is not None or self.head is None:
            return super().logits(hidden, ids)
        out = np.empty(self.head[0].shape[1], np.float32)
        _qgemv(*self.head, np.ascontiguousarray(hidden, np.float32), out)
        return out
