"""The server's stdin reader (``laya_lsp.stdio``): the event loop reads the pipe itself; a stdin
that is a regular file falls back to pygls's own reader. Both serve the same session."""

import asyncio
import json
import os
import subprocess
import sys
import threading
import time

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


def test_content_length_headers_in_any_spelling_come_back_canonical():
    from laya_lsp.stdio import canonical_header

    for line in (b"Content-Length: 41\r\n", b"content-length: 41\r\n", b"Content-Length:41\r\n",
                 b"CONTENT-LENGTH:  41 \r\n", b"Content-Length: 41\n", b'ng"}}Content-Length: 41\r\n'):
        assert canonical_header(line) == b"Content-Length: 41\r\n", line
    for line in (b"\r\n", b"\n", b"Content-Type: application/vscode-jsonrpc; charset=utf-8\r\n",
                 b"X-Content-Length-Note: x\r\n"):
        assert canonical_header(line) == line


@pytest.mark.parametrize("bad", ["lowercase", "no space", "LF only", "3 bytes short", "3 bytes long"])
def test_one_misframed_message_does_not_deafen_the_server(bad):
    """A wrong header spelling or length costs that message (and, when too long, the next one's
    header), never the session: the server answers again from the next well-framed message."""
    from tests.lsp_raw import RawServer

    with RawServer() as s:
        s.initialize()
        body = json.dumps({"jsonrpc": "2.0", "id": 900, "method": "shutdownX"}).encode()
        head = {"lowercase": b"content-length: %d\r\n\r\n", "no space": b"Content-Length:%d\r\n\r\n",
                "LF only": b"Content-Length: %d\n\n"}.get(bad, b"Content-Length: %d\r\n\r\n")
        n = len(body) + {"3 bytes short": -3, "3 bytes long": 3}.get(bad, 0)
        s._in.write(head % n + body)
        s._in.flush()
        answered = None
        for _ in range(3):  # a too-long message eats the next one's first bytes: probe again
            msg_id = s.request("textDocument/completion", {
                "textDocument": {"uri": "file:///nope.py"}, "position": {"line": 0, "character": 0}})
            try:
                answered = s.wait_for(msg_id, timeout=10)
                break
            except AssertionError:
                continue
        assert answered is not None and "result" in answered
        if bad in ("lowercase", "no space", "LF only"):  # well-formed apart from the spelling
            assert s.wait_for(900, timeout=10)["error"]["code"] == -32601  # method not found
        assert s.exit() == 0


def test_a_body_nested_past_the_parser_s_depth_gets_a_parse_error():
    from tests.lsp_raw import RawServer

    with RawServer() as s:
        s.initialize()
        deep = b'{"jsonrpc": "2.0", "id": 7, "method": "textDocument/completion", "params": ' \
            + b"[" * 100_000 + b"]" * 100_000 + b"}"
        s.send(deep)
        deadline = time.monotonic() + 20
        while not any(m.get("error", {}).get("code") == -32700 for m in s.messages):
            assert time.monotonic() < deadline, s.messages[-3:]
            time.sleep(0.05)
        assert s.call("shutdown")["result"] is None  # and the session goes on


def test_the_server_exits_when_the_client_closes_its_output():
    from tests.lsp_raw import ENV, SERVER, frame

    proc = subprocess.Popen(SERVER, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, env=ENV)
    try:
        proc.stdout.close()  # the client stops reading, but keeps our stdin open
        proc.stdin.write(frame({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                                "params": {"processId": None, "rootUri": None, "capabilities": {}}}))
        proc.stdin.flush()
        assert proc.wait(timeout=20) == 1
    finally:
        proc.kill()
        proc.wait()


def test_a_body_that_is_not_utf8_parses_with_each_stray_byte_one_character():
    """Neovim sends a buffer's bytes as they are (``:e ++bad=keep`` of a Latin-1 file): each byte
    that is not UTF-8 becomes one lone surrogate, valid UTF-8 and JSON structure are untouched."""
    from laya_lsp.stdio import utf8_body

    ok = '{"text": "caf\u00e9 \u4e2d"}'.encode()
    assert utf8_body(ok) is ok and utf8_body(b'{"a": 1}') == b'{"a": 1}'
    body = b'{"text": "caf\xe9 \xff\xfe", "n": 1}'
    assert json.loads(utf8_body(body)) == {"text": "caf\udce9 \udcff\udcfe", "n": 1}
    # outside a string it stays what it was: not JSON
    with pytest.raises(ValueError):
        json.loads(utf8_body(b'{"a": \xff}'))
