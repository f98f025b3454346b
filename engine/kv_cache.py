"""A small KV cache with trim, in the shape of mlx-lm's ``KVCache``.

mlx-lm's ``models/cache.py`` is the reference: ``update_and_fetch(keys, values)``, ``offset``,
``trim(n)``. This copy exists so the run-time path does not import ``mlx_lm`` (see
``engine/model.py``); it grows its buffers in steps of ``step`` tokens as mlx-lm's does.
"""

from __future__ import annotations

import mlx.core as mx


class KVCache:
    """Keys and values of one attention layer, ``(batch, kv_heads, offset, head_dim)`` each."""

    step = 256

    def __init__(self):
        self.keys = None
        self.values = None
        self.offset = 0

    def update_and_fetch(self, keys: mx.array, values: mx.array):
        """Append ``keys``/``values`` ``(B, H, L, D)`` at ``offset``; return all cached ``(B, H, offset+L, D)``."""
        prev = self.offset
        L = keys.shape[2]
        if self.keys is None or prev + L > self.keys.shape[2]:
            B, H, _, D = keys.shape
            n = ((prev + L + self.step - 1) // self.step) * self.step
            new_k = mx.zeros((B, H, n, D), keys.dtype)
            new_v = mx.zeros((B, H, n, values.shape[3]), values.dtype)
            if self.keys is not None and prev:
                new_k[..., :prev, :] = self.keys[..., :prev, :]
                new_v[..., :prev, :] = self.values[..., :prev, :]
            self.keys, self.values = new_k, new_v
        self.offset += L
        self.keys[..., prev : self.offset, :] = keys
        self.values[..., prev : self.offset, :] = values
        return self.keys[..., : self.offset, :], self.values[..., : self.offset, :]

    def is_trimmable(self) -> bool:
        return True

    def trim(self, n: int) -> int:
        """Drop the last ``n`` cached tokens (rollback); returns how many were dropped."""
        n = min(self.offset, n)
        self.offset -= n
        return n
