"""End to end over stdio: ``python -m laya_lsp`` driven by pytest-lsp as VS Code and as Neovim.

One server per client (module scope) serves every case; each case opens its own document. The
client's declared capabilities are real (pytest-lsp's recorded VS Code 1.65 and Neovim 0.11
ones), so position encoding (UTF-16 for VS Code, UTF-8 for Neovim), ``InsertReplaceEdit`` support
and work-done progress all differ between the two runs, and a reply that breaks the client's
capabilities fails (``-W error::pytest_lsp.LspSpecificationWarning`` in pyproject).
"""

from __future__ import annotations

import asyncio
import inspect
import itertools
import os
import re
import sys
import textwrap
import time
from pathlib import Path

import pytest
import pytest_lsp
from lsprotocol import types
from pygls.exceptions import JsonRpcRequestCancelled
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities
from tests.unit_lengths import units

pytestmark = pytest.mark.asyncio(loop_scope="module")

SERVER_ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONUNBUFFERED": "1"}
SERVER = [sys.executable, "-m", "laya_lsp"]
MAX_ITEMS = 8
CLIENTS = {"visual-studio-code": "vscode", "neovim": "neovim"}
_uris = itertools.count()


@pytest_lsp.fixture(
    scope="module",
    params=list(CLIENTS),
    ids=list(CLIENTS.values()),
    config=ClientServerConfig(server_command=SERVER, server_env=SERVER_ENV),
)
async def client(request, lsp_client: LanguageClient):
    result = await lsp_client.initialize_session(types.InitializeParams(
        capabilities=client_capabilities(request.param),
        client_info=types.ClientInfo(name=f"pytest-{CLIENTS[request.param]}"),
        initialization_options={"maxItems": MAX_ITEMS},
    ))
    lsp_client.init_result = result
    lsp_client.encoding = result.capabilities.position_encoding or "utf-16"
    lsp_client.kind = CLIENTS[request.param]
    yield
    await lsp_client.shutdown_session()


# --- helpers ------------------------------------------------------------------------------------



class Doc:
    """A document the test edits like an editor: incremental ``didChange`` per keystroke."""

    def __init__(self, client: LanguageClient, text: str, name: str = "doc.py"):
        self.client = client
        self.uri = f"file:///laya-test/{next(_uris)}/{name}"
        self.text = text
        self.version = 1
        client.text_document_did_open(types.DidOpenTextDocumentParams(
            text_document=types.TextDocumentItem(uri=self.uri, language_id="python",
                                                 version=1, text=text)))

    def position(self, offset: int) -> types.Position:
        """The client position of a string offset (lines end at CRLF, CR or LF, as in LSP)."""
        before = self.text[:offset]
        lines = re.split(r"\r\n|\r|\n", before)
        return types.Position(line=len(lines) - 1,
                              character=units(lines[-1], self.client.encoding))

    def end(self) -> types.Position:
        return self.position(len(self.text))

    def insert(self, offset: int, new: str) -> None:
        at = self.position(offset)
        self.version += 1
        self.client.text_document_did_change(types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=self.uri, version=self.version),
            content_changes=[types.TextDocumentContentChangePartial(
                range=types.Range(start=at, end=at), text=new)]))
        self.text = self.text[:offset] + new + self.text[offset:]

    def type(self, offset: int, keys: str) -> int:
        """Type ``keys`` one character at a time at ``offset``; returns the cursor offset."""
        for ch in keys:
            self.insert(offset, ch)
            offset += len(ch)
        return offset

    async def complete(self, offset: int) -> types.CompletionList:
        return await self.client.text_document_completion_async(types.CompletionParams(
            text_document=types.TextDocumentIdentifier(uri=self.uri),
            position=self.position(offset)))

    def close(self) -> None:
        self.client.text_document_did_close(types.DidCloseTextDocumentParams(
            text_document=types.TextDocumentIdentifier(uri=self.uri)))


def word_before(text: str, offset: int) -> str:
    m = re.search(r"\w*\Z", text[:offset])
    return m.group().lstrip("0123456789")


