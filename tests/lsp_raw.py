"""A raw JSON-RPC client over stdio for ``python -m laya_lsp``: sends any bytes, records every
message the server writes (a reader thread), so tests can send what no well-behaved client would."""

from __future__ import annotations

import itertools
import json
import os
import queue
import subprocess
import sys
import tempfile
import threading
import time

SERVER = [sys.executable, "-m", "laya_lsp"]
ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONUNBUFFERED": "1"}


def frame(obj) -> bytes:
    body = obj if isinstance(obj, bytes) else json.dumps(obj).encode()
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


class RawServer:
    """One server process; ``messages`` holds everything it wrote, in order."""

    def __init__(self, *args: str) -> None:
        self.stderr = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(SERVER + list(args), stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=self.stderr, env=ENV)
        self._start(self.proc.stdin, self.proc.stdout)

    def _start(self, to_server, from_server) -> None:
        self._in, self._out = to_server, from_server
        self.messages: list[dict] = []
        self._arrived = threading.Condition()
        self._ids = itertools.count(1)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        try:
            self._read_messages()
        except ConnectionError:  # a TCP server that reset the connection: as the end of its output
            return

    def _read_messages(self) -> None:
        out = self._out
        while True:
            length = None
            while True:
                line = out.readline()
                if not line:
                    return
                if line == b"\r\n":
                    break
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
            msg = json.loads(out.read(length))
            with self._arrived:
                self.messages.append(msg)
                self._arrived.notify_all()

    # --- sending ----------------------------------------------------------------------------

    def send(self, obj) -> None:
        """Send one message: a JSON value, or raw ``bytes`` as the body."""
        self._in.write(frame(obj))
        self._in.flush()

    def request(self, method: str, params=None, msg_id=None):
        """Send a request; returns its id."""
        msg_id = next(self._ids) if msg_id is None else msg_id
        msg = {"jsonrpc": "2.0", "id": msg_id, "method": method}
        if params is not None:
            msg["params"] = params
        self.send(msg)
        return msg_id

    def notify(self, method: str, params=None) -> None:
        msg = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            msg["params"] = params
        self.send(msg)

    def call(self, method: str, params=None, timeout: float = 30.0) -> dict:
        """Send a request and wait for its answer (the whole response message)."""
        return self.wait_for(self.request(method, params), timeout)

    # --- receiving --------------------------------------------------------------------------

    def answers(self, msg_id) -> list[dict]:
        with self._arrived:
            return [m for m in self.messages if "method" not in m and m.get("id") == msg_id]

    def wait_for(self, msg_id, timeout: float = 30.0) -> dict:
        deadline = time.monotonic() + timeout
        with self._arrived:
            while True:
                got = [m for m in self.messages if "method" not in m and m.get("id") == msg_id]
                if got:
                    return got[0]
                left = deadline - time.monotonic()
                assert left > 0, f"no answer to {msg_id!r}; stderr: {self.stderr_text()[-2000:]}"
                self._arrived.wait(left)

    def stderr_text(self) -> str:
        self.stderr.seek(0)
        return self.stderr.read().decode(errors="replace")

    # --- session ----------------------------------------------------------------------------

    def initialize(self, options: dict | None = None, process_id=None, capabilities=None) -> dict:
        answer = self.call("initialize", {"processId": process_id, "rootUri": None,
                                          "capabilities": capabilities or {},
                                          "initializationOptions": options or {}})
        assert "result" in answer, answer
        self.notify("initialized", {})
        return answer["result"]

    def open(self, uri: str, text: str) -> None:
        self.notify("textDocument/didOpen", {"textDocument": {
            "uri": uri, "languageId": "python", "version": 1, "text": text}})

    def complete(self, uri: str, line: int, character: int, timeout: float = 30.0) -> dict:
        return self.call("textDocument/completion", {
            "textDocument": {"uri": uri}, "position": {"line": line, "character": character}},
            timeout)

    def complete_until(self, uri: str, line: int, character: int, label: str,
                       timeout: float = 30.0, why: str = "never offered") -> list[str]:
        """Ask for completion every 0.2 s until ``label`` is among the items; returns the labels.
        Fails with ``why`` after ``timeout`` seconds (words reach the pool in the background)."""
        deadline = time.monotonic() + timeout
        labels: list[str] = []
        while label not in labels:
            assert time.monotonic() < deadline, f"{why}: {labels}"
            time.sleep(0.2)
            labels = [i["label"] for i in self.complete(uri, line, character)["result"]["items"]]
        return labels

    def settled_items(self, uri: str, line: int, character: int, quiet_s: float = 1.5,
                      limit_s: float = 15.0) -> list[dict]:
        """The completion items at a place once their order has stopped changing: the same first
        item for ``quiet_s`` (at most ``limit_s``). A document's counts are installed in the
        background after it opens, and they can reorder two of its own words (``assertEqual``
        and ``assertTrue``, since the re-ranker of 2026-12-04), so a test that compares answers
        to requests made at different times starts from a settled list."""
        start = time.monotonic()
        since, first = start, None
        while True:
            items = self.complete(uri, line, character)["result"]["items"]
            now = time.monotonic()
            label = items[0]["label"] if items else None
            if label != first:
                since, first = now, label
            elif now - since >= quiet_s or now - start >= limit_s:
                return items
            time.sleep(0.1)

    def exit(self, shutdown: bool = True, timeout: float = 20.0) -> int:
        if shutdown:
            self.call("shutdown")
        self.notify("exit")
        return self.proc.wait(timeout=timeout)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def __enter__(self) -> RawServer:
        return self

    def __exit__(self, *exc) -> None:
        self.kill()


class InProcessServer(RawServer):
    """The real server (``create_server()`` and pygls's stdio loop) on a thread of this process,
    over pipes, so a test can also read its state (``ls.workspace``). ``exit`` does not end the
    process; :meth:`close` ends the session with EOF."""

    def __init__(self) -> None:
        import logging

        from laya_lsp.server import create_server

        self.ls = create_server()
        self.exit_codes: list[int] = []
        self.ls.exit = self.exit_codes.append
        self._logging = list(logging.getLogger().handlers)
        r_in, w_in = os.pipe()
        r_out, w_out = os.pipe()
        server_in, server_out = os.fdopen(r_in, "rb"), os.fdopen(w_out, "wb")
        self._loop = threading.Thread(target=self.ls.start_io, args=(server_in, server_out), daemon=True)
        self._loop.start()
        self._start(os.fdopen(w_in, "wb"), os.fdopen(r_out, "rb"))
        self.stderr = tempfile.TemporaryFile()

    def close(self) -> None:
        import logging

        self._in.close()
        self._loop.join(timeout=10)
        self.ls.bridge.shutdown(wait=2)
        root = logging.getLogger()
        for h in list(root.handlers):
            if h not in self._logging:
                root.removeHandler(h)

    def kill(self) -> None:
        self.close()
