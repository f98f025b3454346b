"""Running one Emacs scenario in batch mode against the real server, shared by the Emacs tests
(eglot: ``tests/test_emacs_adversarial.py``; lsp-mode: ``tests/test_emacs_lsp_mode.py``).

Each scenario runs in a fresh git project under ``tmp_path`` with a README snippet as the set-up,
through a driver (``tests/emacs/*.el``) that writes what it recorded as JSON."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

GIT = shutil.which("git")
LAYA_BIN = Path(sys.executable).parent
"""Where ``laya-lsp`` is (the snippets start it by name from ``PATH``)."""

PY = """import json
import os


def load(path):
    with open(path) as f:
        data = json.load(f)
    return data
"""
"""The Python file most scenarios complete in."""

LINES = [  # (label, text before point, text after point, candidate to pick)
    ("cjk", "s = '日本語'; x = json.lo", "", "loads"),
    ("astral", "s = '😀👍🏽'; x = json.lo", "", "loads"),  # UTF-16 surrogate pairs before point
    ("zwj", "s = '👨\u200d👩\u200d👧'; x = json.lo", "", "loads"),
    ("combining", "s = 'e\u0301\u0301'; x = json.lo", "", "loads"),
    ("tab", "\tx = json.lo", "", "loads"),
    ("cjk-mid-word", "s = '日本語'; x = json.lo", "ads(s)", "loads"),
    ("astral-mid-word", "s = '😀'; y = os.pa", "th.join('a')", "path"),
]
"""Hard lines to complete on: non-ASCII before point, a tab, point inside a word."""


CRLF_SCENARIO = r"""
(laya-open "dos.py")
(laya-result 'coding (symbol-name buffer-file-coding-system))
(goto-char (point-max))
(insert "x = json.lo")
(laya-in-sync 'end-sync)
(laya-result 'end-picked (laya-choose "loads"))
(laya-result 'end-line (laya-line))
(end-of-line)
(insert "\ny = os.pa")
(save-excursion (insert "th.join('a')"))
(laya-in-sync 'mid-sync)
(laya-result 'mid-picked (laya-choose "path"))
(laya-result 'mid-line (laya-line))
(save-buffer)
(laya-idle 1)
(goto-char (point-max))
(insert "\nz = json.du")
(laya-in-sync 'after-save-sync)
"""
"""A DOS file (``dos.py``): complete at the end of a line (``loads``) and inside a word
(``path``), checking the client's range each time (``laya-in-sync``), save, and type on."""


def expected_line(before: str, after: str, picked: str) -> str:
    """The line completion should leave: the identifier around point (the part of it typed
    before point and its rest after point) replaced by ``picked``."""
    typed = re.search(r"[A-Za-z0-9_]*$", before).group()
    rest = re.match(r"[A-Za-z0-9_]*", after).group()
    return before[: len(before) - len(typed)] + picked + after[len(rest):]


def run_emacs(emacs: str, driver: Path, snippet: str, tmp_path: Path, scenario: str,
              files: dict[str, str | bytes], *, budget: int, env: dict[str, str] | None = None
              ) -> tuple[dict, str]:
    """Run ``scenario`` (elisp, after the helpers of ``driver``) in ``emacs --batch`` with
    ``snippet`` as the set-up, in a git project holding ``files`` (text written with ``\\n``
    line ends, bytes as they are). ``env`` adds to the driver's environment. Returns the
    recorded results and a context string for assertion messages; fails the test when Emacs
    hangs past ``budget`` + 60 s, writes no result or records an error."""
    project = tmp_path / "project"
    project.mkdir()
    if GIT:  # a real repository: project.el and the clients' file watching list files with git
        subprocess.run([GIT, "init", "-q", str(project)], check=True, capture_output=True)
    else:
        (project / ".git").mkdir()
    for name, content in files.items():
        path = project / name
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8", newline="\n")
    (tmp_path / "setup.el").write_text(snippet, encoding="utf-8")
    (tmp_path / "scenario.el").write_text(";;; -*- lexical-binding: t -*-\n" + scenario,
                                          encoding="utf-8")
    out = tmp_path / "out.json"
    env = {**os.environ, "PATH": f"{LAYA_BIN}{os.pathsep}{os.environ.get('PATH', '')}",
           "HOME": str(tmp_path), "HF_HUB_OFFLINE": "1",
           "LAYA_EMACS_SETUP": str(tmp_path / "setup.el"),
           "LAYA_EMACS_SCENARIO": str(tmp_path / "scenario.el"),
           "LAYA_EMACS_OUT": str(out), "LAYA_EMACS_BUDGET": str(budget), **(env or {})}
    try:
        proc = subprocess.run([emacs, "--batch", "-l", str(driver)], cwd=project, env=env,
                              capture_output=True, text=True, timeout=budget + 60)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"Emacs hung (no exit in {budget + 60} s):\n{(e.stderr or b'')[-3000:]!r}")
    assert out.exists(), f"emacs wrote no result (rc {proc.returncode}):\n{proc.stderr[-3000:]}"
    got = json.loads(out.read_text(encoding="utf-8"))
    shown = {k: v for k, v in got.items() if k != "messages"}
    context = (f"\n{json.dumps(shown, indent=1, ensure_ascii=False)[:6000]}\n--- *Messages* ---\n"
               f"{got.get('messages', '')[-3000:]}\n--- emacs stderr ---\n{proc.stderr[-2000:]}")
    assert "error" not in got, got["error"] + context
    return got, context
