"""A hostile but realistic editor: position encodings other than UTF-16, the completion list's
selected item during inline completion, edits in odd shapes. The real server (``python -m
laya_lsp`` through :mod:`tests.lsp_raw`); every edit it returns is applied to the text here, as an
editor applies it, and the resulting text is checked.
"""

from __future__ import annotations

import itertools
import re

import pytest
from lsprotocol import types
from pygls.workspace import TextDocument

from laya_lsp.documents import cursor_context
from tests.lsp_raw import InProcessServer, RawServer
from tests.unit_lengths import units

_BREAK = re.compile(r"\r\n|\r|\n")
_uris = itertools.count()


def position(text: str, offset: int, encoding: str) -> dict:
    """The LSP position of a string offset (lines end at ``\\r\\n``, ``\\r`` and ``\\n``)."""
    before = text[:offset]
    breaks = list(_BREAK.finditer(before))
    start = breaks[-1].end() if breaks else 0
    return {"line": len(breaks), "character": units(before[start:], encoding)}


def offset(text: str, pos: dict, encoding: str) -> int:
    """The string offset of an LSP position, as an editor reads it (past a line's end: its end)."""
    starts = [0] + [m.end() for m in _BREAK.finditer(text)]
    if pos["line"] >= len(starts):
        return len(text)
    a = starts[pos["line"]]
    m = _BREAK.search(text, a)
    b = m.start() if m else len(text)
    n = 0
    for i in range(a, b):
        if n >= pos["character"]:
            return i
        n += units(text[i], encoding)
    return b


def apply(text: str, rng: dict, new: str, encoding: str) -> str:
    return text[:offset(text, rng["start"], encoding)] + new + text[offset(text, rng["end"], encoding):]


def open_doc(server: RawServer, text: str) -> str:
    uri = f"file:///laya-adversarial/{next(_uris)}/doc.py"
    server.open(uri, text)
    return uri


def inline(server: RawServer, uri: str, pos: dict, selected: dict | None = None) -> list[dict]:
    context = {"triggerKind": 2}
    if selected is not None:
        context["selectedCompletionInfo"] = selected
    answer = server.call("textDocument/inlineCompletion",
                         {"textDocument": {"uri": uri}, "position": pos, "context": context})
    return answer["result"]["items"]


# --- position encodings -------------------------------------------------------------------------

LINES = ["    x = '😀😀'; os.pa|", "    漢字 = os.pa|th + 1", "    y = 'e\u0301'; os.pa|",
         "    '🎉' + self.assertE|", "    𝑥𝑦 = self.assertE|)"]
HEAD = "import os\n\n\ndef f(self):\n    self.assertEqual(zq_weird_name, 'qq-42')\n"


@pytest.mark.parametrize("offered, insert_replace", [
    (["utf-8"], False), (["utf-32"], False), (["utf-8", "utf-32", "utf-16"], True)],
    ids=["utf-8-only", "utf-32-only", "helix"])
def test_edits_land_on_the_identifier_in_any_encoding(offered, insert_replace):
    """Items applied in the negotiated encoding, on lines with emoji, CJK, combining marks and
    CRLF ends, with the cursor at the identifier and past the line's end: the identifier (up to
    the cursor, or whole) becomes the item, nothing else on the line changes."""
    with RawServer() as s:
        caps = {"general": {"positionEncodings": offered}, "textDocument": {"completion": {
            "completionItem": {"insertReplaceSupport": insert_replace}}}}
        encoding = s.initialize(capabilities=caps)["capabilities"]["positionEncoding"]
        assert encoding == offered[0]
        checked = 0
        for marked in LINES:
            for eol in ("\n", "\r\n"):
                cut = len(HEAD.replace("\n", eol)) + marked.index("|")
                text = (HEAD + marked.replace("|", "") + "\n").replace("\n", eol)
                uri = open_doc(s, text)
                word = re.search(r"\w*\Z", text[:cut]).group()
                start, end = cut - len(word), cut + len(re.match(r"\w*", text[cut:]).group())
                here = position(text, cut, encoding)
                past_end = {"line": here["line"], "character": here["character"] + 500}
                for pos in [here] + ([past_end] if text[cut:] == eol else []):
                    items = s.complete(uri, pos["line"], pos["character"])["result"]["items"]
                    assert items, marked
                    for item in items:
                        edit, new = item["textEdit"], item["textEdit"]["newText"]
                        want = {text[:start] + new + text[cut:], text[:start] + new + text[end:]}
                        for rng in [edit[k] for k in ("range", "insert", "replace") if k in edit]:
                            assert apply(text, rng, new, encoding) in want, (marked, eol, item)
                            checked += 1
                    for item in inline(s, uri, pos):
                        got = apply(text, item["range"], item["insertText"], encoding)
                        assert got.startswith(text[:start] + word) and got.endswith(text[cut:]), got
                        checked += 1
        assert checked > 100


