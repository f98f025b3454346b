"""``LspTextDocument`` keeps its lines across edits: after any edit, its lines and text equal what
pygls's rebuild of the whole text followed by a full split gives (the document before the line
index), for random edits at random, also invalid, positions in every position encoding and with
both line-break conventions (``lsp``: ``\\n``, ``\\r\\n`` and ``\\r``; ``lf``: ``\\n`` only), positions
past a line's end clamped to its length first, as LSP says and pygls does not; and the text
around a cursor read from the lines equals slicing the whole text."""

from __future__ import annotations

import random

import pytest
from lsprotocol import types
from pygls.workspace import TextDocument
from pygls.workspace.position_codec import PositionCodec

from laya_lsp.documents import document_head, text_around
from laya_lsp.text_document import LF_CLIENTS, LspTextDocument, line_breaks_for, lsp_lines, split_lines

PIECES = ["a", "b", "_x", " ", "\n", "\r", "\r\n", "\f", "\u2028", "😀", "é", "漢", "\x00"]


class Reference(TextDocument):
    """The document before the line index: pygls's edits, lines split from the whole text."""

    def __init__(self, *args, line_breaks: str = "lsp", **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.line_breaks = line_breaks

    @property
    def lines(self):
        return split_lines(self.source, self.line_breaks)


def _content(line: str, line_breaks: str) -> str:
    """A line without its break: in ``lf`` only its ``\\n`` goes (a ``\\r`` before it is text, as
    Emacs and Neovim show it: ``^M``); in ``lsp`` ``\\r\\n``, ``\\n`` or ``\\r``."""
    if line_breaks == "lf":
        return line.removesuffix("\n")
    return line.rstrip("\r\n")


def _text(rng: random.Random, n: int) -> str:
    return "".join(rng.choice(PIECES) for _ in range(rng.randint(0, n)))


def _position(rng: random.Random, lines: list[str]) -> types.Position:
    line = rng.randint(0, len(lines) + 1)
    width = len(lines[line]) if line < len(lines) else 0
    return types.Position(line=line, character=rng.randint(0, width + 3))


def _units(s: str, encoding: str) -> int:
    return len(s.encode({"utf-8": "utf-8", "utf-16": "utf-16-le", "utf-32": "utf-32-le"}[encoding],
                        "surrogatepass")) // {"utf-8": 1, "utf-16": 2, "utf-32": 4}[encoding]


def _clamped(lines: list[str], p: types.Position, encoding: str, line_breaks: str) -> types.Position:
    """LSP 3.17: "If the character value is greater than the line length it defaults back to the
    line length" (the line break is not part of the line)."""
    if p.line >= len(lines):
        return types.Position(line=p.line, character=p.character)
    width = _units(_content(lines[p.line], line_breaks), encoding)
    return types.Position(line=p.line, character=min(p.character, width))


@pytest.mark.parametrize("line_breaks", ["lsp", "lf"])
@pytest.mark.parametrize("encoding", ["utf-8", "utf-16", "utf-32"])
def test_edits_keep_the_lines_pygls_would_split(encoding, line_breaks):
    rng = random.Random(encoding + line_breaks)
    edits = 0
    for _ in range(300):
        text = _text(rng, 40)
        ours = LspTextDocument("file:///a.py", text, position_codec=PositionCodec(encoding),
                               line_breaks=line_breaks)
        ref = Reference("file:///a.py", text, position_codec=PositionCodec(encoding), line_breaks=line_breaks)
        for _ in range(12):
            a, b = _position(rng, ref.lines), _position(rng, ref.lines)
            if rng.random() < 0.8 and (b.line, b.character) < (a.line, a.character):
                a, b = b, a  # mostly well-ordered ranges; some reversed ones too
            change = types.TextDocumentContentChangePartial(
                range=types.Range(start=a, end=b), text=_text(rng, 6))
            # a reversed range: its ends swapped (vscode-languageserver-textdocument); clamping
            # keeps the order, so the reference takes the swapped range
            ra, rb = sorted((a, b), key=lambda p: (p.line, p.character))
            ra, rb = _clamped(ref.lines, ra, encoding, line_breaks), _clamped(ref.lines, rb, encoding, line_breaks)
            ref.apply_change(types.TextDocumentContentChangePartial(range=types.Range(start=ra, end=rb),
                                                                    text=change.text))
            ours.apply_change(change)
            assert ours.lines == split_lines(ref.source, line_breaks), (text, change)
            assert ours.source == ref.source and ours.chars == len(ref.source)
            edits += 1
        ours.apply_change(types.TextDocumentContentChangeWholeDocument(text="x\r\ny\rz"))
        assert ours.lines == (["x\r\n", "y\rz"] if line_breaks == "lf" else ["x\r\n", "y\r", "z"])
        assert ours.source == "x\r\ny\rz"
    assert edits == 3600


@pytest.mark.parametrize("encoding", ["utf-8", "utf-16", "utf-32"])
@pytest.mark.parametrize("text", ["import os\nos.pa", "import os\r\nos.pa", "import os\ros.pa",
                                  "import é😀\nos.pa", "import é😀\r\nos.pa"])
def test_a_position_past_the_end_of_a_line_is_its_end(text, encoding):
    """One past the end went after the line break (onto the next line, or between "\r" and
    "\n"); past the end of the last line, before its last character (pygls's clamp)."""
    head, brk, tail = text.partition("\n") if "\r" not in text else text.partition("\r\n" if "\r\n" in text else "\r")
    width = _units(head, encoding)
    for past in range(0, 4):
        doc = LspTextDocument("file:///a.py", text, position_codec=PositionCodec(encoding))
        at = types.Position(line=0, character=width + past)
        doc.apply_change(types.TextDocumentContentChangePartial(range=types.Range(start=at, end=at), text="  # x"))
        assert doc.source == head + "  # x" + brk + tail, past
        assert len(doc.lines) == 2
        doc = LspTextDocument("file:///a.py", text, position_codec=PositionCodec(encoding))
        at = types.Position(line=1, character=len(tail) + past)
        doc.apply_change(types.TextDocumentContentChangePartial(range=types.Range(start=at, end=at), text="th"))
        assert doc.source == text + "th", past
        doc = LspTextDocument("file:///a.py", text, position_codec=PositionCodec(encoding))
        a, b = types.Position(line=0, character=0), types.Position(line=0, character=width + past)
        doc.apply_change(types.TextDocumentContentChangePartial(range=types.Range(start=a, end=b), text=""))
        assert doc.source == brk + tail, past  # the line's text goes, its break stays


def test_lines_are_kept_not_resplit():
    doc = LspTextDocument("file:///a.py", "a = 1\nb = 2\n" * 1000)
    lines = doc.lines
    doc.apply_change(types.TextDocumentContentChangePartial(
        range=types.Range(start=types.Position(line=5, character=0), end=types.Position(line=5, character=1)),
        text="zz"))
    assert doc.lines is lines and lines[5] == "zz = 2\n" and lines[4] == "a = 1\n"
    assert doc.source.startswith("a = 1\nb = 2\n" * 2 + "a = 1\nzz = 2\n")


def test_text_around_equals_slicing_the_text():
    rng = random.Random(7)
    for _ in range(3000):
        text = _text(rng, 30)
        lines = lsp_lines(text)
        line = rng.randint(0, len(lines))
        ch = rng.randint(0, len(lines[line])) if line < len(lines) else 0
        off = sum(map(len, lines[:line])) + ch
        before, after = rng.randint(0, 12), rng.randint(0, 12)
        assert text_around(lines, line, ch, before, after) == (text[max(0, off - before):off],
                                                               text[off:off + after])
    doc = LspTextDocument("file:///a.py", "ab\ncd\r\nef")
    # an identifier cut by the limit is left out (counted, it would be a word the file lacks)
    assert [document_head(doc, n) for n in (0, 2, 4, 5, 99)] == ["", "ab", "ab\n", "ab\ncd", "ab\ncd\r\nef"]
    assert document_head(LspTextDocument("file:///a.py", "x = qvzk_frob"), 8) == "x = "
    assert document_head(LspTextDocument("file:///a.py", "qvzk_frob" * 3), 8) == ""


def test_lf_splits_at_line_feeds_only():
    assert split_lines("a\rb\r\nc\r\rd\ne\r", "lf") == ["a\rb\r\n", "c\r\rd\n", "e\r"]
    assert split_lines("a\rb\r\nc\r\rd\ne\r", "lsp") == ["a\r", "b\r\n", "c\r", "\r", "d\n", "e\r"]
    assert split_lines("", "lf") == [] and split_lines("\n\n", "lf") == ["\n", "\n"]
    assert split_lines("a\fb\u2028c\x85", "lf") == ["a\fb\u2028c\x85"]


@pytest.mark.parametrize("client, option, expected", [
    ("Neovim", "auto", "lf"), ("emacs", "auto", "lf"), ("Eglot", "auto", "lf"),
    ("Visual Studio Code", "auto", "lsp"), ("helix", "auto", "lsp"), (None, "auto", "lsp"),
    ("neovim", "auto", "lsp"),  # the names are the clients' own, compared exactly
    ("Neovim", "lsp", "lsp"), ("emacs", "lsp", "lsp"), (None, "lf", "lf"), ("Visual Studio Code", "lf", "lf"),
])
def test_auto_chooses_by_client_name_and_the_option_overrides(client, option, expected):
    assert line_breaks_for(client, option) == expected
    assert {"Neovim", "emacs", "Eglot"} == LF_CLIENTS


@pytest.mark.parametrize("encoding", ["utf-8", "utf-16", "utf-32"])
def test_lf_a_carriage_return_is_a_character_of_its_line(encoding):
    """Emacs and Neovim: ``sep = "\\r"`` is one line (``sep = "^M"``), so ``value = json.lo`` is
    line 2, and a ``\\r`` before a ``\\n`` (``\\r\\r\\n`` in a file read as Unix) is on its line:
    a position after it is before the ``\\n``."""
    from laya_lsp.documents import cursor_context, position_after_change

    def doc(text):
        return LspTextDocument("file:///a.py", text, position_codec=PositionCodec(encoding), line_breaks="lf")

    def edit(d, line, a, b, text):
        change = types.TextDocumentContentChangePartial(range=types.Range(
            start=types.Position(line=line, character=a), end=types.Position(line=line, character=b)), text=text)
        d.apply_change(change)
        return change

    text = 'import json\nsep = "\r😀"\nvalue = json.lo\nprint(value)\n'
    d = doc(text)
    assert len(d.lines) == 4
    change = edit(d, 2, 15, 15, "ads")
    assert d.source == text.replace("json.lo\n", "json.loads\n")
    assert position_after_change(change, d) == types.Position(line=2, character=18)
    ctx = cursor_context(d, types.Position(line=2, character=18))
    assert ctx.word == "loads" and ctx.insert_range == types.Range(
        start=types.Position(line=2, character=13), end=types.Position(line=2, character=18))
    assert ctx.prefix.endswith("value = json.loads")
    sep = _units('sep = "\r😀"', encoding)
    edit(d, 1, sep, sep + 5, "  # x")  # past the line's end: its end, before the "\n"
    assert d.lines[1] == 'sep = "\r😀"  # x\n'
    assert position_after_change(types.TextDocumentContentChangePartial(range=types.Range(
        start=types.Position(line=0, character=0), end=types.Position(line=0, character=0)),
        text="a\rb\r\nc"), d) == types.Position(line=1, character=1)

    for at in (13, 14, 99):  # "import json^M^M": 13 characters; past them, the line's end
        mixed = doc("import json\r\r\nimport os\n")
        edit(mixed, 0, at, at, " # x")
        assert mixed.source == "import json\r\r # x\nimport os\n", at
    crlf = doc("a\r\nb\r\n")  # a CRLF file read as Unix: "a^M"
    edit(crlf, 0, 1, 2, "")  # the "^M" deleted
    assert crlf.source == "a\nb\r\n" and crlf.lines == ["a\n", "b\r\n"]
    edit(crlf, 1, 1, 1, "\r")  # a "^M" typed at a line's end: the lines stay two
    assert crlf.lines == ["a\n", "b\r\r\n"]
