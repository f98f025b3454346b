"""An unusual client: messages that are valid but odd, each driving ``python -m laya_lsp`` over stdio.

Each test is one bug found by acting as a hostile client; the server must answer every request
exactly once, keep the client's text, and treat the options as the README says.
"""

from __future__ import annotations

import time

from tests.lsp_raw import RawServer

URI = "file:///laya-adversarial/doc.py"
TEXT = "import os\nos.pa\n"
NO_SUCH_HOME = "~laya-no-such-user-4f1c"
"""A ``~user`` path whose user does not exist: ``Path.expanduser`` raises ``RuntimeError``."""


def labels(answer: dict) -> list[str]:
    assert "result" in answer, answer
    return [item["label"] for item in answer["result"]["items"]]


def shown(server: RawServer, text: str, timeout: float = 60.0) -> list[str]:
    """The ``window/showMessage`` texts containing ``text``, waiting up to ``timeout`` for one."""
    deadline = time.monotonic() + timeout
    while True:
        found = [m["params"]["message"] for m in list(server.messages)
                 if m.get("method") == "window/showMessage" and text in m["params"]["message"]]
        if found or time.monotonic() > deadline:
            return found
        time.sleep(0.1)


def test_a_jsonrpc_key_inside_the_params_is_only_a_field():
    """LSP lets a client add fields, and options are any JSON: an object holding a ``jsonrpc`` key
    inside a message was typed as a message of its own, so ``initialize`` got -32602, a
    completion got -32602 and a ``didOpen`` was dropped (the document was never open)."""
    with RawServer() as s:
        s.initialize({"maxItems": 5, "laya-notes": {"jsonrpc": "2.0", "note": "kept by the client"}})
        s.notify("textDocument/didOpen", {"textDocument": {
            "uri": URI, "languageId": "python", "version": 1, "text": TEXT, "jsonrpc": "2.0"}})
        answer = s.call("textDocument/completion", {
            "textDocument": {"uri": URI}, "position": {"line": 1, "character": 5},
            "context": {"triggerKind": 1, "jsonrpc": "2.0", "id": 7, "method": "shutdown"}}, timeout=90)
        assert "path" in labels(answer)
        assert s.exit() == 0


def test_params_nested_deeper_than_typing_goes_still_get_their_answer():
    """Valid JSON whose params nest ~600 deep: typing them overflowed the stack inside
    ``json.loads``, which the server took for a body that is not JSON (-32700, id null): the
    request itself was never answered."""
    with RawServer() as s:
        s.initialize()
        deep = "[" * 600 + "]" * 600
        s.send(('{"jsonrpc": "2.0", "id": 41, "method": "workspace/executeCommand", '
                '"params": {"command": "laya.none", "arguments": %s}}' % deep).encode())
        answer = s.wait_for(41)
        assert answer["error"]["code"] == -32602, answer
        assert len(s.answers(41)) == 1
        s.open(URI, TEXT)
        assert "path" in labels(s.complete(URI, 1, 5, timeout=90))  # and the server goes on
        assert s.exit() == 0


def test_a_model_path_in_an_unknown_users_home_falls_back_to_the_shipped_model():
    """README: a ``modelPath`` that cannot be loaded becomes the shipped model. ``~nosuchuser/...``
    raised out of the load (``Path.expanduser``), so every completion was an internal error and
    nothing told the user."""
    with RawServer() as s:
        s.initialize({"modelPath": f"{NO_SUCH_HOME}/model"})
        s.open(URI, TEXT)
        assert "path" in labels(s.complete(URI, 1, 5, timeout=90))
        assert shown(s, "modelPath"), s.messages
        assert s.exit() == 0


def test_a_system2_path_in_an_unknown_users_home_is_reported():
    """``system2Path`` ``~nosuchuser/...``: the System 2 thread died on ``RuntimeError`` (a
    traceback on stderr), the user was never told, and System 2 counted as running."""
    with RawServer() as s:
        s.initialize({"system2": True, "system2Path": f"{NO_SUCH_HOME}/model.gguf"})
        assert shown(s, "System 2 is off"), s.messages
        s.open(URI, TEXT)
        assert "result" in s.complete(URI, 1, 5, timeout=90)
        assert s.exit() == 0


def test_a_cancel_naming_one_of_the_server_s_own_requests_is_ignored():
    """``$/cancelRequest`` is for the sender's own requests. A client that echoed the id of the
    server's ``window/workDoneProgress/create`` cancelled the server's wait for it, and the rest
    of ``initialized`` never ran: the load's progress never ended."""
    with RawServer() as s:
        s.initialize(capabilities={"window": {"workDoneProgress": True}})
        deadline = time.monotonic() + 30
        while True:
            create = [m for m in list(s.messages) if m.get("method") == "window/workDoneProgress/create"]
            if create or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        assert create, "no window/workDoneProgress/create"
        s.notify("$/cancelRequest", {"id": create[0]["id"]})
        time.sleep(0.2)
        s.send({"jsonrpc": "2.0", "id": create[0]["id"], "result": None})
        deadline = time.monotonic() + 90
        while True:
            ends = [m for m in list(s.messages) if m.get("method") == "$/progress"
                    and m["params"]["value"].get("kind") == "end"]
            if ends or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert ends and ends[0]["params"]["value"]["message"].startswith("ready in"), ends
        assert s.exit() == 0