# --- inline completion with the completion list open --------------------------------------------

SELECTING = ("import os\n\n\ndef f(self):\n    self.assertEqual(zq_weird_name, 'qq-42')\n"
             "    self.assertTrue(zq_flag_value)\n")


@pytest.fixture(scope="module")
def vscode():
    """A server as VS Code's language client starts it (UTF-16, ``insertReplaceSupport``)."""
    with RawServer() as s:
        s.initialize(capabilities={"textDocument": {"completion": {"completionItem": {
            "insertReplaceSupport": True}}}})
        yield s


def test_an_inline_item_extends_the_selected_list_item_over_its_range(vscode):
    """VS Code sends the list's selected item (``selectedCompletionInfo``) and shows an inline item
    only if it "extends the text of the selected item and uses the same range". The server gave
    the line of its best word whatever was selected (``assertEqual(...)`` with ``assertTrue``
    selected), an item VS Code drops; an item is now given only when it extends the selection."""
    text = SELECTING + "    self.assert\n"
    uri = open_doc(vscode, text)
    cut = len(text) - 1
    pos = position(text, cut, "utf-16")
    items = vscode.settled_items(uri, pos["line"], pos["character"])
    assert len(items) > 2
    shown = 0
    for item in items:
        selected = {"range": item["textEdit"]["insert"], "text": item["textEdit"]["newText"]}
        for got in inline(vscode, uri, pos, selected):
            assert got["range"] == selected["range"], (item["label"], got)
            assert got["insertText"].startswith(selected["text"]), (item["label"], got)
            applied = apply(text, got["range"], got["insertText"], "utf-16")
            assert applied == text[:cut - len("assert")] + got["insertText"] + "\n"
            shown += 1
    # the best item selected (VS Code selects the first) still gets the line it gets unselected
    first = {"range": items[0]["textEdit"]["insert"], "text": items[0]["label"]}
    alone = inline(vscode, uri, pos)
    assert alone and inline(vscode, uri, pos, first) == alone
    assert shown >= 1


def test_a_selected_item_off_the_cursor_s_range_gets_no_item(vscode):
    """A selected item over another range (another extension's item that replaces the ``.``, or a
    range on another line) cannot be extended by an item over the identifier: no item."""
    text = SELECTING + "    self.assertE\n"
    uri = open_doc(vscode, text)
    pos = position(text, len(text) - 1, "utf-16")
    assert inline(vscode, uri, pos), "no inline item to check against"
    line, ch = pos["line"], pos["character"]
    for rng in ({"start": {"line": line, "character": ch - 8}, "end": pos},
                {"start": {"line": line - 1, "character": 9}, "end": {"line": line - 1, "character": 19}}):
        assert inline(vscode, uri, pos, {"range": rng, "text": ".assertEqual"}) == []


def test_selecting_another_item_shows_that_item_s_line(vscode):
    """With ``assertTrue`` selected, the document's ``self.assertTrue(...)`` line is the ghost text
    (``Predictor.predict``'s ``line_word``); a selected text that is not an identifier extending
    the typed word gets the best item's line checked against it, so no item (``assertTrue(zz``
    starts neither line, whichever of the two words is best)."""
    text = SELECTING + "    self.assert\n"
    uri = open_doc(vscode, text)
    pos = position(text, len(text) - 1, "utf-16")
    rng = {"start": {"line": pos["line"], "character": pos["character"] - 6}, "end": pos}
    got = inline(vscode, uri, pos, {"range": rng, "text": "assertTrue"})
    assert [i["insertText"] for i in got] == ["assertTrue(zq_flag_value)"]
    assert inline(vscode, uri, pos, {"range": rng, "text": "assertTrue(zz"}) == []
    assert inline(vscode, uri, pos, {"range": rng, "text": "assertEqual"})[0]["insertText"].startswith("assertEqual(")


