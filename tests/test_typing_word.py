"""The word being typed is not counted as a document word (it is likely half typed)."""

from __future__ import annotations

from lsprotocol import types
from pygls.workspace import TextDocument

from laya_lsp.documents import blank_word_at, position_after_change

URI = "file:///tmp/typing_word.py"


def _change(line, char, text):
    pos = types.Position(line=line, character=char)
    return types.TextDocumentContentChangePartial(range=types.Range(start=pos, end=pos), text=text)


def test_blank_word_at_touching_ends_and_inside():
    assert blank_word_at("x = prin\n", 8) == "x =     \n"
    assert blank_word_at("x = prin\n", 4) == "x =     \n"  # the word starts at the cursor
    assert blank_word_at("x = prin\n", 6) == "x =     \n"
    assert blank_word_at("print(x)\n", 6) == "print( )\n"
    assert blank_word_at("print(\n", 6) == "print(\n"  # nothing touches the cursor
    assert blank_word_at("", 0) == ""


def test_position_after_change_in_client_units():
    doc = TextDocument(URI, "a\n")
    assert position_after_change(_change(0, 1, "bc"), doc) == types.Position(line=0, character=3)
    assert position_after_change(_change(0, 1, "x\r\nyz"), doc) == types.Position(line=1, character=2)
    assert position_after_change(_change(2, 0, "😀é"), doc) == types.Position(line=2, character=3)
    assert position_after_change(types.TextDocumentContentChangeWholeDocument(text="all"), doc) is None


def test_the_half_typed_word_is_left_out_of_the_refresh():
    from laya_lsp import server as srv
    from tests.doc_recorder import server_with_recorder

    ls, recorder = server_with_recorder()
    ls.opened[URI] = 1
    item = types.TextDocumentItem(uri=URI, language_id="python", version=1, text="import os\n# 😀\n")
    ls.workspace.put_text_document(item)

    def counted_after(change):
        params = types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=URI, version=2),
            content_changes=[change])
        ls.workspace.update_text_document(params.text_document, change)
        ls.observer.cancel(URI)  # so the throttle refreshes at once (no event loop here)
        srv.did_change(ls, params)
        ls.counting.submit(lambda: None).result()
        ls.bridge.engine.call(lambda: None)
        ls.bridge.engine.call(lambda: None)
        return recorder.docs[URI]

    text = counted_after(_change(1, 4, " prin"))  # after an emoji: UTF-16 units differ
    assert "prin" not in text and "import os" in text, text
    text = counted_after(_change(1, 9, "t(os)\n"))
    assert "print(os)" in text, text  # the user moved on: the finished word counts
    ls.bridge.shutdown(wait=2)
