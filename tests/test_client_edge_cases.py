"""Client mistakes and hostile input found by a fresh tester (2026-12-02), one test per bug: a second TCP
connection, a lowercase header over TCP, a pathological `.gitignore` line, impossible `processId`s,
a change to a document that is not open, a repeated `initialized`."""

from __future__ import annotations

from pathlib import Path


def test_did_change_of_a_document_that_is_not_open_is_no_server_error():
    """A ``didChange`` for a document never opened (or already closed: a change racing the
    close) raised ``KeyError`` in pygls's workspace, logged as a server error at ERROR in the
    editor's log; it is the client's mistake, ignored with a warning, and the server goes on."""
    from tests.lsp_raw import RawServer

    with RawServer() as s:
        s.initialize()
        uri = "file:///tmp/laya-s5-never-opened.py"
        edit = {"range": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 0}},
                "text": "x"}
        s.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": 2},
                                            "contentChanges": [edit, {"text": "whole"}]})
        s.open(uri, "handler_function = 1\nhandler_f")
        s.notify("textDocument/didClose", {"textDocument": {"uri": uri}})
        s.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": 3},
                                            "contentChanges": [edit]})
        s.notify("notebookDocument/didChange", {
            "notebookDocument": {"uri": "file:///tmp/laya-s5-never.ipynb", "version": 2}, "change": {}})
        assert s.complete(uri, 0, 1)["result"]["items"] == []  # not open: empty, as before
        s.open(uri, "handler_function = 1\nhandler_f")  # the session goes on
        s.complete_until(uri, 1, 9, "handler_function")
        assert _errors(s) == [], _errors(s)
        assert s.exit() == 0


def test_did_change_of_documents_that_are_not_open_leaves_no_bookkeeping():
    """Each ``didChange`` for a URI not open left an entry in the document-count throttle for
    good (a client sending changes for documents it never opened grew the server without end)."""
    import time

    from tests.lsp_raw import InProcessServer

    s = InProcessServer()
    try:
        s.initialize({})
        edit = {"range": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 0}},
                "text": "x"}
        for k in range(20):
            s.notify("textDocument/didChange", {"textDocument": {"uri": f"file:///tmp/laya-never/{k}.py",
                                                                 "version": 2}, "contentChanges": [edit]})
        uri = "file:///tmp/laya-s5-open.py"
        s.open(uri, "handler_function = 1\nhandler_f")
        s.complete_until(uri, 1, 9, "handler_function")
        time.sleep(0.2)
        assert [k for k in s.ls.observer._last if "laya-never" in k] == []
        assert s.ls.sequencer.entries() == 2
    finally:
        s.close()


def _errors(s) -> list[str]:
    """The ERROR messages the server sent the editor (log and pop-up)."""
    return [m["params"]["message"] for m in s.messages
            if m.get("method") in ("window/logMessage", "window/showMessage") and m["params"]["type"] == 1]


def test_a_process_id_no_process_can_have_is_not_watched():
    """``processId`` past the C range raised ``OverflowError`` out of ``kill`` in the
    ``initialized`` handler (an ERROR in the editor's log, and the workspace index and the
    load report after it never ran); a negative one named a process group (-1: every process,
    so "alive" forever)."""
    from laya_lsp import parent

    assert not parent.alive(2**31)
    assert not parent.alive(2**63)
    assert not parent.alive(-1)
    assert not parent.alive(0)
    import os
    assert parent.alive(os.getpid())


def test_initialized_with_an_out_of_range_process_id_still_indexes_the_workspace(tmp_path):
    from tests.lsp_raw import RawServer

    (tmp_path / "helpers.py").write_text("def workspace_omega_identifier():\n    return 1\n")
    root = tmp_path.as_uri()
    with RawServer() as s:
        answer = s.call("initialize", {"processId": 2**31, "rootUri": root, "capabilities": {},
                                       "initializationOptions": {}})
        assert "result" in answer
        s.notify("initialized", {})
        uri = root + "/main.py"
        s.open(uri, "x = workspace_om")
        s.complete_until(uri, 0, 16, "workspace_omega_identifier", why="the workspace was never indexed")
        assert _errors(s) == [], _errors(s)
        assert s.exit() == 0


def test_a_second_initialized_notification_is_ignored():
    """``initialized`` sent again ran its handler again: the option problems popped up once per
    copy, and each copy started another model-load progress report (and parent watch)."""
    import time

    from tests.lsp_raw import RawServer

    with RawServer() as s:
        answer = s.call("initialize", {"processId": None, "rootUri": None,
                                       "capabilities": {"window": {"workDoneProgress": True}},
                                       "initializationOptions": {"maxItems": "x"}})
        assert "result" in answer
        for _ in range(3):
            s.notify("initialized", {})
        s.open("file:///tmp/laya-s5-init.py", "handler_function = 1\nhandler_f")
        s.complete_until("file:///tmp/laya-s5-init.py", 1, 9, "handler_function")
        time.sleep(0.3)
        shown = [m for m in s.messages if m.get("method") == "window/showMessage"]
        creates = [m for m in s.messages if m.get("method") == "window/workDoneProgress/create"]
        assert len(shown) == 1, shown
        assert len(creates) == 1, creates
        assert s.exit() == 0


