"""Prefill after an edit that no decision followed (``Predictor.prefetch``, ``KVSync.prefill``):
a paste, a comment or a line break reaches the server as an edit, and the window at the cursor is
prefilled in the pauses that follow, so the next decision there prefills a token at most and
answers from the full window (not from the short one a paste would otherwise get)."""

import textwrap
from pathlib import Path

import pytest

from engine.predictor import Predictor
from engine.window_cache import common_prefix

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


def test_a_paste_of_repeated_lines_is_prefilled_once(pair):
    """Repeated lines make the window match itself shifted: the prefill looked for a context
    shift at every step, shifted and fell back, and its idle steps never ended (a core at 100%
    until the next request)."""
    pre, _ = pair
    head = SOURCE[:6000]
    head = head[: head.rindex("\n") + 1]
    block = "    total = compute_value(alpha, beta, gamma, delta, epsilon, zeta, eta, theta)\n"
    pre.reset()
    pre.observe_document(DOC, head, "python")
    pre.predict(head + "de", doc_id=DOC)
    _idle(pre)
    n = pre.stats["prefetched_tokens"]
    pre.prefetch(head + "def run(alpha, beta, gamma):\n" + block * 40 + "    ", DOC)
    steps = 0
    while pre.idle_step():
        steps += 1
        assert steps < 200, "the prefill does not end"
    assert 0 < pre.stats["prefetched_tokens"] - n < len(pre.window.prev) + 8
    assert len(pre.cached) == pre.backend.offset


def test_the_window_left_by_a_prefetch_is_kept_to_come_back_to(pair):
    """Typing at A, the user adds an import at the top (prefetched there) and comes back to A:
    A's window was stored, so the key there prefills a token and the network answers, as for an
    engine that never prefetched."""
    pre, plain = pair
    at = SOURCE.index("        self.width = width") + len("        self.")
    top = SOURCE.index("import re\n") + len("import re\n")
    new = SOURCE[:top] + "import sys\n" + SOURCE[top:]
    back = at + len("import sys\n")
    out = []
    for p in pair:
        p.reset()
        p.observe_document(DOC, SOURCE, "python")
        p.predict(SOURCE[:at] + "wi", doc_id=DOC)
        _idle(p)
        p.prefetch(new[:top + len("import sys\n")], DOC)
        _idle(p)
        short, fwd = p.stats["short_windows"], p.stats["forward_tokens"]
        got = [c.text for c in p.predict(new[:back] + "wid", doc_id=DOC)]
        out.append(got[:5])
        assert p.stats["short_windows"] == short and p.stats["forward_tokens"] - fwd <= 1
        assert p._hidden is not None  # the network's answer, not the prior's alone
    assert out[0] == out[1]


def test_a_decision_back_at_the_last_context_sees_its_own_lines(pair):
    """A prefetch tokenizes another context (``window.tokens``); a decision back at the last
    decision's context must rank with that context's identifiers, not the prefetched one's."""
    pre, plain = pair
    at = SOURCE.index("        self.width = width") + len("        self.")
    for p in pair:
        p.reset()
        p.observe_document(DOC, SOURCE, "python")
        p.predict(SOURCE[:at] + "wi", doc_id=DOC)
        _idle(p)
    pre.prefetch(SOURCE[:at] + "wi\n        ", DOC)  # a line break after "wi", then back up
    _idle(pre)
    for p in pair:
        p.predict(SOURCE[:at] + "wid", doc_id=DOC)
    assert pre.window.line_idents == plain.window.line_idents
    assert pre.window.recent_idents == plain.window.recent_idents


def test_the_server_prefetches_after_edits_that_no_request_followed():
    """Through the real server: an identifier key whose completion request follows at once sends
    the engine no prefetch (the decision replaces it; a prefetch job would only delay the idle
    work); a line break, which no request follows, does, once the edits pause."""
    import time

    from tests.lsp_raw import InProcessServer

    uri = "file:///laya-prefetch/t.py"
    text = "import os\n\n\ndef main(argv):\n    path = os.path.join(argv[0], 'x')\n    return "
    line, col = text.count("\n"), len(text.rsplit("\n", 1)[1])
    s = InProcessServer()
    try:
        s.initialize()
        s.open(uri, text)
        deadline = time.monotonic() + 60
        while not s.complete(uri, line, col).get("result", {}).get("items"):
            assert time.monotonic() < deadline, "no model"
            time.sleep(0.2)
        predictor = s.ls.model.predictor
        calls = []
        real = predictor.prefetch
        predictor.prefetch = lambda prefix, doc_id: (calls.append(prefix), real(prefix, doc_id))
        v = 2

        def key(ch, at):
            nonlocal v
            s.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": v}, "contentChanges": [
                {"range": {"start": {"line": at[0], "character": at[1]}, "end": {"line": at[0], "character": at[1]}},
                 "text": ch}]})
            v += 1

        for i, ch in enumerate("path"):
            key(ch, (line, col + i))
            s.complete(uri, line, col + i + 1)
            time.sleep(0.1)
        assert calls == []
        key("\n    ", (line, col + 4))
        deadline = time.monotonic() + 10
        while not calls:
            assert time.monotonic() < deadline, "no prefetch after the line break"
            time.sleep(0.05)
        assert calls == [text + "path\n    "]
    finally:
        s.close()


def test_a_paste_after_a_small_deletion_prefills_only_what_is_new(pair):
    """The cache holds the context before the edit but for a few deleted tokens: those are
    trimmed and only the pasted tokens prefilled, not the whole window again, even when they are
    more than a jump's (storing the window and starting afresh is for leaving one)."""
    pre, _ = pair
    at, to = SOURCE.index("import re"), SOURCE.index("class TextWrapper")
    pre.reset()
    pre.observe_document(DOC, SOURCE[:at], "python")
    for typed in ("im", "imp"):  # the second decision takes the window finished in the pause
        pre.predict(SOURCE[:at] + typed, doc_id=DOC)
        _idle(pre)
    n, stored = pre.stats["prefetched_tokens"], pre.stats["stored_windows"]
    text = SOURCE[: at - 40] + SOURCE[at:to]  # 40 characters deleted, the lines up to the class pasted
    ctx = pre.window.tokens(text)
    kept = common_prefix(pre.cached, ctx)
    assert len(pre.cached) - pre.kv.speculated > kept  # the deletion
    pre.prefetch(text, DOC)
    _idle(pre)
    assert len(ctx) - kept > 64  # more than a jump's
    assert pre.stats["stored_windows"] == stored
    assert 0 < pre.stats["prefetched_tokens"] - n <= len(ctx) - kept
