"""Plain-CPU decoder: the same checkpoint run with NumPy, for machines without Metal.

Why a second backend: MLX's CPU backend costs ~30-120 us per op on this 2-core x86_64 machine
(a single-token step of this 4-layer model measured ~10 ms there), while a NumPy step is a few
dozen BLAS calls on weights that sit in L2/L3. The weights are dequantized once at load
(``mx.dequantize``, so the numbers are exactly the 6-bit model's) and projections are fused
(``q|k|v`` into one matrix, ``gate|up`` into one; RMSNorm weights folded into the next matrix),
so a decode step is 4 matrix products per layer; single-token steps take a path with no
transposes (keys are also kept transposed).
``tests/test_backends.py`` checks logits parity with the MLX model (max abs difference < 2e-3).

KV cache layout: ``k, v`` of shape ``(layers, kv_heads, capacity, head_dim)`` float32; positions are
window positions ``0..offset-1``; :meth:`trim` rolls back, :meth:`reset` empties.
"""

from __future__ import annotations

import math

import numpy as np

from .model import ModelArgs


def _rms(x: np.ndarray, eps: float) -> np.ndarray:
    return x * (1.0 / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps))


def _rms_norm(x: np.ndarray, w: np.ndarray, eps: float) -> np.ndarray:
    return _rms(x, eps) * w


