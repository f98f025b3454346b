"""End to end: initializationOptions (bad ones included), debounce, latest-wins, cancellation,
and a model that cannot be loaded. Each server here is started with options that change its
behaviour, as VS Code (one client is enough: the client-dependent paths are in test_lsp_e2e)."""

from __future__ import annotations

import asyncio
import os
import sys
import time

import pytest
import pytest_lsp
from lsprotocol import types
from pygls.exceptions import JsonRpcRequestCancelled
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities

import lsp_client
from lsp_client import eventually

pytestmark = pytest.mark.asyncio(loop_scope="module")

SERVER_ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONUNBUFFERED": "1"}
CONFIG = ClientServerConfig(server_command=[sys.executable, "-m", "laya_lsp"], server_env=SERVER_ENV)
DEBOUNCE_MS = 300




def open_doc(client: LanguageClient, text: str) -> str:
    return lsp_client.open_doc(client, text, "laya-options")


async def send_completion(client: LanguageClient, uri: str, line: int, character: int,
                          msg_id: str | None = None) -> asyncio.Future:
    """Send a completion request now; returns the future of its answer."""
    params = types.CompletionParams(text_document=types.TextDocumentIdentifier(uri=uri),
                                    position=types.Position(line=line, character=character))
    # pytest-lsp's send_request_async is a coroutine: it sends only once it runs
    answer = asyncio.ensure_future(
        client.protocol.send_request_async(types.TEXT_DOCUMENT_COMPLETION, params, msg_id=msg_id))
    await asyncio.sleep(0)
    return answer


async def completion(client: LanguageClient, uri: str, line: int, character: int):
    return await (await send_completion(client, uri, line, character))


# --- options, debounce, latest-wins, cancellation ------------------------------------------------

@pytest_lsp.fixture(scope="module", config=CONFIG)
async def client(lsp_client: LanguageClient):
    lsp_client.init_result = await lsp_client.initialize_session(types.InitializeParams(
        capabilities=client_capabilities("visual-studio-code"),
        initialization_options={"debounceMs": DEBOUNCE_MS, "maxItems": 3, "enableInline": False,
                                "logLevel": "loud", "bogusOption": 1, "modelPath": None},
    ))
    yield
    await lsp_client.shutdown_session()


async def test_bad_options_are_shown_by_name(client: LanguageClient):
    msg = await eventually(lambda: next((m for m in client.messages
                                         if m.type == types.MessageType.Warning), None))
    assert "logLevel" in msg.message and "'loud'" in msg.message
    assert "bogusOption" in msg.message
    assert "debounceMs:" not in msg.message and "maxItems:" not in msg.message
    # the same problems went to window/logMessage as warnings
    logged = [m.message for m in client.log_messages if m.type == types.MessageType.Warning]
    assert any("bogusOption" in m for m in logged), logged


async def test_valid_options_still_apply(client: LanguageClient):
    assert client.init_result.capabilities.inline_completion_provider is None  # enableInline: false
    uri = open_doc(client, "import os\nos.pa")
    result = await completion(client, uri, 1, 5)
    assert 0 < len(result.items) <= 3  # maxItems: 3
    for item in result.items:
        assert item.text_edit.insert == types.Range(start=types.Position(line=1, character=3),
                                                    end=types.Position(line=1, character=5))


async def test_newer_request_wins_within_the_debounce(client: LanguageClient):
    uri = open_doc(client, "import os\nos.pa")
    first = await send_completion(client, uri, 1, 5)
    await asyncio.sleep(0.05)
    second = await send_completion(client, uri, 1, 5)
    first, second = await first, await second
    assert first.is_incomplete and len(first.items) == 0, "a superseded request answers empty"
    assert len(second.items) > 0


