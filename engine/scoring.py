"""The network's next-token log-probabilities with a neural cache mixed in.

Grave et al. (2017), "Improving neural language models with a continuous cache": positions of the
window whose final hidden state resembles the current one vote for the token that followed them,
``P = (1 - lam) softmax(logits) + lam P_cache``, ``P_cache(t) ~ sum_{i: ctx[i+1] = t} exp(theta h_i . h)``.
"""

from __future__ import annotations

import numpy as np


def with_neural_cache(logits: np.ndarray, hid: np.ndarray, hidden: np.ndarray, ctx: list[int],
                      lam: float, theta: float) -> np.ndarray:
    """Log-probabilities over the vocabulary, ``(vocab,)``.

    Args:
        logits: the LM head's output at the current position, ``(vocab,)``.
        hid: final hidden states of the cached positions, ``(>= len(ctx), hidden_size)``.
        hidden: the current one, ``(hidden_size,)``.
        ctx: the tokens in the KV cache (the window, or the short window right after a jump).
        lam: the cache's weight (``EngineConfig.cache_weight``; 0: plain softmax).
        theta: sharpness of the similarity (``EngineConfig.cache_theta``).
    """
    n = len(ctx) - 1
    m = logits.max()
    e = np.exp(logits - m)
    z = e.sum()
    if lam <= 0 or n < 2:
        return logits - m - np.log(z)
    sims = hid[:n] @ hidden * theta
    sims = np.exp(sims - sims.max())
    p_cache = np.bincount(np.asarray(ctx[1 : n + 1]), weights=sims, minlength=len(logits))
    p_cache *= lam / p_cache.sum()
    e *= (1 - lam) / z
    e += p_cache
    e += 1e-12
    return np.log(e)