def check_items(doc: Doc, result, offset: int, *, expect_items: bool = True) -> list[str]:
    """Every item replaces exactly the identifier prefix before ``offset``; returns the labels."""
    assert isinstance(result, types.CompletionList)
    assert result.is_incomplete is True
    if expect_items:
        assert result.items, f"no completion at {doc.position(offset)} after {doc.text[:offset][-40:]!r}"
    assert len(result.items) <= MAX_ITEMS
    word = word_before(doc.text, offset)
    start, cursor = doc.position(offset - len(word)), doc.position(offset)
    for i, item in enumerate(result.items):
        edit = item.text_edit
        if doc.client.kind == "vscode":  # declared insertReplaceSupport
            assert isinstance(edit, types.InsertReplaceEdit)
            rng = edit.insert
            assert edit.replace.start == start
        else:
            assert isinstance(edit, types.TextEdit)
            rng = edit.range
        assert (rng.start, rng.end) == (start, cursor), item.label
        assert edit.new_text.startswith(word) and len(edit.new_text) > len(word), item.label
        assert item.label == item.filter_text == edit.new_text
        assert item.sort_text == f"{i:04d}"
        assert item.kind in (types.CompletionItemKind.Variable, types.CompletionItemKind.Keyword,
                             types.CompletionItemKind.Text)
    return [item.label for item in result.items]


