"""The server's stdin reader (``laya_lsp.stdio``): the event loop reads the pipe itself; a stdin
that is a regular file falls back to pygls's own reader. Both serve the same session."""

import asyncio
import json
import os
import subprocess
import sys
import threading

import pytest

from laya_lsp.stdio import LINE_LIMIT, PipeReader, pipe_capable

ENV = {**os.environ, "HF_HUB_OFFLINE": "1"}


def _frame(obj) -> bytes:
    body = json.dumps(obj).encode()
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


SESSION = b"".join(_frame(m) for m in (
    {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"processId": None, "rootUri": None, "capabilities": {}}},
    {"jsonrpc": "2.0", "method": "initialized", "params": {}},
    {"jsonrpc": "2.0", "id": 2, "method": "shutdown", "params": None},
    {"jsonrpc": "2.0", "method": "exit", "params": None},
))


def _responses(out: bytes) -> dict:
    msgs, rest = {}, out
    while rest:
        head, _, rest = rest.partition(b"\r\n\r\n")
        n = next(int(h.split(b":")[1]) for h in head.split(b"\r\n") if h.lower().startswith(b"content-length"))
        m, rest = json.loads(rest[:n]), rest[n:]
        if "id" in m and "method" not in m:
            msgs[m["id"]] = m
    return msgs


def _read_all(chunks: list[bytes], calls):
    """Feed ``chunks`` through a pipe to a PipeReader and run ``calls(reader)``."""
    r, w = os.pipe()

    def write():  # from another thread: a large chunk would fill the pipe before it is read
        with os.fdopen(w, "wb") as fh:
            for c in chunks:
                fh.write(c)

    async def main():
        reader = PipeReader(os.fdopen(r, "rb", buffering=0))
        return await calls(reader)

    t = threading.Thread(target=write)
    t.start()
    try:
        return asyncio.run(main())
    finally:
        t.join(10)


def test_reads_lines_and_bodies_and_a_short_body_at_end_of_input():
    async def calls(reader):
        return [await reader.readline(), await reader.readline(), await reader.readexactly(5),
                await reader.readexactly(10), await reader.readline()]

    got = _read_all([b"Content-Length: 5\r\n", b"\r\nhello", b"wor"], calls)
    assert got == [b"Content-Length: 5\r\n", b"\r\n", b"hello", b"wor", b""]


def test_a_header_line_past_the_limit_is_skipped_not_fatal():
    async def calls(reader):
        return [await reader.readline() for _ in range(3)]

    lines = _read_all([b"X" * (LINE_LIMIT + 10) + b"\r\n", b"Content-Length: 2\r\n"], calls)
    assert not lines[0].startswith(b"Content-Length")
    assert b"Content-Length: 2\r\n" in lines[1:]  # the line after it is read whole


def test_pipe_capable_only_for_pipes(tmp_path):
    r, w = os.pipe()
    try:
        assert pipe_capable(os.fdopen(r, "rb", closefd=False)) == (os.name == "posix")
    finally:
        os.close(r)
        os.close(w)
    with open(tmp_path / "f", "wb+") as fh:
        assert not pipe_capable(fh)


@pytest.mark.parametrize("stdin", ["pipe", "file"])
def test_a_whole_session_over_a_pipe_and_from_a_file(tmp_path, stdin):
    if stdin == "pipe":
        p = subprocess.run([sys.executable, "-m", "laya_lsp"], input=SESSION, capture_output=True,
                           env=ENV, timeout=60)
    else:
        f = tmp_path / "session.bin"
        f.write_bytes(SESSION)
        with open(f, "rb") as fh:
            p = subprocess.run([sys.executable, "-m", "laya_lsp"], stdin=fh, capture_output=True,
                               env=ENV, timeout=60)
    got = _responses(p.stdout)
    assert got[1]["result"]["serverInfo"]["name"] == "laya-lsp"
    assert got[2]["result"] is None
    assert p.returncode == 0
