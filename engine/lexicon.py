"""Identifier n-gram model: the candidate filter that picks the pool the network scores.

Code is split into the tokenizer's pieces (identifiers, numbers, punctuation runs, newlines;
blanks dropped). For each identifier occurrence the model counts it alone (unigram) and after its
one and two previous pieces (``("self", ".")`` -> ``name``). Two of these exist at run time:

* :class:`CorpusLexicon`: built from the training corpus at export time and shipped in the model
  folder (``lexicon.npz``): the most frequent identifiers with their counts and first BPE token,
  and pruned bigram/trigram tables.
* :class:`DocLexicon`: built on line from an open document's text (``Predictor.observe_document``),
  plus the identifiers of the lines in the model's context window, which are always fresh.

:func:`pool` merges both into one prior ``P(identifier | previous pieces)`` by linear
interpolation (Jelinek-Mercer smoothing; weights in ``EngineConfig.prior_weights``) and returns the best
``pool_size`` identifiers that start with the typed prefix.
"""

from __future__ import annotations

import bisect
import re
from array import array
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np

from .compounds import CORPUS_SHARE, CORPUS_WORDS, MAX_COMPOUNDS, SegmentIndex, compounds

PIECE_RE = re.compile(r"\n|[ \t]+|[^\W\d]\w*|\d+|[^\s\w]+|\s")
"""Python-``re`` twin of the tokenizer's pre-tokenizer (newline kept apart from indentation)."""
IDENT_START = re.compile(r"[^\W\d]")
MIN_WORD_LEN = 2
"""Identifiers shorter than this are not worth completing (typing them costs at most one key)."""

WEIGHTS = {"doc3": 0.2, "doc2": 0.15, "doc1": 0.15, "win": 0.1, "cor3": 0.15, "cor2": 0.1, "cor1": 0.15}
"""Default interpolation weights of the prior (``EngineConfig.prior_weights`` documents them)."""
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


SEP = "\x01"
"""Joins strings in the ``lexicon.npz`` arrays (never inside a piece: pieces with it are dropped)."""

_HASH_MUL = 0x100000001B3
"""Multiplier of the strings' 64-bit polynomial hash (the FNV prime; odd, so invertible mod 2**64)."""
_HASH_LEN = 0x9E3779B97F4A7C15
"""Mixes a string's length (in bytes) into its hash."""
_MASK = (1 << 64) - 1
_HASH_CHUNK = 4096
"""Strings hashed per NumPy pass (bounds the transient arrays to ~2 MB: 65,536 at a time cost 25 MB)."""


def _join(strings: list[str]) -> np.ndarray:
    return np.frombuffer(SEP.join(strings).encode("utf-8"), np.uint8)


def _split(arr: np.ndarray) -> list[str]:
    text = arr.tobytes().decode("utf-8")
    return text.split(SEP) if text else []


def _hash_one(b: bytes) -> int:
    """The hash :func:`_hash_all` computes, for one string's UTF-8 bytes (pure Python)."""
    h, p = 0, 1
    for c in b:
        h = (h + (c + 1) * p) & _MASK
        p = (p * _HASH_MUL) & _MASK
    return (h + len(b) * _HASH_LEN) & _MASK


def _hash_all(data: bytes, starts: np.ndarray) -> np.ndarray:
    """64-bit hashes of the strings of a :class:`StringArray` buffer, ``(n,) uint64``:
    ``sum((byte_i + 1) * M**i) + len * L`` mod 2**64 (M, L: :data:`_HASH_MUL`, :data:`_HASH_LEN`),
    computed :data:`_HASH_CHUNK` strings at a time."""
    n = len(starts) - 1
    out = np.empty(n, np.uint64)
    if n == 0:
        return out
    buf = np.frombuffer(data, np.uint8)
    longest = int(np.diff(starts).max())
    with np.errstate(over="ignore"):
        powers = np.cumprod(np.full(longest, _HASH_MUL, np.uint64))
        powers = np.concatenate([[np.uint64(1)], powers[:-1]])
        for a in range(0, n, _HASH_CHUNK):
            b = min(n, a + _HASH_CHUNK)
            lo, hi = int(starts[a]), int(starts[b])
            seg = buf[lo:hi]
            if len(seg) < hi - lo:  # the last string: no separator after it
                seg = np.append(seg, np.uint8(1))
            lens = np.diff(starts[a : b + 1])  # each string's length plus its separator
            rel = starts[a:b] - lo
            pos = np.arange(hi - lo) - np.repeat(rel, lens)
            contrib = (seg.astype(np.uint64) + np.uint64(1)) * powers[pos]
            contrib[seg == 1] = 0  # the separators
            h = np.add.reduceat(contrib, rel)
            out[a:b] = h + (lens - 1).astype(np.uint64) * np.uint64(_HASH_LEN)
    return out


