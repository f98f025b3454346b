"""Probe: the README's Neovim block, `.` repeating an insert that accepted an item inside a word.

`self.|le`, `i`, type `s`, <C-n><C-y> accepts `scale`: the block's CompleteDone autocommand
deletes the word's rest (`le`), giving `self.scale`. The deletion is an API call, not part of the
insert, so `.` on the next line's `self.|le` replays only the insert: `self.scalele`.
(tests/test_nvim_adversarial.py's dot-repeat test accepts at a line's end only.)"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from test_editor_edge_cases import PY, run_session, typed  # noqa: E402
from test_nvim_typing import pytestmark  # noqa: E402,F401

SRC = PY + "        a = self.le\n        b = self.le\n"


def test_dot_repeats_a_mid_word_accept(tmp_path):
    keys = [{"input": "<Esc>G", "gap_ms": 200}, {"input": "k$h", "gap_ms": 200}, {"input": "i", "gap_ms": 200},
            *typed("s", 1500), {"input": "<C-n>", "gap_ms": 300}, {"input": "<C-y>", "gap_ms": 300},
            {"input": "<Esc>", "gap_ms": 300}, {"input": "j$h", "gap_ms": 300}, {"input": ".", "gap_ms": 1000}]
    got = run_session(tmp_path, {"reader.py": SRC}, keys)
    sel = next(s for s in got["snaps"] if s["input"] == "<C-n>")
    word = sel["words"][0]
    assert got["lines"][-2] == "        a = self." + word, got["context"]  # the block deleted `le`
    assert got["lines"][-1] == "        b = self." + word, got["context"]
