"""Predictor behaviour on real code: KV reuse, rollback on deletion, reset, window, thread."""

import random
import textwrap
import threading
from pathlib import Path

import numpy as np
import pytest

from engine.predictor import Predictor
from engine.text import word_prefix
from engine.tokenizer import load_tokenizer
from engine.worker import EngineThread
from engine.scoring import with_neural_cache

SOURCE = Path(textwrap.__file__).read_text()  # a real module nobody here wrote


@pytest.fixture(scope="module")
def pred():
    p = Predictor.load()
    p.fast_path = False  # these tests check the whole window; tests/test_window_cache.py the short one
    p.warmup()
    return p


def fresh_ranking(text):
    p = Predictor.load()
    p.fast_path = False  # the whole window at once (tests/test_window_cache.py covers the short one)
    return [c.text for c in p.predict(text)], p.cached


def test_candidates_complete_the_typed_prefix(pred):
    pred.reset()
    cut = SOURCE.index("self.width = width") + len("self.wi")
    out = pred.predict(SOURCE[:cut])
    assert out, "no candidates"
    assert all(c.text.startswith("wi") and len(c.text) > 2 for c in out)
    assert len({c.text for c in out}) == len(out)
    scores = [c.score for c in out if c.kind != "line"]
    assert scores == sorted(scores, reverse=True)


def test_typing_inside_a_word_needs_no_forward_pass(pred):
    pred.reset()
    start = SOURCE.index("self.expand_tabs = expand_tabs") + len("self.")
    pred.predict(SOURCE[:start])
    before = pred.stats["forward_tokens"]
    for i in range(1, 8):
        out = pred.predict(SOURCE[: start + i])
        assert all(c.text.startswith(SOURCE[start : start + i]) for c in out)
    assert pred.stats["forward_tokens"] == before


def test_deletion_rolls_back_to_the_same_state_as_fresh(pred):
    pred.reset()
    # the last place where the window, typed 40 characters further, still reaches the file start
    # (past it, typing forward slides the window, and the slid start is kept on the way back)
    cut = 200
    while len(pred.tok.encode(SOURCE[: cut + 90]).ids) < pred.config.max_context_tokens - 8:
        cut += 50
    for i in range(cut - 80, cut + 40):  # type forward ...
        pred.predict(SOURCE[:i])
    for i in range(cut + 40, cut - 30, -1):  # ... then delete back
        pred.predict(SOURCE[:i])
    text = SOURCE[: cut - 30]
    got = [c.text for c in pred.predict(text)]
    want, want_cached = fresh_ranking(text)
    assert pred.cached == want_cached
    assert len(pred.cached) == pred.backend.offset
    assert got == want


def test_rolled_back_cache_equals_a_fresh_prefill_of_its_tokens(pred, monkeypatch):
    # a shifted cache is close, not equal (the kept positions' values saw the dropped tokens); the
    # KV sync holds its own copy of the option
    monkeypatch.setattr(pred.kv, "context_shift", False)
    pred.reset()
    shifts = pred.stats["shifts"]
    cut = SOURCE.index("def _split(self, text):")
    for i in range(cut - 80, cut + 40):
        pred.predict(SOURCE[:i])
    for i in range(cut + 40, cut - 30, -1):
        pred.predict(SOURCE[:i])
    fresh = Predictor.load()
    h = fresh.backend.forward(pred.cached)
    assert pred.stats["shifts"] == shifts
    assert np.abs(fresh.backend.logits(h) - pred.backend.logits(pred._hidden)).max() < 2e-3


def test_random_edits_keep_cache_invariant(pred):
    pred.reset()
    rnd = random.Random(1)
    pos = 3000
    for _ in range(200):
        pos = max(1, min(len(SOURCE), pos + rnd.choice([-7, -1, 1, 1, 1, 2, 15])))
        pred.predict(SOURCE[:pos])
        assert len(pred.cached) == pred.backend.offset
        start = pred._pending.start if pred._pending is not None else 0  # after a jump: a short window
        assert pred.cached == pred.window.prev[start : start + len(pred.cached)]


