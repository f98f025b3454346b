"""User errors on the command line end in one clear line on stderr and a non-zero exit.

``laya-lsp`` and ``laya`` are run as a user runs them (subprocesses of this interpreter); no
traceback may reach the terminal, and stdout stays empty on an error.
"""

from __future__ import annotations

import argparse
import os
import re
import socket
import subprocess
import sys

import pytest

from laya_tools.replay import before_cursor

ENV = {**os.environ, "HF_HUB_OFFLINE": "1"}
LSP = [sys.executable, "-m", "laya_lsp"]
LAYA = [sys.executable, "-m", "laya_tools.cli"]


def run(cmd: list[str], timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, env=ENV, timeout=timeout,
                          stdin=subprocess.DEVNULL)


def assert_one_line_error(out: subprocess.CompletedProcess, *expected: str, code: int | None = None):
    """Non-zero exit, no traceback, and the last stderr line holds every ``expected`` text."""
    assert out.returncode != 0, out
    if code is not None:
        assert out.returncode == code, out
    assert "Traceback" not in out.stderr, out.stderr
    assert out.stdout == "", out.stdout
    last = out.stderr.strip().splitlines()[-1]
    for text in expected:
        assert text in last, out.stderr


# --- laya-lsp -------------------------------------------------------------------------------------

@pytest.mark.parametrize("args, expected", [
    (["--tcp", "--port", "70000"], ["70000", "1-65535"]),
    (["--tcp", "--port", "http"], ["'http'"]),
    (["--port", "2087"], ["--port need --tcp"]),
    (["--host", "0.0.0.0"], ["need --tcp"]),
    (["--backend", "numpy"], ["need --check", "initializationOptions"]),  # a server would ignore it
    (["--tcp", "--model-path", "/tmp/m"], ["need --check"]),
    (["--variant", "typing"], ["need --check"]),
    (["--log-file", "/nonexistent-laya-dir/laya.log"], ["/nonexistent-laya-dir/laya.log"]),
])
def test_laya_lsp_usage_errors(args, expected):
    assert_one_line_error(run(LSP + args), *expected, code=2)


def test_laya_lsp_port_in_use_is_reported_before_serving():
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        out = run(LSP + ["--tcp", "--port", str(port)], timeout=60)
    assert_one_line_error(out, f"cannot serve on 127.0.0.1:{port}", code=1)
    assert "serving on" not in out.stderr, out.stderr


def test_laya_lsp_unresolvable_host():
    out = run(LSP + ["--tcp", "--host", "no-such-host.invalid", "--port", "2087"], timeout=60)
    assert_one_line_error(out, "cannot serve on no-such-host.invalid:2087", code=1)


def test_versions():
    for cmd, name in ((LSP, "laya-lsp"), (LAYA, "laya")):
        out = run(cmd + ["--version"])
        assert out.returncode == 0, out.stderr
        assert re.fullmatch(rf"{name} \d+\.\d+\.\d+\S*\n", out.stdout), out.stdout


# --- laya -----------------------------------------------------------------------------------------

@pytest.fixture
def source(tmp_path):
    path = tmp_path / "sample.py"
    path.write_text("import os\n\npath = os.pa\n", encoding="utf-8")
    return path


def test_complete_missing_file(tmp_path):
    missing = tmp_path / "missing.py"
    assert_one_line_error(run(LAYA + ["complete", str(missing)]), "laya complete", str(missing))


def test_complete_directory(tmp_path):
    assert_one_line_error(run(LAYA + ["complete", str(tmp_path)]), "laya complete", str(tmp_path))


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="root reads any file")
def test_complete_unreadable_file(source):
    source.chmod(0)
    assert_one_line_error(run(LAYA + ["complete", str(source)]), "laya complete", "Permission denied")


@pytest.mark.parametrize("offset", ["-1", "1000"])
def test_complete_offset_out_of_range(source, offset):
    size = len(source.read_text())
    assert_one_line_error(run(LAYA + ["complete", "--offset", offset, str(source)]),
                          f"--offset {offset}", f"0 to {size}", code=2)


def test_complete_offset_in_range_works(source):
    text = source.read_text()
    out = run(LAYA + ["complete", "--offset", str(text.index("pa\n") + 2), str(source)])
    assert out.returncode == 0, out.stderr
    assert "'path'" in out.stdout, out.stdout


@pytest.mark.parametrize("command", ["complete", "demo"])
def test_empty_model_folder(tmp_path, source, command):
    empty = tmp_path / "model"
    empty.mkdir()
    args = [command, "--model", str(empty)] + ([str(source)] if command == "complete" else [])
    assert_one_line_error(run(LAYA + args), f"laya {command}", str(empty), "config.json", code=2)


def test_demo_missing_file(tmp_path):
    missing = tmp_path / "missing.py"
    assert_one_line_error(run(LAYA + ["demo", str(missing)]), "laya demo", str(missing), code=2)