async def wait_until_ready(client: LanguageClient, timeout: float = 60) -> None:
    """Wait for the load progress to end (both recorded clients support work-done progress)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for reports in client.progress_reports.values():
            if reports and isinstance(reports[-1], types.WorkDoneProgressEnd):
                return
        await asyncio.sleep(0.05)
    raise AssertionError("the model load progress never ended")


# --- cases --------------------------------------------------------------------------------------

async def test_initialize_capabilities(client: LanguageClient):
    caps = client.init_result.capabilities
    assert caps.completion_provider is not None
    assert list(caps.completion_provider.trigger_characters) == ["."]
    assert caps.inline_completion_provider is not None
    assert caps.text_document_sync.change == types.TextDocumentSyncKind.Incremental
    expected = "utf-8" if client.kind == "neovim" else "utf-16"  # Neovim offers utf-8 first
    assert client.encoding == expected
    assert client.init_result.server_info.name == "laya-lsp"


async def test_model_load_reports_progress(client: LanguageClient):
    await wait_until_ready(client)
    (reports,) = [r for r in client.progress_reports.values() if r]
    assert isinstance(reports[0], types.WorkDoneProgressBegin)
    assert reports[0].title == "Laya"
    assert reports[-1].message.startswith("ready in"), reports[-1]
    assert not [m for m in client.messages if m.type == types.MessageType.Error], client.messages


async def test_typing_into_a_stdlib_module(client: LanguageClient):
    source = Path(inspect.getsourcefile(textwrap)).read_text(encoding="utf-8")
    doc = Doc(client, source, "textwrap.py")
    # at the end of the file: a new function, typed key by key, completing along the way
    offset = doc.type(len(doc.text), "\n\ndef _laya_probe(text, width):\n    lines = wrap(te")
    labels = check_items(doc, await doc.complete(offset), offset)
    assert all(label.startswith("te") for label in labels)
    offset = doc.type(offset, "xt, width)\n    return [line.st")
    check_items(doc, await doc.complete(offset), offset)
    # in the middle of the file: inside dedent(), which uses `margin` further down
    body = doc.text.index("def dedent(text):")
    offset = doc.text.index("\n", body)
    offset = doc.type(offset, "\n    _probe = mar")
    labels = check_items(doc, await doc.complete(offset), offset)
    assert "margin" in labels, labels
    # at an identifier boundary after a dot: the prefix is empty, items are inserted
    offset = doc.type(offset, "gin.")
    check_items(doc, await doc.complete(offset), offset, expect_items=False)
    doc.close()


async def test_utf16_ranges_after_emoji_and_cjk(client: LanguageClient):
    text = ("emoji_label_value = '😀'\n漢字变量 = 1\n"
            "print('😀 漢字 🎉', emoji_la)  # 🎉 the cursor is not at the line end\n")
    doc = Doc(client, text)
    offset = text.index("emoji_la)") + len("emoji_la")
    labels = check_items(doc, await doc.complete(offset), offset)
    assert "emoji_label_value" in labels, labels
    offset = doc.type(offset, ", 漢")
    labels = check_items(doc, await doc.complete(offset), offset)
    assert "漢字变量" in labels, labels
    doc.close()


async def test_crlf_document(client: LanguageClient):
    text = "import os\r\nvalue_crlf_name = os.getcwd()\r\nprint(value_cr"
    doc = Doc(client, text)
    labels = check_items(doc, await doc.complete(len(text)), len(text))
    assert "value_crlf_name" in labels
    offset = doc.type(len(doc.text), ")\r\nos.pa")
    check_items(doc, await doc.complete(offset), offset)
    doc.close()


async def test_edits_refresh_the_document_vocabulary(client: LanguageClient):
    """didChange refreshes the engine's per-document n-gram (throttled to once a second): an
    identifier typed below the cursor becomes a candidate above it."""
    doc = Doc(client, "import os\n\nprint(zebra_u)\n")
    offset = doc.text.index("zebra_u") + len("zebra_u")
    labels = check_items(doc, await doc.complete(offset), offset, expect_items=False)
    assert "zebra_unique_field" not in labels
    doc.type(len(doc.text), "zebra_unique_field = 1\n")
    deadline = time.monotonic() + 5
    while "zebra_unique_field" not in labels:
        assert time.monotonic() < deadline, f"the edit never reached the engine: {labels}"
        await asyncio.sleep(0.2)
        labels = check_items(doc, await doc.complete(offset), offset, expect_items=False)
    doc.close()


async def test_switching_between_documents(client: LanguageClient):
    alpha = Doc(client, "alpha_unique_identifier = 1\nalpha_second = 2\nprint(alpha_")
    beta = Doc(client, "beta_unique_identifier = 1\nbeta_second = 2\nprint(beta_")
    for _ in range(2):
        a = check_items(alpha, await alpha.complete(len(alpha.text)), len(alpha.text))
        b = check_items(beta, await beta.complete(len(beta.text)), len(beta.text))
        assert "alpha_unique_identifier" in a and not any(x.startswith("beta_") for x in a)
        assert "beta_unique_identifier" in b and not any(x.startswith("alpha_") for x in b)
        alpha.type(len(alpha.text), "u")
        beta.type(len(beta.text), "u")
    alpha.close()
    beta.close()


async def test_cancelled_request_then_next_request_works(client: LanguageClient):
    # a new, long document: the first decision prefills the whole context window, so the
    # cancel usually arrives while the engine job runs (test_lsp_options cancels deterministically)
    source = Path(inspect.getsourcefile(textwrap)).read_text(encoding="utf-8")
    text = source + "\n\nresult = wra"
    doc = Doc(client, text, "textwrap.py")
    params = types.CompletionParams(text_document=types.TextDocumentIdentifier(uri=doc.uri),
                                    position=doc.end())
    msg_id = f"laya-cancel-{client.kind}"
    # pytest-lsp's send_request_async is a coroutine: schedule it, let it send, then cancel
    pending = asyncio.ensure_future(
        client.protocol.send_request_async(types.TEXT_DOCUMENT_COMPLETION, params, msg_id=msg_id))
    await asyncio.sleep(0)
    client.protocol.notify(types.CANCEL_REQUEST, types.CancelParams(id=msg_id))
    try:
        result = await pending
    except JsonRpcRequestCancelled:
        pass  # cancelled in flight (the debounced server in test_lsp_options always is)
    else:  # the answer was already on its way when the cancel arrived
        check_items(doc, result, len(text), expect_items=False)
    check_items(doc, await doc.complete(len(text)), len(text))
    doc.close()


async def test_unknown_document_answers_empty(client: LanguageClient):
    result = await client.text_document_completion_async(types.CompletionParams(
        text_document=types.TextDocumentIdentifier(uri="file:///laya-test/never/opened.py"),
        position=types.Position(line=0, character=0)))
    assert len(result.items) == 0 and result.is_incomplete
    doc = Doc(client, "import os\nos.pa")
    check_items(doc, await doc.complete(len(doc.text)), len(doc.text))
    doc.close()


async def test_positions_past_end_of_line_and_file(client: LanguageClient):
    doc = Doc(client, "import os\nos.pa\n")
    past_eol = await client.text_document_completion_async(types.CompletionParams(
        text_document=types.TextDocumentIdentifier(uri=doc.uri),
        position=types.Position(line=1, character=400)))
    check_items(doc, past_eol, len("import os\nos.pa"))  # clamped to the end of line 1
    for line in (3, 10_000):
        past_eof = await client.text_document_completion_async(types.CompletionParams(
            text_document=types.TextDocumentIdentifier(uri=doc.uri),
            position=types.Position(line=line, character=0)))
        assert len(past_eof.items) == 0
    check_items(doc, await doc.complete(len("import os\nos.pa")), len("import os\nos.pa"))
    doc.close()


async def test_inline_completion_is_the_line_candidate(client: LanguageClient):
    doc = Doc(client, "import os\n\n\ndef main(argv):\n    path = os.path.join(argv[0], 'x')\n")
    got = []
    # each probe's word is then typed out, as a user goes on: a fragment left behind (`return pa`)
    # would be a whole word `pa` of the document, and ghost text never lengthens one
    # (``laya_lsp.inline.lengthens_a_whole_word``)
    for keys, rest in (("    return pa", "th"), ("\n    print(pa", "th)"), ("\n    value = os.pa", "th")):
        offset = doc.type(len(doc.text), keys)
        result = await client.text_document_inline_completion_async(types.InlineCompletionParams(
            context=types.InlineCompletionContext(trigger_kind=types.InlineCompletionTriggerKind.Automatic),
            text_document=types.TextDocumentIdentifier(uri=doc.uri),
            position=doc.position(offset)))
        assert isinstance(result, types.InlineCompletionList)
        assert len(result.items) <= 1
        word = word_before(doc.text, offset)
        for item in result.items:
            assert item.range == types.Range(start=doc.position(offset - len(word)),
                                             end=doc.position(offset))
            assert item.insert_text.startswith(word) and len(item.insert_text) > len(word)
            assert "\n" not in item.insert_text
            got.append(item.insert_text)
        # the completion list stays identifiers only (continuations cost forward passes; they
        # are served here, through inline completion)
        listed = await doc.complete(offset)
        check_items(doc, listed, offset)
        assert all(i.kind != types.CompletionItemKind.Text for i in listed.items)
        doc.type(len(doc.text), rest)
    assert got, "no inline completion at any of the probes"
    doc.close()



async def test_inline_completion_repeats_a_line_of_the_document(client: LanguageClient):
    # an earlier line that starts as the cursor's line does gives the ghost text (not the network:
    # it has never seen 'qq-42')
    doc = Doc(client, "def check(self):\n    self.assertEqual(zq_weird_name, 'qq-42')\n")
    offset = doc.type(len(doc.text), "    self.assertE")
    result = await client.text_document_inline_completion_async(types.InlineCompletionParams(
        context=types.InlineCompletionContext(trigger_kind=types.InlineCompletionTriggerKind.Invoked),
        text_document=types.TextDocumentIdentifier(uri=doc.uri),
        position=doc.position(offset)))
    assert [i.insert_text for i in result.items] == ["assertEqual(zq_weird_name, 'qq-42')"]
    assert result.items[0].range == types.Range(start=doc.position(offset - len("assertE")),
                                                end=doc.position(offset))
    doc.close()


async def test_inline_line_fits_before_the_editor_s_closer(client: LanguageClient):
    # the editor auto-closed append's bracket; the earlier line's rest stops where that one takes over
    doc = Doc(client, "def f():\n    items.append(make_item(name))\n    items.append()\n")
    offset = doc.type(len(doc.text) - 2, "make_i")
    result = await client.text_document_inline_completion_async(types.InlineCompletionParams(
        context=types.InlineCompletionContext(trigger_kind=types.InlineCompletionTriggerKind.Invoked),
        text_document=types.TextDocumentIdentifier(uri=doc.uri),
        position=doc.position(offset)))
    assert [i.insert_text for i in result.items] == ["make_item(name)"]
    doc.close()
