"""The token window before the cursor, tokenized line by line and kept stable across keystrokes.

The tokenizer never merges across a ``"\\n"`` (see ``engine/tokenizer.py``), so the tokens of a text
are the concatenation of its lines' tokens. :class:`ContextWindow` caches tokens (and identifiers)
per line, walks back from the cursor only as far as the window needs, and picks the window start
with hysteresis: it keeps the start of the previous window while that still fits in
``max_tokens``; when it must slide, it restarts with about ``min_tokens`` tokens, so a full
re-prefill happens once per ``max_tokens - min_tokens`` new tokens, not on every new line.
After a jump the previous window is out of range; the windows the engine still holds a KV cache
for (``alternates``: ``engine.window_cache.WindowStore``) are tried next, so coming back to a place
picks the same window start as before and its cache is reused.
"""

from __future__ import annotations

from collections import Counter, OrderedDict
from typing import Callable

from .pieces import IDENT_START, MIN_WORD_LEN, PIECE_RE

MAX_LINE_CHARS = 4000
"""A longer line is cut to its last this-many characters before tokenizing (huge minified lines)."""


RECENT_LINES = 6
"""Complete lines just above the cursor whose identifiers get the prior's ``recent`` weight."""


class LineCache:
    """LRU cache ``line text -> (token ids, identifiers)``."""

    def __init__(self, tokenizer, size: int = 20000):
        self.tok = tokenizer
        self.size = size
        self.d: OrderedDict[str, tuple[list[int], list[str]]] = OrderedDict()

    def get(self, chunk: str, store: bool = True) -> tuple[list[int], list[str]]:
        """Tokens and identifiers of one line chunk; ``store=False`` for the line being typed
        (it changes on every keystroke, and caching each version would only grow memory)."""
        hit = self.d.get(chunk)
        if hit is not None:
            self.d.move_to_end(chunk)
            return hit
        ids = self.tok.encode(chunk).ids
        idents = [p for p in PIECE_RE.findall(chunk) if len(p) >= MIN_WORD_LEN and IDENT_START.match(p)]
        hit = (ids, idents)
        if not store:
            return hit
        self.d[chunk] = hit
        if len(self.d) > self.size:
            self.d.popitem(last=False)
        return hit


class ContextWindow:
    """Computes the window's token ids for a text that ends at a word start."""

    def __init__(self, lines: LineCache, eos_id: int, max_tokens: int, min_tokens: int):
        self.lines = lines
        self.eos = eos_id
        self.max = max_tokens
        self.min = min_tokens
        self.prev: list[int] = []
        self.idents: Counter = Counter()
        """Identifier counts of the window's complete lines."""
        self.line_idents: list[str] = []
        """Identifiers on the line being typed (before the word)."""
        self.recent_idents: list[str] = []
        """Identifiers of the last :data:`RECENT_LINES` complete lines."""
        self.done_idents: list[list[str]] = []
        """Identifiers of each complete line of the window, oldest first."""
        self._idents_key: tuple = ()
        self.alternates: Callable[[], list[list[int]]] = list
        """Other windows whose start may be kept (most recent first), tried after ``prev``."""

    def tokens(self, text: str) -> list[int]:
        """Window tokens for ``text`` (the text before the word being typed).

        Returns:
            Token ids, at most ``max_tokens``; they start with ``<|endoftext|>`` when the window
            reaches the start of the file, as every training file did.
        """
        budget = self.max - 1
        chunks: list[list[int]] = []  # nearest line first
        ident_lists: list[list[str]] = []
        total = 0
        end = len(text)
        at_start = False
        while True:
            nl = text.rfind("\n", 0, end)
            start = 0 if nl < 0 else nl
            if end - start > MAX_LINE_CHARS:
                start = end - MAX_LINE_CHARS
                nl = -2  # cut line: the window cannot reach the file start through it
            ids, idents = self.lines.get(text[start:end], store=bool(chunks))
            if total + len(ids) > budget:
                if not chunks:  # one line longer than the window: keep its tail
                    chunks.append(ids[-budget:])
                    ident_lists.append(idents)
                break
            chunks.append(ids)
            ident_lists.append(idents)
            total += len(ids)
            if nl == -1:
                at_start = True
                break
            if nl < 0:
                break
            end = nl
        chunks.reverse()
        ident_lists.reverse()
        # Hysteresis: keep the previous window's first line if it is still in range.
        prev = self.prev
        j = 0
        if prev and not (at_start and prev[0] == self.eos):
            j = self._kept_start(chunks, prev)
            if j < 0:
                for alt in self.alternates():
                    j = self._kept_start(chunks, alt[1:] if alt and alt[0] == self.eos else alt)
                    if j >= 0:
                        break
            if j < 0:  # restart with about min_tokens
                acc = sum(len(c) for c in chunks)
                j = 0
                while j < len(chunks) - 1 and acc - len(chunks[j]) >= self.min:
                    acc -= len(chunks[j])
                    j += 1
        out = [self.eos] if (at_start and j == 0) else []
        for c in chunks[j:]:
            out.extend(c)
        self.prev = out
        # Complete lines' identifiers change once per line (their lists come from the line cache,
        # so their ids are a stable key); the line being typed is kept apart in ``line_idents``.
        done, self.line_idents = ident_lists[j:-1], (ident_lists[-1] if ident_lists else [])
        self.done_idents = done
        self.recent_idents = [w for lst in done[-RECENT_LINES:] for w in lst]
        key = tuple(map(id, done))
        if key != self._idents_key:
            cnt: Counter = Counter()
            for lst in done:
                cnt.update(lst)
            self.idents = cnt
            self._idents_key = key
        return out

    def _kept_start(self, chunks: list[list[int]], prev: list[int]) -> int:
        """Index of the chunk (line) where ``prev`` starts, if the window can keep that start
        (at least ``min_tokens`` from there to the cursor); else -1."""
        acc = sum(len(c) for c in chunks)
        for cand in range(len(chunks)):
            c = chunks[cand]
            if c and prev[: len(c)] == c and (cand + 1 >= len(chunks) or
                                               prev[len(c): len(c) + len(chunks[cand + 1])] == chunks[cand + 1]):
                return cand
            acc -= len(c)
            if acc < self.min:
                break
        return -1

    def reset(self) -> None:
        self.prev = []
        self.idents = Counter()
        self.line_idents = []
        self.recent_idents = []
        self.done_idents = []
        self._idents_key = ()
