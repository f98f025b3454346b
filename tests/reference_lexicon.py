"""The dict-based candidate filter as it was before the array rewrite (commit e7d7905), kept as the
ranking oracle of ``tests/test_lexicon_arrays.py``: the array code must build the same pools.
Only what the oracle needs is kept (no file loading, checking or counting); do not change its
ranking: a ranking change goes into ``engine/pool.py`` and this file's pools stop matching by
design, so the parity test is then updated or retired with it."""


from __future__ import annotations

import bisect
import re
from collections import Counter, defaultdict

import numpy as np

PIECE_RE = re.compile(r"\n|[ \t]+|[^\W\d]\w*|\d+|[^\s\w]+|\s")
"""Python-``re`` twin of the tokenizer's pre-tokenizer (newline kept apart from indentation)."""
IDENT_START = re.compile(r"[^\W\d]")
MIN_WORD_LEN = 2
"""Identifiers shorter than this are not worth completing (typing them costs at most one key)."""

WEIGHTS = {"doc3": 0.2, "doc2": 0.15, "doc1": 0.15, "win": 0.1, "cor3": 0.15, "cor2": 0.1, "cor1": 0.15}
"""Default interpolation weights of the prior (``EngineConfig.prior_weights`` documents them)."""



def pieces(text: str) -> list[str]:
    """Non-blank pieces of ``text`` (identifiers, numbers, punctuation runs, ``"\\n"``)."""
    return [p for p in PIECE_RE.findall(text) if not (p[0] in " \t" or (p.isspace() and p != "\n"))]


def context_keys(prev: list[str]) -> tuple[tuple[str, str] | None, str | None]:
    """Trigram and bigram keys from the last two pieces before an identifier."""
    p1 = prev[-1] if prev else "\n"
    p2 = prev[-2] if len(prev) > 1 else "\n"
    return (p2, p1), p1


def _key3(k: tuple[str, str]) -> str:
    return k[0] + "\x00" + k[1]


class DocLexicon:
    """Identifier counts and n-grams of one document (rebuilt from its whole text)."""

    __slots__ = ("uni", "bi", "tri", "total", "_arrays")

    def __init__(self, text: str = ""):
        self._arrays = None
        self.uni: Counter[str] = Counter()
        self.bi: dict[str, Counter[str]] = defaultdict(Counter)
        self.tri: dict[str, Counter[str]] = defaultdict(Counter)
        ps = pieces(text)
        for i, p in enumerate(ps):
            if len(p) >= MIN_WORD_LEN and IDENT_START.match(p):
                k3, k2 = context_keys(ps[max(0, i - 2) : i])
                self.uni[p] += 1
                self.bi[k2][p] += 1
                self.tri[_key3(k3)][p] += 1
        self.total = sum(self.uni.values())


SEP = "\x01"
"""Joins strings in the ``lexicon.npz`` arrays (never inside a piece: pieces with it are dropped)."""


def _join(strings: list[str]) -> np.ndarray:
    return np.frombuffer(SEP.join(strings).encode("utf-8"), np.uint8)


def _split(arr: np.ndarray) -> list[str]:
    text = arr.tobytes().decode("utf-8")
    return text.split(SEP) if text else []


class _Table:
    """An n-gram table: context key -> (word indices, counts), stored as flat arrays."""

    __slots__ = ("index", "offsets", "ix", "cnt")

    def __init__(self, keys: list[str], offsets: np.ndarray, ix: np.ndarray, cnt: np.ndarray):
        self.index = dict(zip(keys, range(len(keys))))
        self.offsets, self.ix, self.cnt = offsets, ix.astype(np.int64), cnt.astype(np.float64)

    def get(self, key: str):
        k = self.index.get(key)
        if k is None:
            return None
        a, b = self.offsets[k], self.offsets[k + 1]
        return self.ix[a:b], self.cnt[a:b]

    def __len__(self) -> int:
        return len(self.index)


class CorpusLexicon:
    """Shipped corpus statistics (``lexicon.npz``): identifiers sorted for prefix lookup, their
    counts and first BPE token, and pruned bigram/trigram tables."""

    def __init__(self, arrays):
        self.words = _split(arrays["words"])
        self.index = {w: i for i, w in enumerate(self.words)}
        self.counts = arrays["counts"].astype(np.float64)
        self.first_tokens = arrays["first_tokens"].astype(np.int64)
        if not (len(self.words) == len(self.counts) == len(self.first_tokens)):
            raise ValueError("words, counts and first_tokens differ in length")
        self.total = float(self.counts.sum())
        self.by_count = np.argsort(-self.counts, kind="stable")
        self.bi = _Table(_split(arrays["bi_keys"]), arrays["bi_offsets"], arrays["bi_ix"], arrays["bi_cnt"])
        self.tri = _Table(_split(arrays["tri_keys"]), arrays["tri_offsets"], arrays["tri_ix"], arrays["tri_cnt"])

    def prefix_range(self, prefix: str) -> tuple[int, int]:
        lo = bisect.bisect_left(self.words, prefix)
        hi = bisect.bisect_left(self.words, prefix + "\U0010ffff", lo)
        return lo, hi


