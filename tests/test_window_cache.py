"""The fast path after a jump or a paste: a short window answers, the full one is finished by
``advance``, and windows left behind are kept (bounded) so coming back prefills nothing."""

import random
import textwrap
from pathlib import Path

import numpy as np
import pytest

from engine.predictor import Predictor
from engine.window_cache import FAST_MIN_NEW, SHORT_TOKENS, WindowStore, common_prefix

SOURCE = Path(textwrap.__file__).read_text()  # a real module nobody here wrote


@pytest.fixture(scope="module")
def pred():
    p = Predictor.load()
    p.warmup()
    return p


def _cut(marker: str) -> str:
    return SOURCE[: SOURCE.index(marker)]


def _settle(pred, text: str) -> None:
    """Decide at ``text`` and finish its full window (as idle time between keystrokes would)."""
    pred.predict(text)
    while pred.advance():
        pass
    pred.predict(text)
    assert pred._pending is None and pred.cached == pred.window.prev


@pytest.fixture
def short_first(pred):
    """The predictor with ``prior_after_jump`` off: a jump prefills the short window at once."""
    pred.kv.prior_after_jump = False
    yield pred
    pred.kv.prior_after_jump = True


def test_a_jump_is_answered_by_the_prior_then_the_windows_follow(pred):
    """By default a jump prefills nothing: the n-gram prior answers; typing on in the word still
    prefills nothing; the next context change prefills the short window (the pause before it
    would have finished the full one, as advance() shows)."""
    pred.reset()
    _settle(pred, _cut("class TextWrapper"))
    far = _cut("    def _split(self, text):") + "    def "
    before = pred.stats["forward_tokens"]
    out = pred.predict(far)
    assert out and all(c.kind != "line" for c in out)
    assert pred.stats["forward_tokens"] == before and pred.cached == [] and pred._pending is not None
    pred.predict(far + "_s")
    assert pred.stats["forward_tokens"] == before
    pred.predict(far + "_split(self, ")  # a new context: the short window, then what was typed
    assert 0 < pred.stats["forward_tokens"] - before <= SHORT_TOKENS + 8
    while pred.advance():
        pass
    pred.predict(far + "_split(self, t")
    assert pred._pending is None and pred.cached == pred.window.prev


def test_a_jump_answers_from_a_short_window_then_the_full_one(short_first):
    pred = short_first
    pred.reset()
    _settle(pred, _cut("class TextWrapper"))
    before = pred.stats["forward_tokens"]
    far = _cut("    def _split(self, text):") + "    def "
    out = pred.predict(far)
    assert out, "the short window answers"
    assert pred.stats["forward_tokens"] - before <= SHORT_TOKENS
    assert pred._pending is not None and len(pred.cached) == SHORT_TOKENS == pred.backend.offset
    ctx = pred._pending.ctx
    assert pred.cached == ctx[-SHORT_TOKENS:]
    while pred.advance():  # the background work, chunk by chunk; the live cache is untouched
        assert pred.backend.offset == SHORT_TOKENS
    # the next decision uses the finished window, equal to a fresh prefill of it
    pred.predict(far + "_sp")
    assert pred._pending is None and pred.cached == ctx
    fresh = Predictor.load()
    h = fresh.backend.forward(ctx)
    assert np.abs(fresh.backend.logits(h) - pred.backend.logits(pred._hidden)).max() < 2e-3


def test_coming_back_to_a_place_prefills_nothing_new(pred):
    pred.reset()
    here = _cut("    def _munge_whitespace")
    there = _cut("    def _fix_sentence_endings")
    _settle(pred, here)
    _settle(pred, there)  # a jump: the window at `here` is stored
    assert pred.stats["stored_windows"] >= 1 and len(pred.windows) >= 1
    before = pred.stats["forward_tokens"]
    pred.predict(here)  # back: the stored window is swapped in
    assert pred._pending is None
    assert pred.stats["forward_tokens"] - before <= 1  # the last token is recomputed for its state
    assert pred.cached == pred.window.prev


def test_typing_after_a_jump_keeps_the_short_window_and_the_invariant(pred):
    pred.reset()
    _settle(pred, _cut("class TextWrapper"))
    start = SOURCE.index("    def _handle_long_word")
    rnd = random.Random(3)
    pos = start
    for _ in range(150):
        pos += rnd.choice([1, 1, 1, 2, -1, 9])
        pred.predict(SOURCE[:pos])
        assert len(pred.cached) == pred.backend.offset
        s = pred._pending.start if pred._pending is not None else 0
        assert pred.cached == pred.window.prev[s : s + len(pred.cached)]
    assert pred.stats["background_tokens"] > 0


def test_the_store_keeps_to_its_byte_budget():
    store = WindowStore(max_bytes=3000)
    for i in range(10):
        store.put([1, 2, i], (np.zeros(250, np.float32),))  # 1000 bytes each
    assert len(store) == 3 and store.nbytes == 3000
    toks, state = store.take([1, 2, 9, 4], at_least=3)
    assert toks == [1, 2, 9] and len(store) == 2
    assert store.take([1, 2, 0], at_least=3) is None  # evicted
    assert common_prefix([1, 2, 3], [1, 2, 4]) == 2


def test_reset_frees_stored_windows(pred):
    pred.reset()
    _settle(pred, _cut("class TextWrapper"))
    pred.predict(_cut("    def _split(self, text):"))
    assert len(pred.windows) == 1 and pred._pending is not None
    pred.reset()
    assert len(pred.windows) == 0 and pred.windows.nbytes == 0 and pred._pending is None


def test_short_window_threshold_is_above_its_size():
    assert FAST_MIN_NEW > SHORT_TOKENS


def test_the_engine_thread_runs_idle_steps_between_jobs():
    import threading

    from engine.worker import EngineThread, set_idle

    steps = []
    done = threading.Event()

    def idle():
        steps.append(1)
        if len(steps) >= 5:
            done.set()
            return False
        return True

    eng = EngineThread()
    try:
        eng.call(set_idle, idle)
        assert done.wait(5)
        assert eng.call(lambda: 42) == 42  # jobs still run
        assert len(steps) >= 5
    finally:
        eng.shutdown()


def test_a_paste_while_the_full_window_is_pending_takes_a_new_short_window(short_first):
    """Pasting more than FAST_MIN_NEW tokens after another paste, before idle time finished the
    first one's full window, is answered from a new short window, not by prefilling the whole
    paste (the document stays under one window, so the window's start does not move)."""
    pred = short_first
    adv = pred.advance_on_keystroke
    pred.advance_on_keystroke = False  # as in the server: no idle time between these requests

    def upto(n: int) -> str:
        return SOURCE[: SOURCE.rfind("\n", 0, n) + 1]

    try:
        pred.reset()
        _settle(pred, upto(300))
        pred.predict(upto(900))  # a first paste: a short window, its full one pending
        assert pred._pending is not None and not pred._pending.done
        before = pred.stats["forward_tokens"]
        assert pred.predict(upto(1250)) is not None  # a second paste, ~100 tokens
        assert pred.window.prev[: pred._pending.start] == pred._pending.head or pred._pending is None
        assert len(pred.window.prev) < pred.config.max_context_tokens
        assert pred.stats["forward_tokens"] - before <= SHORT_TOKENS
        assert pred.cached == pred.window.prev[-SHORT_TOKENS:]
    finally:
        pred.advance_on_keystroke = adv
