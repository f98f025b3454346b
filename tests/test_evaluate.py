"""The evaluation protocol's parts: identifier targets per language, the metric and the baseline."""

from pathlib import Path

import pytest

from laya_tools.evaluate import (Score, WordCompletion, comment_context, comment_targets, pick_files,
                                 score_file, targets)


def test_python_targets_skip_comments_and_strings():
    text = "import os  # the path module\npath = os.path.join('x y', name)\n"
    assert [w for _, w in targets(text)] == ["import", "os", "path", "os", "path", "join", "name"]
    for start, word in targets(text):
        assert text[start : start + len(word)] == word


@pytest.mark.parametrize("language, text, expected", [
    ("javascript", "// a comment word\nconst total = items.reduce((acc, it) => acc + it, 0); /* more */\n'str ing';",
     ["const", "total", "items", "reduce", "acc", "it", "acc", "it"]),
    ("go", 'package main\n\n// Println prints\nfunc main() { fmt.Println("hello world") }\n',
     ["package", "main", "func", "main", "fmt", "Println"]),
    ("rust", 'fn main() { let name = "x y"; println!("{}", name); } // tail\n',
     ["fn", "main", "let", "name", "println", "name"]),
    ("c", '/* header */\nint count_items(const char *s) { return strlen(s); } // x\n',
     ["int", "count_items", "const", "char", "return", "strlen"]),
    ("typescript", "interface Point { x: number; label: string } // note\n",
     ["interface", "Point", "number", "label", "string"]),
])
def test_other_language_targets_are_code_identifiers(language, text, expected):
    got = targets(text, language)
    assert [w for _, w in got] == expected
    for start, word in got:
        assert text[start : start + len(word)] == word


def test_word_completion_ranks_by_frequency_then_recency():
    text = "alpha beta alpha gamma beta alphabet "
    wc = WordCompletion()
    wc.advance(text, len(text))
    assert wc.items("") == ["beta", "alpha", "alphabet", "gamma"]  # ties: most recent first
    assert wc.items("al") == ["alpha", "alphabet"]
    assert wc.items("alpha") == ["alphabet"]  # only items longer than what is typed


def _score(text, ask):
    sc = Score()
    score_file(text, ask, sc)
    return sc


def test_oracle_saves_all_but_one_key_per_identifier():
    text = "value = compute(value)\n"
    words = [w for _, w in targets(text)]
    by_start = dict(targets(text))

    def oracle(prefix):
        # the identifier being typed starts at the last target start at or before the cursor
        start = max(s for s in by_start if s <= len(prefix))
        return [by_start[start]]

    sc = _score(text, oracle)
    assert sc.chars == sum(map(len, words))
    assert sc.saved == sum(len(w) - 1 for w in words)
    assert sc.top1[0] == sc.n_at[0] == len(words)


def test_silent_completer_saves_nothing_and_late_hits_save_less():
    text = "value = compute(value)\n"
    assert _score(text, lambda prefix: []).saved == 0
    starts = dict(targets(text))

    def after_two(prefix):
        start = max(s for s in starts if s <= len(prefix))
        return [starts[start]] if len(prefix) - start >= 2 else []

    sc = _score(text, after_two)
    assert sc.saved == sum(len(w) - 3 for w in starts.values())
    assert sc.top1[0] == sc.top1[1] == 0 and sc.top1[2] == len(starts)


def test_pick_files_keeps_splits_apart(tmp_path: Path):
    for split, pkg in (("eval", "reported"), ("tune", "tuned")):
        f = tmp_path / split / "python" / pkg / "mod.py"
        f.parent.mkdir(parents=True)
        f.write_text("x = 1\n" * 500)
    assert {f.name.split("/")[0] for f in pick_files(tmp_path, 5, 10_000)} == {"reported"}
    assert {f.name.split("/")[0] for f in pick_files(tmp_path, 5, 10_000, split="tune")} == {"tuned"}
    with pytest.raises(ValueError, match="held-out"):
        pick_files(tmp_path, 5, 10_000, split="train")


def test_tune_prior_shift_moves_mass_and_keeps_the_sum():
    from laya_tools.tune import _shift
    from engine.pool import WEIGHTS

    to_doc = _shift(WEIGHTS, True)
    assert abs(sum(to_doc.values()) - 1.0) < 1e-3
    assert to_doc["doc3"] > WEIGHTS["doc3"] and to_doc["cor1"] < WEIGHTS["cor1"]
    assert to_doc["win"] == WEIGHTS["win"]
    back = _shift(to_doc, False)
    assert all(abs(back[k] - WEIGHTS[k]) < 1e-3 for k in WEIGHTS)