def test_an_outside_line_is_not_fit_inside_an_identifier():
    """System 2's and an mlx-lm model's lines are fit before the text after the cursor here (the
    engine fits its own): with an identifier after the cursor no line fits (the item's range
    ends at the cursor, so ``os.pa|th`` + ``parent.name`` gave ``os.parenth``), while the editor's
    closers still cut the line."""
    from laya_lsp.inline import fit_line

    doc = TextDocument("file:///fit.py", "import os\nx = os.path\nprint(zq_)\n")
    inside = cursor_context(doc, types.Position(line=1, character=8))
    assert fit_line(inside, "parent.name") is None
    closer = cursor_context(doc, types.Position(line=2, character=9))
    assert fit_line(closer, 'zq_value, end="")') == 'zq_value, end=""'


# --- edits in odd shapes ------------------------------------------------------------------------

def test_odd_did_change_notifications_keep_the_client_s_text():
    """Whole-text and ranged changes mixed in one notification, a range ending past the end of the
    text, a version that goes backwards, a change of a document never opened and one after its
    ``didClose``: the server's text is the client's, and completion answers from it."""
    s = InProcessServer()
    try:
        s.initialize(capabilities={"general": {"positionEncodings": ["utf-8"]}})
        uri = "file:///laya-adversarial/changes.py"
        s.open(uri, "import os\nos.pa\n")

        def change(version: int, *changes: dict) -> str:
            s.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": version},
                                                 "contentChanges": list(changes)})
            s.complete(uri, 0, 0)  # answered after the change is applied
            return s.ls.open_document(uri).source

        def at(line: int, a: int, b: int | None = None, line_b: int | None = None) -> dict:
            end = {"line": line if line_b is None else line_b, "character": a if b is None else b}
            return {"start": {"line": line, "character": a}, "end": end}

        assert change(2, {"text": "abc\ndef\n"}, {"range": at(1, 0), "text": "X"},
                      {"text": "zz😀\nyy"}, {"range": at(0, 6), "text": "!"}) == "zz😀!\nyy"
        assert change(3, {"range": at(1, 1, 3, line_b=50), "text": "Q\n"}) == "zz😀!\nyQ\n"
        assert change(1, {"range": at(9, 0), "text": "back"}) == "zz😀!\nyQ\nback"
        s.notify("textDocument/didChange", {"textDocument": {"uri": "file:///never.py", "version": 2},
                                             "contentChanges": [{"text": "x"}]})
        assert s.complete("file:///never.py", 0, 1)["result"]["items"] == []
        items = s.complete(uri, 2, 4)["result"]["items"]
        assert items and all(i["textEdit"]["range"] == at(2, 0, 4) for i in items)
        s.notify("textDocument/didClose", {"textDocument": {"uri": uri}})
        s.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": 9},
                                             "contentChanges": [{"text": "gone"}]})
        assert s.complete(uri, 0, 2)["result"]["items"] == []
        assert s.ls.open_document(uri) is None
    finally:
        s.close()


def test_a_did_change_handler_that_fails_is_reported_and_the_next_edits_still_apply():
    """``didChange`` runs outside pygls's machinery (``LayaProtocol._did_change_now``): an error
    in the server's handler is logged (a ``window/logMessage``, not a ``showMessage``), the edit
    itself is kept, and the edits after it apply as before."""
    s = InProcessServer()
    try:
        s.initialize()
        uri = "file:///laya-adversarial/failing.py"
        s.open(uri, "import os\n")
        handler = s.ls.protocol.fm.features[types.TEXT_DOCUMENT_DID_CHANGE]
        calls = []

        def failing(params):
            calls.append(params)
            raise RuntimeError("handler failed")

        s.ls.protocol.fm.features[types.TEXT_DOCUMENT_DID_CHANGE] = failing
        s.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": 2},
                                             "contentChanges": [{"text": "import os\nos.pa"}]})
        s.complete(uri, 0, 0)
        assert calls and s.ls.open_document(uri).source == "import os\nos.pa"
        s.ls.protocol.fm.features[types.TEXT_DOCUMENT_DID_CHANGE] = handler
        s.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": 3}, "contentChanges": [
            {"range": {"start": {"line": 1, "character": 5}, "end": {"line": 1, "character": 5}}, "text": "t"}]})
        assert "path" in [i["label"] for i in s.complete(uri, 1, 6)["result"]["items"]]
        assert any(m.get("method") == "window/logMessage" and "didChange" in m["params"]["message"]
                   for m in s.messages)
        assert not any(m.get("method") == "window/showMessage" for m in s.messages)
    finally:
        s.close()


