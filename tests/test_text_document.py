"""``LspTextDocument`` keeps its lines across edits: after any edit, its lines and text equal what
pygls's rebuild of the whole text followed by a full LSP split gives (the document before the line
index), for random edits at random, also invalid, positions in every position encoding; and the
text around a cursor read from the lines equals slicing the whole text."""

from __future__ import annotations

import random

import pytest
from lsprotocol import types
from pygls.workspace import TextDocument
from pygls.workspace.position_codec import PositionCodec

from laya_lsp.documents import document_head, text_around
from laya_lsp.text_document import LspTextDocument, lsp_lines

PIECES = ["a", "b", "_x", " ", "\n", "\r", "\r\n", "\f", "\u2028", "😀", "é", "漢", "\x00"]


class Reference(TextDocument):
    """The document before the line index: pygls's edits, lines split from the whole text."""

    @property
    def lines(self):
        return lsp_lines(self.source)


def _text(rng: random.Random, n: int) -> str:
    return "".join(rng.choice(PIECES) for _ in range(rng.randint(0, n)))


def _position(rng: random.Random, lines: list[str]) -> types.Position:
    line = rng.randint(0, len(lines) + 1)
    width = len(lines[line]) if line < len(lines) else 0
    return types.Position(line=line, character=rng.randint(0, width + 3))


@pytest.mark.parametrize("encoding", ["utf-8", "utf-16", "utf-32"])
def test_edits_keep_the_lines_pygls_would_split(encoding):
    rng = random.Random(encoding)
    edits = 0
    for _ in range(300):
        text = _text(rng, 40)
        ours = LspTextDocument("file:///a.py", text, position_codec=PositionCodec(encoding))
        ref = Reference("file:///a.py", text, position_codec=PositionCodec(encoding))
        for _ in range(12):
            a, b = _position(rng, ref.lines), _position(rng, ref.lines)
            if rng.random() < 0.8 and (b.line, b.character) < (a.line, a.character):
                a, b = b, a  # mostly well-ordered ranges; some reversed ones too
            change = types.TextDocumentContentChangePartial(
                range=types.Range(start=a, end=b), text=_text(rng, 6))
            ref.apply_change(types.TextDocumentContentChangePartial(
                range=types.Range(start=types.Position(line=a.line, character=a.character),
                                  end=types.Position(line=b.line, character=b.character)), text=change.text))
            ours.apply_change(change)
            assert ours.lines == lsp_lines(ref.source), (text, change)
            assert ours.source == ref.source and ours.chars == len(ref.source)
            edits += 1
        ours.apply_change(types.TextDocumentContentChangeWholeDocument(text="x\r\ny"))
        assert ours.lines == ["x\r\n", "y"] and ours.source == "x\r\ny"
    assert edits == 3600


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
    assert [document_head(doc, n) for n in (0, 2, 4, 99)] == ["", "ab", "ab\nc", "ab\ncd\r\nef"]
