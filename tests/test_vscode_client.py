"""The VS Code client, as far as it can run here: its protocol test and its package.

VS Code itself cannot run in CI, so ``editors/vscode/test/server.test.js`` (node's test runner)
drives ``laya-lsp`` with VS Code's own protocol libraries and the initialize params the extension
sends; this runs it with the ``laya-lsp`` of this environment. ``npm run package`` must build the
``.vsix`` without a prompt, holding only the esbuild bundle, ``package.json`` and the README.

Needs node 20+ and ``npm ci`` in ``editors/vscode`` (``.ci/run`` does both); skipped, saying why,
without them.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
VSCODE = ROOT / "editors" / "vscode"
NPM = shutil.which("npm")
LAYA_LSP = Path(sys.executable).parent / "laya-lsp"

pytestmark = [
    pytest.mark.skipif(NPM is None or shutil.which("node") is None, reason="node/npm not installed"),
    pytest.mark.skipif(not (VSCODE / "node_modules" / "vscode-languageclient").is_dir(),
                       reason="editors/vscode has no node_modules: run `npm ci` there (.ci/run does)"),
]


def npm(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    env = {**os.environ, "LAYA_LSP": str(LAYA_LSP), "HF_HUB_OFFLINE": "1"}
    return subprocess.run([NPM, *args], cwd=VSCODE, env=env, capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)


def test_protocol_with_the_extensions_initialize_params():
    assert LAYA_LSP.is_file(), f"{LAYA_LSP} missing: pip install -e ."
    out = npm("test")
    report = out.stdout[-6000:] + out.stderr[-3000:]
    assert out.returncode == 0, report
    assert "# fail 0" in out.stdout and "# skipped 0" in out.stdout, report


def test_package_holds_a_few_files(tmp_path):
    vsix = tmp_path / "laya.vsix"
    out = npm("run", "package", "--", "--out", str(vsix))
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    names = sorted(zipfile.ZipFile(vsix).namelist())
    assert "extension/dist/extension.js" in names, names
    assert not [n for n in names if "node_modules" in n or n.endswith(".test.js")], names
    assert len(names) <= 6, names
    assert vsix.stat().st_size < 400_000, vsix.stat().st_size
