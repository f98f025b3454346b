"""Compound candidates: the typed head of an identifier plus a segment seen elsewhere.

A fifth of the identifier characters typed in held-out Python are first uses of names that no
candidate pool holds (``row_type``, ``num_months``, ``UnusedImport``, ``_DEFAULT_ALIGN``), and
many are compounds of segments the document or the corpus already has. When the typed prefix
holds a segment boundary (after ``_``, or at a lower-to-upper camelCase hump), the candidate
filter also offers the prefix up to that boundary followed by each known segment that starts with
the rest, written in the head's style: ``num_mo`` -> ``num_months``, ``UnusedIm`` ->
``UnusedImport``, ``MAX_W`` -> ``MAX_WIDTH``, ``getHTTPRe`` -> ``getHTTPRequest``, ``userI`` ->
``userID`` (a segment that camelCase names spell in capitals more often than capitalised).
Segments come from the document's identifiers and, with less weight (:data:`CORPUS_SHARE`), from
the corpus lexicon's most frequent ones.

Measured on the tune packages (3 files x 5,000 characters per language, in process, 2026-12-01):
keystrokes saved over the six languages 50.10 -> 51.26% with the document's segments and 51.87%
with the corpus's too, as shipped (TypeScript 38.1 -> 42.5, C 44.0 -> 46.4, Python 56.3 -> 57.6);
the weight (``prior_weights["seg"]``) made no difference from 0.002 to 0.02, as compounds mostly
fill a pool that has nothing longer to offer.
"""

from __future__ import annotations

import bisect
import re
from collections import Counter

import numpy as np

SEGMENT_RE = re.compile(r"[A-Z]{2,}(?=s(?![a-z]))|[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")
"""Segments of an ASCII identifier: ``parseHTTPHeader_v2`` -> parse, HTTP, Header, v, 2; a plural
acronym is the acronym and an ``s``: ``userIDs`` -> user, ID, s (identifiers in other scripts
have no segments here)."""
MIN_SEGMENT = 2
"""Shorter segments are not offered (one letter saves at most one key)."""
TOP_SEGMENTS = 16
"""Most segments per source tried for one typed tail."""
CORPUS_WORDS = 20_000
"""The corpus's segments come from its most frequent identifiers only (building from all 150k
Python identifiers took 0.6 s; 20k take ~0.08 s)."""
CORPUS_SHARE = 0.1
"""A corpus segment's share counts this much against a document segment's (tune packages:
1.0 measured 51.65% against 51.71% at 0.1)."""
MAX_TYPED = 64
"""Longer typed prefixes get no compounds (finding the boundaries of a 10,000-character one took
~1 s)."""
MAX_COMPOUNDS = 8
"""Most compounds a pool takes for one typed prefix (the best by share)."""
PAUSE_EVERY = 512
"""Identifiers counted between two calls of :meth:`SegmentIndex.from_words`'s ``pause``."""
TOPS_CACHED = 512
"""Most tails whose best segments :meth:`SegmentIndex.top` remembers per index."""


class SegmentIndex:
    """Lowercase segments with their counts, sorted for prefix lookup."""

    __slots__ = ("segments", "counts", "total", "acronyms", "_tops")

    def __init__(self, counted: Counter, acronyms: set[str] | frozenset = frozenset()):
        self.segments = sorted(counted)
        self.counts = np.fromiter((counted[s] for s in self.segments), np.float64, len(self.segments))
        self.total = float(self.counts.sum()) or 1.0
        self.acronyms = acronyms
        """Segments written in capitals inside camelCase names more often than capitalised
        (``userID``, ``HTTPClient``: ``id``, ``http``); a camelCase compound spells them so."""
        self._tops: dict[str, list[tuple[str, float]]] = {}

    @classmethod
    def from_words(cls, pairs, pause=None) -> "SegmentIndex":
        """Count the segments of the compound identifiers among ``(identifier, count)`` pairs,
        each weighted by its count: ASCII identifiers of two or more segments, so keywords and
        the words of comments (``return``, ``the``) are no segments, nor are the ASCII runs of
        ``café``. ``pause`` (or None) is called every :data:`PAUSE_EVERY` pairs (as a document's
        counting does: the 21,000 identifiers of a 4.7 MB file take ~35 ms)."""
        counted: Counter[str] = Counter()
        caps: Counter[str] = Counter()  # camelCase spelling: > 0 more often in capitals
        for k, (word, n) in enumerate(pairs):
            if pause is not None and k % PAUSE_EVERY == 0:
                pause()
            if not word.isascii():
                continue
            segs = SEGMENT_RE.findall(word)
            if len(segs) < 2:
                continue
            camel = any(c.islower() for c in word)
            for s in segs:
                if len(s) >= MIN_SEGMENT:
                    low = s.lower()
                    counted[low] += n
                    if camel and s[0].isupper():
                        caps[low] += n if s.isupper() else -n
        return cls(counted, frozenset(s for s, v in caps.items() if v > 0))

    def __len__(self) -> int:
        return len(self.segments)

    def top(self, tail: str, k: int = TOP_SEGMENTS) -> list[tuple[str, float]]:
        """The ``k`` most frequent segments longer than ``tail`` that start with it (lowercase),
        with their shares of all segment occurrences."""
        hit = self._tops.get(tail)
        if hit is not None:
            return hit
        lo = bisect.bisect_left(self.segments, tail)
        hi = bisect.bisect_left(self.segments, tail + "\U0010ffff", lo)
        if hi - lo > k:
            best = lo + np.sort(np.argpartition(-self.counts[lo:hi], k)[:k])
        else:
            best = range(lo, hi)
        out = [(self.segments[i], self.counts[i] / self.total) for i in best if len(self.segments[i]) > len(tail)]
        out.sort(key=lambda x: -x[1])
        if len(self._tops) >= TOPS_CACHED:
            self._tops.clear()
        self._tops[tail] = out
        return out


