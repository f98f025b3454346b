"""A text's pieces and the document's own context: its identifier n-grams and long-context matches.

Code is split into the tokenizer's pieces (identifiers, numbers, punctuation runs, newlines;
blanks dropped). For each identifier occurrence the model counts it alone (unigram) and after its
one and two previous pieces (``("self", ".")`` -> ``name``):

* :class:`DocLexicon`: built on line from an open document's text (``Predictor.observe_document``).
* :class:`PieceIndex`: a text's pieces as ids, for long-context matches (:meth:`PieceIndex.followers`):
  one open document's or the workspace's files' (``engine.lexicon.CorpusLexicon.matches``).

The corpus side is ``engine.lexicon``; ``engine.pool`` merges both into the candidate pool.
"""

from __future__ import annotations

import re
from array import array
from collections import Counter, defaultdict

import numpy as np

from .compounds import SegmentIndex

PIECE_RE = re.compile(r"\n|[ \t]+|[^\W\d]\w*|\d+|[^\s\w]+|\s")
"""Python-``re`` twin of the tokenizer's pre-tokenizer (newline kept apart from indentation)."""
IDENT_START = re.compile(r"[^\W\d]")
MIN_WORD_LEN = 2
"""Identifiers shorter than this are not worth completing (typing them costs at most one key)."""
LONG_MIN = 3
"""Fewest pieces a long-context match (:meth:`DocLexicon.followers`) must share with the cursor's
context (two are the document trigram's; tune packages: 3 and 4 within 0.1 points)."""
LONG_MAX = 12
"""Most pieces a long-context match is extended to."""
FEW_MATCHES = 48
"""Up to this many earlier positions a long-context match is extended in Python, else with NumPy
(the break-even on a 2-core x86 machine)."""
LONG_BASE = 2.0
"""Each further matching piece doubles a match's vote (1.5-4 within 0.1 points on the tune packages)."""
WORKSPACE_MATCH_PIECES = 1_000_000
"""Most pieces of the workspace's files kept for long-context matches (~4 MB of ids plus ~6 MB
of match index at most; about 4 MB of source)."""

PAUSE_EVERY = 512
"""Pieces counted between two calls of a document count's ``pause`` (~0.1-0.2 ms of work)."""
PIECES_CHUNK = 8192
"""Characters split per ``re`` call (at a line end): one call holds the GIL throughout, and 400K
characters at once held it ~40 ms, stalling the server's other threads."""


def pieces(text: str) -> list[str]:
    """Non-blank pieces of ``text`` (identifiers, numbers, punctuation runs, ``"\\n"``)."""
    if len(text) <= PIECES_CHUNK:
        found = PIECE_RE.findall(text)
    else:  # a line end always ends a piece, so cutting after one changes nothing
        found, at = [], 0
        while at < len(text):
            cut = text.find("\n", at + PIECES_CHUNK) + 1 or len(text)
            found += PIECE_RE.findall(text, at, cut)
            at = cut
    return [p for p in found if not (p[0] in " \t" or (p.isspace() and p != "\n"))]


def context_keys(prev: list[str]) -> tuple[tuple[str, str] | None, str | None]:
    """Trigram and bigram keys from the last two pieces before an identifier."""
    p1 = prev[-1] if prev else "\n"
    p2 = prev[-2] if len(prev) > 1 else "\n"
    return (p2, p1), p1


def _key3(k: tuple[str, str]) -> str:
    return k[0] + "\x00" + k[1]


