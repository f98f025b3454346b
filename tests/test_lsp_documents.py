"""Unit tests of ``laya_lsp.documents`` (cursor geometry) and ``completion.build_items``."""

from __future__ import annotations

import pytest
from lsprotocol import types
from pygls.workspace import TextDocument
from pygls.workspace.position_codec import PositionCodec

from engine.types import Candidate
from laya_lsp.completion import build_items
from laya_lsp.documents import clamp_position, cursor_context
from tests.unit_lengths import units

ENCODINGS = ["utf-8", "utf-16", "utf-32"]




def doc_of(text: str, encoding: str = "utf-16") -> TextDocument:
    return TextDocument("file:///t.py", text, position_codec=PositionCodec(encoding))


def pos(line: int, character: int) -> types.Position:
    return types.Position(line=line, character=character)


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_range_after_emoji_and_cjk(encoding):
    line = 's = "😀 漢字 🎉"; print(s.up'
    doc = doc_of("import os\n" + line + "\n", encoding)
    cursor = pos(1, units(line, encoding))
    ctx = cursor_context(doc, cursor)
    assert ctx.word == "up"
    assert ctx.prefix.endswith("print(s.up")
    assert ctx.insert_range == types.Range(start=pos(1, units(line[:-2], encoding)), end=cursor)
    assert ctx.replace_range == ctx.insert_range


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_range_mid_line_after_emoji(encoding):
    before, after = 'label = "😀 漢字 🎉"; print(lab', ')  # 😀 tail'
    doc = doc_of(before + after + "\n", encoding)
    cursor = pos(0, units(before, encoding))
    ctx = cursor_context(doc, cursor)
    assert ctx.word == "lab"
    assert ctx.prefix == before and ctx.suffix == after + "\n"
    assert ctx.insert_range == types.Range(start=pos(0, units(before[:-3], encoding)), end=cursor)


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_identifier_made_of_cjk(encoding):
    line = "值 = 漢字变量 + 漢字"
    doc = doc_of(line, encoding)
    ctx = cursor_context(doc, pos(0, units(line, encoding)))
    assert ctx.word == "漢字"
    assert ctx.insert_range.start == pos(0, units(line[:-2], encoding))


def test_crlf_prefix_is_normalized_but_range_is_in_the_real_document():
    doc = doc_of("import os\r\nvalue = 1\r\nprint(val\r\nrest\r\n")
    ctx = cursor_context(doc, pos(2, 9))
    assert ctx.prefix == "import os\nvalue = 1\nprint(val"
    assert ctx.suffix == "\nrest\n"
    assert ctx.insert_range == types.Range(start=pos(2, 6), end=pos(2, 9))


def test_lone_cr_is_a_line_end_too():
    ctx = cursor_context(doc_of("a = 1\rprint(a"), pos(1, 7))
    assert ctx.prefix == "a = 1\nprint(a"
    assert ctx.insert_range == types.Range(start=pos(1, 6), end=pos(1, 7))


@pytest.mark.parametrize("text", ["x = os.pa\nnext", "x = os.pa\r\nnext", "x = os.pa"])
def test_position_past_end_of_line_is_clamped(text):
    ctx = cursor_context(doc_of(text), pos(0, 500))
    assert ctx.word == "pa"
    assert ctx.insert_range == types.Range(start=pos(0, 7), end=pos(0, 9))


def test_end_of_last_line_without_newline():
    # pygls' own offset->position maps the end of such a file to the next line; we must not
    ctx = cursor_context(doc_of("import os\nos.pa"), pos(1, 5))
    assert ctx.insert_range == types.Range(start=pos(1, 3), end=pos(1, 5))


def test_line_after_final_newline_and_empty_document():
    ctx = cursor_context(doc_of("import os\n"), pos(1, 0))
    assert ctx.word == "" and ctx.prefix == "import os\n"
    assert ctx.insert_range == types.Range(start=pos(1, 0), end=pos(1, 0))
    empty = cursor_context(doc_of(""), pos(0, 0))
    assert empty.prefix == "" and empty.insert_range == types.Range(start=pos(0, 0), end=pos(0, 0))


@pytest.mark.parametrize("position", [pos(2, 0), pos(50, 3)])
def test_position_past_end_of_document_gives_none(position):
    assert cursor_context(doc_of("import os\nos.pa"), position) is None


