"""With ``logLevel: debug`` each completion's time to its candidates, and the engine thread's part
of it, reaches the editor's log (``laya_lsp.predictions.predict_at``): how a user sees where a
slow answer's milliseconds went. At the default level nothing of it is sent."""

from __future__ import annotations

import re

from tests.lsp_raw import RawServer

TEXT = "def handler_function():\n    return 1\n\n\nhandler_f"
TIMING = re.compile(r"textDocument/completion \S+ 4:9: ([\d.]+) ms to the candidates, ([\d.]+) ms of them on "
                    r"the engine thread")


def _logged(s) -> list[str]:
    return [m["params"]["message"] for m in s.messages if m.get("method") == "window/logMessage"]


def test_debug_level_logs_each_completion_s_milliseconds():
    with RawServer() as s:
        s.initialize({"logLevel": "debug"})
        uri = "file:///tmp/laya-debug-log.py"
        s.open(uri, TEXT)
        s.complete_until(uri, 4, 9, "handler_function")
        times = [TIMING.search(m) for m in _logged(s)]
        times = [(float(m.group(1)), float(m.group(2))) for m in times if m]
        assert times, _logged(s)[-5:]
        assert all(0 < engine <= total for total, engine in times), times
        assert s.exit() == 0


def test_the_default_level_sends_no_timing():
    with RawServer() as s:
        s.initialize({})
        uri = "file:///tmp/laya-debug-log.py"
        s.open(uri, TEXT)
        s.complete_until(uri, 4, 9, "handler_function")
        assert not [m for m in _logged(s) if "ms to the candidates" in m]
        assert s.exit() == 0
