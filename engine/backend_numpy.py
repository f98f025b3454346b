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

import numpy as np

from .model import ModelArgs


def _rms(x: np.ndarray, eps: float) -> np.ndarray:
    return x * (1.0 / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps))


def _rms_norm(x: np.ndarray, w: np.ndarray, eps: float) -> np.ndarray:
    return _rms(x, eps) * w


class NumpyBackend:
    """Decoder with a KV cache. ``forward(tokens)`` -> final normed hidden state of the last token."""

    name = "numpy"

    def __init__(self, args: ModelArgs, weights: dict[str, np.ndarray], capacity: int):
        """
        Args:
            args: model hyper-parameters.
            weights: float32 arrays under mlx-lm / Llama names (dequantized).
            capacity: most tokens the KV cache holds (context window plus continuation).
        """
        self.args = args
        d, h, kvh, hd = args.hidden_size, args.num_attention_heads, args.num_key_value_heads, args.head_dim
        self.h, self.kvh, self.hd, self.eps = h, kvh, hd, args.rms_norm_eps
        self.emb = np.ascontiguousarray(weights["model.embed_tokens.weight"], dtype=np.float32)
        self.norm = weights["model.norm.weight"].astype(np.float32)
        self.layers = []
        for i in range(args.num_hidden_layers):
            p = f"model.layers.{i}."
            wqkv = np.concatenate([weights[p + f"self_attn.{n}_proj.weight"] for n in "qkv"], axis=0)
            wgu = np.concatenate([weights[p + "mlp.gate_proj.weight"], weights[p + "mlp.up_proj.weight"]], axis=0)
            ln1 = weights[p + "input_layernorm.weight"].astype(np.float32)
            ln2 = weights[p + "post_attention_layernorm.weight"].astype(np.float32)
            # RMSNorm's weight is folded into the next projection: (x * n * w) @ W = (x * n) @ (w[:, None] * W)
            self.layers.append((
                np.ascontiguousarray(ln1[:, None] * wqkv.T, dtype=np.float32),
                np.ascontiguousarray(weights[p + "self_attn.o_proj.weight"].T, dtype=np.float32),
                np.ascontiguousarray(ln2[:, None] * wgu.T, dtype=np.float32),
                np.ascontiguousarray(weights[p + "mlp.down_proj.weight"].T, dtype=np.float32),
            ))
        self.inter = args.intermediate_size
        self.capacity = capacity
        self.k = np.zeros((args.num_hidden_layers, kvh, capacity, hd), np.float32)
        self.v = np.zeros_like(self.k)
        self.kT = np.zeros((args.num_hidden_layers, kvh, hd, capacity), np.float32)  # keys, transposed
        self.d = d
        self.offset = 0
        # RoPE as mlx.nn.RoPE(traditional=False): rotate the two halves of each head.
        inv = args.rope_theta ** (-np.arange(0, hd, 2, dtype=np.float64) / hd)
        ang = np.arange(capacity, dtype=np.float64)[:, None] * inv[None, :]
        self.cos = np.cos(ang).astype(np.float32)  # (capacity, hd/2)
        self.sin = np.sin(ang).astype(np.float32)
        self.scale = np.float32(hd**-0.5)

    def _rope(self, x: np.ndarray, pos: slice) -> np.ndarray:
        # x: (heads, L, hd)
        half = self.hd // 2
        c, s = self.cos[pos], self.sin[pos]
        x1, x2 = x[..., :half], x[..., half:]
        return np.concatenate([x1 * c - x2 * s, x1 * s + x2 * c], axis=-1)

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
        pos = slice(off, off + L)
        end = off + L
        if L > 1:
            mask = np.triu(np.full((L, end), -np.inf, np.float32), k=off + 1)
        for i, (wqkv, wo, wgu, wd) in enumerate(self.layers):
            qkv = _rms(x, self.eps) @ wqkv  # (L, (h+2kvh)*hd)
            q = qkv[:, : h * hd].reshape(L, h, hd).transpose(1, 0, 2)
            k = qkv[:, h * hd : (h + kvh) * hd].reshape(L, kvh, hd).transpose(1, 0, 2)
            v = qkv[:, (h + kvh) * hd :].reshape(L, kvh, hd).transpose(1, 0, 2)
            k = self._rope(k, pos)
            self.k[i, :, pos] = k
            self.kT[i, :, :, pos] = k.transpose(0, 2, 1)
            self.v[i, :, pos] = v
            q = self._rope(q, pos) * self.scale
            K, V = self.k[i, :, :end], self.v[i, :, :end]
            if kvh != h:
                rep = h // kvh
                K, V = np.repeat(K, rep, axis=0), np.repeat(V, rep, axis=0)
            s = q @ K.transpose(0, 2, 1)  # (h, L, end)
            if L > 1:
                s = s + mask
            s = np.exp(s - s.max(axis=-1, keepdims=True))
            s /= s.sum(axis=-1, keepdims=True)
            a = (s @ V).transpose(1, 0, 2).reshape(L, h * hd)
            x = x + a @ wo
            gu = _rms(x, self.eps) @ wgu
            g, u = gu[:, : self.inter], gu[:, self.inter :]
            x = x + ((g / (1.0 + np.exp(-g))) * u) @ wd
        self.offset = end
        out = _rms_norm(x, self.norm, self.eps)
        return out if all_positions else out[-1]

    def _step(self, token: int) -> np.ndarray:
        """One token: the decode hot path, written for few NumPy calls (no transposes/copies)."""
        h, kvh, hd, half, inter = self.h, self.kvh, self.hd, self.hd // 2, self.inter
        off = self.offset
        end = off + 1
        c, s_ = self.cos[off], self.sin[off]
        x = self.emb[token]
        scale_d = np.float32(1.0 / self.d)
        for i, (wqkv, wo, wgu, wd) in enumerate(self.layers):
            qkv = (x * (1.0 / np.sqrt(x.dot(x) * scale_d + self.eps))) @ wqkv
            qk = qkv[: (h + kvh) * hd].reshape(h + kvh, hd)
            x1, x2 = qk[:, :half], qk[:, half:]
            qk = np.concatenate([x1 * c - x2 * s_, x1 * s_ + x2 * c], axis=1)
            self.k[i, :, off] = qk[h:]
            self.kT[i, :, :, off] = qk[h:]
            self.v[i, :, off] = qkv[(h + kvh) * hd :].reshape(kvh, hd)
            q = (qk[:h] * self.scale)[:, None, :]  # (h, 1, hd)
            if kvh == h:
                sc = q @ self.kT[i, :, :, :end]  # (h, 1, end)
                sc = np.exp(sc - sc.max(axis=-1, keepdims=True))
                a = (sc @ self.v[i, :, :end]) / sc.sum(axis=-1, keepdims=True)
            else:
                rep = h // kvh
                K = np.repeat(self.kT[i, :, :, :end], rep, axis=0)
                V = np.repeat(self.v[i, :, :end], rep, axis=0)
                sc = q @ K
                sc = np.exp(sc - sc.max(axis=-1, keepdims=True))
                a = (sc @ V) / sc.sum(axis=-1, keepdims=True)
            x = x + a.reshape(h * hd) @ wo
            gu = (x * (1.0 / np.sqrt(x.dot(x) * scale_d + self.eps))) @ wgu
            g = gu[:inter]
            x = x + ((g / (1.0 + np.exp(-g))) * gu[inter:]) @ wd
        self.offset = end
        return x * (1.0 / np.sqrt(x.dot(x) * scale_d + self.eps)) * self.norm

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

    def shift(self, d: int) -> None:
        """Context shift: drop the oldest ``d`` cached tokens and move the rest to positions ``0..``.

        Keys are stored rotated by RoPE, and a rotation by ``p - d`` is a rotation by ``p`` followed
        by one by ``-d``, so moving them is one more rotation (the method of llama.cpp's context
        shift). Values do not depend on position.
        """
        off = self.offset
        d = min(d, off)
        n = off - d
        half = self.hd // 2
        c, s = self.cos[d], -self.sin[d]  # rotation by -d
        k = self.k[:, :, d:off]
        k1, k2 = k[..., :half], k[..., half:]
        self.k[:, :, :n] = np.concatenate([k1 * c - k2 * s, k1 * s + k2 * c], axis=-1)
        self.kT[:, :, :, :n] = self.k[:, :, :n].transpose(0, 1, 3, 2)
        self.v[:, :, :n] = self.v[:, :, d:off].copy()
        self.offset = n
