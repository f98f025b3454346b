"""Speculative prefill in pauses (``Predictor.idle_step``): the best identifier is prefilled after
its context; the next decision keeps it when the user typed that word, trims it when not, and the
answers are those of a predictor that never speculated."""

import textwrap
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

import pytest

from engine.predictor import Predictor

SOURCE = Path(textwrap.__file__).read_text()  # a real module nobody here wrote
AFTER = SOURCE.index("        self.width = width") + len("        self.")  # the word "width" starts here


@pytest.fixture(scope="module")
def pair():
    spec, plain = Predictor.load(), Predictor.load()
    plain.speculate = False
    for p in (spec, plain):
        p.fast_path = False  # the whole window at once: no pending window to finish first
    return spec, plain


def _both(pair, text, **kw):
    out = []
    for p in pair:
        before = p.stats["forward_tokens"]
        items = p.predict(text, **kw)
        out.append(([(c.text, c.kind) for c in items], p.stats["forward_tokens"] - before))
    return out


def _idle(p):
    while p.idle_step():
        pass


@contextmanager
def _engine_order(pair):
    """The engine's order without the learned re-ranker (``engine.rerank``), which puts the longer
    ``width_of_current_line`` (a corpus word) first where this test types ``width``."""
    saved = [p.config for p in pair]
    for p in pair:
        p.config = replace(p.config, rerank=False)
    try:
        yield
    finally:
        for p, c in zip(pair, saved):
            p.config = c


def test_the_typed_word_is_prefilled_in_a_pause_and_kept_by_the_next_decision(pair):
    with _engine_order(pair):
        _typed_word_is_prefilled(pair)


def _typed_word_is_prefilled(pair):
    spec, plain = pair
    for p in pair:
        p.reset()
    _both(pair, SOURCE[:AFTER])
    (got, _), (want, _) = _both(pair, SOURCE[: AFTER + 3])  # "wid"
    assert got == want and got[0][0] == "width"
    _idle(spec)
    ids = spec.tok.encode("width").ids
    assert spec.kv.speculated == len(ids) and spec.cached[-len(ids):] == ids
    assert len(spec.cached) == spec.backend.offset
    # the user ends the word: the next word start needs only what follows "width"
    nxt = AFTER + len("width = ")
    (got, n_spec), (want, n_plain) = _both(pair, SOURCE[:nxt])
    assert got == want
    assert n_spec < n_plain
    assert spec.kv.speculated == 0 and spec.cached == spec.window.prev == plain.cached


def test_a_wrong_guess_is_trimmed(pair):
    spec, plain = pair
    for p in pair:
        p.reset()
    _both(pair, SOURCE[: AFTER + 3])
    spec._spec_word = "widthOfSomethingElse"  # a guess the user does not type
    _idle(spec)
    assert spec.kv.speculated > 0
    nxt = AFTER + len("width = ")
    (got, _), (want, _) = _both(pair, SOURCE[:nxt])
    assert got == want
    assert spec.cached == plain.cached and len(spec.cached) == spec.backend.offset


def test_a_continuation_after_a_speculation_starts_from_the_context(pair, monkeypatch):
    spec, plain = pair
    for p in pair:
        p.reset()
        monkeypatch.setattr(p.config, "line_min_prob", 0.0)
        monkeypatch.setattr(p.config, "line_min_joint_prob", 0.0)
        monkeypatch.setattr(p.config, "line_match_min_chars", 0)  # the network's line, not the document's
    _both(pair, SOURCE[: AFTER + 3])
    _idle(spec)
    assert spec.kv.speculated > 0
    (got, _), (want, _) = _both(pair, SOURCE[: AFTER + 3], suffix="\n", want_line=True)
    assert [k for _, k in got].count("line") == 1
    assert got == want
    assert spec.cached == plain.cached == spec._ctx


def test_no_speculation_without_the_option_or_after_a_reset(pair):
    spec, plain = pair
    for p in pair:
        p.reset()
    _both(pair, SOURCE[: AFTER + 3])
    _idle(plain)
    assert plain.kv.speculated == 0 and plain.cached == plain._ctx
    spec.reset()
    _idle(spec)
    assert spec.kv.speculated == 0 and spec.cached == []


