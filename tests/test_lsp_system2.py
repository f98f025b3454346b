"""End to end: the ``system2`` option through the real server (a raw stdio client).

A System 2 that cannot load is shown to the user by name while completion goes on (runs
everywhere); with the model installed (the ``system2`` extra and ``laya system2 install``; see
tests/test_system2.py), its guess for a place tops the next completion list there.
"""

from __future__ import annotations

import time

from tests.lsp_raw import RawServer
from tests.test_system2 import GGUF, needs_model

SOURCE = "import os\nimport sys\n\n\ndef main():\n    here = os.path.dirname(__file__)\n    name = os.pa"
URI = "file:///laya-system2/doc.py"
PATH = "doc.py"
"""How System 2's prompt names :data:`URI` (no workspace folder: its file name)."""
LINE, CHAR = SOURCE.count("\n"), len(SOURCE.rsplit("\n", 1)[1])


def labels(s: RawServer) -> list[str]:
    return [i["label"] for i in s.complete(URI, LINE, CHAR)["result"]["items"]]


def until(predicate, timeout: float = 60.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if value := predicate():
            return value
        time.sleep(0.1)
    raise AssertionError("condition not met in time")


def test_a_system2_that_cannot_load_is_named_and_completion_goes_on(tmp_path):
    with RawServer() as s:
        s.initialize({"system2": True, "system2Path": str(tmp_path / "missing.gguf")})
        s.open(URI, SOURCE)
        shown = until(lambda: next((m for m in s.messages if m.get("method") == "window/showMessage"
                                    and "System 2 is off" in m["params"]["message"]), None))
        assert shown["params"]["type"] == 2 and "missing.gguf" in shown["params"]["message"]
        # what else it needs is said at once, not after the model's 98 MB are in place
        import importlib.util

        assert ("llama-cpp-python" in shown["params"]["message"]) == (importlib.util.find_spec("llama_cpp") is None)
        assert "path" in until(lambda: labels(s))
        assert s.exit() == 0


@needs_model
def test_the_guess_tops_the_next_list_at_the_same_place():
    from engine.system2 import System2

    expected = System2(GGUF, n_ctx=512).complete_word(SOURCE, path=PATH)
    assert expected and expected.startswith("pa")
    with RawServer() as s:
        s.initialize({"system2": True, "system2Path": str(GGUF)})
        s.open(URI, SOURCE)
        until(lambda: labels(s))  # the fast answer; System 2 starts after it

        def settled():  # the guess first in a list the document's counts no longer reorder
            got = [i["label"] for i in s.settled_items(URI, LINE, CHAR)]
            return got if got and got[0] == expected else None

        items = until(settled)
        # the fast engine's items stay, below the guess
        assert len(items) > 1 and all(w.startswith("pa") and w != expected for w in items[1:])
        assert s.exit() == 0


@needs_model
def test_inline_completion_shows_the_rest_of_system2_s_line():
    from engine.system2 import System2

    source = "def square(x):\n    ret"
    cont = System2(GGUF, n_ctx=512).continuation(source, max_tokens=12, path=PATH)
    expected = cont.text.rstrip("\n")
    assert expected.startswith("return ") and len(expected) > len("return ")
    with RawServer() as s:
        s.initialize({"system2": True, "system2Path": str(GGUF)})
        s.open(URI, source)
        params = {"textDocument": {"uri": URI}, "position": {"line": 1, "character": 7},
                  "context": {"triggerKind": 2}}

        def inline():
            items = s.call("textDocument/inlineCompletion", params)["result"]["items"]
            return items[0]["insertText"] if items and items[0]["insertText"] == expected else None

        assert until(inline) == expected
        assert s.exit() == 0


@needs_model
def test_a_boundary_key_starts_the_next_word_s_guess_before_any_request():
    """A key editors ask no completion for (here an opening parenthesis) starts System 2's line
    at once (``laya_lsp.system2.after_change``), so the first list at the word start after it
    already has System 2's guess on top; without that start, the first list is the fast one."""
    from engine.system2 import System2

    head = SOURCE.rsplit("\n", 1)[0] + "\n    name = os.path.join"
    after = head + "("
    expected = System2(GGUF, n_ctx=512).complete_word(after, path=PATH)
    assert expected, "System 2 offers no identifier after the parenthesis"
    line, char = after.count("\n"), len(after.rsplit("\n", 1)[1])
    key = {"textDocument": {"uri": URI, "version": 2}, "contentChanges": [
        {"range": {"start": {"line": line, "character": char - 1},
                   "end": {"line": line, "character": char - 1}}, "text": "("}]}
    firsts = {}
    for on in (False, True):
        with RawServer() as s:
            s.initialize({"system2": True, "system2Path": str(GGUF)} if on else {})
            s.open(URI, head)
            # the fast model answers (inside the file's first word: System 2 has no prompt there)
            until(lambda: s.complete(URI, 0, 3)["result"]["items"])
            time.sleep(5)  # System 2 loads
            s.notify("textDocument/didChange", key)
            time.sleep(8)  # the line takes ~0.1-0.3 s (its thread is niced); no request meanwhile
            firsts[on] = s.complete(URI, line, char)["result"]["items"][0]["label"]
            assert s.exit() == 0
    assert firsts[True] == expected and firsts[False] != expected, firsts
