"""End to end: ``workspace/didChangeConfiguration`` (settings pushed, or pulled with
``workspace/configuration``), and the latest-wins bookkeeping of documents that are not open.

Servers are real processes (pytest-lsp, or the raw client of ``lsp_raw`` where the client must
misbehave: answer ``workspace/configuration`` with an error, or not at all)."""

from __future__ import annotations

import asyncio
import os
import sys
import time

import pytest
import pytest_lsp
from lsprotocol import types
from lsp_raw import InProcessServer, RawServer
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities

import lsp_client
from lsp_client import eventually

from laya_lsp.settings_change import PULL_TIMEOUT_S

SERVER_ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONUNBUFFERED": "1"}
CONFIG = ClientServerConfig(server_command=[sys.executable, "-m", "laya_lsp"], server_env=SERVER_ENV)
TEXT = "import os\nos."
"""``os.`` at (1, 3) gets a full list (20 items at the default ``maxItems``)."""
aio = pytest.mark.asyncio(loop_scope="module")




def open_doc(client: LanguageClient, text: str = TEXT) -> str:
    return lsp_client.open_doc(client, text, "laya-settings")


async def count_items(client: LanguageClient, uri: str) -> int:
    result = await client.text_document_completion_async(types.CompletionParams(
        text_document=types.TextDocumentIdentifier(uri=uri), position=types.Position(line=1, character=3)))
    return len(result.items)


def push(client: LanguageClient, settings) -> None:
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings=settings))


async def items_become(client: LanguageClient, uri: str, expected: int) -> None:
    """The settings notification and the next completion are handled in order, but a pulled
    change lands a round trip later: ask until the list has ``expected`` items (5 s at most)."""
    deadline = time.monotonic() + 5
    while (n := await count_items(client, uri)) != expected:
        assert time.monotonic() < deadline, f"{n} items, expected {expected}"
        await asyncio.sleep(0.05)


def shown(client: LanguageClient, kind: types.MessageType) -> list[str]:
    return [m.message for m in client.messages if m.type == kind]


@pytest_lsp.fixture(scope="module", config=CONFIG)
async def client(lsp_client: LanguageClient):
    await lsp_client.initialize_session(types.InitializeParams(
        capabilities=client_capabilities("visual-studio-code"),  # workspace.configuration: true
        initialization_options={"maxItems": 6}))
    yield
    await lsp_client.shutdown_session()


@aio
async def test_pushed_settings_change_max_items(client: LanguageClient):
    uri = open_doc(client)
    assert await count_items(client, uri) == 6  # initializationOptions
    push(client, {"laya": {"maxItems": 2}, "pylsp": {"maxItems": 1}})  # the laya section only
    assert await count_items(client, uri) == 2
    push(client, {"maxItems": 4, "python": {"analysis": {}}})  # the options object itself (Helix)
    assert await count_items(client, uri) == 4
    push(client, {"pylsp": {"plugins": {}}})  # another server's section: nothing changes
    assert await count_items(client, uri) == 4
    assert not shown(client, types.MessageType.Warning), client.messages


@aio
async def test_bad_value_is_shown_and_the_current_value_stays(client: LanguageClient):
    uri = open_doc(client)
    push(client, {"laya": {"maxItems": 3}})
    assert await count_items(client, uri) == 3
    push(client, {"laya": {"maxItems": 5000, "debounceMs": "soon"}})
    warning = await eventually(lambda: shown(client, types.MessageType.Warning))
    assert len(warning) == 1, warning
    assert warning[0].startswith("Laya: problems in settings (the rest apply): "), warning
    assert "maxItems: must be <= 1000, got 5000; using 3" in warning[0], warning
    assert "debounceMs: expected a number, got string 'soon'; using 0" in warning[0], warning
    assert await count_items(client, uri) == 3  # kept, not the default (20) nor 5000


@aio
async def test_restart_only_option_gets_one_restart_message(client: LanguageClient):
    uri = open_doc(client)
    before = len(client.messages)
    push(client, {"laya": {"maxItems": 5, "variant": "typing", "backend": "numpy", "watchProcessId": False}})
    assert await count_items(client, uri) == 5  # the live option applied
    info = await eventually(lambda: shown(client, types.MessageType.Info))
    assert len(info) == 1, info
    assert "restart the server to apply variant, backend, watchProcessId" in info[0], info
    assert "maxItems" not in info[0]
    # the same values again (one live option changed): no new message
    push(client, {"laya": {"maxItems": 4, "variant": "typing", "backend": "numpy", "watchProcessId": False}})
    assert await count_items(client, uri) == 4
    await asyncio.sleep(0.3)
    assert len(client.messages) == before + 1, client.messages[before:]


@aio
async def test_pulled_settings_apply(client: LanguageClient):
    uri = open_doc(client)
    client.set_configuration({"maxItems": 7}, section="laya")
    push(client, None)  # no settings: the server asks for the laya section
    await items_become(client, uri, 7)
    client.set_configuration({"maxItems": 1}, section="laya")
    push(client, {})
    await items_become(client, uri, 1)


# --- clients that answer workspace/configuration badly, or never ---------------------------------

def _configuration_requests(s: RawServer) -> list[dict]:
    return [m for m in s.messages if m.get("method") == "workspace/configuration"]


def _wait_for_request(s: RawServer, seen: int, timeout: float = 10.0) -> dict:
    deadline = time.monotonic() + timeout
    while len(_configuration_requests(s)) <= seen:
        assert time.monotonic() < deadline, "the server did not ask for its settings"
        time.sleep(0.02)
    return _configuration_requests(s)[seen]