def _free_port() -> int:
    """A loopback port nothing listens on now."""
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _tcp_server(port: int, stderr=None):
    """``laya-lsp --tcp`` on ``port``; its stderr to ``stderr`` (a ``subprocess`` target; default: dropped)."""
    import subprocess

    from tests.lsp_raw import ENV, SERVER

    return subprocess.Popen(SERVER + ["--tcp", "--host", "127.0.0.1", "--port", str(port)],
                            stdout=subprocess.DEVNULL, stderr=stderr or subprocess.DEVNULL, env=ENV)


def _tcp_client(port: int):
    import socket
    import time

    from tests.lsp_raw import RawServer

    class TcpClient(RawServer):
        def __init__(self, sock):
            self.sock = sock
            self._start(sock.makefile("wb"), sock.makefile("rb"))

        def stderr_text(self) -> str:
            return ""

        def kill(self) -> None:
            self.sock.close()

    deadline = time.monotonic() + 30
    while True:
        try:
            return TcpClient(socket.create_connection(("127.0.0.1", port), timeout=30))
        except OSError:
            assert time.monotonic() < deadline, "the TCP server never listened"
            time.sleep(0.05)


def test_a_second_tcp_connection_does_not_take_over_the_session():
    """``laya-lsp --tcp``: a second connection while an editor's session ran (another window
    pointed at the port, a port probe) became the writer and reset the lifecycle, so the first
    editor's next completion was answered -32002 on the other socket and never reached it."""

    port = _free_port()
    proc = _tcp_server(port)
    try:
        first = _tcp_client(port)
        first.initialize()
        uri = "file:///tmp/laya-s5-tcp.py"
        first.open(uri, "handler_function = 1\nhandler_f")
        first.complete_until(uri, 1, 9, "handler_function")
        second = _tcp_client(port)
        second.sock.settimeout(10)
        assert second.sock.recv(1) == b""  # refused: closed at once
        answer = first.complete(uri, 1, 9, timeout=10)
        assert "handler_function" in [i["label"] for i in answer["result"]["items"]]
        assert second.messages == []
        assert first.call("shutdown", timeout=10)["result"] is None
        first.kill()
        second.kill()
    finally:
        proc.kill()
        proc.wait()


def test_a_reset_tcp_connection_ends_the_server():
    """An editor killed mid-session resets its connection (RST, not FIN): ``readline`` raised
    ``ConnectionResetError`` out of the session, so the server never shut down, and it refused
    every later connection as "under way": a process left running for good."""
    import socket
    import struct
    import subprocess

    port = _free_port()
    proc = _tcp_server(port)
    try:
        client = _tcp_client(port)
        client.initialize()
        client._in.close()  # the reader thread's file and the socket stay; close them all at once
        client.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        client.sock.shutdown(socket.SHUT_RD)
        client._out.close()
        client.sock.close()  # with linger 0: a reset
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            raise AssertionError("the server ran on after its connection was reset") from None
    finally:
        proc.kill()
        proc.wait()


def test_tcp_reads_a_lowercase_content_length_header():
    """Header names are case-insensitive; stdio took ``content-length:``, TCP waited forever."""
    import json

    port = _free_port()
    proc = _tcp_server(port)
    try:
        client = _tcp_client(port)
        body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "processId": None, "rootUri": None, "capabilities": {}}}).encode()
        client._in.write(b"content-length: %d\r\n\r\n" % len(body) + body)
        client._in.flush()
        assert "capabilities" in client.wait_for(1, timeout=20)["result"]
        client.kill()
    finally:
        proc.kill()
        proc.wait()


def _walk_keeps_only_the_kept_file(tmp_path: Path) -> None:
    """Walk ``tmp_path`` (whose ``.gitignore`` ends with ``secret_*.py``, in force, after a costly
    line, dropped): within 2 s, and only the file holding ``kept_identifier`` is read."""
    import time

    from laya_lsp.workspace import read_workspace

    (tmp_path / "secret_notes.py").write_text("hidden_identifier = 1\n")
    t0 = time.monotonic()
    files = read_workspace([tmp_path])
    assert time.monotonic() - t0 < 2.0
    texts = [t for ts in files.texts.values() for t in ts]
    assert texts == ["kept_identifier = 1\n"]


def test_a_pathological_gitignore_line_cannot_freeze_the_workspace_walk(tmp_path: Path):
    """pathspec's regular expressions backtrack exponentially in a segment's ``*`` count, holding
    the GIL: ``a*a*a*a*a*a*a*a*a*a*b`` against a 40-letter file name took ~10 s per check, during
    which no completion was answered. Such a line is dropped; the others stay in force."""
    (tmp_path / ".gitignore").write_text("a*a*a*a*a*a*a*a*a*a*a*a*b\nsecret_*.py\n")
    (tmp_path / ("a" * 40 + ".py")).write_text("kept_identifier = 1\n")
    _walk_keeps_only_the_kept_file(tmp_path)


