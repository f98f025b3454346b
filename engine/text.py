"""Identifier boundaries in plain text (the same identifier definition as the tokenizer's)."""

from __future__ import annotations

import re
import unicodedata


def run_start(prefix: str) -> int:
    """Where the run of identifier characters (letters, digits, ``_``) that ends ``prefix`` starts."""
    i = len(prefix)
    while i > 0 and (prefix[i - 1].isalnum() or prefix[i - 1] == "_"):
        i -= 1
    return i


def word_prefix(prefix: str) -> str:
    """The identifier characters just before the cursor (``""`` at a boundary).

    Digits alone are not an identifier start, so ``"x = 12"`` gives ``""``, ``"foo.ba"`` gives
    ``"ba"`` and ``"foo.ba2"`` gives ``"ba2"``.
    """
    w = prefix[run_start(prefix):]
    # drop leading digits: "3abc" is not an identifier start
    i = 0
    while i < len(w) and w[i].isdigit():
        i += 1
    return w[i:]


def in_number(prefix: str) -> bool:
    """True when the cursor is inside a number literal: the run of identifier characters before
    it starts with a digit (``"x = 0xab"``, ``"1e5"``, ``"12"``). No identifier belongs there:
    ``0xab`` completed to ``0xabs`` would break the number."""
    i = run_start(prefix)
    return i < len(prefix) and prefix[i].isdigit()


def after_mark(prefix: str) -> bool:
    """True when the identifier characters before the cursor follow a combining mark, or the
    cursor does (``á`` written as ``a`` + U+0301, as decomposed text has it): the identifier goes
    on across the mark, where this module's identifiers (and the tokenizer's) end, so no item can
    replace it whole (``print(á|`` got ``print`` inserted after the mark: ``print(áprint``)."""
    i = run_start(prefix)
    return i > 0 and unicodedata.category(prefix[i - 1])[0] == "M"


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
"""Lone surrogates: valid in a JSON string (clients send them for broken UTF-16), but no UTF-8
encoder, the tokenizer's included, can take them."""


def well_formed(text: str) -> str:
    """``text`` with each lone surrogate replaced by U+FFFD, one for one (lengths are kept)."""
    return text if text.isascii() else _LONE_SURROGATE.sub("\ufffd", text)
