"""Ghost text (``textDocument/inlineCompletion``) in a real Neovim 0.11, set up as
``editors/nvim/README.md`` says.

Neovim 0.11 has no inline completion of its own; ``editors/nvim/lua/laya/inline.lua`` shows the
server's item as virtual text after the cursor and ``<Tab>`` puts it in the buffer. The ``init.lua``
is the README's "Neovim 0.11+" block, taken from the README (``test_nvim_typing.readme_setup``);
a headless Neovim 0.11.4 opens a small Python file whose earlier lines the server offers again (its
ghost text continues a line that starts as an earlier line of the document does) and plays keys
through ``nvim_input``, the queue a terminal's keys go through. After each step it records the
cursor's line, the cursor, the mode, whether the menu is open and every extmark of the buffer
that carries virtual text (the ghost, whatever namespace it is in).

Two sessions: the README's block as it is (Neovim offers UTF-8 first, so positions are in bytes),
and the same block with the client offering only UTF-16, so that the ranges the server sends
count a CJK character as one unit and an emoji as two.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from test_nvim_client import NVIM
from test_nvim_typing import LAYA_LSP, OPEN_AND_WARM, README, readme_setup
from test_nvim_typing import pytestmark  # noqa: F401 - skipped, saying why, without Neovim

PROJECT_FILE = '''import json


class Reader:
    def __init__(self, scale):
        self.scale = scale
        self.records = json.loads(open(scale).read())
        print(self.records[0], scale)
        label = '中文😀' + self.records[0]

    def check(self, other):
        return other
'''

# the lines the server offers again, and what it adds after the typed start
FULL = "        self.records = json.loads(open(scale).read())"
START = "        self.rec"
REST = FULL[len(START):]
CJK_FULL = "        label = '中文😀' + self.records[0]"
CJK_START = "        label = '中文😀' + self.rec"

HARNESS = r"""
local P = vim.json.decode(table.concat(vim.fn.readfile(vim.env.LAYA_NVIM_INLINE), '\n'))
local out = { snaps = {}, values = {} }

local function finish(err)
  out.error = err
  out.lines = vim.api.nvim_buf_get_lines(0, 0, -1, false)
  out.messages = vim.api.nvim_exec2('messages', { output = true }).output
  vim.fn.writefile({ vim.json.encode(out) }, P.out)
  vim.cmd('qa!')
end

