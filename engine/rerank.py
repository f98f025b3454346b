"""A learned re-ranker of the best few candidates (``rerank.json`` in the model folder).

The engine's score (the network's first-token probability mixed with the n-gram prior,
``Predictor._rank_words``) is one number built from many signals by fixed weights. The re-ranker
looks again at its best :data:`TOP_K` candidates with those signals kept apart
(:data:`FEATURES`) and scores them by a linear model, one weight vector per language and per
typed length (0, 1, 2 or more characters), or by a small two-layer network (:class:`MLP`) over
the same features, the typed length and the language; either is fitted as a listwise softmax
("ListNet", Cao et al., 2007) on the ``tune`` packages by ``laya tune --rerank``
(``laya_tools.rerank_fit``), each decision weighed by the square root of the characters its right
answer saves. The other
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
* ``passed_over``: ``w`` was the first item at an earlier keystroke of the word being typed, and
  the user typed on instead of taking it (``EngineConfig.rerank_passed_over``).

A file fitted before the last features existed (its ``features`` a prefix of :data:`FEATURES`)
loads with weight 0 on the others.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

FEATURES = ("score", "net", "prior", "prior_in_group", "in_document", "document_count", "recency",
            "not_in_window", "on_line", "keyword", "rest_length", "rank", "new_word",
            "document_trigram", "document_bigram", "long_match", "recent_lines", "corpus_count",
            "passed_over")
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


MAX_WEIGHT = 1e4
"""The largest weight a file may hold: the fits give a few units; far larger ones would overflow
a score to inf or NaN."""


def _number(x) -> bool:
    """A finite JSON number (not a bool) no larger than :data:`MAX_WEIGHT` in magnitude."""
    return type(x) in (int, float) and abs(x) <= MAX_WEIGHT


def _array(a, shape: tuple[int, ...]) -> np.ndarray:
    """``a`` (nested JSON lists) as a float array of ``shape`` (1 or 2 dimensions) of
    :func:`_number` s. Raises ValueError otherwise."""
    ok = isinstance(a, list) and len(a) == shape[0] and all(
        (isinstance(row, list) and len(row) == shape[1] and all(_number(x) for x in row))
        if len(shape) == 2 else _number(row) for row in a)
    if not ok:
        raise ValueError(f"not {' x '.join(map(str, shape))} numbers within +-{MAX_WEIGHT:g}")
    return np.asarray(a, np.float64)


class MLP:
    """A two-layer scorer: ``s = relu(z @ w1 + b1) @ w2 + z @ skip`` per candidate, where ``z`` is
    the candidate's :data:`FEATURES` followed by one-hots of the typed length (:data:`BUCKETS`) and
    of the language (``languages``; all zeros for a language not listed, which the fit trains for
    by hiding the language of a tenth of its decisions). Constant terms are dropped: they do not
    change the order."""

    def __init__(self, languages: list[str], w1: np.ndarray, b1: np.ndarray, w2: np.ndarray,
                 skip: np.ndarray):
        """
        Args:
            languages: the languages of the one-hot, in its order.
            w1: ``(len(FEATURES) + BUCKETS + len(languages), hidden)``; b1: ``(hidden,)``;
            w2: ``(hidden,)``; skip: ``(len(FEATURES) + BUCKETS + len(languages),)``.
        """
        self.languages = list(languages)
        self.w1, self.b1, self.w2, self.skip = w1, b1, w2, skip
        nf = len(FEATURES)
        self._w1f = np.ascontiguousarray(w1[:nf])
        self._skipf = skip[:nf].copy()
        self._bias: dict[str, np.ndarray] = {}  # language -> (BUCKETS, hidden): b1 + one-hot rows

    def bias(self, language: str) -> np.ndarray:
        b = self._bias.get(language)
        if b is None:
            nf = len(FEATURES)
            b = self.b1 + self.w1[nf: nf + BUCKETS]
            if language in self.languages:
                b = b + self.w1[nf + BUCKETS + self.languages.index(language)]
            self._bias[language] = b
        return b

    def score(self, f: np.ndarray, typed_len: int, language: str) -> np.ndarray:
        """``(k,)`` scores of features ``f`` ``(k, len(FEATURES))``."""
        x = f @ self._w1f
        x += self.bias(language)[min(typed_len, BUCKETS - 1)]
        np.maximum(x, 0.0, out=x)
        return x @ self.w2 + f @ self._skipf

    def to_json(self) -> dict:
        r = lambda a: np.round(np.asarray(a, np.float64), 5).tolist()  # noqa: E731
        return {"languages": self.languages, "w1": r(self.w1), "b1": r(self.b1), "w2": r(self.w2),
                "skip": r(self.skip)}

    @classmethod
    def from_json(cls, d, n_features: int = len(FEATURES)) -> "MLP":
        """Raises ValueError on anything but the shapes of :meth:`to_json` with finite numbers.
        ``n_features``: the file's first features (fewer than :data:`FEATURES`: the others get
        zero rows)."""
        if not isinstance(d, dict) or not isinstance(d.get("languages"), list) or not all(
                isinstance(x, str) for x in d["languages"]):
            raise ValueError("mlp is not an object with a languages list")
        if len(set(d["languages"])) != len(d["languages"]):
            raise ValueError("mlp languages repeat a language")
        d_in = n_features + BUCKETS + len(d["languages"])

        def arr(name, shape):
            try:
                return _array(d.get(name), shape)
            except ValueError as e:
                raise ValueError(f"mlp {name} is {e}") from None

        w1 = d.get("w1")
        hidden = len(w1[0]) if isinstance(w1, list) and w1 and isinstance(w1[0], list) else 0
        if not 1 <= hidden <= 256:
            raise ValueError("mlp w1 has no rows of 1..256 hidden units")
        w1, skip = arr("w1", (d_in, hidden)), arr("skip", (d_in,))
        missing = len(FEATURES) - n_features
        if missing:
            w1 = np.insert(w1, [n_features] * missing, 0.0, axis=0)
            skip = np.insert(skip, [n_features] * missing, 0.0)
        return cls(d["languages"], w1, arr("b1", (hidden,)), arr("w2", (hidden,)), skip)


class Reranker:
    """Per-language linear weights over :data:`FEATURES`, or an :class:`MLP`; see the module
    docstring."""

    def __init__(self, weights: dict[str, np.ndarray] | None = None, k: int = TOP_K,
                 meta: dict | None = None, mlp: MLP | None = None):
        """
        Args:
            weights: language name -> ``(BUCKETS, len(FEATURES))`` float array; ``"*"`` for the
                languages without their own. Ignored when ``mlp`` is given.
            k: candidates re-ranked per decision.
            meta: what the file says of its fit (packages, decisions, date), kept for reports.
            mlp: the two-layer scorer, used for every language.
        """
        self.weights = weights or {}
        self.k = k
        self.meta = meta or {}
        self.mlp = mlp
        self._scorers: dict = {}  # language -> scorer (``scorer`` runs at every decision)

    def weights_for(self, language: str) -> np.ndarray | None:
        """``(BUCKETS, len(FEATURES))`` for ``language``, the ``"*"`` ones, or None."""
        w = self.weights.get(language)
        return w if w is not None else self.weights.get("*")

    def scorer(self, language: str):
        """``score(f, typed_len) -> (k,)`` for ``language``'s decisions (``f``: ``(k,
        len(FEATURES))``), or None when this re-ranker has nothing for it."""
        if language not in self._scorers:
            mlp, w = self.mlp, self.weights_for(language)
            self._scorers[language] = ((lambda f, n: mlp.score(f, n, language)) if mlp is not None else
                                       None if w is None else (lambda f, n: f @ w[min(n, len(w) - 1)]))
        return self._scorers[language]

    @classmethod
    def load(cls, path: Path) -> "Reranker":
        """Read ``rerank.json``.

        Raises:
            ValueError: not JSON, other features than :data:`FEATURES`, or weights of another shape
                (the message names the file).
        """
        try:
            d = json.loads(Path(path).read_text("utf-8"))
            if not isinstance(d, dict) or not (isinstance(d.get("weights"), dict) or "mlp" in d):
                raise ValueError("not an object with a weights object or an mlp")
            feats = d.get("features")
            if not isinstance(feats, list) or not feats or tuple(feats) != FEATURES[: len(feats)]:
                raise ValueError(f"features {feats} are not this engine's {list(FEATURES)} (or their first ones)")
            nf = len(feats)
            weights = {}
            if "mlp" in d and "weights" in d:
                raise ValueError("holds both weights and an mlp")
            mlp = MLP.from_json(d["mlp"], nf) if "mlp" in d else None
            for lang, w in (d.get("weights") or {}).items():
                try:
                    a = _array(w, (BUCKETS, nf))
                except ValueError as e:
                    raise ValueError(f"weights of {lang!r} are {e}") from None
                weights[lang] = np.pad(a, ((0, 0), (0, len(FEATURES) - nf)))
            k = d.get("k", TOP_K)
            if type(k) is not int or not 2 <= k <= 256:
                raise ValueError(f"k={k!r} is not an integer in 2..256")
            meta = d.get("meta") or {}
            if not isinstance(meta, dict):
                raise ValueError("meta is not an object")
        except (OSError, UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError, ValueError,
                RecursionError, OverflowError) as e:
            raise ValueError(f"{path}: not a re-ranker file this engine reads ({e})") from e
        return cls(weights, k, meta, mlp)

    def save(self, path: Path) -> None:
        """Write ``rerank.json`` (linear weights rounded to 4 decimals, the MLP's to 5)."""
        d = {"features": list(FEATURES), "k": self.k, "meta": self.meta}
        if self.mlp is not None:
            d["mlp"] = self.mlp.to_json()
        else:
            d["weights"] = {lang: [[round(float(x), 4) for x in row] for row in w]
                            for lang, w in sorted(self.weights.items())}
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
