"""Keeping the backend's KV cache in step with the decision's context window.

``KVSync.sync(ctx)`` makes the KV cache hold the token list ``ctx`` at the least cost: it keeps the
longest common prefix with what is cached and prefills the rest (a rollback on deletion is a
trim); when the window slid, it shifts the cache (``context_shift``) instead of a re-prefill;
after a jump or a paste it answers from a short window and prefills the full one later
(:meth:`KVSync.advance`), keeping the windows it leaves in a :class:`WindowStore` to come back to
(``engine.window_cache``). Engine thread only, like every model call.
"""

from __future__ import annotations

import os

import numpy as np

from .window_cache import CHUNK_TOKENS, FAST_MIN_NEW, SHORT_TOKENS, PendingWindow, WindowStore, common_prefix


class KVSync:
    """The KV cache of one backend and the token list it holds (``cached``)."""

    def __init__(self, backend, context_shift: bool = True, stats: dict | None = None,
                 prior_after_jump: bool = True):
        """
        Args:
            backend: the decoder (``engine.backends.Backend``).
            context_shift: shift the cache when the window slid (``EngineConfig.context_shift``).
            prior_after_jump: after a jump or a paste, :meth:`sync` prefills nothing and returns
                None (the decision is the n-gram prior's; ``EngineConfig.prior_after_jump``);
                else it prefills the short window at once.
            stats: counters to update (``forward_tokens``, ``shifts``, ``short_windows``,
                ``stored_windows``, ``background_tokens``, ``speculated_tokens``,
                ``prefetched_tokens``).
        """
        self.backend = backend
        self.context_shift = context_shift
        self.stats = stats if stats is not None else {}
        for k in ("forward_tokens", "shifts", "short_windows", "stored_windows", "background_tokens",
                  "speculated_tokens", "prefetched_tokens"):
            self.stats.setdefault(k, 0)
        self.cached: list[int] = []  # tokens in the KV cache; invariant: len == backend.offset
        self.windows = WindowStore()  # KV caches of windows left by a jump (engine.window_cache)
        self.pending: PendingWindow | None = None  # full window being prefilled behind a short one
        # answer from a short window when a decision needs a long prefill (LAYA_FAST_PATH=0: off,
        # for side-by-side benchmarks against the whole-window behaviour)
        self.fast_path = os.environ.get("LAYA_FAST_PATH", "1") != "0"
        self.prior_after_jump = prior_after_jump
        self.speculated = 0
        """Tokens at the end of ``cached`` that :meth:`speculate` added past the synced context."""

    def reset(self) -> None:
        """Empty the KV cache, the stored windows and any pending full window."""
        self.backend.reset()
        self.cached = []
        self.windows.clear()
        self.pending = None
        self.speculated = 0

    def speculate(self, tokens: list[int]) -> None:
        """Prefill ``tokens`` after the synced context, ahead of the decision that will need them
        (idle time: the identifier being typed, before the user ends it). Replaces an earlier
        speculation; the next :meth:`sync` keeps them when its context goes on with them (the
        longest common prefix), else trims them. Nothing is done while a full window is pending."""
        if self.pending is not None:
            return
        if self.speculated and self.cached[-self.speculated:] == list(tokens):
            return  # the same word as at the last pause
        self.unspeculate()
        if not tokens or len(self.cached) + len(tokens) + 1 > self.backend.capacity:
            return
        self.backend.forward(tokens)
        self.cached.extend(tokens)
        self.speculated = len(tokens)
        self.stats["speculated_tokens"] += len(tokens)

    def _settle_speculation(self, ctx: list[int]) -> None:
        """Before a sync: keep the speculated tokens only where a cache without them would take
        the same path, extending the synced context by ``ctx``'s new tokens with no context shift
        and no short window (the kept ones then simply need no prefill); else trim them first,
        so every answer is the one a never-speculating engine gives."""
        base = len(self.cached) - self.speculated  # without them the cache holds base tokens,
        # all of them a prefix of ctx when ctx goes on from the synced context
        keep = (len(ctx) >= base and ctx[:base] == self.cached[:base]
                and not self._shifts(base, len(ctx), base) and not self._short(self.fast_path, len(ctx) - base))
        if not keep:
            self.unspeculate()
        self.speculated = 0  # from here on ``cached`` is the context (the kept tokens belong to it)

    def unspeculate(self) -> None:
        """Trim a speculation off the cache (before a continuation extends the synced context)."""
        if self.speculated:
            self.rollback(len(self.cached) - self.speculated)
            self.speculated = 0

    def extend(self, tokens: list[int]) -> np.ndarray:
        """Run ``tokens`` after the cached ones (e.g. a continuation); returns the last hidden state.
        Undo with :meth:`rollback`."""
        h = self.backend.forward(tokens)
        self.cached.extend(tokens)
        return h

    def rollback(self, n: int) -> None:
        """Trim the cache back to its first ``n`` tokens."""
        if len(self.cached) > n:
            self.backend.trim(len(self.cached) - n)
            del self.cached[n:]

    def sync(self, ctx: list[int]) -> np.ndarray | None:
        """Make the KV cache hold ``ctx`` (or, right after a jump, its last tokens: the short
        window, see ``engine.window_cache``); return the hidden state after its last token, or
        None right after a jump when ``prior_after_jump`` (nothing prefilled yet)."""
        if self.speculated:
            self._settle_speculation(ctx)
        pend = self.pending
        if pend is not None:
            if pend.done:  # the full window is ready: it replaces the short one
                self._install_pending()
            else:
                if len(ctx) > pend.start and ctx[: pend.start] == pend.head:
                    sub = ctx[pend.start :]  # still maps onto the short window
                    if not self.fast_path or len(sub) - common_prefix(self.cached, sub) <= FAST_MIN_NEW:
                        return self._sync_tokens(sub, fast=False)
                    # else a paste past the short window: a new short window answers (below)
                # moved away (or pasted) before it was done: keep what it has, to come back to
                if len(pend.cached) >= 64:
                    self.windows.put(pend.cached, pend.state)
                self.pending = None
                self.backend.reset()
                self.cached = []
        return self._sync_tokens(ctx, fast=self.fast_path)

    def _sync_tokens(self, ctx: list[int], fast: bool) -> np.ndarray | None:
        """Make the KV cache hold exactly ``ctx``; return the hidden state after its last token.

        With ``fast``, a sync that would prefill more than ``FAST_MIN_NEW`` tokens first looks for
        a stored window sharing a longer prefix, else prefills only the last ``SHORT_TOKENS`` and
        leaves the full window to :meth:`advance`.
        """
        cached = self.cached
        n = min(len(cached), len(ctx))
        lcp = 0
        if cached[:n] == ctx[:n]:
            lcp = n
        else:
            while lcp < n and cached[lcp] == ctx[lcp]:
                lcp += 1
        if self._shifts(lcp, len(ctx), len(cached)) and self._shift_to(ctx):
            return self._sync_tokens(ctx, fast)
        if self._short(fast, len(ctx) - lcp):
            # a stored window that leaves at most FAST_MIN_NEW tokens to prefill, else the short one
            hit = self._leave_window(ctx, at_least=max(lcp + 1, len(ctx) - FAST_MIN_NEW))
            cached = self.cached
            if hit is None:  # the cache is empty: the full window is left to ``advance``
                start = len(ctx) - SHORT_TOKENS
                self.pending = PendingWindow(list(ctx), ctx[:start])
                self.stats["short_windows"] += 1
                if self.prior_after_jump:
                    return None  # the short window is prefilled when the context next changes
                return self._sync_tokens(ctx[start:], fast=False)
            lcp = common_prefix(cached, ctx)
        if lcp == len(ctx):
            lcp -= 1  # need the hidden state of the last context token: recompute it
        if lcp < len(cached):
            self.backend.trim(len(cached) - lcp)
            del cached[lcp:]
        new = ctx[lcp:]
        h = self.backend.forward(new)
        cached.extend(new)
        self.stats["forward_tokens"] += len(new)
        return h

    def prefill(self, ctx: list[int], max_tokens: int = CHUNK_TOKENS) -> bool:
        """Idle time: bring the KV cache toward holding ``ctx``, prefilling at most ``max_tokens``
        tokens per call, so that the next decision at that context prefills (almost) nothing.

        For the context at the cursor after an edit that no completion request followed yet (a
        paste, a comment or a line break typed, an undo: ``Predictor.prefetch``). The first call
        that finds the cache diverging from ``ctx`` does what :meth:`sync` would: a context
        shift where the window slid; where more than ``FAST_MIN_NEW`` cached tokens would be
        trimmed, the window being left is stored (to come back to, as after a jump) and a stored
        window sharing a longer prefix is taken. Then the rest is prefilled up to the last token of
        ``ctx``, which is left to the decision (it needs that token's hidden state). A full
        window pending behind a short one is left to :meth:`advance` (nothing is done until it
        is done; once done it replaces the short one here, as in :meth:`sync`).

        Returns:
            True while there is more to prefill.
        """
        if self.pending is not None:
            if not self.pending.done:
                return False
            self._install_pending()
        if self.speculated:
            self._settle_speculation(ctx)
        cached = self.cached
        lcp = common_prefix(cached, ctx)
        if lcp < len(cached):  # the cache diverges from ctx (later steps only extend a prefix of it)
            if self._shifts(lcp, len(ctx), len(cached)) and self._shift_to(ctx):
                lcp = common_prefix(cached, ctx)
            if len(cached) - lcp > FAST_MIN_NEW:  # most of the cache would go: keep it, as a jump does
                self._leave_window(ctx, at_least=lcp + 1)
                cached = self.cached
                lcp = common_prefix(cached, ctx)
        target = len(ctx) - 1
        if lcp >= target:
            return False
        if lcp < len(cached):
            self.backend.trim(len(cached) - lcp)
            del cached[lcp:]
        chunk = ctx[lcp : min(target, lcp + max_tokens)]
        self.backend.forward(chunk)
        cached.extend(chunk)
        self.stats["prefetched_tokens"] += len(chunk)
        return len(cached) < target

    def _install_pending(self) -> None:
        """The full window prefilled behind a short one (done) becomes the cache."""
        self.backend.swap(self.pending.state)
        self.cached = self.pending.cached
        self.pending = None

    def _shift_to(self, ctx: list[int]) -> bool:
        """Drop the oldest cached tokens where the window slid so the cache starts as ``ctx``
        does (the kept keys re-rotated: ``backend.shift``); False when no such shift exists."""
        d = _find_shift(self.cached, ctx)
        if d:
            self.backend.shift(d)
            del self.cached[:d]
            self.stats["shifts"] += 1
        return bool(d)

    def _leave_window(self, ctx: list[int], at_least: int):
        """Leave the cached window: keep it in the store (64 tokens or more, to come back to) and
        take the stored window sharing the longest prefix with ``ctx`` (``at_least`` tokens),
        else an empty cache. Returns the stored window taken, or None."""
        hit = self.windows.take(ctx, at_least=at_least)
        if len(self.cached) >= 64:
            self.windows.put(self.cached, self.backend.swap(hit[1] if hit else None))
            self.stats["stored_windows"] += 1
        elif hit:
            self.backend.swap(hit[1])
        else:
            self.backend.reset()
        self.cached = hit[0] if hit else []
        return hit

    def _shifts(self, lcp: int, n_ctx: int, n_cached: int) -> bool:
        """Whether a sync looks for a context shift: little of the context is cached as it is."""
        return self.context_shift and lcp < n_ctx // 2 and n_cached > 64

    @staticmethod
    def _short(fast: bool, n_new: int) -> bool:
        """Whether a sync of ``n_new`` uncached tokens answers from a short window (or a stored one)."""
        return fast and n_new > FAST_MIN_NEW

    def advance(self, max_tokens: int = CHUNK_TOKENS) -> bool:
        """Prefill up to ``max_tokens`` more of the full window behind a short one (see
        :meth:`sync`); the next decision uses it once complete. Runs on the engine thread between
        decisions (``predict`` calls it on keystrokes that need no forward pass).

        Returns:
            True while there is more to do.
        """
        pend = self.pending
        if pend is None or pend.done:
            return False
        live = self.backend.swap(pend.state)
        chunk = pend.ctx[len(pend.cached) : len(pend.cached) + max_tokens]
        self.backend.forward(chunk)
        pend.cached.extend(chunk)
        pend.state = self.backend.swap(live)
        self.stats["background_tokens"] += len(chunk)
        return not pend.done


def _find_shift(cached: list[int], ctx: list[int], probe: int = 32) -> int:
    """Smallest ``d > 0`` with ``cached[d:d+probe] == ctx[:probe]`` (the window slid by ``d``), or 0."""
    m = min(probe, len(ctx), len(cached))
    head = ctx[:m]
    first = head[0] if head else None
    for d in range(1, len(cached) - m // 2):
        if cached[d] == first and cached[d : d + m] == head[: len(cached) - d]:
            return d
    return 0
