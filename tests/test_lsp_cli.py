"""The ``laya-lsp`` command line: start-up time, stdout hygiene, TCP, ``--check``, ``--log-file``."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time

import pytest

SERVER = [sys.executable, "-m", "laya_lsp"]
ENV = {**os.environ, "HF_HUB_OFFLINE": "1"}


def frame(obj: dict) -> bytes:
    body = json.dumps(obj).encode()
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


def read_frame(stream) -> dict:
    length = None
    while (line := stream.readline()) not in (b"\r\n", b""):
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":")[1])
    assert length is not None, "the stream ended before a message"
    return json.loads(stream.read(length))


INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
              "params": {"processId": None, "rootUri": None, "capabilities": {}}}


def test_initialize_is_answered_before_the_model_is_ready(tmp_path):
    """The initialize result goes out before the model has loaded (it loads on its own thread,
    after the answer): in the server's own log (debug level), the line sending result 1 comes before "model
    ready". An order, not a time, so a busy machine cannot fail it; the time to the answer and to
    the first items is a benchmark's (``python -m laya_tools.bench_docs``), and the bound here only
    catches a hang."""
    log_file = tmp_path / "laya.log"
    proc = subprocess.Popen([*SERVER, "--log-file", str(log_file), "--log-level", "debug"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=ENV)
    try:
        proc.stdin.write(frame(INITIALIZE))
        proc.stdin.flush()
        reply = read_frame(proc.stdout)
        deadline = time.monotonic() + 120
        while "model ready" not in log_file.read_text() and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        proc.kill()
        proc.wait()
    assert reply["id"] == 1 and "completionProvider" in reply["result"]["capabilities"]
    lines = log_file.read_text().splitlines()
    answer = next((i for i, line in enumerate(lines) if 'Sending data: {"id": 1,' in line), None)
    ready = next((i for i, line in enumerate(lines) if "model ready" in line), None)
    assert answer is not None and ready is not None, "\n".join(lines[-20:])
    assert answer < ready, "the initialize result waited for the model:\n" + "\n".join(lines[answer - 5:answer + 1])


def test_stdout_carries_only_json_rpc(tmp_path):
    """A whole session on stdio: every byte on stdout is a well-formed JSON-RPC frame, and with
    --log-file the logs go to the file, not to stdout or stderr."""
    log_file = tmp_path / "laya.log"
    uri = "file:///t/doc.py"
    session = b"".join(frame(m) for m in [
        INITIALIZE,
        {"jsonrpc": "2.0", "method": "initialized", "params": {}},
        {"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {"textDocument": {
            "uri": uri, "languageId": "python", "version": 1, "text": "import os\nos.pa"}}},
        {"jsonrpc": "2.0", "id": 2, "method": "textDocument/completion", "params": {
            "textDocument": {"uri": uri}, "position": {"line": 1, "character": 5}}},
    ])
    proc = subprocess.Popen(SERVER + ["--log-file", str(log_file), "--log-level", "debug"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=ENV)
    proc.stdin.write(session)
    proc.stdin.flush()
    messages = []
    while not any(m.get("id") == 2 for m in messages):
        messages.append(read_frame(proc.stdout))
    bye = frame({"jsonrpc": "2.0", "id": 3, "method": "shutdown"}) + frame(
        {"jsonrpc": "2.0", "method": "exit"})
    rest, err = proc.communicate(bye, timeout=30)
    assert proc.returncode == 0
    while rest:  # whatever came after the completion must parse as frames too
        head, _, rest = rest.partition(b"\r\n\r\n")
        assert head.startswith(b"Content-Length: "), head[:80]
        n = int(head.split(b"\r\n")[0].split(b":")[1])
        messages.append(json.loads(rest[:n]))
        rest = rest[n:]
    completion = next(m for m in messages if m.get("id") == 2)
    # sent right after initialized, while the model loads: it waits for the model, not empty
    assert completion["result"]["items"], completion
    assert any(m.get("id") == 3 for m in messages)
    assert err == b"", err.decode()[-2000:]
    text = log_file.read_text()
    assert "laya_lsp.cli" in text and "DEBUG" in text


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_tcp_mode():
    port = _free_port()
    proc = subprocess.Popen(SERVER + ["--tcp", "--host", "127.0.0.1", "--port", str(port)],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=ENV)
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                conn = socket.create_connection(("127.0.0.1", port), timeout=10)
                break
            except OSError:
                assert time.monotonic() < deadline, "the TCP server never listened"
                time.sleep(0.05)
        with conn, conn.makefile("rwb") as stream:
            stream.write(frame(INITIALIZE))
            stream.flush()
            reply = read_frame(stream)
        assert reply["id"] == 1 and "capabilities" in reply["result"]
    finally:
        proc.kill()
        proc.wait()


def test_check_with_the_shipped_model():
    out = subprocess.run(SERVER + ["--check"], capture_output=True, text=True, env=ENV, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "model loaded in" in out.stdout
    assert "'pa" in out.stdout  # candidates for the sample's "return pa"


def test_check_says_when_the_kernels_are_built_in_the_background(tmp_path):
    """A first start (an empty cache) starts the kernels' build and --check says so; with the
    build done (the cache of the other tests) it does not."""
    fresh = subprocess.run(SERVER + ["--check"], capture_output=True, text=True, timeout=120,
                           env={**ENV, "LAYA_CACHE_DIR": str(tmp_path)})
    assert fresh.returncode == 0, fresh.stderr
    started = any((tmp_path / "kernels").glob("*.lock")) or any((tmp_path / "kernels").glob("*/"))
    assert ("being built in the background" in fresh.stdout) == started, fresh.stdout + fresh.stderr
    built = subprocess.run(SERVER + ["--check"], capture_output=True, text=True, env=ENV, timeout=120)
    if "numba backend" in built.stderr:  # the kernels are there: nothing is being built
        assert "being built in the background" not in built.stdout, built.stdout


@pytest.mark.parametrize("make", ["missing", "corrupt"])
def test_check_names_the_file_at_fault(tmp_path, make):
    folder = tmp_path / "model"
    named = str(folder)
    if make == "corrupt":
        folder.mkdir()
        (folder / "config.json").write_text("{")
        named = str(folder / "config.json")
    out = subprocess.run(SERVER + ["--check", "--model-path", str(folder)], capture_output=True,
                         text=True, env=ENV, timeout=120)
    assert out.returncode == 1
    assert named in out.stderr, out.stderr
    assert out.stdout == ""


def test_stray_prints_do_not_reach_the_json_rpc_stream():
    code = ("import os, sys\n"
            "from laya_lsp.cli import _claim_stdio\n"
            "rpc_in, rpc_out = _claim_stdio()\n"
            "print('python noise')\n"
            "os.write(1, b'native noise\\n')\n"
            "rpc_out.write(b'FRAME'); rpc_out.flush()\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, env=ENV, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout == b"FRAME"
    assert b"python noise" in out.stderr and b"native noise" in out.stderr


@pytest.mark.parametrize("value", ["0", "-1", "fast"])
def test_bad_switch_interval_is_a_clear_error(value):
    env = dict(os.environ, LAYA_SWITCH_INTERVAL_MS=value)
    r = subprocess.run([sys.executable, "-m", "laya_lsp"], input=b"", capture_output=True, env=env,
                       timeout=60)
    assert r.returncode == 2
    assert b"LAYA_SWITCH_INTERVAL_MS must be a positive number" in r.stderr and value.encode() in r.stderr
    assert r.stdout == b""


def test_switch_interval_applies():
    from engine.worker import SWITCH_INTERVAL_S, set_switch_interval

    saved = sys.getswitchinterval()
    try:
        set_switch_interval()
        assert abs(sys.getswitchinterval() - SWITCH_INTERVAL_S) < 1e-9
    finally:
        sys.setswitchinterval(saved)
