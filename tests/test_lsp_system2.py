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
        items = until(lambda: (lambda got: got if got and got[0] == expected else None)(labels(s)))
        # the fast items stay, below the guess (asked again now: the document's n-grams, counted
        # in the background after didOpen, may have changed the fast answer meanwhile)
        fast = [w for w in until(lambda: labels(s)) if w != expected]
        assert len(items) > 1 and set(fast) <= set(items)
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
