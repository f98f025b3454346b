"""Emacs + eglot, set up as ``editors/README.md`` says, completes through ``laya-lsp``.

Emacs runs in batch mode with the README's elisp snippet (taken from the README itself) and
``laya-lsp`` on ``PATH`` (this environment's), opens a Python file whose last line is
``x = json.lo``, asks ``completion-at-point`` (eglot's capf) for candidates and chooses the first
(``tests/emacs/complete.el``). Emacs 28 (Debian bookworm: ``apt-get install emacs-nox
elpa-eglot``, which ``.ci/run`` does when it runs as root) or 29+ (eglot built in). Skipped, saying
why, when there is no Emacs with eglot.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "editors" / "README.md"
DRIVER = Path(__file__).parent / "emacs" / "complete.el"
EMACS = shutil.which("emacs")
LAYA_BIN = Path(sys.executable).parent

SOURCE = '''import json


class Reader:
    def __init__(self, scale):
        self.scale = scale

    def load(self, path):
        x = json.lo'''


def _eglot_missing() -> str | None:
    if EMACS is None:
        return "Emacs not installed (Debian: apt-get install emacs-nox elpa-eglot)"
    probe = subprocess.run([EMACS, "--batch", "--eval",
                            "(progn (require 'package) (package-initialize) (require 'eglot))"],
                           capture_output=True, text=True, timeout=60)
    if probe.returncode != 0:
        return f"Emacs has no eglot (Emacs 28: apt-get install elpa-eglot): {probe.stderr.strip()[-200:]}"
    return None


REASON = _eglot_missing()
pytestmark = pytest.mark.skipif(REASON is not None, reason=REASON or "")


def readme_snippet() -> str:
    section = re.search(r"^## Emacs\b.*?$(.*?)(?=^## )", README.read_text(encoding="utf-8"), re.M | re.S)
    assert section, f"{README} has no '## Emacs' section"
    blocks = re.findall(r"^```elisp\n(.*?)^```", section.group(1), re.M | re.S)
    assert blocks, "no ```elisp block in the README's Emacs section"
    return blocks[0]


def run_eglot(tmp_path: Path, driver: Path, **env: str) -> tuple[dict, str]:
    """Run ``driver`` in Emacs (batch) with the README's snippet loaded, on a copy of ``SOURCE``
    in a project folder: returns the JSON the driver wrote (``LAYA_EMACS_OUT``) and a context
    string for assertion messages (that JSON and Emacs's stderr). ``env``: more variables."""
    project = tmp_path / "project"
    (project / ".git").mkdir(parents=True)
    source = project / "reader.py"
    source.write_text(SOURCE, encoding="utf-8")
    setup = tmp_path / "setup.el"
    setup.write_text(readme_snippet(), encoding="utf-8")
    out = tmp_path / "out.json"
    env = {**os.environ, "PATH": f"{LAYA_BIN}{os.pathsep}{os.environ.get('PATH', '')}",
           "HOME": str(tmp_path), "HF_HUB_OFFLINE": "1", "LAYA_EMACS_SETUP": str(setup),
           "LAYA_EMACS_FILE": str(source), "LAYA_EMACS_OUT": str(out), **env}
    proc = subprocess.run([EMACS, "--batch", "-l", str(driver)], cwd=project, env=env,
                          capture_output=True, text=True, timeout=300)
    assert out.exists(), f"emacs wrote no result (rc {proc.returncode}):\n{proc.stderr[-3000:]}"
    got = json.loads(out.read_text())
    context = f"\n{json.dumps(got, indent=1)}\n--- emacs ---\n{proc.stderr[-3000:]}"
    assert "error" not in got, got["error"] + context
    return got, context


def test_eglot_completes_through_the_server(tmp_path):
    got, context = run_eglot(tmp_path, DRIVER)
    assert got["mode"] == "python-mode", context
    assert got["prefix"] == "lo", context
    candidates = got["candidates"]
    assert "loads" in candidates and all(c.startswith("lo") for c in candidates), context
    assert len(candidates) <= 20, "the README's :maxItems 20 did not reach the server" + context
    assert got["line-before"] == "        x = json.lo", context
    assert got["line-after"] == "        x = json." + got["choice"], context
    print(f"Emacs {got['emacs']}, eglot {got['eglot']}")