def merge_lexicons(corpus: CorpusLexicon | None, extra: CorpusLexicon, weight: float = 1.0) -> CorpusLexicon:
    """One lexicon holding ``corpus`` and ``extra`` (the workspace), as arrays.

    ``extra``'s counts are scaled so that its total is ``weight`` times the corpus total, then
    added: a workspace of 2,000 identifier occurrences weighs as much as a corpus of 20 million.
    The n-gram tables are merged per context (counts scaled the same way, summed per word). Costs ~0.1-0.3 s for a 150k-word corpus; run it off the engine
    thread.

    Args:
        corpus: the shipped lexicon of the language, or None (then ``extra`` alone).
        extra: the other counts.
        weight: ``extra``'s share of unigram mass relative to ``corpus``.

    Returns:
        A new :class:`CorpusLexicon`; neither input is changed.
    """
    if corpus is None or not len(corpus.words):
        return extra
    if not len(extra.words):
        return corpus
    scale = weight * corpus.total / max(1.0, extra.total)
    words = sorted(set(corpus.words).union(extra.words))
    index = {w: i for i, w in enumerate(words)}
    cmap = np.fromiter((index[w] for w in corpus.words), np.int64, len(corpus.words))
    emap = np.fromiter((index[w] for w in extra.words), np.int64, len(extra.words))
    counts = np.zeros(len(words))
    counts[cmap] += corpus.counts
    counts[emap] += scale * extra.counts
    firsts = np.zeros(len(words), np.int64)
    firsts[cmap] = corpus.first_tokens
    firsts[emap] = extra.first_tokens
    arrays = {"words": _join(words), "counts": counts, "first_tokens": firsts}
    for name in ("bi", "tri"):
        a, b = getattr(corpus, name), getattr(extra, name)
        keys = list(a.index)
        kid = dict(a.index)
        for k in b.index:
            if k not in kid:
                kid[k] = len(keys)
                keys.append(k)
        ka = np.repeat(np.arange(len(a)), np.diff(a.offsets))
        bk = np.fromiter((kid[k] for k in b.index), np.int64, len(b))  # b's key order -> merged key id
        kb = bk[np.repeat(np.arange(len(b)), np.diff(b.offsets))]
        key = np.concatenate([ka, kb])
        word = np.concatenate([cmap[a.ix], emap[b.ix]])
        cnt = np.concatenate([a.cnt, scale * b.cnt])
        code, inv = np.unique(key * len(words) + word, return_inverse=True)
        cnt = np.bincount(inv, weights=cnt, minlength=len(code))
        key, word = code // len(words), code % len(words)
        order = np.lexsort((-cnt, key))
        key, word, cnt = key[order], word[order], cnt[order]
        offsets = np.concatenate([[0], np.cumsum(np.bincount(key, minlength=len(keys)))])
        arrays[f"{name}_keys"] = _join(keys)
        arrays[f"{name}_offsets"] = offsets
        arrays[f"{name}_ix"] = word
        arrays[f"{name}_cnt"] = cnt
    return CorpusLexicon(arrays)


