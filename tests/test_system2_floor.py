"""``laya_tools.system2_floor``: replaying per-keystroke records under System 2 confidence floors."""

from __future__ import annotations

import math

import pytest

from laya_tools.system2_floor import main, saved, sweep, with_floor
from test_system2 import GGUF, needs_model


def rows_for(word, fast, guesses, lang="python", start=0):
    """Records of typing ``word``: ``fast[c]`` the fast engine's first item, ``guesses[c]`` System
    2's ``(guess, logprob)`` at ``c`` typed characters."""
    return [[lang, 0, start, word, c, fast[c], *guesses[c]] for c in range(len(word))]


def test_the_first_right_first_item_accepts_the_word_and_the_floor_decides_whose_it_is():
    # "parse": the fast engine is right from 2 typed characters; System 2 at once, but unsure
    rows = rows_for("parse", [None, "path", "parse", "parse", "parse"],
                    [("parse", -2.5)] * 5)
    assert saved(rows, lambda r: r[5]) == {"python": pytest.approx(100 * 2 / 5)}  # 5 - 2 - 1
    assert saved(rows, with_floor(-math.inf)) == {"python": pytest.approx(100 * 4 / 5)}
    assert saved(rows, with_floor(-2.0)) == {"python": pytest.approx(100 * 2 / 5)}
    # a guess that does not fit what was typed never goes first
    wrong = rows_for("abc", [None, "abc", "abc"], [(None, None), ("xy", 0.0), ("xy", 0.0)])
    assert saved(wrong, with_floor(-math.inf)) == {"python": pytest.approx(100 / 3)}


def test_the_sweep_brackets_every_floor_between_off_and_the_perfect_choice(tmp_path, capsys):
    rows = (rows_for("parse", ["path", "path", "parse", "parse", "parse"], [("parse", -0.2)] * 5)
            + rows_for("name", ["name", "name", "name", "name"], [("node", -3.0)] * 4, start=10)
            + rows_for("fn", ["fn", "fn"], [(None, None)] * 2, lang="rust"))
    table = dict(sweep(rows, floors=(-1.0,)))
    assert table["System 2 off"]["python"] == pytest.approx(100 * (2 + 3) / 9)
    # "node" hides "name" until "na" is typed
    assert table["always first"]["python"] == pytest.approx(100 * (4 + 1) / 9)
    assert table["first above -1 nats"]["python"] == pytest.approx(100 * (4 + 3) / 9)
    assert table["perfect choice"]["python"] == pytest.approx(100 * (4 + 3) / 9)
    assert table["System 2 off"]["rust"] == table["perfect choice"]["rust"] == pytest.approx(50.0)
    (tmp_path / "r.json").write_text(__import__("json").dumps(rows))
    assert main(["sweep", str(tmp_path / "r.json")]) == 0
    out = capsys.readouterr().out
    assert "perfect choice" in out and "python" in out and "77.8%" in out


def test_a_rerank_replay_weighs_the_fast_scores_against_system2s():
    from laya_tools.system2_floor import exactly, rescored

    # "parse": the fast engine has "path" first (-1) and "parse" second (-2); System 2 prefers
    # "parse" by 2 nats, and guesses "parser", which the fast engine did not list
    row = ["python", 0, 0, "parse", 1, "path", "parser", -0.5, ["path", "parse"], [-1.0, -2.0],
           [-3.0, -1.0, -0.9], {"path": -3.0, "parse": -1.0, "parser": -0.9}]
    # 0.4: path -3.4, parse -1.8, the guess 0.4 x (-2 - GUESS_MISS) - 0.9
    assert rescored(0.4)(row) == "parse" and exactly(0.4)(row) == "parse"
    assert rescored(4.0)(row) == "path" and exactly(4.0)(row) == "path"  # the fast order wins
    assert rescored(0.0)(row) == "parser" and exactly(0.0)(row) == "parser"  # System 2 alone
    # no scores for this place: the floor rule (the guess is surer than -1.5 nats: first)
    assert rescored(0.4)(row[:10] + [None]) == "parser"
    assert exactly(0.4)(row[:11]) == "path"


@needs_model
def test_records_hold_both_engines_first_items_at_every_keystroke(tmp_path):
    from engine.predictor import Predictor
    from engine.system2 import System2
    from laya_tools.evaluate import EvalFile
    from laya_tools.system2_floor import record

    text = "import os\n\n\ndef load(path):\n    with open(path) as fh:\n        return fh.read()\n"
    rows = record([EvalFile("python", "pkg/load.py", text, tmp_path)], Predictor.load(None), System2(GGUF), exact=2)
    words = {(r[2], r[3]) for r in rows}
    assert {w for _, w in words} >= {"load", "path", "open", "fh", "read"}
    assert len(rows) == sum(len(w) for _, w in words)  # every character of every identifier
    guessed = [r for r in rows if r[6] is not None]
    assert guessed and all(r[7] <= 1e-6 for r in guessed)  # System 2 guessed somewhere, with its log-probability
    scored = [r for r in rows if r[10] is not None]
    assert scored and all(len(r[10]) >= len(r[8]) and max(r[10]) <= 1e-4 for r in scored)
    # the full scores: the first two items (and the guess), log-probabilities; none for the
    # file's first word (no prompt before it)
    assert all(set(r[11]) >= set(r[8][:2]) and all(v <= 1e-4 for v in r[11].values())
               for r in rows if r[2] > 0)
    assert not any(r[11] for r in rows if r[2] == 0)


def test_record_says_what_is_missing_instead_of_a_traceback(tmp_path, capsys):
    assert main(["record", "--corpus", str(tmp_path), "--out", str(tmp_path / "r.json")]) == 2
    assert "laya corpus" in capsys.readouterr().err
    pkg = tmp_path / "tune" / "python" / "pkg"
    pkg.mkdir(parents=True)
    (pkg / "mod.py").write_text("".join(f"def f{i}(value):\n    return value + {i}\n\n\n" for i in range(80)))
    assert main(["record", "--corpus", str(tmp_path), "--system2", str(tmp_path / "nope.gguf"),
                 "--out", str(tmp_path / "r.json")]) == 2
    assert "nope.gguf" in capsys.readouterr().err and not (tmp_path / "r.json").exists()