def test_the_servers_engine_thread_speculates_in_a_pause():
    """The server's load job gives the engine thread ``idle_step`` as its idle work
    (``laya_lsp.loading``): after an answer and a pause, the best word is in the KV cache."""
    import time

    from engine.worker import EngineThread
    from laya_lsp.loading import ModelHandle, _load_job

    eng = EngineThread()
    try:
        pred = eng.call(_load_job, ModelHandle(), None, "code", None)
        eng.call(pred.predict, SOURCE[: AFTER + 2])  # a jump: a short window, the full one in pauses
        deadline = time.monotonic() + 5
        while eng.call(lambda: pred.kv.pending is not None and not pred.kv.pending.done):
            assert time.monotonic() < deadline
            time.sleep(0.05)
        items = eng.call(pred.predict, SOURCE[: AFTER + 3])  # the next key switches to the full window
        assert eng.call(lambda: pred.kv.pending) is None and items
        ids = pred.tok.encode(items[0].text).ids
        while eng.call(lambda: pred.kv.speculated) == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert eng.call(lambda: pred.cached[-len(ids):]) == ids
    finally:
        eng.shutdown()


def test_random_edits_with_pauses_answer_as_without_speculation(pair):
    """Typing, deleting and jumping with a pause (idle steps) now and then: every answer, with
    and without its rest-of-line item, is the one a predictor that never speculates gives."""
    import random

    spec, plain = pair
    for p in pair:
        p.reset()
        p.fast_path = True  # jumps take a short window here, and its full one in the pauses
    rnd = random.Random(7)
    pos = 3000
    try:
        for step in range(300):
            move = rnd.choice([1, 1, 1, 1, 2, -1, -3, 40, -200, 900])
            pos = max(1, min(len(SOURCE) - 1, pos + move))
            want_line = rnd.random() < 0.2
            (got, _), (want, _) = _both(pair, SOURCE[:pos], suffix="\n", want_line=want_line)
            assert got == want, (step, pos)
            assert len(spec.cached) == spec.backend.offset
            if rnd.random() < 0.5:  # a pause: both finish their windows, one also speculates
                _idle(spec)
                _idle(plain)
        assert spec.stats["speculated_tokens"] > 0
    finally:
        for p in pair:
            p.fast_path = False


def _fresh_pair():
    spec, plain = Predictor.load(), Predictor.load()
    plain.speculate = False
    return spec, plain


def test_a_window_slide_trims_the_speculation_first():
    """Typing forward across window slides (context shifts) with a pause after every key: the
    hidden states and answers are those of a never-speculating predictor (a shift used to keep
    the speculated tail, computed against the dropped tokens)."""
    spec, plain = pair = _fresh_pair()
    for p in pair:
        p.fast_path = False
    for pos in range(3000, 3700):
        (got, _), (want, _) = _both(pair, SOURCE[:pos])
        assert got == want, pos
        assert float(abs(spec._hidden - plain._hidden).max()) < 1e-4, pos
        _idle(spec)
        _idle(plain)
    assert spec.stats["shifts"] > 0 and spec.stats["shifts"] == plain.stats["shifts"]
    assert spec.stats["speculated_tokens"] > 0


def test_kept_guesses_count_as_new_tokens_for_the_short_window_and_the_window_store():
    """A paste right after a speculated word takes the short window exactly when it would
    without the speculation, and a window is stored on a jump exactly when it would (found by a
    reviewer: kept guesses had counted as context already there)."""
    spec, plain = pair = _fresh_pair()
    for p in pair:  # type a word's first letter, pause, type on, then paste ~150 characters
        p.predict(SOURCE[:319])
        _idle(p)
        p.predict(SOURCE[:320])
        _idle(p)
    (got, _), (want, _) = _both(pair, SOURCE[:474])
    assert got == want
    assert spec.stats["short_windows"] == plain.stats["short_windows"]
    for p in pair:
        p.reset()
    for pos in (122, 5000, 230):  # near the file start (~63 tokens), far away, and back
        (got, _), (want, _) = _both(pair, SOURCE[:pos])
        assert got == want, pos
        assert len(spec.windows) == len(plain.windows) and spec.cached == plain.cached
        _idle(spec)
        _idle(plain)
