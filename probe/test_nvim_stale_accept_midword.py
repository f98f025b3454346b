"""Probe: the README's Neovim block (editors/nvim/README.md), accepting an item inside a word
while the next completion request is still out.

`self.s|le`: the list comes (each item replaces `sle`, its range ends 3 characters on). The user
types `c` (`self.sc|le`): Neovim asks again (the list is incomplete) and meanwhile filters the
list it has by `sc`; <C-n><C-y> before the new answer accepts `scale` from the OLD list. The
block's CompleteDone autocommand then deletes "the text from where the cursor was when the list
was asked for to the range's end" -- but it takes the cursor and line of the NEWEST request
(`asked`, set on LspRequest) and the range end of the OLD item, two different coordinate systems:
it deletes one character (`l`) where `le` is the word's rest, leaving `self.scalee`.

debounceMs = 400 only widens the window (the server waits before answering); on a loaded machine
the same happens with the default 0 whenever <C-y> comes before the answer.
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import test_editor_edge_cases as E  # noqa: E402
from test_editor_edge_cases import PY, run_session, typed  # noqa: E402
from test_nvim_typing import pytestmark  # noqa: E402,F401


def test_accepting_from_the_list_shown_while_the_next_is_asked_for(tmp_path, monkeypatch):
    setup = E.readme_setup
    monkeypatch.setattr(E, "readme_setup", lambda text: setup(text) + (
        "\nvim.lsp.config('laya', { init_options = { debounceMs = 400 } })\n"))
    keys = [{"input": "Go"}, *typed("        y = self.le"), {"input": "<Left><Left>", "gap_ms": 300},
            *typed("s", 1500),                       # asked at self.s|le; the list shows
            {"input": "c", "gap_ms": 60},            # asked again at self.sc|le (answered 400 ms later)
            {"input": "<C-n>", "gap_ms": 60},        # the old list, filtered by `sc`
            {"input": "<C-y>", "gap_ms": 1500},
            {"input": "<Esc>", "gap_ms": 300}]
    got = run_session(tmp_path, {"reader.py": PY}, keys)
    sel = next(s for s in got["snaps"] if s["input"] == "<C-n>")
    assert sel["pum"] and sel["words"] and sel["words"][0].startswith("sc"), got["context"]
    word = sel["words"][0]  # what <C-n> selected (the old list's first match)
    # the whole identifier `sle` (now `scle`) is replaced by the item, nothing of it left over
    assert got["lines"][-1] == "        y = self." + word, got["context"]
