"""Plain result types of the engine (no LSP types here)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Candidate:
    """One ranked suggestion.

    ``text`` replaces the identifier prefix being typed (the trailing identifier characters of the
    prefix; see :func:`engine.text.word_prefix`), so it starts at the word start: typing ``os.pa``
    gives ``text="path"`` (receiver and dot stay). ``kind`` is ``"identifier"``, ``"keyword"``,
    ``"word"`` (prose) or ``"line"`` (a continuation to the end of the line, ``text`` may contain spaces and punctuation).
    ``score`` is a log-probability-like number: higher is better; only the order is meaningful.
    """

    text: str
    score: float
    kind: str = "identifier"
