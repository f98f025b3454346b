"""Building the candidate pool that the network scores (:class:`PoolBuilder`).

The prior ``P(identifier | previous pieces)`` interpolates linearly (Jelinek-Mercer smoothing;
weights in ``EngineConfig.prior_weights``, defaults :data:`WEIGHTS`) the document's counts
(``engine.pieces.DocLexicon``), the identifiers of the lines in the model's context window, which
are always fresh, and the corpus lexicon (``engine.lexicon.CorpusLexicon``); a pool is the best
``pool_size`` identifiers that start with the typed prefix.
"""

from __future__ import annotations

import bisect
from collections import Counter, defaultdict

import numpy as np

from .compounds import CORPUS_SHARE, CORPUS_WORDS, MAX_COMPOUNDS, SegmentIndex, compounds
from .lexicon import CorpusLexicon
from .pieces import DocLexicon, _key3

WEIGHTS = {"doc3": 0.2, "doc2": 0.15, "doc1": 0.15, "win": 0.1, "cor3": 0.15, "cor2": 0.1, "cor1": 0.15}
"""Default interpolation weights of the prior (``EngineConfig.prior_weights`` documents them)."""

CIX_MEMO_MAX = 4096
"""Most words whose corpus index, and most n-gram contexts (per table) whose corpus followers, a
:class:`PoolBuilder` remembers; then that memo starts over. At most ~0.5 MB of words and ~2 MB of
followers (two array views per context) per language."""


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
        self._window_key = self._window_doc = None
        self._window_split: tuple = ()
        self._window_tot = 0
        self._top: tuple[int, np.ndarray] | None = None
        self._cix: dict[str, int] = {}  # word -> corpus index (-1: not held), see _split_words
        self._follows: dict[str, dict] = {"tri": {}, "bi": {}}  # corpus followers by key, see _follow
        # (document, {trigram key: (positions, shares, total)}, the same for bigram keys)
        self._doc_follow: tuple = (None, {}, {})
        self.keys: tuple = ("", "")  # the last context's n-gram keys (trigram, bigram)
        self.long_followers: dict[str, float] = {}  # its document's long-context matches

    def release(self) -> None:
        """Drop what the last context holds (the document's arrays, window scores, extras), so a
        closed document is not kept alive by the pool; the next :meth:`begin` rebuilds it."""
        self._window_key = self._window_doc = None
        self._doc_follow = (None, {}, {})
        self.long_followers = {}
        self._window_split, self._window_tot = (), 0
        self.doc = self.arr = None
        self.new_words, self.new_scores, self.new_firsts = [], np.zeros(0), np.zeros(0, np.int64)
        self.corpus_extra_ix, self.corpus_extra_v = np.zeros(0, np.int64), np.zeros(0)

    def _top_corpus(self, size: int) -> np.ndarray:
        """The ``size`` most frequent corpus words, sorted by index (cached)."""
        if self._top is None or self._top[0] != size:
            self._top = (size, self.corpus.top_words(size))
        return self._top[1]

    def doc_arrays(self, doc: DocLexicon):
        """Sorted words and aligned arrays of a document (computed once per document version).

        Returns:
            ``(words, index, counts, ccount, doc_cix, doc_dix, firsts)``: the document's words
            (sorted), ``word -> position``, their document and corpus counts, the corpus indices
            of those the corpus holds (sorted) with their positions in ``words``, and their first
            BPE tokens. Nothing here is as large as the corpus.
        """
        cached = doc._arrays
        if cached is not None and cached[0] is self.corpus:
            return cached[1]
        words = sorted(doc.uni)
        counts = np.fromiter((doc.uni[w] for w in words), np.float64, len(words))
        c = self.corpus
        if c is not None:
            cidx = c.words.find_many(words)
            known = np.flatnonzero(cidx >= 0)
            by_corpus = np.argsort(cidx[known], kind="stable")
            doc_cix, doc_dix = cidx[known][by_corpus], known[by_corpus]  # corpus index -> document index
            ccount = np.where(cidx >= 0, c.counts[np.maximum(cidx, 0)], 0.0) if len(words) else np.zeros(0)
            firsts = np.where(cidx >= 0, c.first_tokens[np.maximum(cidx, 0)], -1) if len(words) else np.zeros(0, np.int64)
        else:
            cidx = np.full(len(words), -1, np.int64)
            doc_cix = doc_dix = np.zeros(0, np.int64)
            ccount = np.zeros(len(words))
            firsts = np.full(len(words), -1, np.int64)
        for i in np.flatnonzero(firsts < 0).tolist():
            firsts[i] = self.first_token(words[i])
        arr = (words, {w: i for i, w in enumerate(words)}, counts, ccount, doc_cix, doc_dix, firsts)
        doc._arrays = (self.corpus, arr)  # valid for this corpus lexicon only (languages differ)
        if self.weights.get("seg"):  # the corpus's segments for compounds, here off the keystroke path
            if c is not None and c.segments is None:
                top = c.top_words(CORPUS_WORDS)
                c.segments = SegmentIndex.from_words((c.words[i], n) for i, n in
                                                     zip(top.tolist(), c.counts[top].tolist()))
        return arr

    def begin(self, keys, doc: DocLexicon | None, window: Counter | None, line: list[str] = (),
              recent: list[str] = (), before: list[str] = (), expected: list[str] = (),
              members: dict[str, float] | None = None) -> None:
        """Prepare the context-dependent part (once per word start).

        Args:
            keys: ``context_keys`` of the pieces before the word.
            doc: the document's lexicon, or None.
            window: identifier counts of the window's complete lines (a new object only when they
                change, so their scores are cached by identity).
            line: identifiers already on the line being typed (they count like window ones).
            recent: identifiers of the last complete lines (the ``recent`` weight).
            before: the pieces before the word (the document's long-context matches get the
                ``long`` weight, the workspace's ``wlong``: :meth:`PieceIndex.followers`).
            expected: names the workspace imports from this document's module, given where
                the word is being defined (``engine.imports``); those the document does not
                hold yet share the ``expect`` weight.
            members: inside a Python ``from M import`` statement, what code imports from ``M``
                (name -> times; ``engine.imports``), or after an imported Go package's dot what
                code uses from it (``engine.go_imports``): they share the ``from`` weight by count.
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

        words, index, counts, ccount, doc_cix, doc_dix, firsts = self.arr
        if self._doc_follow[0] is not doc:
            self._doc_follow = (doc, {}, {})
        doc_parts = []

        def add_doc(follow, table, key, weight):
            # the document's own n-gram followers are all document words: their positions and
            # shares are computed once per document version and context, then added as arrays
            hit = follow.get(key)
            if hit is None:
                c = table.get(key)
                if not c:
                    hit = follow[key] = ()
                else:
                    tot = sum(c.values())
                    hit = follow[key] = (np.fromiter((index[w] for w in c), np.int64, len(c)),
                                         np.fromiter(c.values(), np.float64, len(c)) / tot, tot)
            if hit:
                pos, share, tot = hit
                doc_parts.append((pos, share * (weight * tot / (tot + self.confidence))))

        add_doc(self._doc_follow[1], doc.tri, k3s, W["doc3"])
        self.keys = (k3s, k2)
        self.long_followers = doc.followers(before) if W.get("long") and before else {}
        if self.long_followers:
            add(self.long_followers, W["long"])
        if W.get("wlong") and before and self.corpus is not None and self.corpus.matches is not None:
            add(self.corpus.matches.followers(before), W["wlong"])
        add_doc(self._doc_follow[2], doc.bi, k2, W["doc2"])
        c = self.corpus
        if window is not self._window_key or doc is not self._window_doc:
            # the complete lines' identifiers change once per line, the document's arrays about
            # once a second: split the window's scores into document positions, corpus indices
            # and other words once, as arrays, instead of per word start
            self._window_tot = sum(window.values()) if window else 0
            self._window_split = self._split_words(
                [(w, W["win"] * (n / self._window_tot)) for w, n in window.items()] if window else [], index)
            self._window_key, self._window_doc = window, doc
        win_scale = self._window_tot / (self._window_tot + len(line)) if self._window_tot else 0.0
        line_extra: dict[str, float] = defaultdict(float)
        for w in line:
            line_extra[w] += W["win"] / (self._window_tot + len(line))
        rec = W.get("recent", 0.0)
        if rec and recent:
            for w in recent:
                line_extra[w] += rec / len(recent)
        from_w = W.get("from", 0.0)
        tot = sum(members.values()) if from_w and members else 0
        if tot > 0:
            for w, n in members.items():
                line_extra[w] += from_w * n / tot
        exp_w = W.get("expect", 0.0)
        if exp_w and expected:
            missing = [w for w in expected if w not in index]
            for w in missing:
                line_extra[w] += exp_w / len(missing)
        self.doc_base = (W["doc1"] / max(1, doc.total)) * counts
        # corpus n-gram followers stay in corpus index space (arrays): those in the document are
        # added to its entries, the rest become the corpus extras
        cj = np.zeros(0, np.int64)
        cv = np.zeros(0)
        if c is not None:
            self.doc_base += (W["cor1"] / c.total) * ccount
            ixs, vals = [], []
            for table, weight in ((self._follow("tri", k3s), W["cor3"]), (self._follow("bi", k2), W["cor2"])):
                if table is not None:
                    ix, cnt = table
                    ixs.append(ix)
                    vals.append(cnt * (weight / cnt.sum()))
            if ixs:
                ix, val = np.concatenate(ixs), np.concatenate(vals)
                d, m = _doc_positions(doc_cix, doc_dix, ix)
                np.add.at(self.doc_base, d[m], val[m])
                cj, inv = _unique_inverse(ix[~m])  # sorted, summed per word
                cv = np.bincount(inv, weights=val[~m], minlength=len(cj))
        # document / window extras (words): those in the document add to its entries
        # (new words keep the order of first mention: n-grams, window, line; ties in the pool
        # are broken by that order)
        di, dv, xj, xv, new = self._split_words(extra.items(), index)
        parts = [(win_scale, self._window_split)] if win_scale else []
        if line_extra:
            parts.append((1.0, self._split_words(line_extra.items(), index)))
        for scale, (pdi, pdv, pxj, pxv, pnew) in parts:
            di, dv = np.concatenate([di, pdi]), np.concatenate([dv, pdv * scale])
            xj, xv = np.concatenate([xj, pxj]), np.concatenate([xv, pxv * scale])
            for w, v in pnew.items():
                new[w] = new.get(w, 0.0) + v * scale
        new_words = list(new)
        new_scores = list(new.values())
        if len(di):
            np.add.at(self.doc_base, di, dv)
        for pos, v in doc_parts:
            np.add.at(self.doc_base, pos, v)
        if len(xj):  # corpus words not in the document that the window mentions
            cj, inv = _unique_inverse(np.concatenate([cj, xj]))
            cv = np.bincount(inv, weights=np.concatenate([cv, xv]), minlength=len(cj))
        self.corpus_extra_ix = cj
        self.corpus_extra_v = cv
        self.new_words = new_words
        self.new_scores = np.asarray(new_scores, np.float64)
        self.new_firsts = np.fromiter((self.first_token(w) for w in new_words), np.int64, len(new_words))

    def _follow(self, table: str, key: str):
        """The corpus's ``table`` (``"tri"`` or ``"bi"``) ``.get(key)``, remembered: contexts
        (``self .``, ``( self``) recur all the time."""
        memo = self._follows[table]
        hit = memo.get(key, memo)
        if hit is memo:
            if len(memo) > CIX_MEMO_MAX:
                memo.clear()
            hit = memo[key] = getattr(self.corpus, table).get(key)
        return hit

    def _split_words(self, scored, index: dict):
        """``(word, score)`` pairs split into the document's positions, the corpus's indices and
        the other words: ``(doc positions, scores, corpus indices, scores, {word: score})``."""
        di, dv, rest, rest_v = [], [], [], []
        for w, v in scored:
            i = index.get(w)
            if i is not None:
                di.append(i)
                dv.append(v)
            else:
                rest.append(w)
                rest_v.append(v)
        c = self.corpus
        if c is not None and rest:
            # the same few words (the line's, the recent lines', the document's followers) come
            # back word start after word start: one hashed lookup each, then a dict hit
            memo = self._cix
            if len(memo) > CIX_MEMO_MAX:
                memo.clear()
            miss = [w for w in rest if w not in memo]
            if miss:
                memo.update(zip(miss, c.words.find_many(miss).tolist()))
            js = [memo[w] for w in rest]
        else:
            js = [-1] * len(rest)
        xj = [j for j in js if j >= 0]
        xv = [v for j, v in zip(js, rest_v) if j >= 0]
        new = {w: v for j, w, v in zip(js, rest, rest_v) if j < 0}
        return (np.asarray(di, np.int64), np.asarray(dv, np.float64), np.asarray(xj, np.int64),
                np.asarray(xv, np.float64), new)

    def candidates(self, prefix: str, size: int):
        """Pool for a typed prefix: ``(words, prior, first_tokens)``, at most ``size``, best prior first."""
        words, index, counts, ccount, doc_cix, doc_dix, firsts = self.arr
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
                s = c.counts[clo:chi] * (self.weights["cor1"] / c.total)
                cj, cv = self.corpus_extra_ix, self.corpus_extra_v
                a, b = np.searchsorted(cj, clo), np.searchsorted(cj, chi)
                s[cj[a:b] - clo] += cv[a:b]
                a, b = np.searchsorted(doc_cix, clo), np.searchsorted(doc_cix, chi)
                s[doc_cix[a:b] - clo] = -1.0
                parts_score.append(s)
                parts_first.append(c.first_tokens[clo:chi])
                parts_word.append((c.words, clo))
            else:
                # no prefix, or a short one with a wide range: the most frequent corpus words
                # (of the range) plus the context's corpus extras (of the range); only these can
                # reach the pool, as the others' prior is their count alone
                cj, cv = self.corpus_extra_ix, self.corpus_extra_v
                if prefix:
                    a, b = np.searchsorted(cj, clo), np.searchsorted(cj, chi)
                    cj, cv = cj[a:b], cv[a:b]
                    top = c.top_in_range(clo, chi, size)
                else:
                    top = self._top_corpus(size)
                idx = _unique_inverse(np.concatenate([top, cj]))[0]
                s = c.counts[idx] * (self.weights["cor1"] / c.total)
                s[np.searchsorted(idx, cj)] += cv
                s[_in_sorted(idx, doc_cix)] = -1.0
                parts_score.append(s)
                parts_first.append(c.first_tokens[idx])
                parts_word.append((_Indexed(c.words, idx), 0))
        if self.new_words:
            sel = [k for k, w in enumerate(self.new_words) if w.startswith(prefix)] if prefix else list(range(len(self.new_words)))
            if sel:
                parts_score.append(self.new_scores[sel])
                parts_first.append(self.new_firsts[sel])
                parts_word.append(([self.new_words[k] for k in sel], 0))
        weight = self.weights.get("seg")
        segments = self.doc.segments if weight and prefix and self.doc is not None else None
        if segments is not None:
            comp = compounds(prefix, ((segments, 1.0), (c.segments if c is not None else None, CORPUS_SHARE)))
            # the best few (their first tokens cost a tokenizer call each, once); one that is a
            # known word too comes again lower in the list, and Predictor._ranked drops it there
            best = sorted(comp, key=comp.get, reverse=True)[:MAX_COMPOUNDS]
            if best:
                parts_score.append(weight * np.fromiter((comp[w] for w in best), np.float64, len(best)))
                parts_first.append(np.fromiter((self.first_token(w) for w in best), np.int64, len(best)))
                parts_word.append((best, 0))
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


def _unique_inverse(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(a, return_inverse=True)`` for the small integer arrays of one decision, by
    sorting: NumPy 2.3's hash-based ``unique`` costs ~50 us a call at these sizes, this ~5-10."""
    if not len(a):
        return a.astype(np.int64), np.zeros(0, np.int64)
    order = np.argsort(a, kind="stable")
    s = a[order]
    new = np.empty(len(s), bool)
    new[0] = True
    np.not_equal(s[1:], s[:-1], out=new[1:])
    inv = np.empty(len(a), np.int64)
    inv[order] = np.cumsum(new) - 1
    return s[new], inv


def _in_sorted(a: np.ndarray, sorted_b: np.ndarray) -> np.ndarray:
    """``np.isin(a, sorted_b)`` for a sorted ``sorted_b`` (a binary search per element)."""
    if not len(sorted_b):
        return np.zeros(len(a), bool)
    at = np.minimum(np.searchsorted(sorted_b, a), len(sorted_b) - 1)
    return sorted_b[at] == a


def _doc_positions(doc_cix: np.ndarray, doc_dix: np.ndarray, ix: np.ndarray):
    """Document positions of corpus words ``ix``: ``(positions, found)``, ``found`` a mask."""
    if not len(doc_cix):
        return np.zeros(len(ix), np.int64), np.zeros(len(ix), bool)
    at = np.minimum(np.searchsorted(doc_cix, ix), len(doc_cix) - 1)
    return doc_dix[at], doc_cix[at] == ix


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

    def take(self, idx: list[int]) -> list[str]:
        """``[self[i] for i in idx]``, each part's strings read in one pass."""
        out: list[str | None] = [None] * len(idx)
        by_part: dict[int, list[int]] = {}
        for j, i in enumerate(idx):
            by_part.setdefault(self.part[i], []).append(j)
        for q, js in by_part.items():
            seq, lo = self.parts[q]
            at = [lo + self.offs[idx[j]] for j in js]
            if isinstance(seq, _Indexed) and hasattr(seq.seq, "take"):
                got = seq.seq.take(seq.idx[at])
            elif hasattr(seq, "take"):
                got = seq.take(at)
            else:
                got = [seq[a] for a in at]
            for j, w in zip(js, got):
                out[j] = w
        return out


class _Indexed:
    """``seq[idx[i]]`` as a sequence."""

    __slots__ = ("seq", "idx")

    def __init__(self, seq, idx: np.ndarray):
        self.seq, self.idx = seq, idx

    def __getitem__(self, i: int):
        return self.seq[int(self.idx[i])]