def boundaries(typed: str) -> list[tuple[str, str, str]]:
    """``(head, tail, style)`` for each segment boundary in ``typed`` whose tail can still grow
    into a segment: after a single ``_`` (the head's letters all upper: ``upper``, else
    ``lower``; the tail in that case) or at a camelCase hump (``cap``: the tail one capital then
    lowercase letters), also right after an acronym (``getHTTP|Re``: two capitals, then a capital
    followed by lowercase letters). The tail has at least one character: right after ``x_`` any
    segment is a guess (the tune packages measured the same without those). None in a prefix over
    :data:`MAX_TYPED` characters, and none after ``__`` (``__name__`` is a finished name)."""
    out = []
    n = len(typed)
    if n > MAX_TYPED:
        return out
    letters = upper = False  # whether the head has letters, and all of them upper case
    for k in range(1, n + 1):
        prev = typed[k - 1]
        if prev.isalpha():
            upper = prev.isupper() if not letters else upper and prev.isupper()
            letters = True
        if prev == "_":
            head, tail = typed[:k], typed[k:]
            if not letters or (k > 1 and typed[k - 2] == "_") or k == n:
                continue  # ``_`` or ``__``: no segment before it, a dunder's end, or no tail yet
            if tail and not (tail.isupper() if upper else tail.islower()):
                continue
            if not tail.isascii() or "_" in tail:
                continue
            out.append((head, tail, "upper" if upper else "lower"))
        elif k < n and prev.islower() and typed[k].isupper():
            head, tail = typed[:k], typed[k:]
            if tail.isascii() and (len(tail) == 1 or tail[1:].islower()):
                out.append((head, tail, "cap"))
        elif (k + 1 < n and prev.isupper() and typed[k].isupper() and typed[k + 1].islower()
              and typed[k:].isascii() and typed[k + 1:].islower() and typed[k + 1:] != "s"
              and k >= 2 and typed[k - 2].isupper() and not ("_" in typed[:k] and upper)):
            # after an acronym of 2+ capitals: getHTTP|Re, xmlHTTP|Req (not OAu|th, not the
            # plural userID|s, not a SCREAMING_CASE head: MAX_HTTPRe)
            out.append((typed[:k], typed[k:], "cap"))
    return out


def compounds(typed: str, sources) -> dict[str, float]:
    """Compound candidates for ``typed`` with their summed shares.

    Args:
        typed: the identifier prefix being typed.
        sources: ``(SegmentIndex, weight)`` pairs (the document's, the corpus's).

    Returns:
        identifier -> sum over sources of ``weight * share`` of its last segment (empty when
        ``typed`` has no segment boundary).
    """
    out: dict[str, float] = {}
    for head, tail, style in boundaries(typed):
        t = tail.lower()
        for index, weight in sources:
            if index is None or not len(index):
                continue
            for seg, share in index.top(t):
                if style == "upper" or (style == "cap" and len(tail) == 1 and seg in index.acronyms):
                    word = head + seg.upper()  # MAX_WIDTH; userI -> userID (userId once typed so)
                else:
                    word = head + (seg.capitalize() if style == "cap" else seg)
                out[word] = out.get(word, 0.0) + weight * share
    return out
