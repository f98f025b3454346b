"""Compact string storage: many strings as one UTF-8 buffer and their start offsets.

:class:`StringArray` holds them (joined by :data:`SEP`, as ``lexicon.npz`` stores them) with no
Python object per string: prefix lookups by binary search, exact ones through a 64-bit hash index
(:func:`_hash_all`, :func:`_hash_one`). The lexicons (``engine.lexicon``) and the workspace's
line index (``engine.continuation``) keep their strings in it.
"""

from __future__ import annotations

import numpy as np

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

    def take(self, ix) -> list[str]:
        """The strings at indices ``ix`` (non-negative ints), in one pass (``self[i]`` costs a
        few microseconds a string; this a fraction of one)."""
        ix = np.asarray(ix, np.int64)
        starts, data = self.starts, self.data
        return [data[a:b].decode("utf-8") for a, b in zip(starts[ix].tolist(), (starts[ix + 1] - 1).tolist())]

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

