"""Recent windows' KV caches, and the short window that answers right after a jump or a paste.

Typing forward costs a few new tokens per word; a jump to another place in the file (or a pasted
block) needs a whole new window: ~500 tokens of prefill, tens of ms. Two things make that cheap:

* :class:`WindowStore` keeps the KV caches of the last few windows the user left (swapped out of
  the backend, not copied), keyed by their tokens, in a bounded number of bytes. Coming back to a
  place finds the stored window with the longest common token prefix and swaps it in, so only
  what changed there is prefilled (mlx-lm's prompt cache does the same across requests; the
  seed's serve mode kept the 64 most recent prefixes).
* :class:`PendingWindow`: when no stored window helps, the decision is answered from the last
  ``short_tokens`` tokens of the window (a short prefill) while the full window is prefilled later,
  ``chunk`` tokens at a time into a second KV cache, on keystrokes that need no forward pass
  (``Predictor.advance``); once complete it replaces the short one.
"""

from __future__ import annotations

import os
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

import numpy as np

SHORT_TOKENS = 16
"""Tokens of the short window that answers right after a jump. Prefill is compute-bound at
~80-130 us a token on the 2-core dev machine under load (float32 GEMM, one BLAS thread). Measured
in process on held-out Python and Go files (616 jumps to random identifiers, the first keystroke
there): 16 tokens 3.65 ms at the median, 32 tokens 4.79 ms, and top-1 89.3% vs 89.6% (the whole
window: 89.9%); the document's n-grams carry that keystroke. 48 and 64 were slower still."""


def _env_int(name: str, default: int) -> int:
    """A whole number from the environment (for side-by-side runs); ``default`` when unset or bad."""
    raw = os.environ.get(name, "")
    return int(raw) if raw.isdigit() else default


FAST_MIN_NEW = _env_int("LAYA_FAST_MIN_NEW", 64)
"""A decision that would prefill more new tokens than this takes the short window instead
(``LAYA_FAST_MIN_NEW``: for side-by-side comparisons). 24 instead (what the compiled kernels
take at once) for every decision cost 0.37 points of keystrokes saved in process on the tune
packages (50.17 -> 49.80%; 32: 49.95, 48: 50.13), where the identifier after a long comment or
string gets the short window."""

CHUNK_TOKENS = 8
"""Tokens of the full window prefilled per :meth:`Predictor.advance` call: ~1-1.5 ms here, the
longest a request that arrives during idle work waits (16 tokens: ~2.3 ms; a 512-token window
takes ~64 calls, ~0.1 s of idle time)."""

STORE_BYTES = _env_int("LAYA_STORE_MB", 12) << 20
"""Memory for stored windows (each costs the backend's whole KV cache: 2.7 MB for the shipped
model's 293 tokens, so four of them) (``LAYA_STORE_MB``: for side-by-side comparisons). 32 MB
(until 2026-12-03) took the server to 157-166 MB resident over 30,000 edits of a file growing to
28 KB with a jump every 500 edits (139 MB with none stored, 147 MB with 12); typing after jumps
with 100 ms pauses, 12 against 32 beside each other: p99 7.41 against 9.84 ms, the first
keystroke after a jump 3.36 / 4.49 / 6.56 against 3.40 / 9.43 / 13.78 ms (median / p90 / p99,
``python -m laya_tools.bench_jumps jumps --gap-ms 100 --runs 600 --env LAYA_STORE_MB=12``)."""


def common_prefix(a: list[int], b: list[int]) -> int:
    """Length of the longest common prefix of two token lists."""
    n = min(len(a), len(b))
    if a[:n] == b[:n]:
        return n
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def state_nbytes(state: Any) -> int:
    """Bytes held by a backend KV cache returned by ``Backend.swap`` (arrays found one level deep)."""
    total = 0
    for x in state if isinstance(state, tuple) else (state,):
        if isinstance(x, np.ndarray):
            total += x.nbytes
        elif isinstance(x, list):
            for c in x:  # MLX: one KVCache per layer
                for a in (getattr(c, "keys", None), getattr(c, "values", None)):
                    total += int(getattr(a, "nbytes", 0) or 0)
    return total


class WindowStore:
    """LRU of ``tokens -> backend KV cache`` within ``max_bytes``."""

    def __init__(self, max_bytes: int = STORE_BYTES):
        self.max_bytes = max_bytes
        self._d: OrderedDict[tuple[int, ...], tuple[Any, int, list[int]]] = OrderedDict()
        self.nbytes = 0

    def __len__(self) -> int:
        return len(self._d)

    def put(self, tokens: list[int], state: Any) -> None:
        """Keep ``state`` (holding exactly ``tokens``); the least recently used go past the budget."""
        if len(tokens) < 2:
            return
        key = tuple(tokens)
        old = self._d.pop(key, None)
        if old is not None:
            self.nbytes -= old[1]
        n = state_nbytes(state)
        self._d[key] = (state, n, list(tokens))
        self.nbytes += n
        while self.nbytes > self.max_bytes and self._d:
            _, (_, m, _) = self._d.popitem(last=False)
            self.nbytes -= m

    def windows(self) -> list[list[int]]:
        """The stored windows' tokens, most recent first (``ContextWindow.alternates``)."""
        return [v[2] for v in reversed(self._d.values())]

    def take(self, ctx: list[int], at_least: int) -> tuple[list[int], Any] | None:
        """Remove and return ``(tokens, state)`` of the stored window sharing the longest prefix
        with ``ctx``, if that prefix is at least ``at_least`` tokens; else None."""
        best, best_n = None, at_least - 1
        for key, (_, _, toks) in self._d.items():
            if key[0] != (ctx[0] if ctx else None):
                continue
            n = common_prefix(toks, ctx)
            if n > best_n:
                best, best_n = key, n
        if best is None:
            return None
        state, m, toks = self._d.pop(best)
        self.nbytes -= m
        return toks, state

    def clear(self) -> None:
        self._d.clear()
        self.nbytes = 0


@dataclass
class PendingWindow:
    """A full window being prefilled in chunks while a short window answers."""

    ctx: list[int]
    """The full window's tokens (as of the jump)."""
    head: list[int]
    """``ctx[:start]``: the tokens before the short window; later contexts that keep them still
    map onto the short window."""
    state: Any = None
    """Its KV cache while not live (``Backend.swap``); None until the first chunk."""
    cached: list[int] = field(default_factory=list)
    """Tokens already in ``state``."""

    @property
    def start(self) -> int:
        return len(self.head)

    @property
    def done(self) -> bool:
        return len(self.cached) >= len(self.ctx)
