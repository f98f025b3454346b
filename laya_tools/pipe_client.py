"""A lean synchronous LSP client over pipes, for timing the server as an editor's client sees it.

``laya_tools.replay.ReplayClient`` drives the server through pygls's ``LanguageClient``: every
request hops from the caller's thread to an asyncio thread and back, and every answer is
structured into lsprotocol classes by cattrs. Measured side by side on the 2-core dev machine
(two servers, typing forward in textwrap.py, requests interleaved), that client adds ~0.3 ms at
the median and several ms at p99 to each round trip: its own costs, not the server's. Editors
parse JSON-RPC natively (VS Code's ``JSON.parse``, Neovim's ``vim.json.decode``: tens of
microseconds for a completion list). :class:`PipeClient` writes each message and reads the answer
on one thread with blocking pipe I/O and ``json.loads``, so the benchmarks' round trips are the
server's plus the pipe's.

It answers the server's own requests (``window/workDoneProgress/create``,
``client/registerCapability``, ``workspace/configuration``) with ``null`` and skips notifications
but ``window/showMessage``, whose messages it keeps (``PipeClient.messages``).
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import time
from pathlib import Path


def utf16_len(s: str) -> int:
    return len(s.encode("utf-16-le")) // 2


def changed_from(old: str, new: str) -> int:
    """Where ``new`` first differs from ``old`` (the start of the one edit that turns one into the
    other when the user appended or deleted back)."""
    n = 0
    m = min(len(old), len(new))
    while n < m and old[n] == new[n]:
        n += 1
    return n


def position(text: str, offset: int) -> dict:
    """The LSP position (UTF-16 columns) of ``offset`` in ``text``."""
    line = text.count("\n", 0, offset)
    start = text.rfind("\n", 0, offset) + 1
    return {"line": line, "character": utf16_len(text[start:offset])}


def rss_mb(pid: int | None) -> float:
    """Resident memory of process ``pid`` (Linux ``/proc``), in MB; NaN where it cannot be read."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


class PipeClient:
    """``python -m laya_lsp`` on pipes, one open document, one request in flight at a time.

    Args:
        model: ``modelPath`` option (None: the shipped model).
        init_options: other ``initializationOptions``.
        env: extra environment for the server process.
        cwd: the server's working directory (``python -m`` imports ``laya_lsp`` from there
            first: another checkout's tree, for side-by-side comparisons).
        root: a workspace folder (``rootUri`` and ``workspaceFolders``; the server indexes it).

    Raises:
        RuntimeError: the server exited or closed its output before answering.
    """

    def __init__(self, model: str | None = None, init_options: dict | None = None, env: dict | None = None,
                 cwd: str | None = None, root: str | None = None):
        opts = dict(init_options or {})
        if model:
            opts["modelPath"] = str(model)
        self.t_spawn = time.perf_counter()
        self.proc = subprocess.Popen([sys.executable, "-m", "laya_lsp"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     env={**os.environ, "HF_HUB_OFFLINE": "1", **(env or {})}, cwd=cwd)
        self._ids = itertools.count(1)
        self.messages: list[str] = []
        """What the server showed the user (``window/showMessage``), e.g. why System 2 is off."""
        root_uri = Path(root).resolve().as_uri() if root else None
        result = self.request("initialize", {"processId": os.getpid(), "rootUri": root_uri, "capabilities": {},
                                    "workspaceFolders": [{"uri": root_uri, "name": Path(root).name}] if root else None,
                                    "initializationOptions": opts})
        self.t_initialized = time.perf_counter() - self.t_spawn
        self.server_info = (result or {}).get("serverInfo")  # {"name", "version"}, or None
        self.notify("initialized", {})
        self.uri: str | None = None
        self.text = ""
        self.version = 0

    # --- wire ---------------------------------------------------------------------------------

    def _send(self, msg: dict) -> None:
        body = json.dumps(msg).encode()
        self.proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        self.proc.stdin.flush()

    def _read(self) -> dict:
        out = self.proc.stdout
        length = 0
        while True:
            line = out.readline()
            if not line:
                raise RuntimeError(f"laya-lsp closed its output (exit status {self.proc.poll()})")
            if line in (b"\r\n", b"\n"):
                if length:
                    return json.loads(out.read(length))
            elif line.lower().startswith(b"content-length:"):
                length = int(line.split(b":", 1)[1])

    def notify(self, method: str, params) -> None:
        self._send({"jsonrpc": "2.0", "method": method, "params": params})

    def request(self, method: str, params):
        """Send a request and return its ``result`` (raises RuntimeError on an error answer)."""
        msg_id = next(self._ids)
        self._send({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params})
        while True:
            msg = self._read()
            if "method" in msg:
                if "id" in msg:  # the server's own request: accept it
                    self._send({"jsonrpc": "2.0", "id": msg["id"], "result": None})
                elif msg["method"] == "window/showMessage":
                    self.messages.append(str((msg.get("params") or {}).get("message")))
                continue
            if msg.get("id") == msg_id:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result")

    # --- one document ---------------------------------------------------------------------------

    def open(self, uri: str, text: str = "", language: str = "python") -> None:
        self.uri, self.text, self.version = uri, text, 1
        self.notify("textDocument/didOpen", {"textDocument": {
            "uri": uri, "languageId": language, "version": 1, "text": text}})

    def edit(self, start: int, end: int, new: str) -> None:
        """Replace ``text[start:end]`` by ``new`` (one incremental ``didChange``)."""
        self.version += 1
        self.notify("textDocument/didChange", {
            "textDocument": {"uri": self.uri, "version": self.version},
            "contentChanges": [{"range": {"start": position(self.text, start), "end": position(self.text, end)},
                                "text": new}]})
        self.text = self.text[:start] + new + self.text[end:]

    def type_to(self, text: str) -> None:
        """Bring the document to ``text`` with one incremental change (append, or delete back)."""
        if text == self.text:
            return
        n = changed_from(self.text, text)
        self.edit(n, len(self.text), text[n:])

    def complete_at(self, offset: int) -> tuple[list[dict], float]:
        """Completion at ``offset``: ``(items as JSON objects, seconds for the round trip)``."""
        params = {"textDocument": {"uri": self.uri}, "position": position(self.text, offset)}
        t = time.perf_counter()
        res = self.request("textDocument/completion", params)
        dt = time.perf_counter() - t
        items = res.get("items", []) if isinstance(res, dict) else (res or [])
        return items, dt

    def complete(self) -> tuple[list[dict], float]:
        """Completion at the end of the document."""
        return self.complete_at(len(self.text))

    def rss_mb(self) -> float:
        """Resident memory of the server process, in MB (see :func:`rss_mb`)."""
        return rss_mb(self.proc.pid)

    def shutdown(self) -> None:
        try:
            self.request("shutdown", None)
            self.notify("exit", None)
            self.proc.wait(timeout=10)
        except (RuntimeError, OSError, subprocess.TimeoutExpired):
            self.proc.kill()
        finally:
            for f in (self.proc.stdin, self.proc.stdout):
                try:
                    f.close()
                except OSError:
                    pass