def test_reset_empties_the_cache(pred):
    pred.predict(SOURCE[:2000])
    assert pred.backend.offset > 0
    pred.reset()
    assert pred.backend.offset == 0 and pred.cached == [] and pred.doc_id is None


def test_window_is_bounded_and_slides_rarely(pred):
    pred.reset()
    restarts = 0
    prev_start = None
    ends = [i for i, ch in enumerate(SOURCE) if ch == "\n"][:400]
    total = len(pred.tok.encode(SOURCE[: ends[-1]]).ids)
    for line_end in ends:
        ctx = pred.window.tokens(SOURCE[:line_end])
        assert len(ctx) <= pred.config.max_context_tokens
        if prev_start is not None and ctx[:8] != prev_start:
            restarts += 1
        prev_start = ctx[:8]
    # the window restarts about once per (max - min) new tokens, not once per line
    assert 0 < restarts <= total / (pred.config.max_context_tokens - pred.config.min_context_tokens) + 2
    assert restarts < len(ends) / 5  # textwrap's docstrings: ~15 tokens a line, a slide per ~9 lines


def test_line_continuation_is_rolled_back(pred, monkeypatch):
    monkeypatch.setattr(pred.config, "line_min_prob", 0.0)  # always continue: rollback is under test
    monkeypatch.setattr(pred.config, "line_min_joint_prob", 0.0)
    pred.reset()
    cut = SOURCE.index("        self.width = width") + len("        self.")
    out = pred.predict(SOURCE[:cut], want_line=True)
    lines = [c for c in out if c.kind == "line"]
    assert lines and lines[0].text.startswith(out[0].text)
    assert "\n" not in lines[0].text
    assert len(pred.cached) == pred.backend.offset == len(pred._ctx)


def test_no_line_when_rest_of_line_is_code(pred, monkeypatch):
    monkeypatch.setattr(pred.config, "line_min_prob", 0.0)
    monkeypatch.setattr(pred.config, "line_min_joint_prob", 0.0)
    cut = SOURCE.index("        self.width = width") + len("        self.")
    out = pred.predict(SOURCE[:cut], suffix="foo = 1\n", want_line=True)
    assert not [c for c in out if c.kind == "line"]


def test_tokens_concatenate_by_line():
    tok = load_tokenizer(Path(Predictor.load().folder) / "tokenizer.json")
    text = SOURCE[:5000] + "\n\n\t x = 'é😀中'\r\n  y\n"
    lines = text.split("\n")
    cat = []
    for i, line in enumerate(lines):
        cat += tok.encode(("\n" if i else "") + line).ids
    assert tok.encode(text).ids == cat


def test_word_prefix():
    assert word_prefix("os.pa") == "pa"
    assert word_prefix("x = 12") == ""
    assert word_prefix("foo(") == ""
    assert word_prefix("a_b2") == "a_b2"
    assert word_prefix("3abc") == "abc"
    assert word_prefix("ünï") == "ünï"


def test_engine_thread_runs_everything_on_one_thread():
    et = EngineThread()
    seen = set()
    jobs = [et.submit(lambda: seen.add(threading.get_ident())) for _ in range(20)]
    for j in jobs:
        j.future.result(5)
    assert len(seen) == 1 and threading.get_ident() not in seen
    with pytest.raises(ZeroDivisionError):
        et.call(lambda: 1 / 0)
    et.shutdown()


def test_unicode_and_huge_lines_do_not_break(pred):
    pred.reset()
    out = pred.predict("x = '😀中文'\nname = 1\nna")
    assert all(c.text.startswith("na") for c in out)
    huge = "y = [" + "1, " * 200000 + "]\nva"
    out = pred.predict(huge)
    assert len(pred.cached) <= pred.config.max_context_tokens + 1
    assert np.isfinite([c.score for c in out]).all()


def test_context_shift_slides_without_reprefill(pred):
    pred.reset()
    ends = [i for i, ch in enumerate(SOURCE) if ch == "\n"][:300]
    shifts = pred.stats.get("shifts", 0)
    for e in ends:
        before = pred.stats["forward_tokens"]
        pred.predict(SOURCE[: e + 1])
        assert len(pred.cached) == pred.backend.offset
        if ends.index(e) > 100:  # once the window is full, no step re-prefills a whole window
            assert pred.stats["forward_tokens"] - before < 64
    assert pred.stats.get("shifts", 0) > shifts