def test_an_identifier_longer_than_the_prefix_gets_no_context():
    """Its start is cut off the prefix, so an item (the whole word, from the document's words)
    would replace only the cut part and repeat the rest before it."""
    line = "x = " + "a" * 200
    assert cursor_context(doc_of(line), pos(0, len(line)), max_prefix=100) is None
    ctx = cursor_context(doc_of(line + " + aaa"), pos(0, len(line) + 6), max_prefix=100)
    assert ctx.word == "aaa" and ctx.insert_range == types.Range(start=pos(0, 207), end=pos(0, 210))


def test_cursor_inside_identifier_replace_range_covers_its_rest():
    ctx = cursor_context(doc_of("print(textwrap)"), pos(0, 9))
    assert ctx.word == "tex"
    assert ctx.insert_range == types.Range(start=pos(0, 6), end=pos(0, 9))
    assert ctx.replace_range == types.Range(start=pos(0, 6), end=pos(0, 14))


def test_huge_line_is_bounded():
    text = "x = [" + "1, " * 100_000 + "\n" + "y" * 10 + "\nprint(yy"
    ctx = cursor_context(doc_of(text), pos(2, 8), max_prefix=1000, max_suffix=10)
    assert len(ctx.prefix) == 1000 and ctx.prefix.endswith("print(yy")
    assert ctx.word == "yy"


def test_leading_digits_are_not_part_of_the_word():
    ctx = cursor_context(doc_of("x = 3ab"), pos(0, 7))
    assert ctx.word == "ab"
    assert ctx.insert_range.start == pos(0, 5)


def _ctx():
    return cursor_context(doc_of("import os\nos.pa"), pos(1, 5))


def test_build_items_text_edits_sort_and_dedupe():
    cands = [Candidate("path", 2.0, "identifier"), Candidate("path", 1.9, "identifier"),
             Candidate("path.join(a, b)", 1.8, "line"), Candidate("pass", 1.0, "keyword")]
    items = build_items(_ctx(), cands, insert_replace=False, max_items=20)
    assert [i.label for i in items] == ["path", "path.join(a, b)", "pass"]
    assert [i.sort_text for i in items] == ["0000", "0001", "0002"]
    assert [i.kind for i in items] == [types.CompletionItemKind.Variable, types.CompletionItemKind.Text,
                                       types.CompletionItemKind.Keyword]
    for item in items:
        assert isinstance(item.text_edit, types.TextEdit)
        assert item.text_edit.range == types.Range(start=pos(1, 3), end=pos(1, 5))
        assert item.filter_text == item.text_edit.new_text == item.label
        assert item.insert_text_format == types.InsertTextFormat.PlainText


def test_plain_text_edit_covers_the_word_after_the_cursor_too():
    """A client without insertReplaceSupport (eglot, Neovim 0.11): ``os.pa|th`` + ``path`` must
    give ``os.path``, not ``os.pathth``."""
    doc = doc_of("import os\nos.path.join('a')\n")
    ctx = cursor_context(doc, pos(1, 5))
    (item,) = build_items(ctx, [Candidate("path", 1.0, "identifier")], insert_replace=False, max_items=5)
    assert item.text_edit.range == types.Range(start=pos(1, 3), end=pos(1, 7))
    line = "os.path.join('a')"
    r = item.text_edit.range
    assert line[: r.start.character] + item.text_edit.new_text + line[r.end.character:] == line


def test_position_inside_a_character_is_no_position():
    """UTF-16 column 6 of ``x = '😀'`` splits the emoji's surrogate pair: no code-point position
    (an edit there could not contain it); the columns around it are fine."""
    doc = doc_of("x = '\U0001F600'\n")
    assert clamp_position(doc, pos(0, 6)) is None
    assert cursor_context(doc, pos(0, 6)) is None
    at5, at7 = clamp_position(doc, pos(0, 5)), clamp_position(doc, pos(0, 7))
    assert (at5.line, at5.character) == (0, 5) and (at7.line, at7.character) == (0, 6)