class PoolBuilder:
    """Builds candidate pools with NumPy: per context once (:meth:`begin`), per keystroke cheaply.

    A pool is the union of three parts, scored by the interpolated prior:

    * the document's identifiers (sorted, so a typed prefix is a :mod:`bisect` range),
    * the corpus lexicon's identifiers not in the document (also a sorted range),
    * context-specific extras (n-gram followers and window identifiers) not in either.
    """

    def __init__(self, corpus: CorpusLexicon | None, first_token, weights: dict[str, float] | None = None,
                 confidence: float = 1.0):
        """
        Args:
            corpus: shipped corpus lexicon, or None.
            first_token: ``word -> first BPE token id`` (for words outside the corpus lexicon).
            weights: interpolation weights (``EngineConfig.prior_weights``; default ``WEIGHTS``).
            confidence: ``EngineConfig.doc_confidence``.
        """
        self.corpus = corpus
        self.first_token = first_token
        self.weights = dict(weights or WEIGHTS)
        self.confidence = confidence
        self._empty_doc = DocLexicon("")
        self._window_key = None
        self._window_scores: list = []
        self._window_tot = 0
        self._corpus_w = None
        self._top: tuple[int, np.ndarray] | None = None

    def _top_corpus(self, size: int) -> np.ndarray:
        """The ``size`` most frequent corpus words, sorted by index (cached)."""
        if self._top is None or self._top[0] != size:
            self._top = (size, np.sort(self.corpus.by_count[:size]))
        return self._top[1]

    def doc_arrays(self, doc: DocLexicon):
        """Sorted words and aligned arrays of a document (computed once per document version)."""
        cached = doc._arrays
        if cached is not None and cached[0] is self.corpus:
            return cached[1]
        words = sorted(doc.uni)
        counts = np.fromiter((doc.uni[w] for w in words), np.float64, len(words))
        c = self.corpus
        if c is not None:
            cidx = np.fromiter((c.index.get(w, -1) for w in words), np.int64, len(words))
            to_doc = np.full(len(c.words), -1, np.int64)  # corpus index -> document index
            to_doc[cidx[cidx >= 0]] = np.flatnonzero(cidx >= 0)
            in_doc = to_doc >= 0
            ccount = np.where(cidx >= 0, c.counts[np.maximum(cidx, 0)], 0.0) if len(words) else np.zeros(0)
            firsts = np.where(cidx >= 0, c.first_tokens[np.maximum(cidx, 0)], -1) if len(words) else np.zeros(0, np.int64)
        else:
            cidx = np.full(len(words), -1, np.int64)
            in_doc = np.zeros(0, bool)
            to_doc = np.zeros(0, np.int64)
            ccount = np.zeros(len(words))
            firsts = np.full(len(words), -1, np.int64)
        for i in np.flatnonzero(firsts < 0).tolist():
            firsts[i] = self.first_token(words[i])
        arr = (words, {w: i for i, w in enumerate(words)}, counts, ccount, in_doc, firsts, to_doc)
        doc._arrays = (self.corpus, arr)  # valid for this corpus lexicon only (languages differ)
        return arr

    def begin(self, keys, doc: DocLexicon | None, window: Counter | None, line: list[str] = ()) -> None:
        """Prepare the context-dependent part (once per word start).

        Args:
            keys: ``context_keys`` of the pieces before the word.
            doc: the document's lexicon, or None.
            window: identifier counts of the window's complete lines (a new object only when they
                change, so their scores are cached by identity).
            line: identifiers already on the line being typed (they count like window ones).
        """
        doc = doc if doc is not None else self._empty_doc
        self.doc = doc
        self.arr = self.doc_arrays(doc)
        k3, k2 = keys
        k3s = _key3(k3)
        W = self.weights
        extra: dict[str, float] = defaultdict(float)

        def add(c, weight):
            if c:
                tot = sum(c.values())
                # Witten-Bell-style confidence: a context seen often in this document is trusted more
                weight *= tot / (tot + self.confidence)
                for w, n in c.items():
                    extra[w] += weight * n / tot

        add(doc.tri.get(k3s), W["doc3"])
        add(doc.bi.get(k2), W["doc2"])
        if window is not self._window_key:  # the complete lines' identifiers change once per line
            self._window_tot = sum(window.values()) if window else 0
            self._window_scores = [(w, n / self._window_tot) for w, n in window.items()] if window else []
            self._window_key = window
        if self._window_scores or line:
            scale = self._window_tot / (self._window_tot + len(line))
            for w, v in self._window_scores:
                extra[w] += W["win"] * v * scale
            for w in line:
                extra[w] += W["win"] / (self._window_tot + len(line))
        c = self.corpus
        words, index, counts, ccount, in_doc, firsts, to_doc = self.arr
        self.doc_base = (W["doc1"] / max(1, doc.total)) * counts
        # corpus n-gram followers stay in corpus index space (arrays): those in the document are
        # added to its entries, the rest become the corpus extras
        cj = np.zeros(0, np.int64)
        cv = np.zeros(0)
        if c is not None:
            self.doc_base += (W["cor1"] / c.total) * ccount
            if self._corpus_w != W["cor1"]:
                self.corpus_base = (W["cor1"] / c.total) * c.counts
                self._corpus_w = W["cor1"]
            ixs, vals = [], []
            for table, weight in ((c.tri.get(k3s), W["cor3"]), (c.bi.get(k2), W["cor2"])):
                if table is not None:
                    ix, cnt = table
                    ixs.append(ix)
                    vals.append(cnt * (weight / cnt.sum()))
            if ixs:
                ix, val = np.concatenate(ixs), np.concatenate(vals)
                d = to_doc[ix]
                m = d >= 0
                np.add.at(self.doc_base, d[m], val[m])
                cj, inv = np.unique(ix[~m], return_inverse=True)  # sorted, summed per word
                cv = np.bincount(inv, weights=val[~m], minlength=len(cj))
        # document / window extras (words): those in the document add to its entries
        new_words, new_scores = [], []
        di, dv, xj, xv = [], [], [], []
        for w, v in extra.items():
            i = index.get(w)
            if i is not None:
                di.append(i)
                dv.append(v)
                continue
            j = c.index.get(w) if c is not None else None
            if j is not None:
                xj.append(j)
                xv.append(v)
                continue
            new_words.append(w)
            new_scores.append(v)
        if di:
            np.add.at(self.doc_base, np.asarray(di, np.int64), np.asarray(dv))
        if xj:  # corpus words not in the document that the window mentions
            cj, inv = np.unique(np.concatenate([cj, np.asarray(xj, np.int64)]), return_inverse=True)
            cv = np.bincount(inv, weights=np.concatenate([cv, np.asarray(xv)]), minlength=len(cj))
        self.corpus_extra_ix = cj
        self.corpus_extra_v = cv
        self.new_words = new_words
        self.new_scores = np.asarray(new_scores, np.float64)
        self.new_firsts = np.fromiter((self.first_token(w) for w in new_words), np.int64, len(new_words))

    def candidates(self, prefix: str, size: int):
        """Pool for a typed prefix: ``(words, prior, first_tokens)``, at most ``size``, best prior first."""
        words, index, counts, ccount, in_doc, firsts, to_doc = self.arr
        parts_score, parts_first, parts_word = [], [], []
        # document words
        if prefix:
            lo = bisect.bisect_left(words, prefix)
            hi = bisect.bisect_left(words, prefix + "\U0010ffff", lo)
        else:
            lo, hi = 0, len(words)
        parts_score.append(self.doc_base[lo:hi])
        parts_first.append(firsts[lo:hi])
        parts_word.append((words, lo))
        c = self.corpus
        if c is not None:
            clo, chi = c.prefix_range(prefix) if prefix else (0, 0)
            if prefix and chi - clo <= 4 * size:
                s = self.corpus_base[clo:chi].copy()
                cj, cv = self.corpus_extra_ix, self.corpus_extra_v
                a, b = np.searchsorted(cj, clo), np.searchsorted(cj, chi)
                s[cj[a:b] - clo] += cv[a:b]
                if len(in_doc):
                    s[in_doc[clo:chi]] = -1.0
                parts_score.append(s)
                parts_first.append(c.first_tokens[clo:chi])
                parts_word.append((c.words, clo))
            else:
                # no prefix, or a short one with a wide range: the most frequent corpus words (of
                # the range) plus the context's corpus extras (of the range)
                cj, cv = self.corpus_extra_ix, self.corpus_extra_v
                if prefix:
                    a, b = np.searchsorted(cj, clo), np.searchsorted(cj, chi)
                    cj, cv = cj[a:b], cv[a:b]
                    top = clo + np.sort(np.argsort(-c.counts[clo:chi], kind="stable")[:size])
                else:
                    top = self._top_corpus(size)
                idx = np.union1d(top, cj)
                s = self.corpus_base[idx]
                s[np.searchsorted(idx, cj)] += cv
                if len(in_doc):
                    s[in_doc[idx]] = -1.0
                parts_score.append(s)
                parts_first.append(c.first_tokens[idx])
                parts_word.append((_Indexed(c.words, idx), 0))
        if self.new_words:
            sel = [k for k, w in enumerate(self.new_words) if w.startswith(prefix)] if prefix else list(range(len(self.new_words)))
            if sel:
                parts_score.append(self.new_scores[sel])
                parts_first.append(self.new_firsts[sel])
                parts_word.append(([self.new_words[k] for k in sel], 0))
        score = np.concatenate(parts_score)
        first = np.concatenate(parts_first)
        top = np.flatnonzero(score > 0)
        if len(top) > size:
            top = top[np.argpartition(-score[top], size)[:size]]
        top = top[np.argsort(-score[top], kind="stable")]
        bounds = np.cumsum([len(x) for x in parts_score])
        part = np.searchsorted(bounds, top, side="right")
        starts = np.concatenate([[0], bounds[:-1]])
        return _LazyWords(parts_word, part, top - starts[part]), score[top], first[top]


class _LazyWords:
    """Pool words, turned into strings only when asked for (a pool is scored as arrays)."""

    __slots__ = ("parts", "part", "offs")

    def __init__(self, parts, part: np.ndarray, offs: np.ndarray):
        self.parts, self.part, self.offs = parts, part.tolist(), offs.tolist()

    def __len__(self) -> int:
        return len(self.part)

    def __getitem__(self, i: int) -> str:
        seq, lo = self.parts[self.part[i]]
        return seq[lo + self.offs[i]]


class _Indexed:
    """``seq[idx[i]]`` as a sequence."""

    __slots__ = ("seq", "idx")

    def __init__(self, seq, idx: np.ndarray):
        self.seq, self.idx = seq, idx

    def __getitem__(self, i: int):
        return self.seq[int(self.idx[i])]