def test_gitignore_wildcards_of_several_segments_count_together(tmp_path: Path):
    """The wildcards of different segments multiply as well: 3 per segment passed the check per
    segment, and ``**/a*a*a*/**/a*a*a*/**/a*a*a*/b`` took seconds per path of a 30-deep folder
    chain (each folder of the walk is checked). Counted over the whole line (``**`` once), such a
    line is dropped; lines of common shape stay."""
    from laya_lsp.workspace import _costly

    for line in ("*.py[cod]", "**/node_modules/**", "**/build/**/*.o", "a*a*a*b", "secret_*.py"):
        assert not _costly(line), line
    for line in ("**/a*a*a*/**/a*a*a*/**/a*a*a*/b", "**/a/**/a/**/a/**/a/b", "**/a*a*/**/b"):
        assert _costly(line), line
    (tmp_path / ".gitignore").write_text("**/a*a*a*/**/a*a*a*/**/a*a*a*/b\nsecret_*.py\n")
    deep = tmp_path.joinpath(*["a" * 8] * 30)
    deep.mkdir(parents=True)
    (deep / "kept.py").write_text("kept_identifier = 1\n")
    _walk_keeps_only_the_kept_file(tmp_path)


def test_a_tcp_port_probe_does_not_end_the_server():
    """A connection that closes before sending a byte (``nc -z``, a readiness check) ended the
    server, so the editor that came next was refused. The server goes on listening, serves the
    next session, and still ends with it."""
    import socket
    import subprocess
    import time

    port = _free_port()
    proc = _tcp_server(port)
    try:
        deadline = time.monotonic() + 30
        probes = 0
        while probes < 3:  # probes: connected, closed, nothing sent (the first as soon as it listens)
            try:
                socket.create_connection(("127.0.0.1", port), timeout=30).close()
                probes += 1
            except OSError:
                assert time.monotonic() < deadline and proc.poll() is None, "the server never listened"
                time.sleep(0.05)
        while True:  # a connection before the last probe's end reaches the server is closed by it
            client = _tcp_client(port)
            msg_id = client.request("initialize", {"processId": None, "rootUri": None, "capabilities": {}})
            until = time.monotonic() + 30
            while not client.answers(msg_id) and client._reader.is_alive() and time.monotonic() < until:
                time.sleep(0.01)
            if client.answers(msg_id):
                break
            client.kill()
            assert time.monotonic() < deadline and proc.poll() is None, "no session after the probes"
            time.sleep(0.1)
        assert "result" in client.answers(msg_id)[0]
        client.notify("initialized", {})
        uri = "file:///tmp/laya-probe-tcp.py"
        client.open(uri, "handler_function = 1\nhandler_f")
        client.complete_until(uri, 1, 9, "handler_function")
        assert proc.poll() is None
        client.sock.shutdown(socket.SHUT_RDWR)  # the editor's end of the connection
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            raise AssertionError("the server ran on after its session's connection closed") from None
        client.kill()
    finally:
        proc.kill()
        proc.wait()


def test_tcp_serving_on_means_listening_and_bad_json_is_one_warning():
    """"serving on" was logged after a test bind, before the socket listened: a client connecting
    as soon as it read the line was refused. A body that is not JSON is answered -32700 and
    logged as one warning line, not an ERROR with a traceback on stderr (as over stdio). An editor
    gone while the model still loads (``initialized`` waits for it) left asyncio's "Exception in
    callback" and two ``CancelledError`` tracebacks on stderr."""
    import json
    import socket
    import subprocess

    port = _free_port()
    proc = _tcp_server(port, stderr=subprocess.PIPE)
    try:
        while b"serving on" not in (line := proc.stderr.readline()):
            assert line, "the server ended without serving"
        sock = socket.create_connection(("127.0.0.1", port), timeout=30)  # at once: no retry
        body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "processId": None, "rootUri": None, "capabilities": {}}}).encode()
        initialized = b'{"jsonrpc": "2.0", "method": "initialized", "params": {}}'
        sock.sendall(b"Content-Length: %d\r\n\r\n" % len(body) + body + b"Content-Length: 3\r\n\r\n{{{"
                     + b"Content-Length: %d\r\n\r\n" % len(initialized) + initialized)
        got = b""
        while b"-32700" not in got:
            chunk = sock.recv(65536)
            assert chunk, got
            got += chunk
        sock.close()
        proc.wait(timeout=20)
        err = proc.stderr.read().decode()
        assert "Traceback" not in err and "ERROR" not in err, err
        assert "WARNING" in err and "client error" in err, err
    finally:
        proc.kill()
        proc.wait()
