"""Prose documents (Markdown, plain text, commit messages) are completed by the typing model."""

from __future__ import annotations

from lsp_raw import RawServer

README = "file:///tmp/laya-prose/README.md"
CODE = "file:///tmp/laya-prose/main.py"
TEXT = ("# Widget\n\nThis package provides a simple way to read the configuration file of your "
        "application.\n\nTo install it, run the following comm")
LAST = TEXT.split("\n")[-1]
TEXT_KIND, VARIABLE_KIND = 1, 6


def _open(s: RawServer, uri: str, text: str, language_id: str) -> None:
    s.notify("textDocument/didOpen", {"textDocument": {
        "uri": uri, "languageId": language_id, "version": 1, "text": text}})


def _items(s: RawServer, uri: str, line: int, character: int) -> list[dict]:
    answer = s.complete(uri, line, character, timeout=60)
    assert "result" in answer, answer
    return answer["result"]["items"]


def test_markdown_gets_the_typing_model_and_code_keeps_the_code_model():
    with RawServer() as s:
        s.initialize()
        _open(s, README, TEXT, "markdown")
        items = _items(s, README, TEXT.count("\n"), len(LAST))
        labels = [i["label"] for i in items]
        assert "command" in labels, labels
        assert {i["kind"] for i in items} == {TEXT_KIND}, items[:3]  # prose words, not identifiers
        _open(s, CODE, "import os\nos.pa", "python")
        code = _items(s, CODE, 1, 5)
        assert "path" in [i["label"] for i in code]
        assert VARIABLE_KIND in {i["kind"] for i in code}
        # and back (the document's own words may have been counted in between)
        again = _items(s, README, TEXT.count("\n"), len(LAST))
        assert "command" in [i["label"] for i in again] and {i["kind"] for i in again} == {TEXT_KIND}
        shown = [m for m in s.messages if m.get("method") == "window/showMessage"]
        assert not shown, shown
        assert s.exit() == 0


def test_prose_option_off_keeps_the_code_model():
    with RawServer() as s:
        s.initialize({"prose": False})
        _open(s, README, TEXT, "markdown")
        items = _items(s, README, TEXT.count("\n"), len(LAST))
        assert TEXT_KIND not in {i["kind"] for i in items}, items[:3]
        assert s.exit() == 0


def test_lowercase_prefix_also_offers_capitalized_words():
    """In prose, "zorb" offers the document's "Zorblax" (after words that match as typed)."""
    from engine.predictor import Predictor

    p = Predictor.load(variant="typing")
    text = "We met the Zorblax team on Monday.\n\nNext week we use zorb"
    p.observe_document("doc", text, "prose")
    got = [c.text for c in p.predict(text, doc_id="doc", language="prose")]
    assert "Zorblax" in got, got
    code = Predictor.load()  # code keeps exact case: "zorb" never becomes "Zorblax"
    code.observe_document("py", "Zorblax = 1\nzorb", "python")
    assert "Zorblax" not in [c.text for c in code.predict("Zorblax = 1\nzorb", doc_id="py", language="python")]