# --- help for every argument ----------------------------------------------------------------------

class _Parsed(Exception):
    def __init__(self, parser):
        self.parser = parser


def _parser(module_main, argv):
    """The parser ``module_main`` builds (caught at ``parse_args``)."""
    original = argparse.ArgumentParser.parse_args

    def capture(self, *args, **kwargs):
        raise _Parsed(self)

    argparse.ArgumentParser.parse_args = capture
    try:
        module_main(argv)
    except _Parsed as p:
        return p.parser
    finally:
        argparse.ArgumentParser.parse_args = original
    raise AssertionError("main() did not parse arguments")


def _undocumented(parser: argparse.ArgumentParser, only: set[str] | None = None) -> list[str]:
    missing = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                if only is None or name in only:
                    missing += [f"{name} {m}" for m in _undocumented(sub)]
        elif not action.help:
            missing.append("/".join(action.option_strings) or action.dest)
    return missing


def test_every_argument_has_help():
    from laya_tools import cli as engine_cli
    from laya_lsp import cli as lsp_cli

    assert _undocumented(lsp_cli.build_parser()) == []
    # complete, demo and bench (corpus/train/eval/export are the training tools)
    laya = _parser(engine_cli.main, ["complete"])
    assert _undocumented(laya, only={"complete", "demo", "bench"}) == []


# --- the demo shows what was typed ----------------------------------------------------------------

def test_before_cursor_shows_the_previous_line_at_a_line_start():
    text = "class A:\n    def f(self):\n        return 1\n\n    def g"
    assert before_cursor(text, len(text) - 5) == r"class A:\ndef f(self):\nreturn 1\n\n|"
    assert before_cursor("x = os.pa", 9) == "x = os.pa|"
    assert before_cursor("a" * 100, 100, width=10) == "a" * 10 + "|"


