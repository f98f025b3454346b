"""System 2 (``engine.system2``): the merge rule, clear errors, and the real model when installed.

The model tests run SmolLM2-135M-Instruct (Q4_1) through llama.cpp; they need the ``system2``
extra (llama-cpp-python, which builds llama.cpp for ~13 minutes, so CI does not have it) and the
file from ``laya system2 install`` (see :data:`GGUF`), and
are skipped, saying which is missing, otherwise.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest

from engine.system2 import (DEFAULT_FILE, MIN_WORD_LOGPROB, Continuation, System2, System2Error, _continues_identifier,
                            confident_word_at, default_path, merge)
from laya_lsp.system2 import Guess, System2Runner, prompt_path

GGUF = Path(os.environ.get("LAYA_SYSTEM2_GGUF") or next(
    (p for p in (default_path(), Path.home() / ".cache" / "laya" / "system2" / DEFAULT_FILE) if p.is_file()),
    default_path()))
"""``$LAYA_SYSTEM2_GGUF``, else where ``laya system2 install`` wrote it (``$LAYA_CACHE_DIR`` when
it was set for the test run, else the default cache)."""
HAVE_LLAMA = importlib.util.find_spec("llama_cpp") is not None
needs_model = pytest.mark.skipif(
    not (HAVE_LLAMA and GGUF.is_file()),
    reason=f"needs llama-cpp-python ({'installed' if HAVE_LLAMA else 'missing'}: pip install -e '.[system2]') "
           f"and {GGUF} ({'present' if GGUF.is_file() else 'missing'}: laya system2 install)")


def test_merge_puts_a_fitting_guess_first_and_leaves_the_rest_in_order():
    assert merge(["alpha", "beta", "path"], "path", "pa") == ["path", "alpha", "beta"]
    assert merge(["alpha", "beta"], "parse", "") == ["parse", "alpha", "beta"]
    assert merge(["alpha", "beta"], "parse", "", rank=1) == ["alpha", "parse", "beta"]
    # already at or above its place: unchanged (rank 1 must not demote the fast engine's top)
    assert merge(["path", "beta"], "path", "", rank=1) == ["path", "beta"]
    # a guess that no longer fits what was typed, or is not longer, is left out
    assert merge(["alpha"], "path", "x") == ["alpha"]
    assert merge(["alpha"], "pa", "pa") == ["alpha"]
    assert merge(["alpha"], None, "") == ["alpha"]


def test_a_missing_model_file_is_a_clear_error_naming_it(tmp_path):
    missing = tmp_path / "nope.gguf"
    with pytest.raises(System2Error, match="nope.gguf"):
        System2(missing)


def test_a_continuation_offers_its_identifiers_while_the_user_follows_it():
    cont = Continuation("import os\nx = os.", "path.join(base, name)\n")
    at = "import os\nx = os."
    assert cont.word_at(at) == "path" and cont.word_at(at + "pa") == "path"
    assert cont.word_at(at + "path.") == "join"  # the next identifier: no new guess needed
    assert cont.word_at(at + "path.join(b") == "base"
    assert cont.word_at(at + "path(") is None  # typed something else: it no longer applies
    assert cont.word_at(at + "path") is None  # the identifier is typed out
    assert cont.word_at("y = os.") is None  # another place
    # an identifier cut off by the token budget is not offered, nor a number
    assert Continuation("x = ", "some_long_na").word_at("x = so") is None
    assert Continuation("argv[", "1]\n").word_at("argv[") is None


def test_a_guess_carries_the_log_probability_of_the_rest_of_its_identifier():
    # tokens: "pa" | "th" | "." | "join" | "(" ...: (end in text, log-probability)
    cont = Continuation("x = os.", "path.join(a)\n", ((2, -0.1), (4, -0.2), (5, -0.3), (9, -0.4), (10, -1.0)))
    at = "x = os."
    assert cont.scored_word_at(at) == ("path", pytest.approx(-0.3))  # "pa" and "th"
    assert cont.scored_word_at(at + "pa") == ("path", pytest.approx(-0.2))  # what is left of "path"
    assert cont.scored_word_at(at + "path.") == ("join", pytest.approx(-0.4))
    assert cont.scored_word_at(at + "path(") is None  # left the line: no guess, no confidence
    assert Continuation("x = ", "abc\n").scored_word_at("x = ") == ("abc", 0.0)  # none recorded


def test_ghost_text_is_the_rest_of_the_line_without_a_cut_off_end():
    cont = Continuation("x = ", "read_config(sys.argv[1])\n")
    assert cont.rest_at("x = re") == "read_config(sys.argv[1])"
    assert cont.rest_at("x = read_config(") == "sys.argv[1])"
    assert cont.rest_at("x = read_config(sys.argv[1])") is None  # nothing left
    assert cont.rest_at("x = write") is None  # left the line
    # still growing (or cut by the token budget): no half identifier, no half character
    assert Continuation("x = ", "open(config_fi").rest_at("x = ") == "open("
    assert Continuation("s = ", '"x" + "\ufffd').rest_at("s = ") == '"x" + "'


def _toy_system2(pieces: list[bytes]) -> System2:
    """A System 2 with a made-up vocabulary and no model: enough for ``word_scores``."""

    s2 = System2.__new__(System2)
    s2._index_pieces(pieces)
    return s2


def test_a_token_after_a_word_ends_it_unless_it_goes_on_with_a_letter_of_any_script():
    for piece in (b"(", b" ", b"\n", b"", "\u00a0".encode(), "\u2192x".encode(), "\U0001f600".encode(),
                  "\U0001f600".encode()[:3], "\U0001f600".encode()[:2], "\u2014".encode()[:2], "\u3002".encode(),
                  "\u3002".encode()[:2], "\u0301".encode()[:1], "\u0301x".encode()):
        assert not _continues_identifier(piece), piece  # brackets, spaces, arrows, emoji, 。, accents (whole or cut)
    for piece in (b"_x", b"a", b"9", "\u00e9t\u00e9".encode(), "\u540d\u524d".encode(), "\u540d".encode()[:2],
                  "\u540d".encode()[:1], "\u0436".encode(), "\u0436".encode()[:1], "\u211d".encode()[:2],
                  "\u2167".encode()[:2], b"\x80abc"):
        assert _continues_identifier(piece), piece  # ASCII, accented, CJK, Cyrillic, ℝ, Ⅷ (whole or cut)


def test_words_are_scored_from_the_distributions_the_continuation_kept():
    import math

    import numpy as np

    pieces = [b"", b" f", b" foo", b" fob", b"bar", b"baz", b"(", b" foo(", b" x"]
    s2 = _toy_system2(pieces)

    def dist(probs: dict[int, float]) -> np.ndarray:
        d = np.full(len(pieces), -50.0, dtype=np.float32)
        for i, p in probs.items():
            d[i] = math.log(p)
        return d

    # healed back " ", nothing typed; the continuation went " foo" (0.5), "bar" (0.6), "(" (0.9)
    steps = ((2, dist({2: 0.5, 1: 0.1, 3: 0.2, 7: 0.1, 8: 0.1})), (4, dist({4: 0.6, 5: 0.3, 6: 0.1})),
             (6, dist({6: 0.9, 0: 0.1})))
    cont = Continuation("x = ", "foobar(\n", (), b" ", steps)  # its context ends with the healed " "
    scores = s2.word_scores(cont, "x = f", ["foobar", "foobaz", "foo", "fob", "fxy"])
    want = [math.log(0.1 + 0.5 * 0.6 * (0.9 + 0.1)),  # " f" (a start of it), or the path ended by "("
            math.log(0.1 + 0.5 * 0.3),  # " f", or " foo" then "baz": an upper bound from there
            math.log(0.1 + 0.1 + 0.5 * 0.1),  # " f", " foo(", or " foo" then "(" (no identifier)
            math.log(0.2 + 0.1),  # " fob" or " f"
            math.log(0.1)]  # only " f" fits it
    assert scores == pytest.approx(want, abs=1e-4)
    # another place (a new line before it, or text the continuation never saw): no scores
    assert s2.word_scores(cont, "y = f", ["foo"]) is None
    assert s2.word_scores(Continuation("x = ", "foo\n"), "x = f", ["foo"]) is None
    # typed "fo" at the continuation, then a backspace and "x": its healed tokens no longer fit
    typed_fo = Continuation("x = ", "foobar(\n", (), b" ", steps, "fo")
    assert s2.word_scores(typed_fo, "x = fo", ["foobar"]) is not None
    assert s2.word_scores(typed_fo, "x = fx", ["fxy"]) is None


def test_the_runner_lets_system2_rerank_the_fast_items_where_it_has_scores():
    import math

    import numpy as np

    from engine.system2 import RERANK_WEIGHT
    from engine.types import Candidate

    pieces = [b"", b" f", b" foo", b"bar", b"(", b" fxy"]
    d0 = np.full(len(pieces), -50.0, dtype=np.float32)
    d0[[2, 1, 5]] = np.log([0.8, 0.1, 0.1])
    d1 = np.full(len(pieces), -50.0, dtype=np.float32)
    d1[[3, 4]] = np.log([0.5, 0.5])
    d2 = np.full(len(pieces), -50.0, dtype=np.float32)
    d2[4] = 0.0
    runner = System2Runner()
    runner.model = _toy_system2(pieces)
    runner._result = Guess("file:///a.py", Continuation("x = ", "foobar(\n", (), b" ", ((2, d0), (3, d1), (4, d2))))
    fast = [Candidate("fxy", -1.0), Candidate("foo", -1.5), Candidate("foobar", -4.0)]
    # fxy: " f" or " fxy"; foo: " f", or " foo" then "("; foobar: " f", or " foo", "bar", "("
    combined = {c.text: RERANK_WEIGHT * c.score + s for c, s in zip(fast, (
        math.log(0.1 + 0.1), math.log(0.1 + 0.8 * 0.5), math.log(0.1 + 0.8 * 0.5 * 1.0)))}
    want = max(combined, key=combined.get)
    assert want == "foo"  # the rule moves a lower fast item up here
    got = runner.merge("file:///a.py", "x = f", fast)
    assert [c.text for c in got] == ["foo", "fxy", "foobar"]
    assert got[0] is fast[1]  # the fast engine's own item, score and kind kept
    # a guess the fast engine did not list competes too
    only = runner.merge("file:///a.py", "x = fo", [Candidate("fox", -0.1)])
    assert {c.text for c in only} == {"fox", "foobar"}
    # another place (the continuation was made on another line): the fast order stands
    assert runner.merge("file:///a.py", "y = 1\nz = f", fast) == fast
    # an item that does not start with the typed part (a prose word in another case) is not re-ranked
    cased = runner.merge("file:///a.py", "x = f", [Candidate("Fxy", 5.0), *fast])
    assert [c.text for c in cased] == ["foo", "Fxy", "fxy", "foobar"]

    class Broken:
        def word_scores(self, *a):
            raise ValueError("boom")

    runner.model = Broken()  # a failure falls back to the guess rule instead of failing the request
    assert [c.text for c in runner.merge("file:///a.py", "x = f", fast)] == ["foobar", "fxy", "foo"]


def test_a_folder_or_a_tilde_path_is_handled_by_name(tmp_path, monkeypatch):
    with pytest.raises(System2Error, match="is a folder"):
        System2(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path))
    with pytest.raises(System2Error, match=str(tmp_path / "nope.gguf")):
        System2("~/nope.gguf")


def test_the_runner_offers_a_guess_only_where_it_was_made():
    from engine.types import Candidate

    runner = System2Runner()
    prefix = "import os\nx = os.pa"
    runner._result = Guess("file:///a.py", Continuation("import os\nx = os.", "path\n"))
    cands = [Candidate("pardir", -1.0), Candidate("pathsep", -2.0)]
    assert [c.text for c in runner.merge("file:///a.py", prefix, cands)] == ["path", "pardir", "pathsep"]
    assert [c.text for c in runner.merge("file:///a.py", prefix + "t", cands)] == ["path", "pardir", "pathsep"]
    # another document, another place, or typed past the guess: the fast list as it was
    assert runner.merge("file:///b.py", prefix, cands) == cands
    assert runner.merge("file:///a.py", "y = os.pa", cands) == cands
    assert runner.merge("file:///a.py", prefix + "x", cands) == cands
    # a guess System 2 itself doubts (its rest below MIN_WORD_LOGPROB) leaves the list alone
    unsure = MIN_WORD_LOGPROB - 0.5
    runner._result = Guess("file:///a.py", Continuation("import os\nx = os.", "path\n", ((4, unsure),)))
    assert runner.merge("file:///a.py", prefix, cands) == cands
    runner._result = Guess("file:///a.py", Continuation("import os\nx = os.", "path\n", ((4, -0.1),)))
    assert [c.text for c in runner.merge("file:///a.py", prefix, cands)] == ["path", "pardir", "pathsep"]


def test_a_guess_goes_first_only_when_system2_is_sure_enough_of_it():
    cont = Continuation("x = ", "read_config(path)\n", ((4, -0.2), (11, -0.9), (12, -0.1), (16, -3.0)))
    assert confident_word_at(cont, "x = ") == "read_config"  # -1.1 nats
    assert confident_word_at(cont, "x = read_config(") is None  # "path": -3.0 nats
    assert confident_word_at(cont, "x = read_config(", min_logprob=float("-inf")) == "path"
    assert confident_word_at(cont, "y = ") is None and confident_word_at(None, "x = ") is None


def test_the_prompt_names_the_file_by_its_path_in_the_workspace():
    folders = ["file:///home/u/proj", "file:///home/u/proj/sub"]
    assert prompt_path("file:///home/u/proj/src/app.py", folders) == "src/app.py"
    assert prompt_path("file:///home/u/proj/sub/b%20c.rs", folders) == "b c.rs"  # the innermost folder
    assert prompt_path("file:///home/u/projx/a.go", folders) == "a.go"  # outside: its name
    assert prompt_path("file:///home/u/proj/src/app.py", ["file:///home/u/proj/"]) == "src/app.py"
    assert prompt_path("file:///tmp/x.ts", []) == "x.ts"
    # a Windows drive, spelled one way by the folder and another by the document
    assert prompt_path("file:///c%3A/Users/u/proj/src/m.c", ["file:///C:/Users/u/proj"]) == "src/m.c"
    assert prompt_path("file:///tmp/a%0Ab.py", []) == "a b.py"  # no line break in the prompt's first line
    assert prompt_path("untitled:Untitled-1", folders) == "Untitled-1"
    assert prompt_path("untitled:", folders) is None
    assert prompt_path("file://[x/a.py", folders) is None  # does not parse
    # RFC 8089's local host, and the scheme in any case, on either side
    assert prompt_path("file://localhost/home/u/proj/src/app.py", folders) == "src/app.py"
    assert prompt_path("FILE:///home/u/proj/src/app.py", ["file://LOCALHOST/home/u/proj"]) == "src/app.py"


@needs_model
def test_not_installed_llama_or_a_corrupt_file_is_a_clear_error(tmp_path):
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGUF" + b"\0" * 64)
    with pytest.raises(System2Error, match="bad.gguf"):
        System2(bad)


@pytest.fixture(scope="module")
def model():
    return System2(GGUF, n_threads=2, n_ctx=512)


@needs_model
def test_it_completes_the_identifier_being_typed(model):
    src = "import os\nimport sys\n\n\ndef main():\n    here = os.path.dirname(__file__)\n    name = os.pa"
    assert model.complete_word(src) == "path"
    # token healing: the prompt ends inside what the model would write as one token
    assert model.complete_word("class Box:\n    def __init__(self, width):\n        self.wi") == "width"
    assert model.complete_word("def square(x):\n    ret") == "return"


@needs_model
def test_at_a_boundary_it_guesses_the_next_identifier(model):
    guess = model.complete_word("import os\n\nfiles = os.listdir('.')\nfor name in ")
    assert guess is not None and guess.isidentifier()
    assert model.complete_word("import os\nprint(os.") is not None


@needs_model
def test_a_one_token_prompt_gives_no_guess_and_no_error(model):
    assert model.continuation("(") is None and model.complete_word("#") is None


@needs_model
def test_a_stop_request_abandons_the_guess(model):
    assert model.complete_word("def square(x):\n    ret", stop=lambda: True) is None
    assert model.continuation("def square(x):\n    ret", stop=lambda: True) is None


@needs_model
def test_the_continuation_records_a_log_probability_per_token(model):
    prefix = "import os\n\npath = os.path.jo"
    cont = model.continuation(prefix)
    assert cont is not None and cont.logprobs
    ends = [e for e, _ in cont.logprobs]
    assert ends == sorted(ends) and ends[-1] >= len(cont.text.rstrip("\n"))  # the last may run past the line
    assert all(lp <= 1e-6 for _, lp in cont.logprobs)
    word, lp = cont.scored_word_at(prefix)
    assert word.startswith("jo") and -30 < lp <= 1e-6


@needs_model
def test_the_continuation_runs_to_the_end_of_the_line(model):
    seen = []
    prefix = "def square(x):\n    ret"
    cont = model.continuation(prefix, max_tokens=16, on_text=seen.append)
    assert cont.text.startswith("return") and cont.text.endswith("\n") and cont.text.count("\n") == 1
    assert cont.word_at(prefix) == "return"
    assert seen and all(cont.text.startswith(c.text) for c in seen)  # partial ones grow into it


@needs_model
def test_the_prompt_keeps_its_start_while_it_grows(model):
    text = Path(os.__file__).read_text()[:20000]
    model.complete_word(text[:12000])
    anchor = model._anchor
    assert anchor > 0  # a long file is cut at a line start
    assert text[anchor - 1] == "\n"
    model.complete_word(text[:12040])
    assert model._anchor == anchor  # the KV cache's prefix is reused


@needs_model
def test_the_prompt_start_is_found_again_when_the_window_slides(model):
    """The server hands over a window of the document that moves as the user types."""
    text = Path(os.__file__).read_text()[:20000]
    model.complete_word(text[:12000])
    key = model._anchor_key
    cached = list(model._cached)
    model.complete_word(text[500:12010])  # the window's start moved by 500 characters
    assert model._anchor_key == key
    assert model._cached[: len(cached) - 8] == cached[: len(cached) - 8]  # the KV cache's prefix kept


@needs_model
def test_the_prompt_opens_with_the_file_name_token_and_the_path(model):
    from engine.system2 import HEADER_TOKENS

    head = model.header("tools/paths.py")
    assert head[0] == model.llm.tokenize(b"<filename>", add_bos=False, special=True)[0]
    assert model.llm.detokenize(head[1:]) == b"tools/paths.py\n"
    assert model.header(None) == [] and model.header("") == []
    assert len(model.header("a/" * 200 + "deep.py")) == HEADER_TOKENS  # a long path keeps its end
    assert model.llm.detokenize(model.header("a/" * 200 + "deep.py")[-3:]).endswith(b".py\n")
    src = "import os\nimport sys\n\n\ndef main():\n    here = os.path.dirname(__file__)\n    name = os.pa"
    assert model.complete_word(src, path="tools/paths.py") == "path"
    assert model._cached[: len(head)] == head  # the KV cache holds the header first


def test_a_change_that_leaves_the_cursor_at_a_word_boundary_starts_the_next_line():
    """``after_change``: keys an editor asks no completion for (a space, a bracket, a line
    break) still start System 2's next line, with the file's path for the prompt."""
    from lsprotocol import types
    from pygls.workspace import TextDocument

    from laya_lsp.documents import position_after_change
    from laya_lsp.system2 import after_change

    class Recording(System2Runner):
        enabled = True

        def __init__(self):
            super().__init__()
            self.asked = []

        def request(self, uri, prefix, folders=()):
            self.asked.append((uri, prefix, prompt_path(uri, folders)))

    def changed(runner, doc, changes):  # as did_change calls it
        after_change(runner, uri, doc, changes, position_after_change(changes[-1], doc), folders)

    def key(doc, line, char, text):
        change = types.TextDocumentContentChangePartial(
            range=types.Range(start=types.Position(line=line, character=char),
                              end=types.Position(line=line, character=char)), text=text)
        doc.apply_change(change)
        return [change]

    uri = "file:///home/u/proj/src/app.py"
    folders = ["file:///home/u/proj"]
    runner = Recording()
    doc = TextDocument(uri, "import os\nx = os.path.join")
    changed(runner, doc, key(doc, 1, 16, "("))
    assert runner.asked == [(uri, "import os\nx = os.path.join(", "src/app.py")]
    # an auto-closed pair: the cursor is between its two characters
    runner, doc = Recording(), TextDocument(uri, "import os\nx = os.path.join")
    changed(runner, doc, key(doc, 1, 16, "()"))
    assert runner.asked == [(uri, "import os\nx = os.path.join(", "src/app.py")]
    # inside a word, a deletion, several changes at once, or System 2 off: nothing
    runner, doc = Recording(), TextDocument(uri, "import os\nx = os.path.join")
    changed(runner, doc, key(doc, 1, 16, "s"))
    changed(runner, doc, key(doc, 1, 16, ""))
    changed(runner, doc, key(doc, 1, 17, " ") + key(doc, 0, 9, " "))
    runner.enabled = False
    changed(runner, doc, key(doc, 1, 17, " "))
    assert runner.asked == []


def test_the_system2_benchmark_names_a_missing_model_and_a_short_file(tmp_path, capsys):
    from laya_tools import bench_system2

    assert bench_system2.main([str(tmp_path / "none.gguf"), "--file", __file__]) == 1
    assert "none.gguf does not exist" in capsys.readouterr().err


@needs_model
def test_the_system2_benchmark_times_each_model(tmp_path, capsys):
    from laya_tools import bench_system2

    short = tmp_path / "short.py"
    short.write_text("x = 1\n" * 20)
    assert bench_system2.main([str(GGUF), "--file", str(short)]) == 1
    assert "too short" in capsys.readouterr().err
    assert bench_system2.main([str(GGUF), "--file", __file__, "--warmup", "1", "--runs", "3"]) == 0
    out = capsys.readouterr().out
    assert "3 continuations each after 1 warm-up" in out and GGUF.name in out


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="thread scheduling policies are Linux's")
@pytest.mark.parametrize("how", ["idle", "nice"])
def test_the_system2_thread_yields_the_cores_to_the_fast_path(how):
    import threading

    from laya_lsp.system2 import NICE, _yield_cores

    got = {}

    def run():
        tid = threading.get_native_id()
        _yield_cores(how)
        got["policy"], got["nice"] = os.sched_getscheduler(tid), os.getpriority(os.PRIO_PROCESS, tid)

    t = threading.Thread(target=run)
    t.start()
    t.join()
    if how == "idle":
        assert got["policy"] == os.SCHED_IDLE
    else:
        assert got["policy"] == os.SCHED_OTHER
        assert got["nice"] == NICE or got["nice"] == os.nice(0) > NICE  # raising it back needs privilege
    assert os.sched_getscheduler(0) == os.SCHED_OTHER  # the calling (fast path's) thread is untouched


def test_healing_counts_each_token_that_spells_the_typed_text_once():
    # " f" is both a start of " f" and a token that starts with it: counted twice, it doubled its
    # weight in the healed token's normaliser (found by a helper: "(" after "print" at -0.85 nats
    # where the whole vocabulary gave it -0.33)
    s2 = _toy_system2([b"", b" ", b" f", b" fo", b" foo", b" foo(", b"f", b"x"])
    got = s2._allowed(b" f")
    assert sorted(got) == [1, 2, 3, 4, 5] and len(got) == len(set(got))
    assert sorted(s2._allowed(b" fo")) == [1, 2, 3, 4, 5]
    assert s2._allowed(b"q") == []
