"""``laya-lsp --http``: the HTTP completion service and the language server in one process."""

from __future__ import annotations

import json
import re
import time
import urllib.request

import pytest

from lsp_raw import RawServer

pytest.importorskip("aiohttp", reason="the HTTP service needs the 'serve' extra (aiohttp)")

URI = "file:///tmp/laya-http/main.py"


def _url(s: RawServer, timeout: float = 60) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        m = re.search(r"HTTP completion service on (http://\S+)", s.stderr_text())
        if m:
            return m.group(1)
        assert s.proc.poll() is None, s.stderr_text()[-2000:]
        time.sleep(0.1)
    raise AssertionError("no service address on stderr: " + s.stderr_text()[-2000:])


def _post(url: str, body: dict) -> dict:
    req = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as r:
        return json.loads(r.read())


def test_one_process_answers_lsp_and_http():
    with RawServer("--http", "0") as s:
        s.initialize()
        base = _url(s)
        s.open(URI, "import os\nos.pa")
        s.complete(URI, 1, 5)
        time.sleep(0.5)  # the opened document's words are counted and installed by now
        items = s.complete(URI, 1, 5)["result"]["items"]
        assert "path" in [i["label"] for i in items]
        # the seed's exact request, then the OpenAI shape
        seed = _post(base + "/complete", {"prompt": "import os\nos.pa", "max_tokens": 1})
        assert seed["choices"][0]["text"] == "th", seed
        oai = _post(base + "/v1/completions", {"prompt": "def main():\n    ret", "max_tokens": 2, "n": 2})
        assert len(oai["choices"]) == 2 and any(c["text"].startswith("urn") for c in oai["choices"]), oai
        # the editor's window is not the service's: LSP completion is unchanged after HTTP requests
        again = s.complete(URI, 1, 5)["result"]["items"]
        assert [i["label"] for i in again] == [i["label"] for i in items]
        assert s.exit() == 0


def _post_raw(url: str, raw: bytes) -> tuple[int, dict]:
    """``(status, decoded JSON body)``, error statuses included."""
    req = urllib.request.Request(url, raw, {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def test_odd_bodies_answer_a_result_or_400_not_500():
    """The service's request checks are ``laya serve``'s (``laya_serve.params``): a negative seed
    is taken, a lone surrogate becomes U+FFFD, a body nested too deeply is invalid JSON."""
    with RawServer("--http", "0") as s:
        s.initialize()
        url = _url(s) + "/v1/completions"
        status, d = _post_raw(url, json.dumps({"prompt": "import os\nos.pa", "seed": -1, "max_tokens": 2,
                                               "temperature": 0.8}).encode())
        assert status == 200 and d["choices"], d
        status, d = _post_raw(url, b'{"prompt": "x = \\"\\ud800\\"\\nos.pa", "max_tokens": 1}')
        assert status == 200 and d["choices"][0]["text"], d
        status, d = _post_raw(url, b'{"prompt": "x", "a": ' + b"[" * 100_000 + b"]" * 100_000 + b"}")
        assert status == 400 and "not valid JSON" in d["error"]["message"], d
        assert s.exit() == 0


def test_port_in_use_is_shown_and_lsp_goes_on():
    import socket

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        with RawServer("--http", str(port)) as s:
            s.initialize()
            deadline = time.monotonic() + 60
            shown = []
            while not shown and time.monotonic() < deadline:
                shown = [m for m in s.messages if m.get("method") == "window/showMessage"]
                time.sleep(0.1)
            assert shown and "HTTP completion service is off" in shown[0]["params"]["message"], shown
            assert str(port) in shown[0]["params"]["message"]
            assert "HTTP completion service is off" in s.stderr_text()  # asked for on the command line
            s.open(URI, "import os\nos.pa")
            assert "path" in [i["label"] for i in s.complete(URI, 1, 5)["result"]["items"]]
            assert s.exit() == 0
