"""The rest-of-line continuation: the best identifier, then greedy tokens to the end of the line.

Runs after the decision's context in the KV cache and rolls itself back out, so the context
stays; stops before a token the model is unsure of (``line_min_prob``), at a line end, after
``line_max_tokens`` or when its request is cancelled.
"""

from __future__ import annotations

import numpy as np

MAX_WORD_TOKENS = 24
"""Longest identifier (in tokens) that gets a rest-of-line continuation (longer ones: none)."""


def continue_line(kv, tok, word: str, max_tokens: int, min_prob: float, eos: int, id_to_text: dict,
                  stop=None) -> tuple[str, bool]:
    """``(word + greedy continuation, complete)``; ``complete`` is False when ``stop`` cut it short.

    Args:
        kv: the ``engine.kv_sync.KVSync`` holding the context.
        tok: the tokenizer.
        word: the identifier the line starts with.
        max_tokens: most greedy tokens (``EngineConfig.line_max_tokens``).
        min_prob: stop before a greedy token less likely than this (``line_min_prob``).
        eos: the end-of-text token id.
        id_to_text: token id -> its byte-level text (``"Ċ"`` is a newline).
        stop: a ``threading.Event`` checked between steps.
    """
    ids = tok.encode(word).ids
    backend = kv.backend
    if len(ids) > MAX_WORD_TOKENS or len(kv.cached) + len(ids) + 1 > backend.capacity:
        return word, True  # a very long identifier: no room planned for its continuation
    n_ctx = len(kv.cached)
    h = kv.extend(ids)
    out: list[int] = []
    budget = min(max_tokens, backend.capacity - len(kv.cached) - 1)
    complete = True
    for _ in range(max(0, budget)):
        if stop is not None and stop.is_set():
            complete = False
            break
        lg = backend.logits(h)
        t = int(np.argmax(lg))
        # confidence of the greedy token: p = 1 / sum(exp(logits - max))
        if 1.0 / np.exp(lg - lg[t]).sum() < min_prob:
            break
        text = id_to_text.get(t, "")
        if t == eos or "Ċ" in text:  # "Ċ" is the byte-level symbol of "\n"
            break
        out.append(t)
        h = kv.extend([t])
    kv.stats["forward_tokens"] += len(ids) + len(out)
    kv.rollback(n_ctx)  # the continuation leaves the cache; the context stays
    line = word + tok.decode(out) if out else word
    return line.rstrip(), complete


def without_suffix(line: str, suffix: str | None) -> str:
    """Drop the end of a continuation that the rest of the line already has (e.g. a ``)``)."""
    rest = (suffix or "").split("\n", 1)[0].strip()
    if rest and line.endswith(rest):
        line = line[: -len(rest)].rstrip()
    return line


def line_is_open(suffix: str | None) -> bool:
    """True when the rest of the cursor's line is empty or only closing brackets/quotes."""
    if not suffix:
        return True
    rest = suffix.split("\n", 1)[0]
    return all(c in ")]}'\" \t:;," for c in rest)