def test_plain_text_edit_at_a_word_start_gets_no_item():
    """Nothing typed yet (``|os``) and a word after the cursor: a client without
    ``insertReplaceSupport`` gets no item (an insertion glues onto the word, ``importos``, and
    eglot made ``|pa`` + ``path`` ``pathpa``; a replacement deletes the untouched word: a fresh
    helper's ``import os\n|os.pa`` + ``import`` gave ``import.pa``); with it, insert and replace
    ranges say both; where no word follows, an insertion."""
    for text, at in (("import os\nos.pa", pos(1, 0)), ("x = os.\u00e9t\u00e9", pos(0, 7))):
        ctx = cursor_context(doc_of(text), at)
        assert build_items(ctx, [Candidate("import", 1.0, "keyword")], insert_replace=False, max_items=5) == []
        (item,) = build_items(ctx, [Candidate("import", 1.0, "keyword")], insert_replace=True, max_items=5)
        assert item.text_edit.insert.start == item.text_edit.insert.end == at != item.text_edit.replace.end
    ctx = cursor_context(doc_of("import os\nx = "), pos(1, 4))
    (item,) = build_items(ctx, [Candidate("os", 1.0, "identifier")], insert_replace=False, max_items=5)
    assert item.text_edit.range.start == item.text_edit.range.end == pos(1, 4)


def test_build_items_insert_replace_and_max_items():
    cands = [Candidate(f"pa{i}", -i, "identifier") for i in range(10)]
    items = build_items(_ctx(), cands, insert_replace=True, max_items=3)
    assert len(items) == 3
    edit = items[0].text_edit
    assert isinstance(edit, types.InsertReplaceEdit)
    assert edit.insert == edit.replace == types.Range(start=pos(1, 3), end=pos(1, 5))


@pytest.mark.parametrize("encoding", ENCODINGS)
@pytest.mark.parametrize("rest", [5000, 4096 - 2, 4096 - 1])
def test_replace_range_ends_where_a_long_identifier_does(encoding, rest):
    # the engine's suffix is cut at MAX_SUFFIX_CHARS; the identifier after the cursor is not
    line = "x = 漢.pa" + "t" * rest
    doc = doc_of("import os\n" + line + " + 1\n", encoding)
    cursor = pos(1, units("x = 漢.pa", encoding))
    ctx = cursor_context(doc, cursor)
    assert len(ctx.suffix) == 4096
    assert ctx.replace_range == types.Range(start=pos(1, units("x = 漢.", encoding)),
                                            end=pos(1, units(line, encoding)))


def test_an_identifier_longer_than_the_prefix_limit_after_the_cursor_gets_no_context():
    # not searched to its end at every keystroke; its start would be as unreachable as a prefix's
    assert cursor_context(doc_of("os.pa" + "t" * 70_000), pos(0, 5)) is None
    assert cursor_context(doc_of("os.pa" + "t" * 60_000), pos(0, 5)).replace_range.end == pos(0, 60_005)


@pytest.mark.parametrize("encoding", ENCODINGS)
@pytest.mark.parametrize("insert_replace", [False, True])
def test_items_in_json_shape_are_what_cattrs_writes_for_build_items(encoding, insert_replace):
    """``items_json`` (what the server sends) equals lsprotocol's converter's output for
    ``build_items`` at every cursor of a text with CJK, emoji and CRLF, for every kind of item,
    duplicates, and the ``max_items`` cut."""
    from pygls.protocol import default_converter

    from laya_lsp.completion import items_json

    convert = default_converter()
    text = 'import os\r\ns = "😀 漢字"; os.pa\r\nx = os.path.jo(a)\r\n\r\nzz'
    doc = doc_of(text, encoding)
    cands = [Candidate("path", 2.0, "identifier"), Candidate("path", 1.9, "identifier"),
             Candidate("path.join(a, b)", 1.8, "line"), Candidate("pass", 1.0, "keyword"),
             Candidate("paths", 0.9, "word"), Candidate("pat", 0.8, "other"), Candidate("", 0.5, "identifier")]
    checked = 0
    for line_no, line in enumerate(text.split("\r\n")):
        for col in range(units(line, encoding) + 1):
            ctx = cursor_context(doc, pos(line_no, col))
            if ctx is None:
                continue
            for max_items in (2, 20):
                want = convert.unstructure(types.CompletionList(is_incomplete=True, items=build_items(
                    ctx, cands, insert_replace=insert_replace, max_items=max_items)))
                got = {"isIncomplete": True, "items": items_json(ctx, cands, insert_replace=insert_replace,
                                                                 max_items=max_items)}
                assert got == want, (line_no, col)
                checked += bool(want["items"])
    assert checked > 20
