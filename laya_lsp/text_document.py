"""The server's documents: the client's line breaks, and a line index kept across edits.

pygls's :class:`~pygls.workspace.TextDocument` keeps only the text: each access to ``lines``
splits all of it again, and an incremental edit rebuilds the whole string through the lines, so a
keystroke in a 5 MB file cost ~40-50 ms. :class:`LspTextDocument` keeps the lines themselves: an
edit re-splits only the lines it touches, ``lines`` costs nothing, and ``source`` is joined only
when asked for (then cached until the next edit). The cursor's surroundings are read from the
lines (:func:`laya_lsp.documents.cursor_context`), so a keystroke costs the same in any file size.
Edits give the same lines as pygls's rebuild followed by a full split (``tests/test_text_document.py``
checks that on random edits, and ``tests/test_edit_property.py`` through the server).

Where a line ends is the client's choice (:data:`LINE_BREAKS`, one per session, chosen in
``initialize``: :func:`line_breaks_for`): LSP counts ``\\n``, ``\\r\\n`` and a lone ``\\r`` (VS
Code does), but Emacs (eglot, lsp-mode) and Neovim count lines at ``\\n`` only, a lone ``\\r``
being a character of its line (``^M``); split LSP's way, every position below such a character
named another line for them. A document splits its lines the way of its session. In ``lf`` a
``\\r`` before a ``\\n`` is a character of its line too, as those clients show it (``abc^M``, four
columns in a buffer that holds it): a position past it is on the line, not in the break.
"""

from __future__ import annotations

import re

from lsprotocol import types
from pygls.workspace import TextDocument

from . import units

LSP, LF = "lsp", "lf"
LINE_BREAKS = (LSP, LF)
"""The line-break conventions: ``lsp`` (``\\n``, ``\\r\\n`` and ``\\r``, as LSP 3.17 says) and
``lf`` (``\\n`` only; every ``\\r`` is a character of its line, one right before the ``\\n`` too)."""

LF_CLIENTS = frozenset({"Neovim", "emacs", "Eglot"})
"""``clientInfo.name`` of the clients known to count lines at ``\\n`` only: Neovim (0.11's
``vim.lsp`` splits buffers at ``\\n``), Emacs lsp-mode (``emacs``: ``lsp--cur-line`` is
``line-number-at-pos``) and eglot from 1.10 (``Eglot``; 1.9 sends no ``clientInfo``, and the
README's snippet sets the ``lineBreaks`` option instead)."""

_LSP_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")
"""One line and its end: LSP knows only ``\\n``, ``\\r\\n`` and ``\\r`` as line breaks."""


def lsp_lines(text: str) -> list[str]:
    """``text`` split after each LSP line break (``str.splitlines(True)`` also splits on
    ``\\f``, ``\\v``, ``\\x1c``-``\\x1e``, ``\\x85``, U+2028 and U+2029)."""
    return _LSP_LINE.findall(text)


