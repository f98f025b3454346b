"""Identifier n-gram model: the candidate filter that picks the pool the network scores.

Code is split into the tokenizer's pieces (identifiers, numbers, punctuation runs, newlines;
blanks dropped: ``engine.pieces``). For each identifier occurrence the model counts it alone
(unigram) and after its one and two previous pieces (``("self", ".")`` -> ``name``). Two of these
exist at run time:

* :class:`CorpusLexicon` (this module): built from the training corpus at export time and shipped
  in the model folder (``lexicon.npz``): the most frequent identifiers with their counts and first
  BPE token, and pruned bigram/trigram tables (strings held as ``engine.string_array.StringArray``).
* ``engine.pieces.DocLexicon``: built on line from an open document's text
  (``Predictor.observe_document``), plus the identifiers of the lines in the model's context
  window, which are always fresh.

``engine.pool.PoolBuilder`` merges both into one prior ``P(identifier | previous pieces)`` by linear
interpolation (Jelinek-Mercer smoothing; weights in ``EngineConfig.prior_weights``) and returns the best
``pool_size`` identifiers that start with the typed prefix.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from pathlib import Path

import numpy as np

from .pieces import DocLexicon, PieceIndex
from .string_array import SEP, StringArray, _join

_NARROW = ("counts", "bi_offsets", "tri_offsets", "bi_cnt", "tri_cnt")
"""Integer parts (int64/int32 in the file) held in the narrowest type that keeps every value."""


def narrow(name: str, a: np.ndarray) -> np.ndarray:
    """Part ``name`` of a lexicon file in the narrowest exact integer type: int32, or uint16 for
    the n-gram counts (never negated) when they are all under 65,536. Values, sums and products
    with floats are unchanged, so are the pools."""
    if name not in _NARROW or a.dtype.kind != "i" or not a.size:
        return a
    lo, hi = int(a.min()), int(a.max())
    if name.endswith("_cnt") and 0 <= lo and hi < 2**16:
        return a.astype(np.uint16)
    if a.dtype.itemsize > 4 and -(2**31) <= lo and hi < 2**31:
        return a.astype(np.int32)
    return a


class _Table:
    """An n-gram table: context key -> (word indices, counts), stored as flat arrays (the keys a
    :class:`StringArray`, looked up by hash; the arrays kept as the file holds them)."""

    __slots__ = ("keys", "offsets", "ix", "cnt")

    def __init__(self, keys: StringArray, offsets: np.ndarray, ix: np.ndarray, cnt: np.ndarray):
        if len(offsets) != len(keys) + 1:
            raise ValueError("an n-gram table's keys and offsets differ in length")
        self.keys, self.offsets, self.ix, self.cnt = keys, offsets, ix, cnt

    def get(self, key: str):
        """``(word indices, counts)`` of the context ``key``, or None."""
        k = self.keys.find(key)
        if k < 0:
            return None
        a, b = self.offsets[k], self.offsets[k + 1]
        return self.ix[a:b], self.cnt[a:b]

    def __len__(self) -> int:
        return len(self.keys)


TOP_RANGES_CACHED = 256
"""Most prefix ranges whose most frequent words :meth:`CorpusLexicon.top_in_range` keeps (at most
~2 MB; only prefixes of one or two characters have ranges wide enough to use it)."""


class CorpusLexicon:
    """Shipped corpus statistics (``lexicon.npz``): identifiers sorted for prefix lookup, their
    counts and first BPE token, and pruned bigram/trigram tables.

    Everything is a flat NumPy array or one byte buffer (:class:`StringArray`), loaded once from
    the file as it is stored (no per-identifier Python objects, no widened copies): the Python
    lexicon takes ~21 MB, where lists and dicts of strings took ~60 MB.
    """

    def __init__(self, arrays, strings: dict[str, StringArray] | None = None):
        """
        Args:
            arrays: the parts (:attr:`PARTS`) as :meth:`build` returns them or the file holds them.
            strings: ``words``, ``bi_keys`` and ``tri_keys`` made already (then ``arrays`` may
                lack them): the memory-mapped cache passes them with their offsets and indices.
        """
        strings = strings or {}
        self.words = strings["words"] if "words" in strings else StringArray(arrays["words"])
        self.counts = np.asarray(arrays["counts"])
        self.first_tokens = np.asarray(arrays["first_tokens"])
        if not (len(self.words) == len(self.counts) == len(self.first_tokens)):
            raise ValueError("words, counts and first_tokens differ in length")
        self.total = float(self.counts.sum())
        self.matches: PieceIndex | None = None  # the workspace's pieces (``Predictor.build_workspace``)
        self.segments = None  # its most frequent words' segments (``engine.compounds``), made on first use
        self.lines = None  # the workspace's lines (``engine.continuation.LineIndex``), likewise
        self.imports = None  # names the workspace imports per module (``engine.imports.ImportIndex``)
        self._top_in_range: dict[tuple[int, int, int], np.ndarray] = {}
        for name in ("bi", "tri"):
            keys = strings.get(f"{name}_keys")
            keys = keys if keys is not None else StringArray(arrays[f"{name}_keys"])
            setattr(self, name, _Table(keys, arrays[f"{name}_offsets"], arrays[f"{name}_ix"], arrays[f"{name}_cnt"]))

    def prefix_range(self, prefix: str) -> tuple[int, int]:
        return self.words.prefix_range(prefix)

    def top_words(self, size: int) -> np.ndarray:
        """Indices of the ``size`` most frequent words (ties: the earlier word), sorted."""
        return np.sort(np.argsort(-self.counts, kind="stable")[:size])

    def top_in_range(self, lo: int, hi: int, size: int) -> np.ndarray:
        """Indices of the ``size`` most frequent words among ``lo:hi`` (a prefix's range), sorted;
        cached per range (a one-character prefix spans thousands of words: ranking them all on
        every keystroke cost ~0.1 ms)."""
        cache = self._top_in_range
        key = (lo, hi, size)
        top = cache.get(key)
        if top is None:
            top = lo + np.sort(np.argsort(-self.counts[lo:hi], kind="stable")[:size])
            if len(cache) >= TOP_RANGES_CACHED:
                cache.clear()
            cache[key] = top
        return top

    @property
    def nbytes(self) -> int:
        """Bytes held (arrays, buffers and hash indices)."""
        n = self.words.nbytes + self.counts.nbytes + self.first_tokens.nbytes
        for t in (self.bi, self.tri):
            n += t.keys.nbytes + t.offsets.nbytes + t.ix.nbytes + t.cnt.nbytes
        return n

    PARTS = ("words", "counts", "first_tokens", "bi_keys", "bi_offsets", "bi_ix", "bi_cnt",
             "tri_keys", "tri_offsets", "tri_ix", "tri_cnt")

    @classmethod
    def check(cls, path: Path) -> None:
        """Check that ``path`` is a readable lexicon file without loading its arrays.

        Raises:
            ValueError: naming the file when it is not a zip archive holding every part.
        """
        import zipfile

        try:
            with zipfile.ZipFile(path) as z:
                names = {n.removesuffix(".npy") for n in z.namelist()}
        except (OSError, zipfile.BadZipFile) as e:
            raise ValueError(f"lexicon file {path} is corrupt: {e}") from e
        missing = [p for p in cls.PARTS if p not in names]
        if missing:
            raise ValueError(f"lexicon file {path} is corrupt: it lacks {', '.join(missing)}")

    @classmethod
    def load(cls, path: Path, mapped: bool = True) -> "CorpusLexicon":
        """Read ``lexicon.npz``.

        Args:
            path: the file.
            mapped: memory-map it from an uncompressed copy in the user's cache
                (``engine.lexicon_cache``; written on first use), so only the pages that lookups
                touch take memory; without a usable cache, or with False, load it into memory.

        Raises:
            ValueError: naming the file when it is missing a part or corrupt.
        """
        if mapped:
            from .lexicon_cache import load_mapped

            lex = load_mapped(cls, path)
            if lex is not None:
                return lex
        try:
            with np.load(path, allow_pickle=False) as z:
                return cls({k: narrow(k, z[k]) for k in z.files})
        except (OSError, ValueError, KeyError, EOFError, UnicodeDecodeError) as e:
            raise ValueError(f"lexicon file {path} is corrupt: {e}") from e
        except Exception as e:  # zipfile.BadZipFile and friends
            raise ValueError(f"lexicon file {path} is corrupt: {e}") from e

    @classmethod
    def from_texts(cls, texts, tokenizer, **kw) -> "CorpusLexicon":
        """Count ``texts`` (e.g. a workspace's files) into a lexicon (see :meth:`build`)."""
        return cls(cls.build(texts, tokenizer, **kw))

    @staticmethod
    def build(texts, tokenizer, max_words: int = 150000, top_per_context: int = 128,
              min_context_count: int = 3) -> dict[str, np.ndarray]:
        """Count the corpus; return the arrays that :meth:`load` reads (``np.savez_compressed``).

        The defaults were chosen on held-out files (``laya eval``, 4 files x 4000 chars, step-500
        model): 40k words / 48 per context / contexts seen 20+ times (1.7 MB) saved 41.8% of
        identifier keystrokes, 80k / 96 / 6+ (3.2 MB) 42.7%, these (4.7 MB) 43.2%.
        """
        uni: Counter[str] = Counter()
        bi: dict[str, Counter[str]] = defaultdict(Counter)
        tri: dict[str, Counter[str]] = defaultdict(Counter)
        for text in texts:
            d = DocLexicon(text, segments=False)
            uni.update(d.uni)
            for k, c in d.bi.items():
                bi[k].update(c)
            for k, c in d.tri.items():
                tri[k].update(c)
        words = sorted(w for w, _ in uni.most_common(max_words) if SEP not in w)
        index = {w: i for i, w in enumerate(words)}
        firsts = [e.ids[0] for e in tokenizer.encode_batch(words)]
        out = {"words": _join(words), "counts": np.asarray([uni[w] for w in words], np.int64),
               "first_tokens": np.asarray(firsts, np.int32)}
        for name, table in (("bi", bi), ("tri", tri)):
            keys, offsets, ix, cnt = [], [0], [], []
            for k in sorted(table):
                c = table[k]
                if SEP in k or sum(c.values()) < min_context_count:
                    continue
                top = [(index[w], n) for w, n in c.most_common() if w in index][:top_per_context]
                if top:
                    keys.append(k)
                    ix.extend(i for i, _ in top)
                    cnt.extend(n for _, n in top)
                    offsets.append(len(ix))
            out[f"{name}_keys"] = _join(keys)
            out[f"{name}_offsets"] = np.asarray(offsets, np.int64)
            out[f"{name}_ix"] = np.asarray(ix, np.int32)
            out[f"{name}_cnt"] = np.asarray(cnt, np.int32)
        return out


def merge_lexicons(corpus: CorpusLexicon | None, extra: CorpusLexicon, weight: float = 1.0) -> CorpusLexicon:
    """One lexicon holding ``corpus`` and ``extra`` (the workspace), as arrays.

    ``extra``'s counts are scaled so that its total is ``weight`` times the corpus total, then
    added: a workspace of 2,000 identifier occurrences weighs as much as a corpus of 20 million.
    The n-gram tables are merged per context (counts scaled the same way, summed per word). The
    words are merged as byte buffers (``extra``'s new words inserted at their sorted places), so no
    Python string is made per corpus word. Costs ~0.1-0.3 s for a 150k-word corpus; run it off the
    engine thread.

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
    ewords = list(extra.words)
    found = corpus.words.find_many(ewords)
    new = np.flatnonzero(found < 0)  # extra's words the corpus lacks (sorted, as extra's are)
    cw = corpus.words
    ins = np.fromiter((cw._lower_bound(ewords[k].encode("utf-8")) for k in new.tolist()), np.int64, len(new))
    cdata = cw.data[:] + b"\x01"  # every word followed by the separator (the last one too)
    chunks, prev = [], 0
    for k, at in zip(new.tolist(), ins.tolist()):
        if at > prev:
            chunks.append(cdata[cw.starts[prev] : cw.starts[at]])
        chunks.append(ewords[k].encode("utf-8") + b"\x01")
        prev = at
    if prev < len(cw):
        chunks.append(cdata[cw.starts[prev] :])
    n = len(cw) + len(new)
    cmap = np.arange(len(cw)) + np.searchsorted(ins, np.arange(len(cw)), side="right")
    emap = found.copy()
    emap[found >= 0] = cmap[found[found >= 0]]
    emap[new] = ins + np.arange(len(new))
    counts = np.zeros(n)
    counts[cmap] += corpus.counts
    counts[emap] += scale * extra.counts
    firsts = np.zeros(n, np.int32)  # token and word ids fit in int32 (the file's own types)
    firsts[cmap] = corpus.first_tokens
    firsts[emap] = extra.first_tokens
    arrays = {"words": np.frombuffer(b"".join(chunks)[:-1], np.uint8), "counts": counts, "first_tokens": firsts}
    for name in ("bi", "tri"):
        a, b = getattr(corpus, name), getattr(extra, name)
        bkeys = list(b.keys)
        bk = a.keys.find_many(bkeys)  # b's key order -> merged key id (a's keys, then b's new ones)
        fresh = np.flatnonzero(bk < 0)
        bk[fresh] = len(a) + np.arange(len(fresh))
        keys = a.keys.data[:]
        if len(fresh):
            more = b"\x01".join(bkeys[k].encode("utf-8") for k in fresh.tolist())
            keys = keys + b"\x01" + more if len(a) else more
        ka = np.repeat(np.arange(len(a)), np.diff(a.offsets))
        kb = bk[np.repeat(np.arange(len(b)), np.diff(b.offsets))]
        key = np.concatenate([ka, kb])
        word = np.concatenate([cmap[a.ix], emap[b.ix]])
        cnt = np.concatenate([a.cnt, scale * b.cnt])
        code, inv = np.unique(key * n + word, return_inverse=True)
        cnt = np.bincount(inv, weights=cnt, minlength=len(code))
        key, word = code // n, code % n
        order = np.lexsort((-cnt, key))
        key, word, cnt = key[order], word[order], cnt[order]
        offsets = np.concatenate([[0], np.cumsum(np.bincount(key, minlength=len(a) + len(fresh)))])
        arrays[f"{name}_keys"] = np.frombuffer(keys, np.uint8)
        arrays[f"{name}_offsets"] = offsets.astype(np.int32) if offsets[-1] < 2**31 else offsets
        arrays[f"{name}_ix"] = word.astype(np.int32)
        arrays[f"{name}_cnt"] = cnt
    return CorpusLexicon(arrays)