def test_a_client_that_fails_or_never_answers_workspace_configuration():
    uri = "file:///laya-settings/raw.py"
    with RawServer() as s:
        s.initialize({"maxItems": 3}, capabilities={"workspace": {"configuration": True}})
        s.open(uri, TEXT)
        assert len(s.complete(uri, 1, 3, timeout=60)["result"]["items"]) == 3
        # an error answer: nothing changes, completions go on
        s.notify("workspace/didChangeConfiguration", {"settings": None})
        request = _wait_for_request(s, 0)
        assert request["params"] == {"items": [{"section": "laya"}]}
        s.send({"jsonrpc": "2.0", "id": request["id"],
                "error": {"code": -32601, "message": "Unhandled method workspace/configuration"}})
        assert len(s.complete(uri, 1, 3)["result"]["items"]) == 3
        # no answer: completions are answered while the server waits, which ends after the timeout
        s.notify("workspace/didChangeConfiguration", {"settings": {}})
        late = _wait_for_request(s, 1)
        t0 = time.monotonic()
        assert len(s.complete(uri, 1, 3)["result"]["items"]) == 3
        assert time.monotonic() - t0 < PULL_TIMEOUT_S / 2, "a completion waited for the settings"
        deadline = time.monotonic() + PULL_TIMEOUT_S + 10
        while not any("no answer in" in m.get("params", {}).get("message", "") for m in s.messages):
            assert time.monotonic() < deadline, "the wait for workspace/configuration never ended"
            time.sleep(0.1)
        s.send({"jsonrpc": "2.0", "id": late["id"], "result": [{"maxItems": 9}]})  # too late: ignored
        assert len(s.complete(uri, 1, 3)["result"]["items"]) == 3
        # pushed settings still apply, and nothing went wrong on the way
        s.notify("workspace/didChangeConfiguration", {"settings": {"laya": {"maxItems": 2}}})
        assert len(s.complete(uri, 1, 3)["result"]["items"]) == 2
        errors = [m for m in s.messages if m.get("method") in ("window/showMessage", "window/logMessage")
                  and m["params"]["type"] == types.MessageType.Error]
        assert not errors, errors
        assert s.exit() == 0


def test_a_client_without_workspace_configuration_is_not_asked():
    uri = "file:///laya-settings/nopull.py"
    with RawServer() as s:
        s.initialize({"maxItems": 3})  # no capabilities
        s.open(uri, TEXT)
        s.notify("workspace/didChangeConfiguration", {"settings": None})
        assert len(s.complete(uri, 1, 3, timeout=60)["result"]["items"]) == 3
        time.sleep(0.3)
        assert not _configuration_requests(s)
        assert s.exit() == 0


def test_workspace_index_turned_on_then_off_while_running(tmp_path):
    (tmp_path / "helpers.py").write_text("def workspace_alpha_identifier():\n    return 1\n")
    root = tmp_path.as_uri()
    uri, name = root + "/main.py", "workspace_alpha_identifier"
    with RawServer() as s:
        assert "result" in s.call("initialize", {
            "processId": None, "rootUri": root, "workspaceFolders": [{"uri": root, "name": "ws"}],
            "capabilities": {}, "initializationOptions": {"workspaceIndex": False}})
        s.notify("initialized", {})
        s.open(uri, "x = workspace_al")

        def labels() -> list[str]:
            return [i["label"] for i in s.complete(uri, 0, 16, timeout=60)["result"]["items"]]

        assert name not in labels()
        s.notify("workspace/didChangeConfiguration", {"settings": {"laya": {"workspaceIndex": True}}})
        s.complete_until(uri, 0, 16, name, why="turning workspaceIndex on did not index")
        s.notify("workspace/didChangeConfiguration", {"settings": {"laya": {"workspaceIndex": False}}})
        deadline = time.monotonic() + 20
        while name in labels():
            assert time.monotonic() < deadline, "turning workspaceIndex off kept the workspace's names"
            time.sleep(0.2)
        assert not [m for m in s.messages if m.get("method") == "window/showMessage"], s.messages
        assert s.exit() == 0


# --- latest-wins bookkeeping: only open documents have entries -----------------------------------

def test_requests_for_documents_not_open_leave_no_bookkeeping():
    s = InProcessServer()
    try:
        s.initialize({})
        for k in range(30):  # never opened
            assert s.complete(f"file:///laya-settings/never/{k}.py", 0, 0, timeout=60)["result"]["items"] == []
        uri = "file:///laya-settings/open.py"
        s.open(uri, TEXT)
        assert s.complete(uri, 1, 3, timeout=60)["result"]["items"]
        assert s.ls.sequencer.entries() == 2  # the open document and its completion kind
        s.notify("textDocument/didClose", {"textDocument": {"uri": uri}})
        for _ in range(5):  # closed
            assert s.complete(uri, 1, 3)["result"]["items"] == []
        assert s.ls.sequencer.entries() == 0
        s.open(uri, TEXT)  # reopened: served again
        assert s.complete(uri, 1, 3)["result"]["items"]
    finally:
        s.close()


def test_readme_names_the_live_and_the_restart_options():
    """The README's paragraph on settings changes agrees with ``settings_change.LIVE``."""
    import re
    from pathlib import Path

    from laya_lsp.config import OPTION_NAME
    from laya_lsp.settings_change import LIVE, RESTART

    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    para = re.search(r"^Settings can also change while the server runs.*?\n\n", readme, re.M | re.S).group(0)
    at_once, _, rest = para.partition("apply at once.")
    at_start = rest.partition("are read only at start")[0]
    names = lambda text: set(re.findall(r"`(\w+)`", text)) & set(OPTION_NAME.values())  # noqa: E731
    assert names(at_once) == {OPTION_NAME[n] for n in LIVE}
    assert names(at_start) - {"enableInline"} == {OPTION_NAME[n] for n in RESTART}
