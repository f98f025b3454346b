"""A learned re-ranker of the best few candidates (``rerank.json`` in the model folder).

The engine's score (the network's first-token probability mixed with the n-gram prior,
``Predictor._rank_words``) is one number built from many signals by fixed weights. The re-ranker
looks again at its best :data:`TOP_K` candidates with those signals kept apart
(:data:`FEATURES`) and scores them by a linear model, one weight vector per language and per
typed length (0, 1, 2 or more characters): a listwise softmax ("ListNet", Cao et al., 2007)
fitted on the ``tune`` packages by ``laya tune --rerank`` (``laya_tools.rerank_fit``), each
decision weighed by the square root of the characters its right answer saves. The other
candidates keep their order below those :data:`TOP_K`. Right after a jump or a paste, while the
n-gram prior alone answers (``EngineConfig.prior_after_jump``), nothing is re-ranked.

Features of one candidate ``w`` when ``typed`` is typed (shape ``(k, len(FEATURES))``):

* ``score``: the engine's log score, minus the best one's (0 for the first).
* ``net``: the network's log-probability of ``w``'s first token (neural cache included).
* ``prior``: log of the n-gram prior's share of the pool.
* ``prior_in_group``: log of the prior's share among the pool's words with the same first token.
* ``in_document``: the document holds ``w`` (its counts are in the last refresh).
* ``document_count``: ``log(1 + times w is in the document)`` (counts up to :data:`COUNT_CAP`, as
  those of ``document_trigram``, ``document_bigram`` and ``long_match``).
* ``recency``: ``log(1 + r)``, ``r`` how many distinct identifiers of the context window came
  after ``w``'s last use, at most ``RECENCY_ABSENT`` (that when the window does not hold it), and
  ``not_in_window``: 1 then.
* ``on_line``: ``w`` is already on the line being typed; ``recent_lines``: on one of the last
  complete lines (``engine.context.RECENT_LINES``).
* ``keyword``: a reserved word of the language.
* ``rest_length``: ``log`` of the characters ``w`` adds to what is typed.
* ``rank``: ``log(1 + its place in the engine's order)``.
* ``new_word``: neither in the document nor in the corpus lexicon (an n-gram follower of the
  window, a compound, an expected name).
* ``document_trigram`` / ``document_bigram``: ``log(1 + times w followed the last two / one
  pieces in the document)``.
* ``long_match``: ``log(1 + weight of the document's long-context matches for w)``
  (``engine.pieces.PieceIndex.followers``).
* ``corpus_count``: ``log(1 + w's corpus count)`` for a document word, 0 for the others.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

FEATURES = ("score", "net", "prior", "prior_in_group", "in_document", "document_count", "recency",
            "not_in_window", "on_line", "keyword", "rest_length", "rank", "new_word",
            "document_trigram", "document_bigram", "long_match", "recent_lines", "corpus_count")
"""Feature names, in the order of a feature row (the module docstring defines each)."""

TOP_K = 32
"""Candidates re-ranked per decision (the engine's best that are longer than the typed text). On
the ``tune`` packages the right identifier is among the first 32 in ~76% of the decisions, and
the rest of the pool rarely comes first after re-ranking."""

BUCKETS = 3
"""Weight vectors per language: typed length 0, 1, and 2 or more characters."""

RECENCY_ABSENT = 64
"""``r`` of a candidate the context window does not hold, and the most ``recency`` counts."""

COUNT_CAP = 16
"""The document's counts (``document_count``, ``document_trigram``, ``document_bigram``,
``long_match``) count up to this: the fit saw files of 8,000 characters, and uncapped counts of a
long repetitive file pushed its most used name down (``self.assertE`` after 300
``self.assertEqual`` lines offered ``assertEquals`` first)."""

FILE = "rerank.json"
"""Its file in a model folder."""


class Reranker:
    """Per-language weights over :data:`FEATURES`; see the module docstring."""

    def __init__(self, weights: dict[str, np.ndarray], k: int = TOP_K, meta: dict | None = None):
        """
        Args:
            weights: language name -> ``(BUCKETS, len(FEATURES))`` float array; ``"*"`` for the
                languages without their own.
            k: candidates re-ranked per decision.
            meta: what the file says of its fit (packages, decisions, date), kept for reports.
        """
        self.weights = weights
        self.k = k
        self.meta = meta or {}

    def weights_for(self, language: str) -> np.ndarray | None:
        """``(BUCKETS, len(FEATURES))`` for ``language``, the ``"*"`` ones, or None."""
        w = self.weights.get(language)
        return w if w is not None else self.weights.get("*")

    @classmethod
    def load(cls, path: Path) -> "Reranker":
        """Read ``rerank.json``.

        Raises:
            ValueError: not JSON, other features than :data:`FEATURES`, or weights of another shape
                (the message names the file).
        """
        try:
            d = json.loads(Path(path).read_text("utf-8"))
            if not isinstance(d, dict) or not isinstance(d.get("weights"), dict):
                raise ValueError("not an object with a weights object")
            if not isinstance(d.get("features"), list) or tuple(d["features"]) != FEATURES:
                raise ValueError(f"features {d.get('features')} are not this engine's {list(FEATURES)}")
            weights = {}
            for lang, w in d["weights"].items():
                ok = (isinstance(w, list) and len(w) == BUCKETS and all(
                    isinstance(row, list) and len(row) == len(FEATURES) and all(
                        type(x) in (int, float) and math.isfinite(x) for x in row) for row in w))
                if not ok:
                    raise ValueError(f"weights of {lang!r} are not {BUCKETS} x {len(FEATURES)} finite numbers")
                weights[lang] = np.asarray(w, np.float64)
            k = d.get("k", TOP_K)
            if type(k) is not int or not 2 <= k <= 256:
                raise ValueError(f"k={k!r} is not an integer in 2..256")
            meta = d.get("meta") or {}
            if not isinstance(meta, dict):
                raise ValueError("meta is not an object")
        except (OSError, UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError, ValueError,
                RecursionError) as e:
            raise ValueError(f"{path}: not a re-ranker file this engine reads ({e})") from e
        return cls(weights, k, meta)

    def save(self, path: Path) -> None:
        """Write ``rerank.json`` (weights rounded to 4 decimals)."""
        d = {"features": list(FEATURES), "k": self.k, "meta": self.meta,
             "weights": {lang: [[round(float(x), 4) for x in row] for row in w]
                         for lang, w in sorted(self.weights.items())}}
        Path(path).write_text(json.dumps(d, indent=1) + "\n", "utf-8")


def recency_ranks(line_idents: list[str], done: list[list[str]]) -> dict[str, int]:
    """``identifier -> r``: how many distinct identifiers came after its last use, newest first,
    over the line being typed (``line_idents``) then the window's complete lines (``done``, oldest
    first)."""
    out: dict[str, int] = {}
    for lst in (line_idents, *reversed(done)):
        for w in reversed(lst):
            if w not in out:
                out[w] = len(out)
    return out