def test_language_overrides_apply_per_language_only():
    from engine.config import load_variant

    cfg = load_variant("code")
    cfg.language = {"go": {"net_weight": 0.6}}
    assert cfg.for_language("go").net_weight == 0.6
    assert cfg.for_language("python").net_weight == cfg.net_weight
    cfg.language = {"rust": {"no_such_option": 1}}
    with pytest.raises(ValueError, match="rust"):
        cfg.for_language("rust")


def test_rest_of_line_counts_only_exact_continuations_of_the_right_word():
    text = "value = compute(value)\nresult = value\n"
    by_start = dict(targets(text))

    def oracle(prefix):
        return [by_start[max(s for s in by_start if s <= len(prefix))]]

    lines = {  # what the engine would show at each identifier start
        "value": "value = compute(value)",  # right: 17 characters past the word
        "compute": "compute(other)",  # wrong continuation: offered, not correct
        "result": "result",  # nothing past the word: not offered
    }
    sc = Score()
    score_file(text, oracle, sc, ask_line=lambda prefix: lines.get(by_start[len(prefix)]))
    assert sc.text_chars == len(text)
    # "value" at 0 (correct, 17), "compute" (wrong), "value" at 16 ("value = compute(value)" is not
    # how that line goes on: wrong), "result" (not offered), "value" at 32 (wrong: the line ends)
    assert (sc.line_offered, sc.line_correct, sc.line_chars) == (4, 1, len(" = compute(value)"))
    # a completer whose first item is not the identifier is never asked for a line
    sc2 = Score()
    score_file(text, lambda prefix: [], sc2, ask_line=lambda prefix: 1 / 0)
    assert sc2.line_offered == 0


@pytest.mark.parametrize("language, text, expected", [
    ("python", "#!/usr/bin/env python\nx = 1  # the value\n# Returns it\ns = '# not me'\n",
     ["the", "value", "Returns", "it"]),
    ("c", "#include <stdio.h>\n/* Opens a file.\n * Closes it */ int x; // done\n", ["Opens", "file", "Closes", "it", "done"]),
    ("go", "// Package cli parses flags\nvar s = \"// no\"\n", ["Package", "cli", "parses", "flags"]),
])
def test_comment_targets_are_the_words_of_comments_only(language, text, expected):
    assert [w for _, w in comment_targets(text, language)] == expected
    assert all(text[i : i + len(w)] == w for i, w in comment_targets(text, language))


def test_comment_context_is_the_comment_block_as_prose():
    assert comment_context("x = 1\n# Returns the\n# value of x") == "Returns the\nvalue of x"
    assert comment_context("y = f(x)  # the new ") == "the new "
    assert comment_context("/**\n * Opens a\n * file and") == "\nOpens a\nfile and"
    assert comment_context("int x; // done\nint y; // a") == "a"


@pytest.mark.parametrize("language", ["typescript", "javascript", "go", "rust", "c"])
def test_a_file_cut_inside_a_block_comment_has_no_comment_targets(language):
    """Held-out files are cut at ``--max-chars``; cut inside ``/** ... */``, Pygments lexed the
    comment's words as code and they counted as identifiers to type."""
    code = {"typescript": "let total = count\n", "javascript": "let total = count\n",
            "go": "var total = count\n", "rust": "let total = count;\n", "c": "int total = count;\n"}[language]
    text = code + "/**\n * Prepares the pending query.\n * @param serializeData - Optional transform"
    words = [w for _, w in targets(text, language)]
    assert "total" in words and "count" in words
    assert not {"Prepares", "pending", "serializeData", "Optional", "transform"} & set(words), words
    if language != "rust":  # Rust's /** */ is a doc comment, a string to Pygments
        assert "transform" in [w for _, w in comment_targets(text, language)]