def test_demo_prints_each_sample_with_the_text_before_the_cursor():
    out = run(LAYA + ["demo"], timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    samples = [line for line in out.stdout.splitlines() if " -> " in line]
    assert len(samples) >= 5, out.stdout
    for line in samples:
        shown = line.rsplit(" -> ", 1)[0].strip()  # the code itself may hold " -> "
        assert shown.endswith("|") and len(shown) > 1, f"a sample without context: {line!r}"
    assert "keystrokes saved" in out.stdout


def test_complete_takes_the_language_from_the_extension(tmp_path):
    f = tmp_path / "main.go"
    f.write_text('package main\n\nimport "fmt"\n\nfunc main() {\n\tfmt.Pri\n')
    out = run(LAYA + ["complete", str(f), "-n", "3"])
    assert out.returncode == 0, out.stderr
    assert "'Printf'" in out.stdout and "PrimaryKeyConstraint" not in out.stdout


def test_complete_rejects_a_non_positive_count(tmp_path):
    f = tmp_path / "a.py"
    f.write_text("import os\nos.pa\n")
    out = run(LAYA + ["complete", str(f), "-n", "-3"])
    assert out.returncode == 2 and out.stderr.strip().splitlines()[-1].startswith("laya complete: -n -3")


def test_demo_on_a_file_with_nothing_to_type_says_so(tmp_path):
    f = tmp_path / "empty.py"
    f.write_text("")
    out = run(LAYA + ["demo", str(f)])
    assert out.returncode == 2 and "no identifiers to type" in out.stderr
    assert "Traceback" not in out.stderr


def test_train_anneal_without_a_checkpoint(tmp_path):
    out = run(LAYA + ["train", "--checkpoint", str(tmp_path / "none"), "--corpus", str(tmp_path / "corpus"),
                      "--anneal", "--steps", "10"])
    assert_one_line_error(out, "laya train:", "--anneal continues a checkpoint", code=2)
    assert not (tmp_path / "none").exists()


def test_fitting_the_reranker_needs_an_out_file():
    """``laya tune --rerank`` never overwrites the shipped ``rerank.json`` by default."""
    out = run(LAYA + ["tune", "--rerank"])
    assert_one_line_error(out, "--out", "rerank.json", code=2)


@pytest.mark.parametrize("content", [None, b"not an npz"])
def test_fitting_the_reranker_from_decisions_that_cannot_be_read(tmp_path, content):
    f = tmp_path / "d.npz"
    if content is not None:
        f.write_bytes(content)
    out = run(LAYA + ["tune", "--rerank", "--decisions-in", str(f), "--out", str(tmp_path / "r.json")])
    assert_one_line_error(out, "cannot read the decisions", "d.npz", code=2)
    assert not (tmp_path / "r.json").exists()


@pytest.mark.parametrize("args, words", [
    (["--decisions-out", "d"], "name an .npz file"),
    (["--decisions-out", "x.npz", "--decisions-in", "y.npz"], "give one"),
    (["--decisions-out", "/nonexistent-dir/d.npz"], "folder does not exist"),
    (["--decisions-in", ""], "name each .npz file once"),
    (["--decisions-in", "a.npz,a.npz"], "name each .npz file once"),
    (["--decisions-in", "/nonexistent-dir/d.npz"], "no such file"),
    (["--decisions-out", "d.npz", "--out", "/tmp"], "is a folder"),
    (["--decisions-weights", "1"], "give those"),
    (["--rerank-unfaced-weight", "1.5"], "from 0 to 1"),
    (["--rerank-unfaced-weight", "-0.1"], "from 0 to 1"),
    (["--decisions-in", "a.npz,b.npz", "--decisions-weights", "1"], "one number >= 0 per --decisions-in file (2)"),
    (["--decisions-in", "a.npz", "--decisions-weights", "x"], "one number >= 0"),
    (["--decisions-in", "a.npz", "--decisions-weights", "-1"], "one number >= 0"),
    (["--decisions-in", "a.npz", "--decisions-weights", "0"], "not all 0"),
])
def test_reranker_decision_files_are_checked_before_collecting(tmp_path, args, words):
    out = run(LAYA + ["tune", "--rerank", "--out", str(tmp_path / "r.json")] + args)
    assert_one_line_error(out, "laya tune --rerank:", words, code=2)


def test_reranker_flags_without_rerank_are_refused(tmp_path):
    """Without ``--rerank``, ``laya tune`` prints ranking options: a forgotten ``--rerank`` must not
    silently do that instead of fitting."""
    out = run(LAYA + ["tune", "--decisions-in", "a.npz", "--out", str(tmp_path / "r.json")])
    assert_one_line_error(out, "laya tune:", "only apply with --rerank", code=2)


def _decisions(path, faced: bool):
    """A small collection of decisions whose answer is marked by ``on_line``; ``faced``: with the
    ``faced`` flags (every other decision)."""
    import numpy as np

    from laya_tools.rerank_fit import save_decisions
    from tests.rerank_decisions import marked_decisions

    n = 64
    data = marked_decisions(n, 4, languages=("go",), rest=4, buckets=False)
    if faced:
        data["faced"] = np.arange(n) % 2 == 0
    save_decisions(data, path)


def test_fitting_faced_only_from_saved_decisions(tmp_path):
    """``--rerank-faced-only`` with ``--decisions-in`` keeps the decisions marked ``faced``; files
    collected before the mark existed are refused by name."""
    import json

    _decisions(tmp_path / "old.npz", faced=False)
    out = run(LAYA + ["tune", "--rerank", "--decisions-in", str(tmp_path / "old.npz"), "--rerank-faced-only",
                      "--out", str(tmp_path / "r.json")])
    assert_one_line_error(out, "laya tune --rerank:", "old.npz", "collect again", code=2)
    _decisions(tmp_path / "new.npz", faced=True)
    out = run(LAYA + ["tune", "--rerank", "--decisions-in", str(tmp_path / "new.npz"), "--rerank-faced-only",
                      "--rerank-fit-seed", "3", "--out", str(tmp_path / "r.json")])
    assert out.returncode == 0, out.stderr
    meta = json.loads((tmp_path / "r.json").read_text())["meta"]
    assert meta["decisions"] == 32 and meta["faced_only"] is True and meta["fit_seed"] == 3


def test_fitting_with_the_unfaced_decisions_weighed_down(tmp_path):
    """``--rerank-unfaced-weight W`` keeps every decision and weighs the unfaced ones by ``W`` (the
    shipped fit: 0.3); files without the ``faced`` marks are refused by name."""
    import json

    _decisions(tmp_path / "old.npz", faced=False)
    out = run(LAYA + ["tune", "--rerank", "--decisions-in", str(tmp_path / "old.npz"),
                      "--rerank-unfaced-weight", "0.3", "--out", str(tmp_path / "r.json")])
    assert_one_line_error(out, "laya tune --rerank:", "old.npz", "collect again", code=2)
    _decisions(tmp_path / "new.npz", faced=True)
    out = run(LAYA + ["tune", "--rerank", "--decisions-in", str(tmp_path / "new.npz"),
                      "--rerank-unfaced-weight", "0.3", "--out", str(tmp_path / "r.json")])
    assert out.returncode == 0, out.stderr
    meta = json.loads((tmp_path / "r.json").read_text())["meta"]
    assert meta["decisions"] == 64 and meta["unfaced_weight"] == 0.3
    out = run(LAYA + ["tune", "--rerank", "--decisions-in", str(tmp_path / "new.npz"),
                      "--rerank-unfaced-weight", "0", "--out", str(tmp_path / "r.json")])
    assert out.returncode == 0 and json.loads((tmp_path / "r.json").read_text())["meta"]["decisions"] == 32
