"""Identifier boundaries in plain text (the same identifier definition as the tokenizer's)."""

from __future__ import annotations


def word_prefix(prefix: str) -> str:
    """The identifier characters just before the cursor (``""`` at a boundary).

    Digits alone are not an identifier start, so ``"x = 12"`` gives ``""``, ``"foo.ba"`` gives
    ``"ba"`` and ``"foo.ba2"`` gives ``"ba2"``.
    """
    i = len(prefix)
    while i > 0 and (prefix[i - 1].isalnum() or prefix[i - 1] == "_"):
        i -= 1
    w = prefix[i:]
    # drop leading digits: "3abc" is not an identifier start
    i = 0
    while i < len(w) and w[i].isdigit():
        i += 1
    return w[i:]
