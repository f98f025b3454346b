"""Cursor geometry: what text the engine sees and which range a suggestion replaces.

Every conversion between a client ``Position`` (UTF-16 code units by default, UTF-8/UTF-32 when
negotiated) and string offsets goes through the document's negotiated encoding (pygls's position
codec) and :mod:`laya_lsp.units` (the same rounding, computed in C); a Python string is never
indexed with ``position.character``. Ranges are computed
in the real document (CRLF kept); only the text handed to the engine is normalized to LF and
bounded in size.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from lsprotocol import types
from pygls.workspace import TextDocument
from pygls.workspace.position_codec import ServerTextPosition

from engine.text import well_formed, word_prefix

from . import units
from .text_document import LF, break_length

MAX_PREFIX_CHARS = 64 * 1024
"""Most characters before the cursor handed to the engine (its context window is far smaller)."""
MAX_SUFFIX_CHARS = 4 * 1024
"""Most characters after the cursor handed to the engine."""

# LSP line ends (the server's documents split lines this way, or at "\n" only in a session whose
# client counts lines so: laya_lsp.text_document.LspTextDocument.line_breaks)
_LINE_END = re.compile(r"(?:\r\n|[\n\r])\Z")
_WORD_AHEAD = re.compile(r"\w*")
_BREAK = re.compile(r"\r\n|[\n\r]")


def line_breaks_of(doc: TextDocument) -> str:
    """The document's line-break convention (``laya_lsp.text_document.LINE_BREAKS``); a plain
    pygls document has LSP's."""
    return getattr(doc, "line_breaks", "lsp")


@dataclass(frozen=True, slots=True)
class CursorContext:
    """The text around one cursor position, ready for the engine and for building edits."""

    prefix: str
    """Up to :data:`MAX_PREFIX_CHARS` before the cursor, line endings normalized to ``\\n``."""
    suffix: str
    """Up to :data:`MAX_SUFFIX_CHARS` after the cursor, line endings normalized to ``\\n``."""
    word: str
    """The identifier prefix being typed (:func:`engine.text.word_prefix` of ``prefix``)."""
    insert_range: types.Range
    """Client units: from the start of ``word`` to the cursor. A suggestion replaces this."""
    replace_range: types.Range
    """Client units: from the start of ``word`` to the end of the identifier the cursor is in
    (for ``InsertReplaceEdit.replace``); equal to ``insert_range`` when no word follows."""


