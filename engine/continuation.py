"""The rest-of-line continuation: the best identifier, then the rest of the line.

First from the document itself (:func:`line_from_document`: an earlier line that starts the same
way), else from the network (:func:`continue_line`): greedy tokens after the decision's context in
the KV cache, rolled back out so the context stays; they stop before a token the model is unsure of
(``line_min_prob``) or before the line so far becomes less likely than ``line_min_joint_prob``, at a
line end, after ``line_max_tokens`` or when the request is cancelled.
"""

from __future__ import annotations

import os

import numpy as np

LINE_MAX_CHARS = 300
"""Longer lines are neither offered nor kept (minified or generated code)."""
LINE_MATCH_CHARS = 100_000
"""How far back (characters before the cursor's line) :func:`line_from_document` looks."""


def line_before(ctx_text: str) -> str:
    """The cursor's line up to the identifier (``ctx_text``: the text before it)."""
    return ctx_text[ctx_text.rfind("\n") + 1 :]


def line_key(ctx_text: str, word: str) -> str:
    """What an earlier line must start with: the cursor's line before ``word`` without its
    indentation, and ``word``."""
    return line_before(ctx_text).lstrip() + word


LINE_AGREE = 3
"""How many of the latest earlier lines that start as the cursor's line does must agree for
:func:`line_from_document` to offer a character."""


def line_from_document(ctx_text: str, word: str, min_key: int) -> str | None:
    """The rest of the line as far as the latest earlier lines that start as the cursor's line does
    agree.

    The key is the cursor's line before the word, without its indentation, plus ``word`` (e.g.
    ``self.assertEqual`` in ``    self.assertEqual``); an earlier line whose text after its
    indentation starts with the key gives ``word`` and what followed the key there, to its line end
    (trailing blanks dropped). The latest :data:`LINE_AGREE` such lines (those with something past
    ``word``) give their longest common start, cut back to a whole identifier: where lines of a
    list differ only in their last name (``RUN_TEST_CASE(UnityFixture, PointerSetting);``, then
    ``..., ForceMallocFail);``) the ghost text stops before it instead of repeating the latest
    one's. The idea of whole-line completion in editors (Vim's ``i_CTRL-X_CTRL-L``) and of
    prompt-lookup decoding, used here for ghost text. On the tune packages (``laya eval --split
    tune --files 6 --max-chars 6000 --workspace off --lines``, six languages) the network's greedy
    lines alone gained 2,158 characters (55.8% of the lines offered correct); with the latest line
    first (``min_key`` 10) 6,183 (52.5%); a shorter key then gained more and was right less often
    (6: about a sixth more characters, 46.6% correct), a longer one the reverse (16: a sixth fewer,
    54.5%). Since the lines must agree, a shorter key is right more often too (3 ships:
    ``EngineConfig.line_match_min_chars``). Where the lines agree (eval packages, 6 files x 8,000
    characters per language, in process, key 10): 11,892 -> 12,649 characters gained, 56.0% -> 62.5% of the lines shown right (C 50.9% -> 55.9%,
    Go 49.6% -> 62.2%); the latest 8 lines 12,213 characters, the latest 4 (the latest line whole
    where it occurs 2 or 3 times among them) 12,570-12,609; on the tune packages (3 files x 5,000
    characters) the latest 2 lines 0.7% fewer characters than 3.

    Args:
        ctx_text: the document before the word (LF line ends).
        word: the identifier the line item starts with.
        min_key: shortest key (characters) that is looked up; shorter keys (a bare ``return``)
            match too many unrelated lines. 0 disables the lookup.

    Returns:
        ``word`` plus what the earlier lines' rests share, when that goes past ``word`` (lines over
        :data:`LINE_MAX_CHARS` take no part: no ghost text from minified code); else None.
    """
    ls = ctx_text.rfind("\n") + 1
    key = line_key(ctx_text, word)
    if not min_key or len(key) < min_key:
        return None
    lo = max(0, ls - LINE_MATCH_CHARS)
    rests: list[str] = []
    at = ctx_text.rfind(key, lo, ls)
    while at >= 0 and len(rests) < LINE_AGREE:
        # the key starts that line; a line with no line end before it in the text may be cut (the
        # server passes the last 64 KiB): it is not used. The line end is looked for a little way
        # back, then past blanks only: not back to the text's start (a long minified line holding
        # the key many times cost a scan of the whole text per match)
        start = 0
        if at and ctx_text[at - 1].isspace():  # (a line end is a blank too)
            start = ctx_text.rfind("\n", at - _NEAR if at > _NEAR else 0, at) + 1
            if not start and at > _NEAR:
                start = _after_blanks(ctx_text, at)
        if start and (start == at or ctx_text[start:at].isspace()):
            eol = ctx_text.find("\n", at)
            line = ctx_text[at + len(key) - len(word) : eol if eol >= 0 else len(ctx_text)].rstrip()
            if len(word) < len(line) <= LINE_MAX_CHARS and _encodable(line):
                rests.append(line)
        at = ctx_text.rfind(key, lo, at)  # that one has nothing to offer: an older one may
    if not rests:
        return None
    line = rests[0]
    end = len(os.path.commonprefix(rests))
    if any(end < len(r) and _ident_char(r[end]) for r in rests):
        while end > len(word) and _ident_char(line[end - 1]):  # no half identifier
            end -= 1
    return line[:end] if end > len(word) else None