class StringArray:
    """Strings held as one UTF-8 buffer (joined by :data:`SEP`, as ``lexicon.npz`` stores them)
    and their start offsets: no Python object per string.

    Lookups: :meth:`prefix_range` (binary search; the strings must be sorted, as a lexicon's words
    are: UTF-8 byte order is code point order) and :meth:`find` / :meth:`find_many` (exact, through
    a 64-bit hash index built on first use: 12 bytes per string; hash matches are checked against
    the bytes, so a collision cannot return a wrong index).
    """

    __slots__ = ("data", "starts", "_hashes", "_order")

    def __init__(self, buf, starts: np.ndarray | None = None,
                 index: tuple[np.ndarray, np.ndarray] | None = None):
        """
        Args:
            buf: the joined strings: ``(bytes,) uint8``, ``bytes`` or a read-only ``mmap`` (whose
                slices are ``bytes``); empty for no strings.
            starts: the offsets, when known (:attr:`starts`; e.g. memory-mapped from a cache).
            index: the hash index, when known (``(sorted hashes, order)`` of :meth:`hash_index`).
        """
        self.data = bytes(buf) if isinstance(buf, np.ndarray) else buf
        self._hashes, self._order = index if index is not None else (None, None)
        if starts is not None:
            self.starts = starts
        elif len(self.data):
            seps = np.flatnonzero(np.frombuffer(self.data, np.uint8) == 1)
            dtype = np.int32 if len(self.data) < 2**31 - 2 else np.int64
            self.starts = np.concatenate([[0], seps + 1, [len(self.data) + 1]]).astype(dtype)
        else:
            self.starts = np.zeros(1, np.int32)
        """``(n + 1,)``: string ``i`` is ``data[starts[i]:starts[i + 1] - 1]``."""

    @classmethod
    def from_strings(cls, strings) -> "StringArray":
        return cls(SEP.join(strings).encode("utf-8"))

    def __len__(self) -> int:
        return len(self.starts) - 1

    def bytes_at(self, i: int) -> bytes:
        return self.data[self.starts[i] : self.starts[i + 1] - 1]

    def __getitem__(self, i: int) -> str:
        if not -len(self) <= i < len(self):
            raise IndexError(i)
        return self.bytes_at(i % len(self)).decode("utf-8")

    def __iter__(self):
        return iter(self.data[:].decode("utf-8").split(SEP) if len(self.data) else ())

    @property
    def nbytes(self) -> int:
        extra = 0 if self._hashes is None else self._hashes.nbytes + self._order.nbytes
        return len(self.data) + self.starts.nbytes + extra

    def _lower_bound(self, key: bytes, lo: int = 0) -> int:
        hi = len(self)
        starts, data = self.starts, self.data
        while lo < hi:
            mid = (lo + hi) // 2
            if data[starts[mid] : starts[mid + 1] - 1] < key:
                lo = mid + 1
            else:
                hi = mid
        return lo

    def prefix_range(self, prefix: str) -> tuple[int, int]:
        """``(lo, hi)``: the sorted strings ``lo..hi-1`` start with ``prefix``."""
        key = prefix.encode("utf-8", "surrogatepass")
        lo = self._lower_bound(key)
        return lo, self._lower_bound(key + b"\xff", lo)  # 0xff never occurs in UTF-8

    def hash_index(self) -> tuple[np.ndarray, np.ndarray]:
        """``(hashes, order)``: the strings' 64-bit hashes sorted, ``(n,) uint64``, and which
        string each is, ``(n,) int32`` (built on first use)."""
        return self._index()

    def _index(self) -> tuple[np.ndarray, np.ndarray]:
        if self._hashes is None:
            h = _hash_all(self.data, self.starts)
            order = np.argsort(h, kind="stable").astype(np.int32 if len(h) < 2**31 else np.int64)
            self._hashes, self._order = h[order], order
        return self._hashes, self._order

    def _resolve(self, h: int, key: bytes, at: int) -> int:
        """The index of the string ``key`` among those whose hash ``h`` starts at ``at`` of the
        sorted hashes, or -1."""
        hashes, order = self._hashes, self._order
        while at < len(hashes) and hashes[at] == h:
            i = int(order[at])
            if self.bytes_at(i) == key:
                return i
            at += 1
        return -1

    def find(self, s: str) -> int:
        """Index of the string ``s``, or -1."""
        if not len(self):
            return -1
        hashes, _ = self._index()
        key = s.encode("utf-8", "surrogatepass")
        h = _hash_one(key)
        return self._resolve(h, key, int(np.searchsorted(hashes, np.uint64(h))))

    def find_many(self, strings: list[str]) -> np.ndarray:
        """Indices of ``strings``, ``(len(strings),) int64``, -1 for those not held."""
        out = np.full(len(strings), -1, np.int64)
        if not len(self) or not strings:
            return out
        hashes, _ = self._index()
        keys = [s.encode("utf-8", "surrogatepass") for s in strings]
        ok = [k for k in keys if b"\x01" not in k]
        if len(ok) != len(keys):  # a string holding the separator is never held
            sel = [i for i, k in enumerate(keys) if b"\x01" not in k]
            out[sel] = self.find_many([strings[i] for i in sel])
            return out
        q = StringArray(b"\x01".join(keys))
        qh = _hash_all(q.data, q.starts) if len(q) == len(keys) else np.array([_hash_one(k) for k in keys], np.uint64)
        at = np.searchsorted(hashes, qh)
        hit = at < len(hashes)
        hit[hit] = hashes[at[hit]] == qh[hit]
        for k in np.flatnonzero(hit).tolist():
            out[k] = self._resolve(int(qh[k]), keys[k], int(at[k]))
        return out


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

    def release(self) -> None:
        """Drop what the last context holds (the document's arrays, window scores, extras), so a
        closed document is not kept alive by the pool; the next :meth:`begin` rebuilds it."""
        self._window_key = self._window_doc = None
        self._doc_follow = (None, {}, {})
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
                (name -> times; ``engine.imports``): they share the ``from`` weight by count.
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
        if W.get("long") and before:
            add(doc.followers(before), W["long"])
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


class _Indexed:
    """``seq[idx[i]]`` as a sequence."""

    __slots__ = ("seq", "idx")

    def __init__(self, seq, idx: np.ndarray):
        self.seq, self.idx = seq, idx

    def __getitem__(self, i: int):
        return self.seq[int(self.idx[i])]