def test_neural_cache_gives_a_distribution(pred):
    pred.reset()
    text = SOURCE[:3000]
    pred.predict(text)
    logits = pred.backend.logits(pred._hidden)
    cfg = pred.config
    logp = with_neural_cache(logits, pred.backend.hid, pred._hidden, pred._ctx, cfg.cache_weight, cfg.cache_theta)
    assert abs(np.log(np.exp(logp).sum())) < 1e-3
    # the cache moves probability toward tokens that followed similar positions in the window
    plain = logits - logits.max() - np.log(np.exp(logits - logits.max()).sum())
    assert np.abs(logp - plain).max() > 1e-3


def test_run_time_path_does_not_import_mlx_lm():
    """Importing mlx_lm pulls in transformers (seconds, tens of MB): the server must not."""
    import subprocess
    import sys

    code = ("import sys; from engine.predictor import Predictor; import laya_lsp.server; "
            "p = Predictor.load(); p.predict('import os\\nos.pa'); "
            "print('mlx_lm' in sys.modules, 'transformers' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.stdout.split() == ["False", "False"], out.stderr[-2000:]


def test_full_window_and_a_very_long_identifier_never_overflow_the_kv_cache():
    """A window full of context plus a long identifier must not overflow the KV cache (the
    capacity is planned once: context + word + continuation)."""
    from engine.predictor import Predictor

    p = Predictor.load()
    body = "".join(f"value_{i} = compute(value_{i - 1}, other_{i})\n" for i in range(1, 400))
    long_word = "configuration_" + "_".join(f"segment{i}" for i in range(30))
    text = body + f"{long_word} = 1\nresult = {long_word[:10]}"
    for k in range(len(text) - 12, len(text) + 1):
        assert p.predict(text[:k], want_line=True) is not None
    assert len(p.cached) <= p.backend.capacity


def test_no_identifier_inside_a_number_literal(pred):
    from engine.text import in_number

    assert in_number("x = 0xab") and in_number("y = 1e5") and in_number("n = 12")
    assert not in_number("x = a0") and not in_number("foo.ba2") and not in_number("x = ")
    p = pred
    assert p.predict("import os\nx = 0xab") == []
    assert p.predict("import os\nx = 12") == []
    assert p.predict("import os\nos.pa")  # an identifier still completes


def test_the_same_text_in_another_language_begins_that_languages_pool():
    p = Predictor.load()
    text = "import os\n\ndef main(argv):\n    return os.pa"
    assert p.predict(text)
    assert [c.text for c in p.predict(text, language="go")]  # raised AttributeError: no pool begun


def test_no_reserved_word_after_a_member_access_or_a_definition_keyword(pred):
    """``x = self.c`` offered ``class`` first, ``obj.i`` ``import``, ``def c`` ``class`` (a fresh
    user, an empty workspace): a reserved word can never come there. Soft keywords can
    (``re.match``), and a number's dot and ``..`` are not member accesses."""
    from engine.languages import C, GO, JAVASCRIPT, PYTHON, RUST
    from engine.predictor import _reserved_here

    body = "import os\nimport re\n\n\nclass Foo:\n    def go(self, obj):\n"
    for line, word in (("        x = self.c", "class"), ("        y = obj.i", "import"),
                       ("        z = obj.f", "for"), ("        w = os.r", "return"), ("    def c", "class")):
        items = [c.text for c in pred.predict(body + line, max_items=20, language="python")]
        assert items and word not in items, (line, items)
    assert "class" in [c.text for c in pred.predict(body + "\n\ncl", max_items=20, language="python")]
    assert "match" not in _reserved_here(PYTHON, "x = re.") and "import" in _reserved_here(PYTHON, "x = re.")
    assert not _reserved_here(PYTHON, "x = 1.") and not _reserved_here(PYTHON, "x[1..")
    assert _reserved_here(PYTHON, "f().") and _reserved_here(PYTHON, "x1.") and _reserved_here(PYTHON, "async def ")
    assert "await" not in _reserved_here(RUST, "fut.") and "match" in _reserved_here(RUST, "x.")
    assert "func" in _reserved_here(GO, "fmt.") and "nil" not in _reserved_here(GO, "fmt.")
    assert not _reserved_here(JAVASCRIPT, "promise.")  # promise.catch, obj.default: any word
    # C's p->next (blanks or not), C++'s and Rust's paths: std::fmt, but Rust's super::super::x
    for text in ("p->", "p -> ", "x = a->b->", "std::"):
        assert {"int", "void", "return"} <= _reserved_here(C, text), text
    assert "fn" in _reserved_here(RUST, "std::") and "let" in _reserved_here(RUST, "x = std:: ")
    assert "super" not in _reserved_here(RUST, "use super::") and "self" not in _reserved_here(RUST, "a::")
    assert not _reserved_here(C, "x = a - ") and not _reserved_here(RUST, "let x: ")
    for text, lang, word in (("int main(void) {\n    p->v", "c", "void"), ("int f(void) {\n    p->i", "c", "int"),
                             ("fn main() {\n    std::f", "rust", "fn"), ("fn main() {\n    std::l", "rust", "let")):
        items = [c.text for c in pred.predict(text, max_items=20, language=lang)]
        assert word not in items, (text, items)


def test_no_reserved_word_right_after_a_dollar_sign_in_javascript(pred):
    """A fresh user's ``$el`` offered ``else`` (``$`` is an identifier character in JavaScript,
    not in the engine's pieces): no reserved word after ``$`` there, but one the document
    writes after it (jQuery's ``$this``); other languages and other signs are unchanged."""
    from engine.languages import JAVASCRIPT, PYTHON, TYPESCRIPT
    from engine.predictor import _reserved_here

    body = "const elem = document.body;\nconst $elem = $(elem);\nif (ok) {\n  f();\n} else {\n  g();\n}\n"
    for lang in ("javascript", "typescript"):
        items = [c.text for c in pred.predict(body + "const x = $el", max_items=20, language=lang)]
        assert items and "else" not in items, (lang, items)
        assert "elem" in items, items  # the document's $elem: its `elem` after `$`
        assert "else" in [c.text for c in pred.predict(body + "if (a) {\n} el", max_items=20, language=lang)]
    assert {"else", "this", "new"} <= _reserved_here(JAVASCRIPT, "x = $")
    assert {"else", "type"} <= _reserved_here(TYPESCRIPT, "a$")
    jquery = "var $this = $(this);\n$"
    assert "this" not in _reserved_here(JAVASCRIPT, jquery) and "else" in _reserved_here(JAVASCRIPT, jquery)
    assert not _reserved_here(JAVASCRIPT, "x = ") and not _reserved_here(PYTHON, "x = $")


def test_the_name_before_a_member_access_comes_last(pred):
    """``os.`` offered ``os`` first (and ghost text ``os.``) to a fresh user: the name before the
    dot, ``->`` or ``::`` goes below the other items, unless the text has it after itself there."""
    from engine.languages import C, PROSE, PYTHON, RUST
    from engine.predictor import _repeated_name

    assert _repeated_name(PYTHON, "import os\nos.") == "os" and _repeated_name(PYTHON, "x = self.") == "self"
    assert _repeated_name(C, "p->") == "p" and _repeated_name(RUST, "std::") == "std"
    assert _repeated_name(PYTHON, "a::") is None and _repeated_name(PYTHON, "x = 1.") is None
    assert _repeated_name(PYTHON, "y = node.node\nnode.") is None and _repeated_name(PYTHON, "a.b.") is None
    assert _repeated_name(PYTHON, "# see os. ") is None and _repeated_name(C, "p -> ") == "p"
    assert _repeated_name(PROSE, "I like Python.") is None
    for text in ("import os\nos.", "import os\n\nos.path.join(os.getcwd(), os.sep)\nos.",
                 "class A:\n    def f(self):\n        self.x = self\n        self."):
        items = [c.text for c in pred.predict(text, max_items=20, language="python")]
        name = text.rsplit("\n", 1)[-1].strip(" .")
        assert items and items[0] != name and (name not in items or items.index(name) == len(items) - 1), items


def test_no_item_inside_an_identifier_split_by_a_combining_mark(pred):
    """``á`` written as ``a`` + U+0301 (decomposed text): the identifier goes on across the mark, so
    no item can replace it whole; a fresh user's ``print(á|`` got ``print`` after the mark
    (``print(áprint``). Precomposed ``á`` is a letter like any other."""
    from engine.text import after_mark

    nfd = "a\u0301"
    assert after_mark("print(" + nfd) and after_mark("x = " + nfd + "b") and after_mark(nfd + "bc_1")
    assert not after_mark("print(\u00e1") and not after_mark("x = ab") and not after_mark("s = '" + nfd + "' + ")
    doc = nfd + "b = 1\nprint(" + nfd
    assert pred.predict(doc, language="python") == [] and pred.predict(doc + "b", language="python") == []
    assert pred.predict("\u00e1b = 1\nprint(\u00e1", language="python")[0].text == "\u00e1b"


def test_pool_prepared_beside_the_forward_pass_ranks_as_one_after_the_other():
    """``EngineConfig.overlap_pool``: the pool's context on the helper thread changes no item."""
    ranked = {}
    for overlap in (True, False):
        p = Predictor.load()
        p.overlap = overlap
        p.fast_path = False  # no window pending behind a short one (the helper waits those out)
        p.observe_document("doc", SOURCE[:3000], "python")
        out = []
        for end in range(2000, 2400):  # typed one character at a time
            out.append([(c.text, round(c.score, 9)) for c in p.predict(SOURCE[:end], doc_id="doc")])
        ranked[overlap] = out
        assert (p.stats["overlapped"] > 0) == overlap
    assert ranked[True] == ranked[False]


def test_an_error_on_the_helper_thread_reaches_the_caller_and_is_forgotten(monkeypatch):
    p = Predictor.load()
    p.fast_path = False
    assert p.overlap
    p.predict(SOURCE[:2000], doc_id="doc")  # a jump: no helper
    end = 2000
    while not p.stats["overlapped"]:  # typed on, one character at a time, to a new context
        end += 1
        before = [(c.text, c.score) for c in p.predict(SOURCE[:end], doc_id="doc")]
    begin = p._begin_pool

    def broken(*a):
        raise RuntimeError("pool failed")

    monkeypatch.setattr(p, "_begin_pool", broken)
    with pytest.raises(RuntimeError, match="pool failed"):
        for n in range(end + 1, end + 200):
            p.predict(SOURCE[:n], doc_id="doc")
    assert p.stats["overlapped"] == 2
    monkeypatch.setattr(p, "_begin_pool", begin)
    # back at the earlier context: the same items as before the failure (a helper that failed
    # leaves no half-made state behind: the next decision syncs and begins its pool again)
    assert [(c.text, c.score) for c in p.predict(SOURCE[:end], doc_id="doc")] == before


def test_predictors_share_one_helper_thread():
    before = threading.active_count()
    for _ in range(4):
        p = Predictor.load()
        p.warmup()
        p.predict(SOURCE[:2000], doc_id="doc")
        p.predict(SOURCE[:2001], doc_id="doc")
    assert threading.active_count() <= before + 1


def test_the_helper_waits_out_jumps_and_pastes():
    """``OVERLAP_MAX_NEW``: a decision that prefills many new tokens prepares its pool on the
    calling thread; typing on (one new token) hands it to the helper."""
    p = Predictor.load()
    p.fast_path = False
    end = SOURCE.index("\n", 2000) + 1
    p.predict(SOURCE[:end], doc_id="doc")  # hundreds of new tokens: no helper
    assert p.stats["overlapped"] == 0
    nxt = SOURCE.index(" ", end + 8)
    p.predict(SOURCE[:nxt + 1], doc_id="doc")  # 'fix_sentence_endings ': ten new tokens
    assert p.stats["overlapped"] == 0
    p.predict(SOURCE[:nxt + 2], doc_id="doc")  # one more character typed
    assert p.stats["overlapped"] == 1