async def test_edit_makes_a_pending_request_answer_empty(client: LanguageClient):
    uri = open_doc(client, "import os\nos.pa")
    pending = await send_completion(client, uri, 1, 5)
    await asyncio.sleep(0.05)
    client.text_document_did_change(types.DidChangeTextDocumentParams(
        text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=2),
        content_changes=[types.TextDocumentContentChangePartial(
            range=types.Range(start=types.Position(line=1, character=5),
                              end=types.Position(line=1, character=5)), text="t")]))
    stale = await pending
    assert len(stale.items) == 0
    fresh = await completion(client, uri, 1, 6)
    assert fresh.items and all(i.label.startswith("pat") for i in fresh.items)


async def test_cancel_during_debounce_gives_request_cancelled(client: LanguageClient):
    uri = open_doc(client, "import os\nos.pa")
    t0 = time.monotonic()
    pending = await send_completion(client, uri, 1, 5, msg_id="laya-cancel-during-debounce")
    await asyncio.sleep(0.05)
    client.protocol.notify(types.CANCEL_REQUEST, types.CancelParams(id="laya-cancel-during-debounce"))
    with pytest.raises(JsonRpcRequestCancelled):
        await pending
    assert time.monotonic() - t0 < DEBOUNCE_MS / 1000, "cancelled before its debounce ended"
    after = await completion(client, uri, 1, 5)
    assert len(after.items) > 0


# --- a model or variant that cannot be used: that option falls back to its default -----------

BAD_MODEL_OPTIONS = {
    # case: (initializationOptions, text the warning must hold, besides the file at fault)
    "missing": ({"modelPath": "{folder}"}, "using the model shipped inside the package"),
    "corrupt": ({"modelPath": "{folder}"}, "using the model shipped inside the package"),
    "empty": ({"modelPath": "{folder}"}, "using the model shipped inside the package"),
    "unknown-variant": ({"variant": "nosuch"}, "using 'code'"),
    "variant-without-model": ({"variant": "{folder}.toml"}, "using 'code'"),
}


@pytest_lsp.fixture(scope="module", params=sorted(BAD_MODEL_OPTIONS), config=CONFIG)
async def broken(request, lsp_client: LanguageClient):
    folder = request.getfixturevalue("tmp_path_factory").mktemp("model") / "laya-broken"
    options, lsp_client.fallback = BAD_MODEL_OPTIONS[request.param]
    lsp_client.named = {"missing": str(folder), "corrupt": str(folder / "config.json"),
                        "empty": str(folder), "unknown-variant": "nosuch",
                        "variant-without-model": f"{folder}.toml"}[request.param]  # what the warning names
    if request.param in ("corrupt", "empty"):
        folder.mkdir()
    if request.param == "corrupt":
        (folder / "config.json").write_text("{ not json", encoding="utf-8")
    if request.param == "variant-without-model":  # a variant file that names no model
        folder.with_suffix(".toml").write_text('model = ""\nbits = 8\n', encoding="utf-8")
    await lsp_client.initialize_session(types.InitializeParams(
        capabilities=client_capabilities("visual-studio-code"),
        initialization_options={k: v.format(folder=folder) for k, v in options.items()}))
    yield
    await lsp_client.shutdown_session()


async def test_bad_model_option_is_shown_and_falls_back(broken: LanguageClient):
    msg = await eventually(lambda: next((m for m in broken.messages
                                         if m.type == types.MessageType.Warning), None))
    assert broken.named in msg.message, msg.message
    assert broken.fallback in msg.message, msg.message
    (reports,) = [r for r in broken.progress_reports.values() if r]
    await eventually(lambda: isinstance(reports[-1], types.WorkDoneProgressEnd))
    assert reports[-1].message.startswith("ready in"), reports[-1]
    assert not [m for m in broken.messages if m.type == types.MessageType.Error], broken.messages


async def test_after_a_fallback_completions_work(broken: LanguageClient):
    uri = open_doc(broken, "import os\nos.pa")
    result = await completion(broken, uri, 1, 5)
    assert result.items and all(i.label.startswith("pa") for i in result.items)