def test_resolve_and_cancels_that_name_nothing_are_answered_or_ignored(vscode):
    """``completionItem/resolve`` (not offered: ``resolveProvider`` is false) with a foreign ``data``
    or none is answered MethodNotFound; ``$/cancelRequest`` for an answered request, one never
    sent and an id of another type changes nothing."""
    uri = open_doc(vscode, "import os\nos.pa")
    for item in ({"label": "path", "data": {"from": "another server"}}, {"label": "path"}):
        assert vscode.call("completionItem/resolve", item)["error"]["code"] == -32601
    answered = vscode.request("textDocument/completion", {
        "textDocument": {"uri": uri}, "position": {"line": 1, "character": 5}})
    vscode.wait_for(answered)
    for msg_id in (answered, 987654, str(answered), {}, [1], 1.5, True, None):
        vscode.notify("$/cancelRequest", {"id": msg_id})
    assert "path" in [i["label"] for i in vscode.complete(uri, 1, 5)["result"]["items"]]
    assert len(vscode.answers(answered)) == 1
    # an id no request can have ({} or [1]) is no failure to report to the user
    assert not [m for m in vscode.messages if m.get("method") == "window/logMessage"
                and "failed to handle" in m["params"]["message"]]


def test_the_cursor_after_a_reversed_range_is_after_the_inserted_text():
    """A range whose end comes first is applied with its ends swapped (as VS Code's documents do);
    the cursor the server keeps for the edit (the half-typed word left out of the document's
    words, the prefetch) was put after the range's later end instead: ``value`` replaced by
    ``zz`` left it at 7, past ``zz = 1``'s ``zz``."""
    from laya_lsp.documents import position_after_change

    doc = TextDocument("file:///reversed.py", "import os\nvalue = 1\n")
    change = types.TextDocumentContentChangePartial(range=types.Range(
        start=types.Position(line=1, character=5), end=types.Position(line=1, character=0)), text="zz")
    assert position_after_change(change, doc) == types.Position(line=1, character=2)


def test_a_late_answer_to_a_progress_request_is_dropped_quietly(tmp_path):
    """A busy editor answers ``window/workDoneProgress/create`` after the server stopped waiting
    (``laya_lsp.loading.PROGRESS_CREATE_TIMEOUT_S``): the answer is dropped; it raised in pygls and
    reached the user as an error message, "failed to handle a message"."""
    import time

    from laya_lsp.loading import PROGRESS_CREATE_TIMEOUT_S

    (tmp_path / "mod.py").write_text("def zq_name():\n    return 1\n")
    with RawServer() as s:
        s.call("initialize", {"processId": None, "rootUri": tmp_path.as_uri(),
                              "capabilities": {"window": {"workDoneProgress": True}}})
        s.notify("initialized", {})
        time.sleep(PROGRESS_CREATE_TIMEOUT_S + 1.0)
        asked = [m for m in s.messages if m.get("method") == "window/workDoneProgress/create"]
        assert len(asked) == 2, [m.get("method") for m in s.messages]  # the model's, the workspace's
        for m in asked:
            s.send({"jsonrpc": "2.0", "id": m["id"], "result": None})
        time.sleep(1.0)  # a log message is sent after the answer that caused it
        assert s.exit() == 0
    errors = [m["params"] for m in s.messages
              if m.get("method") in ("window/logMessage", "window/showMessage") and m["params"]["type"] <= 2]
    assert errors == [], errors
