"""Property: random incremental edits keep the server's document equal to the client's text.

A reference model of the client (a Python string, positions counted as LSP counts them: lines end
only at ``\\n``, ``\\r\\n`` and ``\\r``; characters in UTF-8, UTF-16 or UTF-32 code units) sends
random ``didChange`` edits over text full of the characters servers get wrong (every separator
``str.splitlines`` knows, emoji, CJK, combining marks, NUL, lone surrogates). After each edit the
server's document must equal the reference; after each sequence a completion at a random valid
position must answer (not fail). The server is the real one (``create_server()`` and pygls's stdio loop) on a
thread, over pipes, so the test can read its document.
"""

from __future__ import annotations

import itertools
import re

import numpy  # noqa: F401 - imported before the engine thread imports it (hypothesis peeks at it)
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.lsp_raw import InProcessServer

CHARS = (list("ab_x1 .(){}:'\"\t") + ["\n", "\r", "\r\n", "\n"] + list("\f\v\x1c\x1d\x1e\x85\u2028\u2029")
         + ["😀", "🎉", "漢", "字", "e\u0301", "\u0301", "\x00", "\ud800", "\udbff", "\udc00", "\udfff"])
TEXTS = st.lists(st.sampled_from(CHARS), max_size=30).map("".join)
_BREAK = re.compile(r"\r\n|\r|\n")
_PAIR = re.compile("[\ud800-\udbff][\udc00-\udfff]")
"""A high then a low surrogate: JSON would join them into one character, which a UTF-16 client
(its text is code units) never sees as two; the model keeps lone surrogates apart."""
EXAMPLES = 250
"""Per encoding; 750 sequences (~2,600 edits) in all, ~55 s on the 2-core dev machine."""
_uris = itertools.count()


def units(text: str, encoding: str) -> int:
    if encoding == "utf-32":
        return len(text)
    if encoding == "utf-16":
        return sum(2 if ord(c) > 0xFFFF else 1 for c in text)
    return len(text.encode("utf-8", "surrogatepass"))


def position(text: str, offset: int, encoding: str) -> dict:
    """The LSP position of a string offset of the client's text."""
    before = text[:offset]
    breaks = list(_BREAK.finditer(before))
    start = breaks[-1].end() if breaks else 0
    return {"line": len(breaks), "character": units(before[start:], encoding)}


def valid_offsets(text: str) -> list[int]:
    """Offsets a client position can name: not between the ``\\r`` and ``\\n`` of a CRLF."""
    return [i for i in range(len(text) + 1) if not (0 < i < len(text) and text[i - 1:i + 1] == "\r\n")]


@pytest.fixture(scope="module", params=["utf-8", "utf-16", "utf-32"])
def session(request):
    server = InProcessServer()
    result = server.initialize(capabilities={"general": {"positionEncodings": [request.param]}})
    assert result["capabilities"]["positionEncoding"] == request.param
    server.encoding = request.param
    yield server
    server.close()


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_random_edits_keep_the_client_text(session, data):
    encoding = session.encoding
    text = data.draw(TEXTS.filter(lambda t: not _PAIR.search(t)), label="text")
    uri = f"file:///laya-property/{next(_uris)}.py"
    session.open(uri, text)
    version = 1
    for _ in range(data.draw(st.integers(1, 6), label="edits")):
        offsets = valid_offsets(text)
        a = data.draw(st.sampled_from(offsets), label="start")
        b = data.draw(st.sampled_from([o for o in offsets if o >= a][:12]), label="end")
        new = data.draw(TEXTS, label="new")
        edited = text[:a] + new + text[b:]
        if _PAIR.search(edited):
            continue
        version += 1
        session.notify("textDocument/didChange", {
            "textDocument": {"uri": uri, "version": version},
            "contentChanges": [{"range": {"start": position(text, a, encoding),
                                          "end": position(text, b, encoding)}, "text": new}]})
        text = edited
        # a request answered after the edit: the edit has been applied (messages go in order)
        assert session.call("laya/noSuchMethod")["error"]["code"] == -32601
        assert session.ls.open_document(uri).source == text
    at = position(text, data.draw(st.sampled_from(valid_offsets(text)), label="cursor"), encoding)
    answer = session.call("textDocument/completion", {"textDocument": {"uri": uri}, "position": at})
    assert "result" in answer, answer
    session.notify("textDocument/didClose", {"textDocument": {"uri": uri}})