def test_lagged_system2_runs_at_the_boundary_key_before_a_word_start():
    """As the server's ``after_change``: the key before a word start that left System 2's line
    (``,`` of ``, ``) started a line there, so the word start has its guess; a word start right
    after the key that left the line gets none until the next key."""
    from engine.system2 import CONTEXT_CHARS, Continuation
    from laya_tools.evaluate import LaggedSystem2

    class Scripted:  # System 2's interface, with a fixed guess: " bar" after a comma, else "bar"
        def __init__(self):
            self.at = []

        def continuation(self, prefix, max_tokens=12, path=None, keep_steps=0):
            self.at.append((prefix, path))
            return Continuation(prefix[-CONTEXT_CHARS:], (" bar)\n" if prefix.endswith(",") else "bar)\n"))

    s2 = Scripted()
    lagged = LaggedSystem2(s2, path="a.py")
    assert lagged(["x", "y"], "f(x, ") == ["bar", "x", "y"]
    assert s2.at == [("f(x,", "a.py")]
    # the word start follows the key that left the line: no guess yet, a line starts here
    s2.at.clear()
    assert lagged(["x"], "g(") == ["x"] and s2.at == [("g(", "a.py")]
    assert lagged(["x"], "g(b") == ["bar", "x"]


def test_lagged_system2_reranks_with_the_fast_scores_as_the_server_does():
    import numpy as np

    from engine.system2 import CONTEXT_CHARS, Continuation
    from laya_tools.evaluate import LaggedSystem2
    from test_system2 import _toy_system2

    pieces = [b"", b" f", b" foo", b"bar", b"(", b" fxy"]
    d0, d1, d2 = (np.full(len(pieces), -50.0, dtype=np.float32) for _ in range(3))
    d0[[2, 1, 5]] = np.log([0.8, 0.1, 0.1])
    d1[[3, 4]] = np.log([0.5, 0.5])
    d2[4] = 0.0
    s2 = _toy_system2(pieces)
    runs = []

    def continuation(prefix, max_tokens=12, path=None, keep_steps=0):
        runs.append(keep_steps)
        head = prefix[: len(prefix) - 1]  # "f" typed
        return Continuation(head[-CONTEXT_CHARS:], "foobar(\n", (), b" ", ((2, d0), (3, d1), (4, d2))[:keep_steps])

    s2.continuation = continuation
    lagged = LaggedSystem2(s2, path="a.py", keep_steps=8)
    items, fast = ["fxy", "foo", "foobar"], [-1.0, -1.5, -4.0]
    assert lagged(items, "x = f", fast) == items and runs == [8]  # nothing in hand yet: a run starts
    assert lagged(items, "x = f", fast) == ["foo", "fxy", "foobar"]  # the test_system2 case
    # without the scores (or distributions), the guess rule: "foobar" (no log-probabilities: sure)
    assert lagged(items, "x = f") == ["foobar", "fxy", "foo"]


def test_first_uses_are_scored_apart():
    # "alpha" is new at its first use, seen later; "beta" appears first in a comment
    text = "alpha = 1  # beta\nbeta = alpha\n"

    def oracle(prefix):
        return {len("alpha = 1  # beta\n"): ["beta"], len("alpha = 1  # beta\nbeta = "): ["alpha"]}.get(len(prefix), [])

    sc, base = Score(), Score()
    score_file(text, oracle, sc, WordCompletion(), base)
    # targets: alpha (first use), beta (seen in the comment), alpha (seen)
    assert sc.chars == 14 and sc.first_chars == 5 and base.first_chars == 5
    assert sc.saved == 3 + 4 and sc.first_saved == 0  # the oracle only knew the later two
    # word completion: nothing for the first use; "beta" (the most recent word) at once, "alpha"
    # once a letter is typed ("beta" is then the most frequent)
    assert base.first_saved == 0 and base.saved == 3 + 3
    row = sc.split_row(base)
    assert "first uses 36% of the characters: saved 0.0%" in row
    assert "names already in the file: 77.8% (66.7%)" in row


def test_eval_both_reports_in_process_and_through_the_server_in_one_run(tmp_path: Path, capsys):
    """``laya eval --both``: the README's whole table from one command (in process with
    ``--lines``, then the same files through the server)."""
    from laya_tools.cli import main

    f = tmp_path / "eval" / "python" / "pkg" / "mod.py"
    f.parent.mkdir(parents=True)
    f.write_text("import os\n\n\ndef main(path):\n    return os.path.join(path, 'x')\n" * 50)  # > 2 KB
    assert main(["eval", "--corpus", str(tmp_path), "--files", "1", "--max-chars", "400",
                 "--workspace", "off", "--both", "--lines"]) == 0
    out = capsys.readouterr().out
    assert out.count("without workspace, in process") == 1
    assert out.count("without workspace, through the LSP server (stdio)") == 1
    assert "rest of line:" in out and "completion round trip over" in out
    assert main(["eval", "--corpus", str(tmp_path), "--through-server", "--lines"]) == 2  # no --both
