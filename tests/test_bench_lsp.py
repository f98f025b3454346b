"""The LSP benchmark workloads (``laya bench --jumps``) run against a real server and time what
they say: every timed keystroke is answered, with items."""

import inspect
import textwrap

import pytest

from laya_tools.bench_jumps import bench_jumps, bench_pastes, bench_typing

TEXT = open(inspect.getsourcefile(textwrap), encoding="utf-8").read()


def test_pastes_and_jumps_time_every_keystroke():
    pr = bench_pastes(TEXT, {"default": (None, None)}, warmup=3, runs=24, keys=4)
    r = pr["default"]
    assert len(r["all"]) == 24 == len(r["after_paste"]) + len(r["typing"])
    assert len(r["after_paste"]) >= 24 // 4 and r["empty_answers"] <= 3
    assert all(0 < t < 30 for t in r["all"])
    jr = bench_jumps(TEXT, {"default": (None, None)}, warmup=2, runs=20, keys=5)
    r = jr["default"]
    assert len(r["all"]) == 20 and len(r["after_jump"]) == 4
    assert r["empty_answers"] == 0


def test_typing_asks_at_identifier_keys_only_and_times_each_request():
    start = TEXT.index("class TextWrapper:")
    servers = {"default": (None, None), "LAYA_PREFETCH=0": (None, {"LAYA_PREFETCH": "0"})}
    out = bench_typing(TEXT, servers, warmup=2, runs=30, gap=0.04, start=start)
    asked = TEXT[start:]
    keys = sum(ch.isalnum() or ch == "_" for ch in asked[: asked.index("wrapping")])
    assert keys < 32  # the 32 requests reach past the docstring's first line
    for r in out.values():
        assert len(r["all"]) == 30 == len(r["after_other"]) + len(r["typing"])
        assert len(r["after_other"]) >= 1  # the first word after ':\n    """\n    '
        assert r["empty_answers"] <= 2


def test_a_second_server_runs_from_another_checkout():
    """``--tree DIR``: that server's process runs in DIR with DIR first on its ``PYTHONPATH`` (so
    it imports that checkout's code), and the key naming DIR is not passed on to it."""
    import os
    from pathlib import Path

    from laya_tools.bench_jumps import TREE, _Server

    root = str(Path(__file__).resolve().parent.parent)  # this checkout stands in for another one
    s = _Server("other", None, {TREE: root, "LAYA_X": "1"}, None)
    try:
        pid = s.client.proc.pid
        assert os.readlink(f"/proc/{pid}/cwd") == root
        env = dict(kv.split("=", 1) for kv in open(f"/proc/{pid}/environ").read().split("\0") if "=" in kv)
        assert env["PYTHONPATH"] == root and env["LAYA_X"] == "1" and TREE not in env
    finally:
        s.client.shutdown()


def test_alone_runs_one_server_and_refuses_a_second_one(capsys, tmp_path):
    from laya_tools.bench_jumps import main

    assert main(["typing", "--alone", "--warmup", "2", "--runs", "6"]) == 0
    out = capsys.readouterr().out
    assert "one server" in out and "default again" not in out and out.count("answers without items") == 1
    with pytest.raises(SystemExit):
        main(["typing", "--alone", "--tree", str(tmp_path)])
    # --env and --options then set up the one server (System 2 off and on in turn, for example)
    assert main(["typing", "--alone", "--env", "LAYA_PREFETCH=0", "--options", '{"maxItems": 3}',
                 "--warmup", "2", "--runs", "4"]) == 0
    out = capsys.readouterr().out
    assert out.count("answers without items") == 1 and 'LAYA_PREFETCH=0 {"maxItems": 3}' in out
    for bad in (["--options", "[1]"], ["--options", "{x"], ["--options", "null"], ["--env", "NOEQUALS"]):
        with pytest.raises(SystemExit):
            main(["typing", "--alone", *bad])


def test_what_the_server_shows_the_user_reaches_the_benchmark(capsys, tmp_path):
    """A benchmark of System 2 on where it cannot load says so beside its numbers (it would
    otherwise time System 2 off under the name of on)."""
    import time

    from laya_tools.bench_jumps import _servers

    missing = tmp_path / "none.gguf"
    with _servers({"on": ({"system2": True, "system2Path": str(missing)}, None)}, None,
                  "file:///t.py", TEXT) as live:
        s = live["on"]
        deadline = time.monotonic() + 20
        while not s.client.messages and time.monotonic() < deadline:
            s.complete(len(TEXT))  # the message comes from System 2's thread, soon after the start
            time.sleep(0.1)
        assert any(str(missing) in m for m in s.client.messages)
    assert str(missing) in capsys.readouterr().err