class NumpyBackend:
    """Decoder with a KV cache. ``forward(tokens)`` -> final normed hidden state of the last token.

    Layout choices that keep a decode step to few NumPy calls:

    * The q/k output features of each head are permuted at load from MLX's "two halves" RoPE order
      to interleaved pairs, so RoPE is one complex multiplication (``view(np.complex64)``). Dot
      products ``q . k`` do not change under a permutation applied to both.
    * The attention scale is folded into ``W_q``; RMSNorm weights into the next projection.
    * Keys are cached transposed ``(layers, kv_heads, head_dim, capacity)``, so scores are one
      batched matrix product with no copy; values ``(layers, kv_heads, capacity, head_dim)``.
    """

    name = "numpy"

    def __init__(self, args: ModelArgs, weights: dict[str, np.ndarray], capacity: int,
                 config: dict | None = None):
        """
        Args:
            args: model hyper-parameters.
            weights: float32 arrays under mlx-lm / Llama names (dequantized).
            capacity: most tokens the KV cache holds (context window plus continuation).
            config: the model folder's ``config.json`` (kept as ``self.config``).
        """
        self.args = args
        self.config = config or {}
        d, h, kvh, hd = args.hidden_size, args.num_attention_heads, args.num_key_value_heads, args.head_dim
        self.h, self.kvh, self.hd, self.eps, self.d = h, kvh, hd, args.rms_norm_eps, d
        half = hd // 2
        perm = np.empty(hd, np.int64)
        perm[0::2] = np.arange(half)
        perm[1::2] = np.arange(half, hd)
        self.emb = np.ascontiguousarray(weights["model.embed_tokens.weight"], dtype=np.float32)
        self.norm = weights["model.norm.weight"].astype(np.float32)
        scale = hd**-0.5
        self.layers = []
        for i in range(args.num_hidden_layers):
            p = f"model.layers.{i}."
            wq = weights[p + "self_attn.q_proj.weight"].reshape(h, hd, d)[:, perm].reshape(h * hd, d) * scale
            wk = weights[p + "self_attn.k_proj.weight"].reshape(kvh, hd, d)[:, perm].reshape(kvh * hd, d)
            wqkv = np.concatenate([wq, wk, weights[p + "self_attn.v_proj.weight"]], axis=0)
            wgu = np.concatenate([weights[p + "mlp.gate_proj.weight"], weights[p + "mlp.up_proj.weight"]], axis=0)
            ln1 = weights[p + "input_layernorm.weight"].astype(np.float32)
            ln2 = weights[p + "post_attention_layernorm.weight"].astype(np.float32)
            self.layers.append((
                np.ascontiguousarray(ln1[:, None] * wqkv.T, dtype=np.float32),
                np.ascontiguousarray(weights[p + "self_attn.o_proj.weight"].T, dtype=np.float32),
                np.ascontiguousarray(ln2[:, None] * wgu.T, dtype=np.float32),
                np.ascontiguousarray(weights[p + "mlp.down_proj.weight"].T, dtype=np.float32),
            ))
        self.inter = args.intermediate_size
        self.capacity = capacity
        n_layers = args.num_hidden_layers
        self.kT = np.zeros((n_layers, kvh, hd, capacity), np.float32)
        self.v = np.zeros((n_layers, kvh, capacity, hd), np.float32)
        self.offset = 0
        self.hid = np.zeros((capacity, d), np.float32)  # final hidden state per cached position
        # RoPE (mlx.nn.RoPE, traditional=False, base rope_theta) as unit complex numbers per pair.
        inv = args.rope_theta ** (-np.arange(0, hd, 2, dtype=np.float64) / hd)
        ang = np.arange(capacity, dtype=np.float64)[:, None] * inv[None, :]
        self.rot = np.exp(1j * ang).astype(np.complex64)  # (capacity, hd/2)

    def forward(self, tokens, all_positions: bool = False) -> np.ndarray:
        """Run new tokens after the cached ones.

        Args:
            tokens: token ids (at least one).
            all_positions: return hidden states for every new token instead of the last.

        Returns:
            ``(hidden_size,)`` float32, or ``(len(tokens), hidden_size)`` with ``all_positions``.

        Raises:
            ValueError: the KV cache would exceed ``capacity`` tokens.
        """
        L = len(tokens)
        off = self.offset
        if off + L > self.capacity:
            raise ValueError(f"KV cache holds {self.capacity} tokens; {off} cached + {L} new is too many")
        if L == 1 and not all_positions:
            return self._step(int(tokens[0]))
        h, kvh, hd = self.h, self.kvh, self.hd
        x = self.emb[np.asarray(tokens, dtype=np.int64)]  # (L, d)
        end = off + L
        mask = np.triu(np.full((L, end), -np.inf, np.float32), k=off + 1)
        rot = self.rot[off:end, None, :]  # (L, 1, hd/2)
        for i, (wqkv, wo, wgu, wd) in enumerate(self.layers):
            qkv = _rms(x, self.eps) @ wqkv  # (L, (h+2kvh)*hd)
            qk = np.ascontiguousarray(qkv[:, : (h + kvh) * hd]).reshape(L, h + kvh, hd)
            qk = (qk.view(np.complex64) * rot).view(np.float32)  # RoPE
            self.kT[i, :, :, off:end] = qk[:, h:].transpose(1, 2, 0)
            self.v[i, :, off:end] = qkv[:, (h + kvh) * hd :].reshape(L, kvh, hd).transpose(1, 0, 2)
            q = qk[:, :h].transpose(1, 0, 2)  # (h, L, hd)
            K, V = self.kT[i, :, :, :end], self.v[i, :, :end]
            if kvh != h:
                K, V = np.repeat(K, h // kvh, axis=0), np.repeat(V, h // kvh, axis=0)
            s = q @ K + mask  # (h, L, end)
            s = np.exp(s - s.max(axis=-1, keepdims=True))
            s /= s.sum(axis=-1, keepdims=True)
            x = x + (s @ V).transpose(1, 0, 2).reshape(L, h * hd) @ wo
            gu = _rms(x, self.eps) @ wgu
            g = gu[:, : self.inter]
            x = x + ((g / (1.0 + np.exp(-g))) * gu[:, self.inter :]) @ wd
        self.offset = end
        out = _rms_norm(x, self.norm, self.eps)
        self.hid[off:end] = out
        return out if all_positions else out[-1]

    def _step(self, token: int) -> np.ndarray:
        """One token: the decode hot path (about 30 NumPy calls per layer)."""
        h, kvh, hd, inter, eps = self.h, self.kvh, self.hd, self.inter, self.eps
        off = self.offset
        end = off + 1
        rot = self.rot[off]
        inv_d = 1.0 / self.d
        nq = (h + kvh) * hd
        x = self.emb[token]
        for i, (wqkv, wo, wgu, wd) in enumerate(self.layers):
            qkv = (x * (1.0 / math.sqrt(float(x.dot(x)) * inv_d + eps))) @ wqkv
            qk = (qkv[:nq].view(np.complex64).reshape(h + kvh, hd // 2) * rot).view(np.float32)
            self.kT[i, :, :, off] = qk[h:]
            self.v[i, :, off] = qkv[nq:].reshape(kvh, hd)
            q = qk[:h, None, :]  # (h, 1, hd)
            K, V = self.kT[i, :, :, :end], self.v[i, :, :end]
            if kvh != h:
                K, V = np.repeat(K, h // kvh, axis=0), np.repeat(V, h // kvh, axis=0)
            sc = q @ K  # (h, 1, end)
            sc = np.exp(sc - sc.max(axis=-1, keepdims=True))
            a = (sc @ V) / sc.sum(axis=-1, keepdims=True)
            x = x + a.reshape(h * hd) @ wo
            gu = (x * (1.0 / math.sqrt(float(x.dot(x)) * inv_d + eps))) @ wgu
            g = gu[:inter]
            x = x + ((g / (1.0 + np.exp(-g))) * gu[inter:]) @ wd
        self.offset = end
        out = x * (1.0 / math.sqrt(float(x.dot(x)) * inv_d + eps)) * self.norm
        self.hid[off] = out
        return out

    def logits(self, hidden: np.ndarray, ids: np.ndarray | None = None) -> np.ndarray:
        """LM head (tied embeddings): ``(vocab,)`` logits, or only the rows ``ids`` (the pool head)."""
        w = self.emb if ids is None else self.emb[ids]
        return w @ hidden

    def trim(self, n: int) -> int:
        n = min(n, self.offset)
        self.offset -= n
        return n

    def reset(self) -> None:
        self.offset = 0

    def swap(self, state=None):
        """Install another KV cache (None: a new empty one); return the live one (no copy)."""
        old = (self.kT, self.v, self.hid, self.offset)
        if state is None:
            self.kT, self.v, self.hid = np.empty_like(self.kT), np.empty_like(self.v), np.zeros_like(self.hid)
            self.offset = 0
        else:
            self.kT, self.v, self.hid, self.offset = state
        return old

    def shift(self, d: int) -> None:
        """Context shift: drop the oldest ``d`` cached tokens and move the rest to positions ``0..``.

        Keys are stored rotated by RoPE, and a rotation by ``p - d`` is a rotation by ``p`` followed
        by one by ``-d``, so moving them is one more rotation (the method of llama.cpp's context
        shift). Values do not depend on position.
        """
        off = self.offset
        d = min(d, off)
        n = off - d
        k = np.ascontiguousarray(self.kT[:, :, :, d:off].transpose(0, 1, 3, 2))  # (layers, kvh, n, hd)
        k = (k.view(np.complex64) * np.conj(self.rot[d])).view(np.float32)
        self.kT[:, :, :, :n] = k.transpose(0, 1, 3, 2)
        self.v[:, :, :n] = self.v[:, :, d:off].copy()
        self.hid[:n] = self.hid[d:off].copy()
        self.offset = n
