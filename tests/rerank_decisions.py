"""Synthetic re-ranker decisions for the fit's tests: the right candidate is the one with a
feature raised by 3, so a fit that learns anything ranks it first."""

from __future__ import annotations

import numpy as np

from engine.rerank import BUCKETS, FEATURES


def marked_decisions(n: int, k: int, seed: int = 0, feature: str = "on_line",
                     languages: tuple[str, ...] = ("go", "c"), rest: int = 5,
                     buckets: bool = True) -> dict[str, np.ndarray]:
    """``n`` decisions of ``k`` candidates (the arrays of ``laya_tools.rerank_fit.collect``,
    without ``faced``): features drawn from N(0, 1), ``feature`` + 3 on the right one; the
    languages cycle through ``languages``; typed-length buckets drawn at random, or all 0."""
    rng = np.random.default_rng(seed)
    F = rng.normal(size=(n, k, len(FEATURES))).astype(np.float32)
    label = rng.integers(0, k, n)
    F[np.arange(n), label, FEATURES.index(feature)] += 3.0
    return {"F": F, "mask": np.ones((n, k), bool), "label": label, "rest": np.full(n, rest),
            "bucket": rng.integers(0, BUCKETS, n) if buckets else np.zeros(n, np.int64),
            "language": np.array([languages[i % len(languages)] for i in range(n)])}
