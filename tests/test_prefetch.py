"""Prefill after an edit that no decision followed (``Predictor.prefetch``, ``KVSync.prefill``):
a paste, a comment or a line break reaches the server as an edit, and the window at the cursor is
prefilled in the pauses that follow, so the next decision there prefills a token at most and
answers from the full window (not from the short one a paste would otherwise get)."""

import textwrap
from pathlib import Path

import pytest

from engine.predictor import Predictor

SOURCE = Path(textwrap.__file__).read_text()  # a real module nobody here wrote
DOC = "file:///textwrap.py"
START = SOURCE.index("class TextWrapper")
PASTED = SOURCE.index("    def _munge_whitespace")  # ~35 lines after START: a paste of them
WORD = PASTED + len("    def ")  # "_munge_whitespace" starts here


@pytest.fixture(scope="module")
def pair():
    pre, plain = Predictor.load(), Predictor.load()
    plain.prefetching = False
    for p in (pre, plain):
        p.advance_on_keystroke = False  # as in the server: idle steps do the background work
    return pre, plain


def _idle(p) -> int:
    steps = 0
    while p.idle_step():
        steps += 1
    return steps


def _start(p):
    p.reset()
    p.observe_document(DOC, SOURCE[:START], "python")
    p.predict(SOURCE[:START] + "cl", doc_id=DOC)
    _idle(p)


def test_a_paste_is_prefilled_in_the_pause_after_it(pair):
    pre, plain = pair
    for p in pair:
        _start(p)
        p.prefetch(SOURCE[:WORD], DOC)  # the paste: an edit no request followed
        _idle(p)
    assert pre.stats["prefetched_tokens"] > 32 and plain.stats["prefetched_tokens"] == 0
    assert len(pre.cached) == pre.backend.offset
    short = pre.stats["short_windows"]
    before = pre.stats["forward_tokens"]
    got = [c.text for c in pre.predict(SOURCE[: WORD + 1], doc_id=DOC)]
    assert pre.stats["forward_tokens"] - before <= 1  # the context's last token, for its hidden state
    assert pre.stats["short_windows"] == short  # the full window answered
    # without the prefetch the paste gets a short window (the n-gram prior alone answers), and
    # once the full window is prefilled the answer is the prefetching engine's
    plain_short = plain.stats["short_windows"]
    plain.predict(SOURCE[: WORD + 1], doc_id=DOC)
    assert plain.stats["short_windows"] == plain_short + 1
    _idle(plain)
    plain._synced = False
    want = [c.text for c in plain.predict(SOURCE[: WORD + 1], doc_id=DOC)]
    assert got[:5] == want[:5]


def test_a_decision_cancels_the_prefetch_and_another_document_is_ignored(pair):
    pre, _ = pair
    _start(pre)
    n = pre.stats["prefetched_tokens"]
    pre.prefetch(SOURCE[:WORD], "file:///other.py")  # the engine holds another document
    _idle(pre)
    assert pre.stats["prefetched_tokens"] == n
    pre.prefetch(SOURCE[:WORD], DOC)
    pre.predict(SOURCE[: START + 3], doc_id=DOC)  # a request came first: nothing left to prefill
    _idle(pre)
    assert pre.stats["prefetched_tokens"] == n


def test_inside_the_decided_word_nothing_is_prefilled(pair):
    pre, _ = pair
    _start(pre)
    n = pre.stats["prefetched_tokens"]
    pre.prefetch(SOURCE[:START] + "cla", DOC)  # the same context as the last decision's
    _idle(pre)
    assert pre.stats["prefetched_tokens"] == n


def test_speculation_and_prefetch_keep_the_cache_consistent(pair):
    """A word prefilled by speculation, then the user types past it: the prefetch keeps what
    the new context shares and the next decision equals a fresh engine's."""
    pre, plain = pair
    at = SOURCE.index("        self.width = width") + len("        self.")
    for p in pair:
        p.reset()
        p.observe_document(DOC, SOURCE[:at], "python")
        p.predict(SOURCE[: at + 2], doc_id=DOC)
        _idle(p)  # speculation: "width" after the context
    pre.prefetch(SOURCE[: at + len("width = wid")], DOC)
    _idle(pre)
    assert len(pre.cached) == pre.backend.offset
    got = [c.text for c in pre.predict(SOURCE[: at + len("width = wid")], doc_id=DOC)]
    want = [c.text for c in plain.predict(SOURCE[: at + len("width = wid")], doc_id=DOC)]
    assert got[:5] == want[:5]