-- every extmark of the buffer with virtual text, in any namespace: the ghost
local function ghosts()
  local found = {}
  for _, m in ipairs(vim.api.nvim_buf_get_extmarks(0, -1, 0, -1, { details = true })) do
    local d = m[4]
    if d.virt_text or d.virt_lines then
      local text = {}
      for _, chunk in ipairs(d.virt_text or {}) do
        text[#text + 1] = chunk[1]
      end
      found[#found + 1] = { row = m[2], col = m[3], text = table.concat(text), pos = d.virt_text_pos,
        hl = d.virt_text and d.virt_text[1] and d.virt_text[1][2] or vim.NIL,
        virt_lines = d.virt_lines and #d.virt_lines or 0 }
    end
  end
  return found
end

local function snap(tag)
  local row, col = unpack(vim.api.nvim_win_get_cursor(0))
  return { tag = tag, line = vim.api.nvim_get_current_line(), row = row, col = col,
    mode = vim.api.nvim_get_mode().mode, pum = vim.fn.pumvisible() == 1, ghosts = ghosts(),
    nlines = vim.api.nvim_buf_line_count(0), last = vim.api.nvim_buf_get_lines(0, -2, -1, true)[1] }
end
""" + OPEN_AND_WARM + r"""
-- inline completion requests the client sent, and those it cancelled
out.requests, out.cancels = 0, 0
vim.api.nvim_create_autocmd('LspRequest', {
  callback = function(ev)
    local r = ev.data.request
    if r.method == 'textDocument/inlineCompletion' then
      if r.type == 'pending' then
        out.requests = out.requests + 1
      elseif r.type == 'cancel' then
        out.cancels = out.cancels + 1
      end
    end
  end,
})
out.offset_encoding = vim.lsp.get_clients({ bufnr = 0, name = 'laya' })[1].offset_encoding

local i = 0
local step
local function after(key, started)
  -- wait gap_ms, and with wait = 'ghost' on until a ghost shows (at most max_ms)
  local s = snap(key.tag or key.input or key.lua)
  local waited = vim.uv.now() - started
  if waited < (key.gap_ms or 150) or (key.wait == 'ghost' and #s.ghosts == 0 and waited < (key.max_ms or 8000)) then
    vim.defer_fn(function() after(key, started) end, 20)
    return
  end
  s.waited_ms = waited
  table.insert(out.snaps, s)
  step()
end
step = function()
  i = i + 1
  local key = P.steps[i]
  if not key then
    vim.defer_fn(function() finish(nil) end, 100)
    return
  end
  if key.lua then
    local ok, value = pcall(assert(loadstring(key.lua)))
    table.insert(out.values, { tag = key.tag, ok = ok, value = value == nil and vim.NIL or value })
  else
    vim.api.nvim_input(key.input)
  end
  local started = vim.uv.now()
  vim.defer_fn(function() after(key, started) end, 20)
end
vim.defer_fn(step, 300)
"""


def keys(text: str, gap_ms: int = 70) -> list[dict]:
    """Type ``text`` one key at a time."""
    return [{"input": {"<": "<LT>"}.get(c, c), "gap_ms": gap_ms} for c in text]


def run_session(tmp_path: Path, steps: list[dict], *, extra_init: str = "") -> dict:
    """Open ``PROJECT_FILE`` with the README's block (plus ``extra_init``) and play ``steps``."""
    assert LAYA_LSP.is_file(), f"{LAYA_LSP} is missing: pip install -e . puts it there"
    project = tmp_path / "project"
    (project / ".git").mkdir(parents=True)
    source = project / "reader.py"
    source.write_text(PROJECT_FILE, encoding="utf-8")
    init = tmp_path / "init.lua"
    setup = readme_setup(README.read_text(encoding="utf-8"))
    on = "\n      require('laya.inline').attach(client, args.buf)\n"
    assert on in setup, "the README's block no longer turns ghost text on"
    init.write_text(setup + extra_init, encoding="utf-8")
    harness = tmp_path / "harness.lua"
    harness.write_text(HARNESS, encoding="utf-8")
    out, params = tmp_path / "out.json", tmp_path / "params.json"
    params.write_text(json.dumps({"file": str(source), "out": str(out), "steps": steps,
                                  "attach_ms": 120_000}))
    xdg = {f"XDG_{k}_HOME": str(tmp_path / "xdg" / k.lower()) for k in ("CONFIG", "DATA", "STATE", "CACHE")}
    env = {**os.environ, **xdg, "LAYA_NVIM_INLINE": str(params), "HF_HUB_OFFLINE": "1"}
    budget = sum(s.get("gap_ms", 150) + s.get("max_ms", 0) for s in steps) / 1000
    proc = subprocess.run([NVIM, "--headless", "--clean", "-u", str(init), "-S", str(harness)],
                          cwd=project, env=env, capture_output=True, text=True, timeout=240 + budget)
    log = tmp_path / "xdg" / "state" / "nvim" / "lsp.log"
    lsp_log = log.read_text(errors="replace") if log.exists() else ""
    assert out.exists(), f"nvim wrote no result (rc {proc.returncode}):\n{proc.stderr[-3000:]}\n{lsp_log[-3000:]}"
    got = json.loads(out.read_text())
    got["lsp_log"] = lsp_log
    got["init"] = init.read_text()
    got["context"] = ("\n".join(
        f"{s['tag']!r:14} {s['mode']:3} pum={int(s['pum'])} ({s['row']},{s['col']}) {s['line']!r} "
        f"ghosts={[(g['col'], g['text']) for g in s['ghosts']]} {s['waited_ms']}ms" for s in got["snaps"])
        + f"\n--- values ---\n{got['values']}\n--- messages ---\n{got['messages']}"
        + f"\n--- lsp.log ---\n{lsp_log[-2000:]}")
    return got


def wait_ghost(tag: str, max_ms: int = 8000) -> dict:
    """Wait until a ghost shows (the server answers in milliseconds; a loaded machine, longer), and
    at least 500 ms, as a person would before pressing a key: Neovim 0.11's completion opens the
    menu for an answer that comes after the cursor moved on along its line, and asks again after
    the last key typed with the menu open, as late as its measured round trip (with ``debounceMs``
    150, 150-300 ms: with 250 ms here, a list asked for after ``<Tab>`` had accepted the ghost
    opened the menu again on a loaded machine)."""
    return {"lua": "return nil", "wait": "ghost", "tag": tag, "gap_ms": 500, "max_ms": max_ms}


# The user's own insert-mode mapping of <C-Right>, made before Laya attaches: without a ghost the
# key must still do this.
USER_MAP = "\nvim.keymap.set('i', '<C-Right>', '[R]')\n"
PRINT = "        print(self.records[0], scale)"
VALUE = "        value = other"

STEPS = [
    # a line that starts as an earlier one does: the ghost is the rest of that line; <Tab>
    {"input": "o", "gap_ms": 300}, *keys(START), wait_ghost("A-ghost"),
    {"input": "<Tab>", "tag": "A-tab", "gap_ms": 300},
    {"input": "<Esc>", "tag": "A-esc", "gap_ms": 300},
    {"input": "u", "tag": "A-undo", "gap_ms": 300},
    {"input": "<C-r>", "tag": "A-redo", "gap_ms": 300},
    # <Esc>, and <C-o> (mode niI), with a ghost shown; both lines deleted after (the server would
    # otherwise take "        self.rec" as an earlier line to agree with)
    {"input": "o"}, *keys(START), wait_ghost("B-ghost"),
    {"input": "<Esc>", "tag": "B-esc", "gap_ms": 300}, {"input": "dd", "gap_ms": 200},
    {"input": "o"}, *keys(START), wait_ghost("O-ghost"),
    {"input": "<C-o>", "tag": "O-ctrl-o", "gap_ms": 300}, {"input": "<Esc>", "tag": "O-back", "gap_ms": 300},
    {"input": "<Esc>", "tag": "O-esc", "gap_ms": 200}, {"input": "dd", "gap_ms": 200},
    # typing through the ghost, then a character that is not the ghost's
    {"input": "o"}, *keys(START), wait_ghost("E-ghost"), *keys("ords"), wait_ghost("E-through"),
    {"input": "X", "tag": "E-other", "gap_ms": 500}, {"input": "<Esc>", "tag": "E-esc", "gap_ms": 200},
    {"input": "dd", "gap_ms": 200},
    # one word at a time (<C-Right>): a name, then blanks and a sign
    {"input": "o"}, *keys(START), wait_ghost("W-ghost"),
    {"input": "<C-Right>", "gap_ms": 0}, wait_ghost("W-word1"),
    {"input": "<C-Right>", "tag": "W-word2", "gap_ms": 300}, {"input": "<Esc>", "gap_ms": 200},
    {"input": "dd", "gap_ms": 200},
    # mid-line: a closing parenthesis after the cursor
    {"input": "o"}, *keys("        print()"), {"input": "<Left>"}, *keys("self.rec"), wait_ghost("M-ghost"),
    {"input": "<Tab>", "tag": "M-tab", "gap_ms": 300}, {"input": "<Esc>", "gap_ms": 200},
    # a word right after the cursor: no ghost, so <Tab> indents there and <C-Right> does the
    # user's mapping; then a blank line, where <Tab> indents too
    {"input": "o"}, *keys(VALUE), {"input": "<C-Left>", "tag": "N-noghost", "gap_ms": 700},
    {"input": "<Tab>", "tag": "N-tab", "gap_ms": 500}, {"input": "<C-Right>", "tag": "N-cright", "gap_ms": 300},
    {"input": "<Esc>", "gap_ms": 200},
    {"input": "o", "tag": "N-blank", "gap_ms": 700}, {"input": "<Tab>", "tag": "N-blank-tab", "gap_ms": 300},
    {"input": "<Esc>", "gap_ms": 200}, {"input": "dd", "gap_ms": 200},
    # an item selected in the menu (inserted), then <Tab>: the ghost continues the item
    {"input": "o"}, *keys(START), wait_ghost("P-ghost"),
    {"input": "<C-n>", "gap_ms": 0}, wait_ghost("P-selected"),
    {"input": "<Tab>", "tag": "P-tab", "gap_ms": 300}, {"input": "<Esc>", "gap_ms": 200},
    # CJK and an emoji before the cursor
    {"input": "o"}, *keys(CJK_START), wait_ghost("C-ghost"),
    {"input": "<Tab>", "tag": "C-tab", "gap_ms": 300}, {"input": "<Esc>", "tag": "C-esc", "gap_ms": 200},
]


@pytest.fixture(scope="module")
def session(tmp_path_factory):
    """The README's block as it is (positions in UTF-8 bytes: Neovim offers it first)."""
    return run_session(tmp_path_factory.mktemp("nvim-inline"), STEPS, extra_init=USER_MAP)


def snap(got: dict, tag: str) -> dict:
    found = [s for s in got["snaps"] if s["tag"] == tag]
    assert len(found) == 1, f"no step {tag!r}" + got["context"]
    return found[0]


def ghost(got: dict, tag: str) -> str:
    """The ghost shown at step ``tag``: one extmark, inline at the cursor, in LayaGhost."""
    s = snap(got, tag)
    assert len(s["ghosts"]) == 1, f"{tag}: {s['ghosts']}" + got["context"]
    g = s["ghosts"][0]
    assert (g["row"], g["col"]) == (s["row"] - 1, s["col"]) and g["pos"] == "inline", f"{tag}: {g}" + got["context"]
    assert g["hl"] == "LayaGhost" and g["virt_lines"] == 0, f"{tag}: {g}" + got["context"]
    return g["text"]


def with_ghost(s: dict) -> tuple[str, int]:
    """The line and cursor byte column that accepting the ghost of snapshot ``s`` must leave."""
    b, text = s["line"].encode(), s["ghosts"][0]["text"].encode()
    return (b[: s["col"]] + text + b[s["col"]:]).decode(), s["col"] + len(text)


def assert_accepted(got: dict, before: str, after: str, line: str | None = None) -> None:
    b, a = snap(got, before), snap(got, after)
    want, col = with_ghost(b)
    assert (a["line"], a["col"], a["mode"]) == (want, col, "i"), f"{after}: {a}" + got["context"]
    assert line is None or a["line"] == line, got["context"]
    assert not a["pum"], f"{after}: the menu is still open" + got["context"]


def test_ghost_is_the_rest_of_the_earlier_line_and_tab_accepts_it(session):
    got = session
    assert got.get("error") is None, got["error"] + got["context"]
    assert got["offset_encoding"] == "utf-8"
    assert ghost(got, "A-ghost") == REST
    assert snap(got, "A-ghost")["line"] == START  # the ghost is not in the buffer
    assert_accepted(got, "A-ghost", "A-tab", FULL)
    assert snap(got, "A-tab")["nlines"] == len(PROJECT_FILE.splitlines()) + 1
    # every ghost seen while typing sat at the cursor, in insert mode only
    for s in got["snaps"]:
        for g in s["ghosts"]:
            assert s["mode"] in ("i", "ic") and (g["row"], g["col"]) == (s["row"] - 1, s["col"]), (
                f"{s}" + got["context"])


def test_undo_and_redo_after_accepting(session):
    """The insert that typed the line and accepted the ghost is one undo step: ``u`` removes the
    whole new line, ``<C-r>`` brings it back whole."""
    got = session
    assert not snap(got, "A-esc")["ghosts"] and snap(got, "A-esc")["line"] == FULL, got["context"]
    undo = snap(got, "A-undo")
    assert undo["nlines"] == len(PROJECT_FILE.splitlines()) and undo["line"] == "        return other", (
        got["context"])
    assert undo["last"] == "        return other", got["context"]
    redo = snap(got, "A-redo")
    assert redo["last"] == FULL and redo["nlines"] == undo["nlines"] + 1, got["context"]


def test_leaving_insert_mode_clears_the_ghost(session):
    got = session
    assert ghost(got, "B-ghost") == REST
    esc = snap(got, "B-esc")
    assert esc["mode"] == "n" and not esc["ghosts"] and esc["line"] == START, got["context"]
    assert ghost(got, "O-ghost") == REST
    ctrl_o = snap(got, "O-ctrl-o")
    assert ctrl_o["mode"] == "niI" and not ctrl_o["ghosts"] and ctrl_o["line"] == START, got["context"]
    assert snap(got, "O-esc")["line"] == START and not snap(got, "O-esc")["ghosts"], got["context"]


def test_typing_through_the_ghost_keeps_exactly_the_typed_text(session):
    got = session
    assert ghost(got, "E-ghost") == REST
    assert snap(got, "E-through")["line"] == START + "ords"
    assert ghost(got, "E-through") == REST[len("ords"):]  # the ghost follows what was typed
    other = snap(got, "E-other")
    assert other["line"] == START + "ordsX", got["context"]
    assert all(not g["text"].startswith(" = json") for g in other["ghosts"]), "a stale ghost" + got["context"]
    assert snap(got, "E-esc")["line"] == START + "ordsX" and not snap(got, "E-esc")["ghosts"], got["context"]


def test_accepting_one_word_at_a_time(session):
    got = session
    assert ghost(got, "W-ghost") == REST
    assert snap(got, "W-word1")["line"] == START + "ords", got["context"]
    assert ghost(got, "W-word1") == REST[len("ords"):]
    w2 = snap(got, "W-word2")
    assert (w2["line"], w2["col"], w2["mode"]) == (START + "ords =", len(START + "ords ="), "i"), got["context"]


def test_mid_line_before_a_closing_parenthesis(session):
    got = session
    m = snap(got, "M-ghost")
    assert m["line"] == "        print(self.rec)" and m["col"] == len("        print(self.rec"), got["context"]
    assert ghost(got, "M-ghost") == "ords[0], scale"
    assert_accepted(got, "M-ghost", "M-tab", PRINT)


def test_without_a_ghost_the_keys_do_what_they_did(session):
    """A word right after the cursor (the server offers no line there): no ghost, ``<Tab>`` indents
    (Python's ftplugin: expandtab, softtabstop 4) and the word stays once; ``<C-Right>`` runs the
    user's own mapping. On a blank line no ghost is shown, so ``<Tab>`` indents there too."""
    got = session
    n = snap(got, "N-noghost")
    assert n["line"] == VALUE and n["col"] == len("        value = ") and not n["ghosts"], got["context"]
    assert snap(got, "N-tab")["line"] == "        value =     other", got["context"]
    assert snap(got, "N-cright")["line"] == "        value =     [R]other", got["context"]
    blank = snap(got, "N-blank")
    assert blank["line"] == "" and not blank["ghosts"], got["context"]
    assert snap(got, "N-blank-tab")["line"] == "    ", got["context"]


def test_tab_with_a_menu_item_selected(session):
    got = session
    assert ghost(got, "P-ghost") == REST
    selected = snap(got, "P-selected")
    assert selected["pum"] and selected["line"] != START, got["context"]  # <C-n> inserted an item
    assert_accepted(got, "P-selected", "P-tab")


def test_cjk_and_emoji_before_the_cursor(session):
    got = session
    assert ghost(got, "C-ghost") == "ords[0]"
    assert_accepted(got, "C-ghost", "C-tab", CJK_FULL)


def test_the_buffer_holds_exactly_what_was_typed_and_accepted(session):
    got = session
    accepted_after_selecting = snap(got, "P-tab")["line"]  # the menu's first item, then the ghost
    assert got["lines"] == PROJECT_FILE.splitlines() + [
        FULL, PRINT, "        value =     [R]other", accepted_after_selecting, CJK_FULL], got["context"]
    assert "[ERROR]" not in got["lsp_log"], got["lsp_log"][-3000:]
    assert "E5108" not in got["messages"] and "Error" not in got["messages"], got["context"]
    assert got["requests"] > 50, got["context"]


def u16(s: str) -> int:
    return len(s.encode("utf-16-le")) // 2


def _item(text: str, line: str, start: int, end: int, row: int = 0) -> dict:
    """An item over ``line[start:end]`` (string indices), its range in UTF-16 units."""
    return {"insertText": text, "range": {"start": {"line": row, "character": u16(line[:start])},
                                          "end": {"line": row, "character": u16(line[:end])}}}


def _case(line: str, cursor: int, item: dict, want: str | bool) -> dict:
    return {"line": line, "col": len(line[:cursor].encode()), "item": item, "want": want}


CJK_LINE = CJK_START
AFTER = "a = foo_z"
UNIT_CASES = [
    # the range covers the word typed up to the cursor
    _case(CJK_LINE, len(CJK_LINE), _item("records[0]", CJK_LINE, len(CJK_LINE) - 3, len(CJK_LINE)), "ords[0]"),
    # it reaches past the cursor over text the item ends with: shown only what goes before it
    _case(AFTER, 8, _item("foo_baz", AFTER, 4, 9), "ba"),
    # text after the cursor the item would change: nothing
    _case("a = foo_q", 8, _item("foo_baz", "a = foo_q", 4, 9), False),
    # the item does not start with what was typed
    _case("x = self.rex", 12, _item("records", "x = self.rex", 9, 12), False),
    # the same, off by the emoji's second UTF-16 unit (a client counting code points)
    _case("s = '😀' + rec", 13, {"insertText": "records", "range": {
        "start": {"line": 0, "character": u16("s = '😀' + ") - 1}, "end": {"line": 0, "character": 13}}}, False),
    # a position inside the emoji's surrogate pair
    _case("'😀x", 5, {"insertText": "x", "range": {"start": {"line": 0, "character": 2},
                                                   "end": {"line": 0, "character": 2}}}, False),
    # another line, or past the line's end
    _case("self.rec", 8, _item("records", "self.rec", 5, 8, row=1), False),
    _case("self.rec", 8, {"insertText": "records", "range": {"start": {"line": 0, "character": 5},
                                                             "end": {"line": 0, "character": 9}}}, False),
    # no range: inserted at the cursor
    _case("x = ", 4, {"insertText": "abc"}, "abc"),
    # a snippet (not from Laya)
    _case("x = ", 4, {"insertText": {"kind": "snippet", "value": "abc"}}, False),
    # nothing to add
    _case("self.records", 12, _item("records", "self.records", 5, 12), False),
]

UNIT_LUA = r"""local cases = vim.json.decode([==[%s]==])
local ghost_for = require('laya.inline')._ghost_for
local got = {}
for n, c in ipairs(cases) do
  local g = ghost_for(c.item, c.line, 1, c.col, 'utf-16')
  got[n] = g and g.rest or false
end
return got
"""

UTF16_STEPS = [
    {"lua": UNIT_LUA % json.dumps(UNIT_CASES, ensure_ascii=False), "tag": "unit", "gap_ms": 0},
    {"input": "o"}, *keys(CJK_START, 50), wait_ghost("U-ghost"),
    {"input": "<Tab>", "tag": "U-tab", "gap_ms": 300}, {"input": "<Esc>", "tag": "U-esc", "gap_ms": 200},
    # a key typed while a ghost shows: looked at 40 ms later, before the server (waiting 150 ms)
    # can have answered, the old ghost must be gone
    {"input": "o"}, *keys(START, 50), wait_ghost("S-ghost"), {"input": "o", "tag": "S-typed", "gap_ms": 40},
    wait_ghost("S-fresh"), {"input": "<Esc>", "gap_ms": 200}, {"input": "dd", "gap_ms": 200},
    # <Tab> while a completion request is out (asked just before it, answered 150 ms later; the
    # menu closed by <C-e>, which asks for the ghost again): the edit makes the request stale in
    # the server, whose empty answer opens no menu at the end of the accepted line
    {"input": "o"}, *keys(START, 50), wait_ghost("L-ghost"), {"input": "<C-e>", "wait": "ghost", "tag": "L-closed", "gap_ms": 500, "max_ms": 8000},
    {"lua": "vim.lsp.completion.get() return vim.fn.pumvisible()", "tag": "L-asked", "gap_ms": 0},
    {"input": "<Tab>", "tag": "L-tab", "gap_ms": 600}, {"input": "<Esc>", "gap_ms": 200}, {"input": "dd", "gap_ms": 200},
    # with 'paste' on (insert-mode mappings off, so <Tab> could not accept) no ghost shows
    {"lua": "vim.o.paste = true", "tag": "paste-on", "gap_ms": 0}, {"input": "o"}, *keys(START, 50),
    {"input": "", "tag": "P-paste", "gap_ms": 700}, {"lua": "vim.o.paste = false", "tag": "paste-off", "gap_ms": 0},
    {"input": "<Esc>", "gap_ms": 200}, {"input": "dd", "gap_ms": 200},
]
UTF16_INIT = """
vim.lsp.config('laya', {
  capabilities = { general = { positionEncodings = { 'utf-16' } } },
  init_options = { debounceMs = 150 },
})
"""


@pytest.fixture(scope="module")
def utf16_session(tmp_path_factory):
    """The README's block, the client offering only UTF-16 and the server waiting 150 ms before
    it answers (``debounceMs``), so that requests are still out when the next key is typed."""
    return run_session(tmp_path_factory.mktemp("nvim-inline-utf16"), UTF16_STEPS, extra_init=UTF16_INIT)


def test_utf16_ranges_and_cancelled_requests(utf16_session):
    got = utf16_session
    assert got.get("error") is None, got["error"] + got["context"]
    assert got["offset_encoding"] == "utf-16"
    (unit,) = [v for v in got["values"] if v["tag"] == "unit"]
    assert unit["ok"] and unit["value"] == [c["want"] for c in UNIT_CASES], unit
    assert ghost(got, "U-ghost") == "ords[0]"
    assert_accepted(got, "U-ghost", "U-tab", CJK_FULL)
    assert got["lines"] == PROJECT_FILE.splitlines() + [CJK_FULL], got["context"]
    assert ghost(got, "S-ghost") == REST
    typed = snap(got, "S-typed")
    assert typed["line"] == START + "o", got["context"]
    # no ghost yet, or (on a slow machine) the new one: never the old one
    assert [g["text"] for g in typed["ghosts"]] in ([], [REST[1:]]), "a stale ghost" + got["context"]
    assert ghost(got, "S-fresh") == REST[1:]
    # keys came faster than the answers: the client cancelled the requests they made stale
    assert got["cancels"] > 5 and got["requests"] > got["cancels"], got["context"]
    # <Tab> with a completion request out: accepted, and no menu opened afterwards by its answer
    assert ghost(got, "L-ghost") == ghost(got, "L-closed") == REST and not snap(got, "L-closed")["pum"], got["context"]
    tab = snap(got, "L-tab")
    assert tab["line"] == FULL and not tab["pum"], "the late answer opened the menu" + got["context"]
    # and no ghost after the line's last `)` (it was `self.`; now none at a word start:
    # laya_lsp.inline.LINE_NEEDS_WORD)
    assert tab["ghosts"] == [], got["context"]
    pasting = snap(got, "P-paste")
    assert pasting["line"] == START and pasting["ghosts"] == [], "a ghost with 'paste' on" + got["context"]
    assert "[ERROR]" not in got["lsp_log"], got["lsp_log"][-3000:]