_NEAR = 256
"""How far back from a match :func:`line_from_document` looks for its line end at once."""


def _after_blanks(text: str, at: int) -> int:
    """Where the line holding ``at`` starts when only blanks come before ``at`` on it and a line end
    before them, else 0 (also for the text's first line: it may be cut)."""
    i = at
    while i and text[i - 1] != "\n" and text[i - 1].isspace():
        i -= 1
    return i if i and text[i - 1] == "\n" else 0


def _encodable(text: str) -> bool:
    """False for text holding a lone surrogate (it would reach the editor as U+FFFD)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def fit_to_suffix(line: str, suffix: str | None, before: str = "") -> str | None:
    """``line`` (the identifier at the cursor and what follows it) cut to fit before the text
    after the cursor, which an editor keeps; None when it cannot fit.

    The rest of the cursor's line (``suffix`` up to its line end) is only closers, quotes and
    ``:;,`` here (:func:`line_is_open`), typically what the editor auto-closed for an opener in
    ``before`` (the cursor's line up to the identifier). Then its first character ``c`` ends the
    inserted text: the line is cut at its first ``c`` outside the brackets it opens itself, so
    ``items.append(make_i|)`` with the line ``make_item(name))`` inserts ``make_item(name)``,
    ``with open(zq_pa|)`` with ``zq_path_name) as fh:`` inserts ``zq_path_name`` and
    ``key = 'zq_k|'`` with ``zq_key' + x`` inserts ``zq_key``; a closer of another kind there means
    the line does not fit (None). A ``c`` inside a string the line opens itself is not that one,
    and a line that leaves a bracket or string open before ``c`` stops before its opener
    (``make_item(`` inserts ``make_item``, not ``make_item()`` with the editor's ``)`` taken over).
    When nothing in ``before`` is open, the suffix is dropped from the line's end if the line ends
    with it, and the line is kept whole otherwise.
    """
    rest = (suffix or "").split("\n", 1)[0].strip()
    if not rest:
        return line
    c = rest[0]
    if c in ")]}":
        cut = sum(map(before.count, "([{")) > sum(map(before.count, ")]}"))
    elif c in "'\"`":
        cut = before.count(c) % 2 == 1
    else:
        cut = True
    if cut:
        depth = 0
        opened = -1  # where the outermost bracket or string the line leaves open starts
        quote = ""  # the string the line is in (its own: c is another character)
        escaped = False
        for i, ch in enumerate(line):
            if quote:
                if escaped:
                    escaped = False
                elif ch == "\\":
                    escaped = True
                elif ch == quote:
                    quote = ""
                    if depth == 0:
                        opened = -1
                continue
            if ch == c and (depth == 0 or c in "'\"`"):
                return line[:i].rstrip()
            if ch in "'\"`":
                quote = ch
                if depth == 0:
                    opened = i
            elif ch in "([{":
                if depth == 0:
                    opened = i
                depth += 1
            elif ch in ")]}":
                if depth == 0:
                    return None  # closes something other than what the suffix closes
                depth -= 1
                if depth == 0:
                    opened = -1
        # a line cut short (where the document's lines stop agreeing, or the network's) must not
        # leave a bracket or string open: the editor's closer after it would close that instead
        return line[:opened].rstrip() if opened >= 0 else line
    return line[: -len(rest)].rstrip() if line.endswith(rest) else line


WORKSPACE_LINE_BYTES = 4_000_000
"""Most bytes of distinct workspace lines a :class:`LineIndex` keeps (~4 MB, plus 12 bytes a line)."""
LINE_MIN_CHARS = 10
"""Shorter lines (after stripping) are not kept: no key of ``line_match_min_chars`` finds them."""


class LineIndex:
    """The workspace's distinct lines (indentation and trailing blanks stripped), sorted, with how
    often each occurs: :meth:`rest` gives the most frequent line that starts with a key.

    Used after the document's own lines (:func:`line_from_workspace`). On the tune packages with
    the rest of each package as the workspace (``laya eval --split tune --files 6 --max-chars 6000
    --workspace only --lines``, six languages) rest-of-line items gained 6,466 characters without
    it and 9,009 with it, 52.1% and 53.7% of the lines shown exactly right (imports, logger set-up,
    recurring calls).
    """

    __slots__ = ("lines", "counts")

    def __init__(self, lines, counts: np.ndarray):
        self.lines, self.counts = lines, counts

    @classmethod
    def from_texts(cls, texts, max_bytes: int = WORKSPACE_LINE_BYTES) -> "LineIndex":
        """Count ``texts``' lines (the first ``max_bytes`` of distinct ones, in order of the texts)."""
        from collections import Counter

        from .string_array import StringArray

        seen: Counter = Counter()
        size = 0
        for text in texts:
            for ln in text.split("\n"):
                ln = ln.strip()
                if LINE_MIN_CHARS <= len(ln) <= LINE_MAX_CHARS and "\x01" not in ln:
                    if ln not in seen:
                        if not _encodable(ln):  # a lone surrogate: not a line anyone types
                            continue
                        size += len(ln.encode("utf-8")) + 1
                        if size > max_bytes:
                            break
                    seen[ln] += 1
            if size > max_bytes:
                break
        keys = sorted(seen)
        return cls(StringArray.from_strings(keys), np.fromiter((seen[k] for k in keys), np.int32, len(keys)))

    def rest(self, key: str) -> str | None:
        """The most frequent kept line that starts with ``key`` and is longer (ties: the first in
        sorted order), or None."""
        lo, hi = self.lines.prefix_range(key)
        if lo < hi and self.lines[lo] == key:  # the key itself sorts first among its extensions
            lo += 1
        if lo >= hi:
            return None
        return self.lines[lo + int(np.argmax(self.counts[lo:hi]))]


def line_from_workspace(ctx_text: str, word: str, min_key: int, index: LineIndex | None) -> str | None:
    """:func:`line_from_document`'s fallback: ``word`` plus the rest of the workspace's most frequent
    line that starts with the same key (:class:`LineIndex`), or None."""
    if index is None or not min_key:
        return None
    key = line_key(ctx_text, word)
    if len(key) < min_key:
        return None
    line = index.rest(key)
    return word + line[len(key) :] if line is not None else None


MAX_WORD_TOKENS = 24
"""Longest identifier (in tokens) that gets a rest-of-line continuation (longer ones: none)."""


def continue_line(kv, tok, word: str, max_tokens: int, min_prob: float, eos: int, id_to_text: dict,
                  stop=None, min_joint_prob: float = 0.0) -> tuple[str, bool]:
    """``(word + greedy continuation, complete)``; ``complete`` is False when ``stop`` cut it short.

    Args:
        kv: the ``engine.kv_sync.KVSync`` holding the context.
        tok: the tokenizer.
        word: the identifier the line starts with.
        max_tokens: most greedy tokens (``EngineConfig.line_max_tokens``).
        min_prob: stop before a greedy token less likely than this (``line_min_prob``).
        min_joint_prob: stop before a greedy token that would make the product of the greedy
            tokens' probabilities (the line's probability after ``word``) less than this
            (``line_min_joint_prob``; 0: no such limit).
        eos: the end-of-text token id.
        id_to_text: token id -> its byte-level text (``"Ċ"`` is a newline).
        stop: a ``threading.Event`` checked between steps.
    """
    ids = tok.encode(word).ids
    backend = kv.backend
    if len(ids) > MAX_WORD_TOKENS or len(kv.cached) + len(ids) + 1 > backend.capacity:
        return word, True  # a very long identifier: no room planned for its continuation
    n_ctx = len(kv.cached)
    h = kv.extend(ids)
    out: list[int] = []
    budget = min(max_tokens, backend.capacity - len(kv.cached) - 1)
    complete = True
    ends_word = False  # the line ends where its last identifier does (a line end, a token after it)
    joint = 1.0  # the probability of the greedy tokens so far
    for _ in range(max(0, budget)):
        if stop is not None and stop.is_set():
            complete = False
            break
        lg = backend.logits(h)
        t = int(np.argmax(lg))
        text = id_to_text.get(t, "")
        if t == eos or "Ċ" in text:  # "Ċ" is the byte-level symbol of "\n"
            ends_word = True
            break
        if not out and _continues_word(tok, t):
            break  # the network writes a longer name than ``word``: no line goes on from ``word``
        # confidence of the greedy token: p = 1 / sum(exp(logits - max))
        p = 1.0 / np.exp(lg - lg[t]).sum()
        joint *= p
        if p < min_prob or joint < min_joint_prob:
            ends_word = not _continues_word(tok, t)
            break
        out.append(t)
        h = kv.extend([t])
    else:  # the budget ran out: does the next token go on with the last identifier?
        if out:
            ends_word = not _continues_word(tok, int(np.argmax(backend.logits(h))))
    kv.stats["forward_tokens"] += len(ids) + len(out)
    kv.rollback(n_ctx)  # the continuation leaves the cache; the context stays
    line = word + tok.decode(out) if out else word
    return whole_words(line, word, ends_word), complete


def _continues_word(tok, t: int) -> bool:
    """Whether token ``t`` goes on with the identifier before it: the pre-tokenizer never merges
    across identifier boundaries, so a token whose text starts with a letter (of any script), a
    digit or ``_`` continues one; so, to be safe, does one starting inside a UTF-8 sequence
    (decoded alone it starts with U+FFFD: the rest of ``größe`` after ``gr``)."""
    c = tok.decode([t])[:1]
    return bool(c) and (c.isalnum() or c in "_\ufffd")


def whole_words(line: str, word: str, ends_word: bool) -> str:
    """``line`` (``word`` and a generated rest) without a cut-off end: no replacement character
    (tokens that stopped inside a UTF-8 sequence decode to U+FFFD; a name just before one is cut
    too) and, unless ``ends_word``, no
    last identifier that the next token would have gone on with (``self.scale_`` from
    ``scale_factor``: accepting it would leave half a name). Trailing blanks are dropped; the
    result is ``word`` when nothing whole is left after it."""
    bad = line.find("\ufffd", len(word))
    if bad >= 0:  # half a character: a name just before it is cut as well
        line, ends_word = line[:bad], not _ident_char(line[bad - 1])
    if not ends_word and len(line) > len(word) and _ident_char(line[-1]):
        j = len(line)
        while j > 0 and _ident_char(line[j - 1]):
            j -= 1
        line = word if j < len(word) else line[:j]
    line = line.rstrip()
    return line if len(line) > len(word) else word


def _ident_char(c: str) -> bool:
    return c.isalnum() or c == "_"


def line_before_suffix(line: str | None, suffix: str | None) -> str | None:
    """``line`` (from the document's earlier lines) without the text after the cursor on its line
    (``suffix`` to its line end, which the editor keeps), where the line ends with exactly that
    text: ``print(self.rec|, 'x done')`` after an earlier ``print(self.records[0], 'x done')``
    gives ``records[0]``. None where it does not end so (the text after the cursor would come
    twice, or out of place), or where ``suffix`` has nothing on its line."""
    rest = (suffix or "").split("\n", 1)[0].rstrip()
    body = (line or "").rstrip()
    if not rest or len(body) <= len(rest) or not body.endswith(rest):
        return None
    return body[: len(body) - len(rest)]


def line_is_open(suffix: str | None) -> bool:
    """True when the rest of the cursor's line is empty or only closing brackets/quotes."""
    if not suffix:
        return True
    rest = suffix.split("\n", 1)[0]
    return all(c in ")]}'\" \t:;," for c in rest)