def normalize_newlines(text: str) -> str:
    """The engine's view of document text: CRLF and lone CR to LF (the engine was trained on LF
    text), and each character the tokenizer cannot encode (a lone surrogate, which clients send
    for broken UTF-16) to U+FFFD, one for one."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return well_formed(text)


def clamp_position(doc: TextDocument, position: types.Position,
                   lines: Sequence[str] | None = None) -> ServerTextPosition | None:
    """The code-point position for a client position, clamped to the end of its line.

    Args:
        doc: the open document.
        position: line and character in the client's position encoding.
        lines: ``doc.lines``, when the caller has them already (pygls splits the whole text on
            every access).

    Returns:
        The position in code points (``ServerTextPosition``), with a character past the end of the
        line moved to the line end. The line just after a final line break (or line 0 of an empty
        document) is valid, at character 0. ``None`` for a line past the end of the document and
        for a position inside one character (a client's bug: the answer is empty, as LSP requires
        an edit's range to contain the position, and no range of whole characters does).
    """
    if lines is None:
        lines = doc.lines
    if position.line < 0 or position.character < 0:
        return None
    if line_breaks_of(doc) == LF:  # the break is "\n"; every "\r" is a character of its line
        if position.line >= len(lines):
            at_last_line_start = position.line == len(lines) and (not lines or lines[-1].endswith("\n"))
            return ServerTextPosition(position.line, 0) if at_last_line_start else None
        line = lines[position.line]
        content = line[:len(line) - break_length(line, LF)]
    elif position.line >= len(lines):
        at_last_line_start = position.line == len(lines) and (
            not lines or _LINE_END.search(lines[-1]) is not None)
        return ServerTextPosition(position.line, 0) if at_last_line_start else None
    else:
        content = _LINE_END.sub("", lines[position.line])
    if content.isascii():  # one code unit per character in every encoding: no conversion needed
        return ServerTextPosition(position.line, min(position.character, len(content)))
    encoding = doc.position_codec.encoding
    at = min(position.character, units.num_units(content, encoding))
    code_points = units.to_code_points(content, at, encoding)
    if units.to_units(content, code_points, encoding) != at:
        return None  # inside one character (between a UTF-16 surrogate pair, inside a UTF-8 sequence)
    return ServerTextPosition(position.line, code_points)


def text_around(lines: Sequence[str], line: int, character: int, before: int,
                after: int) -> tuple[str, str]:
    """The last ``before`` characters before a position and the first ``after`` after it, read
    from the lines around it: the cost depends on ``before + after``, not on the document's size.

    Args:
        lines: the document's lines, each with its line break.
        line, character: the position in code points (``line == len(lines)``: the end).
        before, after: most characters to return on each side.

    Returns:
        ``(text before, text after)``, as ``"".join(lines)`` sliced at the position would give.
    """
    here = lines[line] if line < len(lines) else ""
    head, tail = [here[:character]], [here[character:]]
    n, i = len(head[0]), line - 1
    while n < before and i >= 0:
        head.append(lines[i])
        n, i = n + len(lines[i]), i - 1
    n, i = len(tail[0]), line + 1
    while n < after and i < len(lines):
        tail.append(lines[i])
        n, i = n + len(lines[i]), i + 1
    text_before = "".join(reversed(head))
    return (text_before[-before:] if before > 0 else ""), "".join(tail)[:max(0, after)]


def document_head(doc: TextDocument, chars: int, *, typing_at: ServerTextPosition | None = None) -> str:
    """The first ``chars`` characters of ``doc`` (read from its lines: a large document's whole
    text is never joined for it).

    Args:
        doc: the open document.
        chars: most characters to return.
        typing_at: where the user is typing (code points), or None. The identifier touching it is
            replaced by spaces, one for one: it is likely half typed (``prin`` on the way to
            ``print``), and a word counted from it would be offered back later as if the document
            used it (editors' word completion leaves the word at the cursor out the same way).
    """
    out, n = [], 0
    for i, ln in enumerate(doc.lines):
        if n >= chars:
            break
        if typing_at is not None and i == typing_at.line:
            ln = blank_word_at(ln, typing_at.character)
        out.append(ln)
        n += len(ln)
    head = "".join(out)
    if len(head) > chars:
        # an identifier cut by the limit would be counted as a word the document does not have
        cut = chars
        if head[cut].isalnum() or head[cut] == "_":
            while cut > 0 and (head[cut - 1].isalnum() or head[cut - 1] == "_"):
                cut -= 1
        head = head[:cut]
    return head


def blank_word_at(line: str, character: int) -> str:
    """``line`` with the identifier that touches ``character`` (a code-point offset; the word may
    end or start there) replaced by as many spaces; unchanged when none does."""
    start = character
    while start > 0 and (line[start - 1].isalnum() or line[start - 1] == "_"):
        start -= 1
    end = character
    while end < len(line) and (line[end].isalnum() or line[end] == "_"):
        end += 1
    return line if start == end else line[:start] + " " * (end - start) + line[end:]


def position_after_change(change: types.TextDocumentContentChangeEvent,
                          doc: TextDocument) -> types.Position | None:
    """The cursor after a ranged content change: the end of the inserted text, in the client's
    units (``doc``'s position codec) and lines (``doc``'s line breaks). None for a whole-text
    change, which says nothing about the cursor. The text goes in at the range's earlier end (a
    range whose end comes first has its ends swapped, ``laya_lsp.text_document``)."""
    rng = getattr(change, "range", None)
    if rng is None:
        return None
    start = min(rng.start, rng.end, key=lambda p: (p.line, p.character))
    *before, last = (change.text.split("\n") if line_breaks_of(doc) == LF else _BREAK.split(change.text))
    width = units.num_units(last, doc.position_codec.encoding)
    if before:
        return types.Position(line=start.line + len(before), character=width)
    return types.Position(line=start.line, character=start.character + width)


def cursor_context(doc: TextDocument, position: types.Position, *,
                   max_prefix: int = MAX_PREFIX_CHARS,
                   max_suffix: int = MAX_SUFFIX_CHARS) -> CursorContext | None:
    """Cut the engine's prefix/suffix at ``position`` and compute the ranges to replace.

    Args:
        doc: the open document (pygls keeps it in sync with the client's edits).
        position: the cursor, in client units; clamped to its line end when past it.
        max_prefix: most characters of prefix to keep (the last ones before the cursor).
        max_suffix: most characters of suffix to keep.

    Returns:
        The :class:`CursorContext`, or ``None`` when ``position`` is past the end of the document,
        the identifier being typed fills all ``max_prefix`` characters (its start is not in
        the prefix, so no edit could replace it whole), or the identifier's rest after the cursor
        is longer than that (a data blob: not searched to its end at every keystroke).
    """
    lines = doc.lines  # once: pygls's own documents split the whole text on every access
    cursor = clamp_position(doc, position, lines)
    if cursor is None:
        return None
    before, after = text_around(lines, cursor.line, cursor.character, max_prefix, max_suffix)
    prefix, suffix = normalize_newlines(before), normalize_newlines(after)
    word = word_prefix(prefix)
    if len(word) >= max_prefix:  # it may begin before the cut (a 70,000-character blob)
        return None
    # An identifier never spans a line break, so the word lies on the cursor's line.
    start = ServerTextPosition(cursor.line, cursor.character - len(word))
    # the identifier's end on the line itself: the suffix is cut at max_suffix characters
    here = lines[cursor.line] if cursor.line < len(lines) else ""
    at = min(cursor.character, len(here))
    ahead = _WORD_AHEAD.match(here, at, at + max_prefix + 1).group()
    if len(ahead) > max_prefix:
        return None
    end_of_word = ServerTextPosition(cursor.line, cursor.character + len(ahead))
    if here.isascii():  # client units == code points
        def rng(a: ServerTextPosition, b: ServerTextPosition) -> types.Range:
            return types.Range(start=types.Position(line=a.line, character=a.character),
                               end=types.Position(line=b.line, character=b.character))
        insert_range, replace_range = rng(start, cursor), rng(start, end_of_word)
    else:
        encoding = doc.position_codec.encoding

        def client(p: ServerTextPosition) -> types.Position:
            return types.Position(line=p.line, character=units.to_units(here, p.character, encoding))

        insert_range = types.Range(start=client(start), end=client(cursor))
        replace_range = types.Range(start=client(start), end=client(end_of_word))
    return CursorContext(prefix=prefix, suffix=suffix, word=word,
                         insert_range=insert_range, replace_range=replace_range)