def lf_lines(text: str) -> list[str]:
    """``text`` split after each ``\\n`` (the ``lf`` convention: every ``\\r`` stays in its line)."""
    parts = text.split("\n")
    lines = [p + "\n" for p in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines


def split_lines(text: str, line_breaks: str = LSP) -> list[str]:
    """``text`` split after each line break of the convention ``line_breaks`` (:data:`LINE_BREAKS`)."""
    return lf_lines(text) if line_breaks == LF else lsp_lines(text)


def break_length(line: str, line_breaks: str = LSP) -> int:
    """Length of the line break that ends ``line`` (one of a document's lines): in ``lsp`` 2 for
    ``\\r\\n`` and 1 for ``\\n`` or ``\\r``; in ``lf`` 1 for ``\\n`` (a ``\\r`` before it is a character
    of the line: Emacs and Neovim, holding it in a buffer, put a position after it); 0 for a last
    line without one."""
    if line_breaks == LF:
        return 1 if line.endswith("\n") else 0
    if line.endswith("\n"):
        return 2 if line.endswith("\r\n") else 1
    return 1 if line.endswith("\r") else 0


def line_breaks_for(client_name: str | None, option: str = "auto") -> str:
    """The session's convention: the ``lineBreaks`` option when it names one, else (``auto``)
    ``lf`` for the clients of :data:`LF_CLIENTS` and ``lsp`` for any other (the specification's,
    which VS Code follows)."""
    if option in LINE_BREAKS:
        return option
    return LF if client_name in LF_CLIENTS else LSP


class LspTextDocument(TextDocument):
    """pygls's document, split at its session's line breaks only (``line_breaks``: LSP's by
    default), with its lines kept across edits.

    ``lines`` is the live list (valid until the next edit; never change it). An incremental edit
    maps its range through the position codec exactly as pygls does and replaces the lines it
    spans; a neighbouring line joins the re-split when a ``\\r`` and a ``\\n`` could pair up (or
    come apart) across the edit's ends.
    """

    def __init__(self, *args, line_breaks: str = LSP, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        if line_breaks not in LINE_BREAKS:
            raise ValueError(f"line_breaks: {line_breaks!r} is not one of {', '.join(LINE_BREAKS)}")
        self.line_breaks = line_breaks
        """Where lines end (:data:`LINE_BREAKS`), as the client counts them."""
        self._lines: list[str] | None = None
        self._chars: int | None = None

    @property
    def chars(self) -> int:
        """Length of the text in code points (kept across edits)."""
        if self._chars is None:
            self._chars = len(self.source)
        return self._chars

    @property
    def lines(self) -> list[str]:
        if self._lines is None:
            self._lines = split_lines(TextDocument.source.fget(self), self.line_breaks)
        return self._lines

    @property
    def source(self) -> str:
        if self._source is None and self._lines is not None:
            self._source = "".join(self._lines)
        return super().source

    def _apply_full_change(self, change: types.TextDocumentContentChangeEvent) -> None:
        self._source, self._lines, self._chars = change.text, None, None

    def _apply_incremental_change(self, change: types.TextDocumentContentChangePartial) -> None:
        lines = self.lines
        sl, sc = self._from_client_units(lines, change.range.start)
        el, ec = self._from_client_units(lines, change.range.end)
        if (el, ec) < (sl, sc):
            # a range whose end comes first: its ends swapped, as VS Code's documents and
            # vscode-languageserver-textdocument do (pygls doubled text on one line, and left
            # the text as it was across lines, so the two copies parted)
            sl, sc, el, ec = el, ec, sl, sc
        if sl == len(lines):  # no lines (the codec clamps any other line): pygls appends
            self._splice(sl, sl, change.text)
        else:
            self._splice(sl, el + 1, lines[sl][:sc] + change.text + lines[el][ec:])

    def _from_client_units(self, lines: list[str], position: types.Position) -> tuple[int, int]:
        """An edit's position as ``(line, code point)``, in O(1) on an ASCII line and in C on
        others (``laya_lsp.units``; pygls walks the line character by character in Python: ~0.3 s
        a keystroke on a 1 MB minified line, 0.4-1.2 s on a non-ASCII one).

        A character past the line's length is its length, as LSP 3.17 says ("defaults back to
        the line length"; the line break is not part of it). pygls's codec counts the break in
        and then takes one off: one past the end of a line landed after its break (the text went
        onto the next line, or between a ``\r`` and its ``\n``) and further past the end of the
        last line landed before its last character. A line past the last is the end of the text.
        """
        line, character = position.line, position.character
        if line >= len(lines):  # no such line: the end of the text (pygls's clamp)
            pos = self._position_codec.position_from_client_units(lines, position)
            return pos.line, pos.character
        text = lines[line]
        n = len(text) - break_length(text, self.line_breaks)
        if text.isascii():  # one code unit a character, any encoding
            return line, min(character, n)
        content = text[:n]
        encoding = self._position_codec.encoding
        return line, units.to_code_points(content, min(character, units.num_units(content, encoding)), encoding)

    def _splice(self, a: int, b: int, chunk: str) -> None:
        """Replace ``lines[a:b]`` by the lines of ``chunk``."""
        lines = self._lines
        if a > 0 and not lines[a - 1].endswith("\n"):  # a "\r" that a "\n" of the chunk may join
            a -= 1
            chunk = lines[a] + chunk
        while b < len(lines) and not chunk.endswith("\n"):  # the next line may join or pair up
            chunk += lines[b]
            b += 1
        if self._chars is not None:
            self._chars += len(chunk) - sum(map(len, lines[a:b]))
        if ("\r" not in chunk or self.line_breaks == LF) and chunk.find("\n") in (-1, len(chunk) - 1):
            lines[a:b] = [chunk] if chunk else []  # one line: no regex over a long line
        else:
            lines[a:b] = split_lines(chunk, self.line_breaks)
        self._source = None