class PieceIndex:
    """A text's pieces as ids, for long-context matches (:meth:`followers`): one open document's
    (inside :class:`DocLexicon`) or the workspace's files' (``CorpusLexicon.matches``)."""

    __slots__ = ("ids", "vocab", "_match")

    def __init__(self):
        self.ids = array("i")  # piece ids: fast to index from Python, a buffer for NumPy
        self.vocab: dict[str, int] = {}  # piece -> id (ids in order of first occurrence)
        self._match = None

    @classmethod
    def from_texts(cls, texts, max_pieces: int = WORKSPACE_MATCH_PIECES) -> "PieceIndex":
        """The pieces of ``texts`` one after another (a newline between two texts), up to
        ``max_pieces`` (the texts after that are left out)."""
        index = cls()
        ids, vocab = index.ids, index.vocab
        for text in texts:
            ps = pieces(text)
            if len(ids) + len(ps) + 1 > max_pieces:
                break
            ids.extend(vocab.setdefault(p, len(vocab)) for p in ps)
            ids.append(vocab.setdefault("\n", len(vocab)))
        return index

    @property
    def nbytes(self) -> int:
        """Bytes held by the ids and the match index (not the vocabulary's strings)."""
        n = self.ids.itemsize * len(self.ids)
        if self._match is not None:
            n += self._match[0].nbytes + self._match[1].nbytes
        return n

    def _match_index(self):
        """Identifier positions sorted by the ids of their two previous pieces (built once)."""
        if self._match is None:
            ids = np.frombuffer(self.ids, np.int32) if len(self.ids) else np.zeros(0, np.int32)
            words = np.zeros(len(self.vocab), bool)
            for p, j in self.vocab.items():
                words[j] = len(p) >= MIN_WORD_LEN and bool(IDENT_START.match(p))
            pos = np.flatnonzero(words[ids[2:]]).astype(np.int32) + 2 if len(ids) > 2 else np.zeros(0, np.int32)
            keys = ids[pos - 2].astype(np.int64) * len(self.vocab) + ids[pos - 1]
            order = np.argsort(keys, kind="stable")
            self._match = (keys[order], pos[order], list(self.vocab))
        return self._match

    def followers(self, before: list[str], min_len: int = LONG_MIN, max_len: int = LONG_MAX,
                  base: float = LONG_BASE) -> dict[str, float]:
        """Identifiers that followed the longest earlier matches of the context (copy by match).

        Every position whose ``min_len`` (up to ``max_len``) previous pieces equal the last
        pieces of ``before`` votes for the identifier that followed it, with weight
        ``base ** (L - min_len)`` for a match of ``L`` pieces: a long context seen before
        (``self.assertEqual(result.``) predicts what followed it there far better than the
        trigram. The idea is that of prompt-lookup decoding and of unbounded n-grams
        ("infini-gram", Liu et al., 2024), applied to one document or one workspace.

        Args:
            before: the pieces before the cursor's word (:func:`pieces`), at least the last
                ``max_len``.

        Returns:
            identifier -> summed weight (empty when no match is ``min_len`` long).
        """
        if len(before) < min_len or len(self.ids) <= min_len:
            return {}
        cur = [self.vocab.get(p, -1) for p in before[-max_len:]]
        if cur[-1] < 0 or cur[-2] < 0:
            return {}
        keys, pos, names = self._match_index()
        key = cur[-2] * len(self.vocab) + cur[-1]
        lo, hi = np.searchsorted(keys, key), np.searchsorted(keys, key, side="right")
        if lo == hi:
            return {}
        out: dict[str, float] = defaultdict(float)
        if hi - lo <= FEW_MATCHES:  # the usual case: a few earlier positions, compared one by one
            ids, m = self.ids, len(cur)
            for p in pos[lo:hi].tolist():
                n = 2
                while n < m and p > n and ids[p - 1 - n] == cur[-1 - n]:
                    n += 1
                if n >= min_len:
                    out[names[ids[p]]] += base ** (n - min_len)
            return out
        ids = np.frombuffer(self.ids, np.int32)
        alive = pos[lo:hi]
        for j in range(2, len(cur) + 1):
            if j < len(cur):  # does the match extend to the (j + 1)-th piece back?
                at = alive - (1 + j)
                ok = (at >= 0) & (ids[np.maximum(at, 0)] == cur[-1 - j])
            else:
                ok = np.zeros(len(alive), bool)
            if j >= min_len:  # those that stop here matched j pieces
                w = base ** (j - min_len)
                for p in alive[~ok].tolist():
                    out[names[ids[p]]] += w
            alive = alive[ok]
            if not len(alive):
                break
        return out


class DocLexicon:
    """Identifier counts and n-grams of one document (rebuilt from its whole text), and its pieces
    for long-context matches (:meth:`followers`)."""

    __slots__ = ("uni", "bi", "tri", "total", "_arrays", "index", "segments")

    def __init__(self, text: str = "", pause=None, segments: bool = True):
        """Count ``text``'s identifiers and their n-gram contexts.

        Args:
            text: the document.
            pause: called every :data:`PAUSE_EVERY` pieces, or None. Counting holds the GIL
                (~12 ms for a 20 KB file); the server passes a callable that waits while a
                request is being answered, so a refresh never slows a keystroke.
            segments: also count its identifiers' segments for compound candidates
                (:attr:`segments`; :meth:`CorpusLexicon.build` counts its files without them).
        """
        self._arrays = None
        self.uni: Counter[str] = Counter()
        self.bi: dict[str, Counter[str]] = defaultdict(Counter)
        self.tri: dict[str, Counter[str]] = defaultdict(Counter)
        self.index = PieceIndex()
        ps = pieces(text)
        ids, vocab = self.index.ids, self.index.vocab
        for i, p in enumerate(ps):
            if pause is not None and i % PAUSE_EVERY == 0:
                pause()
            ids.append(vocab.setdefault(p, len(vocab)))
            if len(p) >= MIN_WORD_LEN and IDENT_START.match(p):
                k3, k2 = context_keys(ps[max(0, i - 2) : i])
                self.uni[p] += 1
                self.bi[k2][p] += 1
                self.tri[_key3(k3)][p] += 1
        self.total = sum(self.uni.values())
        self.segments = SegmentIndex.from_words(self.uni.items(), pause) if segments else None

    def followers(self, before: list[str], **kw) -> dict[str, float]:
        """The document's long-context matches (:meth:`PieceIndex.followers`)."""
        return self.index.followers(before, **kw)
