"""Rest-of-line items from the document's earlier lines (``engine.continuation.line_from_document``)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from engine.continuation import LINE_AGREE, _continues_word, line_from_document, whole_words
from engine.predictor import Predictor

DOC = (
    "def check(self):\n"
    "    self.assertEqual(zq_weird_name, 'qq-17')\n"
    "    other = 1\n"
    "    self.assertEqual(zq_weird_name, 'qq-42')\n"
    "    self.count = zq_weird_name.size\n"
    "\n"
    "def again(self):\n"
)


def test_the_earlier_lines_starting_the_same_way_give_their_rest_as_far_as_they_agree():
    # two lines start "self.assertEqual": they agree up to the string's last characters
    assert line_from_document(DOC + "    self.", "assertEqual", 10) == "assertEqual(zq_weird_name, 'qq-"
    # indentation does not matter; the key is the line's text before the word plus the word
    assert line_from_document(DOC + "self.", "assertEqual", 10) == "assertEqual(zq_weird_name, 'qq-"
    assert line_from_document(DOC + "  x = ", "zq_weird_name", 10) is None  # no line starts "x = zq..."
    # one such line: all of it
    assert line_from_document(DOC + "    self.", "count", 10) == "count = zq_weird_name.size"
    # the same line each time: all of it
    same = "\n    self.assertTrue(zq_ready)\n" * 3
    assert line_from_document(same + "    self.", "assertTrue", 10) == "assertTrue(zq_ready)"


def test_lines_that_differ_in_their_last_name_stop_before_it():
    runner = "".join(f"\n    RUN_TEST_CASE(UnityFixture, {n});" for n in ("PointerSetting", "PointerSet", "ForceMallocFail"))
    assert line_from_document(runner + "\n    ", "RUN_TEST_CASE", 10) == "RUN_TEST_CASE(UnityFixture, "
    # never half a name: "Pointer" is what two of them share, not the third
    assert line_from_document(runner[: runner.rindex("\n")] + "\n    ", "RUN_TEST_CASE", 10) == \
        "RUN_TEST_CASE(UnityFixture, "
    # only the latest LINE_AGREE lines take part: an old, different one does not cut them short
    old = "\nzq_call(0, 'old')" + "\nzq_call(1, 'same')" * LINE_AGREE
    assert line_from_document(old + "\n", "zq_call", 5) == "zq_call(1, 'same')"
    # agreeing on nothing past the word: no line
    assert line_from_document("\nzq_call(1)\nzq_call.x\n", "zq_call", 5) is None


def test_the_key_must_start_the_earlier_line_and_be_long_enough():
    # "zq_weird_name" occurs only inside lines: no earlier line starts with it
    assert line_from_document(DOC + "    ", "zq_weird_name", 10) is None
    assert line_from_document(DOC + "    self.", "count", 10) == "count = zq_weird_name.size"
    assert line_from_document(DOC + "    self.", "count", 11) is None  # "self.count" is 10 characters
    assert line_from_document(DOC + "    self.", "count", 0) is None  # 0: off
    # an earlier line that is just the key has nothing more to offer
    assert line_from_document("    self.count\n    self.", "count", 5) is None
    assert line_from_document("", "anything_long", 5) is None


@pytest.fixture(scope="module")
def pred():
    return Predictor.load()


def test_the_server_path_offers_the_document_line_first(pred):
    pred.reset()
    items = pred.predict(DOC + "    self.assertE", "\n", doc_id="file:///t.py", max_items=5, want_line=True)
    assert items[0].text == "assertEqual"
    lines = [c.text for c in items if c.kind == "line"]
    assert lines == ["assertEqual(zq_weird_name, 'qq-"]  # as far as the two earlier lines agree
    one = DOC.replace("    self.assertEqual(zq_weird_name, 'qq-17')\n", "")
    items = pred.predict(one + "    self.assertE", "\n", doc_id="file:///t.py", max_items=5, want_line=True)
    assert [c.text for c in items if c.kind == "line"] == ["assertEqual(zq_weird_name, 'qq-42')"]
    # the rest of the line already there is not repeated
    items = pred.predict(one + "    self.assertE", "')\n", doc_id="file:///t.py", max_items=5, want_line=True)
    assert [c.text for c in items if c.kind == "line"] == ["assertEqual(zq_weird_name, 'qq-42"]


def test_without_the_lookup_the_line_is_the_network_s(pred):
    cfg = pred.config
    try:
        pred.config = replace(cfg, line_match_min_chars=0)
        pred.reset()
        items = pred.predict(DOC + "    self.assertE", "\n", doc_id="file:///u.py", max_items=5, want_line=True)
        assert all("qq-42" not in c.text for c in items)  # the network has never seen that string
    finally:
        pred.config = cfg


def test_workspace_lines_give_the_most_frequent_extension():
    from engine.continuation import LineIndex, line_from_workspace

    files = ["import logging\nlogger = logging.getLogger(__name__)\n",
             "import logging\n\nlogger = logging.getLogger(__name__)\nlogger = logging.getLogger('x')\n",
             "bad = '\ud800 lone surrogate line'\n"]
    idx = LineIndex.from_texts(files)
    assert idx.rest("logger = logging.get") == "logger = logging.getLogger(__name__)"  # 2 against 1
    assert idx.rest("logger = logging.getLogger(__name__)") is None  # nothing longer
    assert idx.rest("import logging") is None and idx.rest("nothing like it") is None
    assert line_from_workspace("def f():\n    logger = logging.", "getLogger", 10, idx) == "getLogger(__name__)"
    assert line_from_workspace("logger = logging.", "getLogger", 0, idx) is None
    assert line_from_workspace("x.", "getLogger", 10, None) is None
    assert LineIndex.from_texts(files, max_bytes=20).rest("logger = logging.get") is None  # over budget
    assert LineIndex.from_texts([]).rest("anything at all") is None


def test_the_workspace_line_comes_after_the_document_s(pred):
    files = ["import logging\nlogger = logging.getLogger(__name__)\nvalue = compute_qq(17)\n"] * 3
    pred.set_workspace(pred.build_workspace({"python": files}))
    try:
        pred.reset()
        items = pred.predict("import logging\nlogger = logging.getL", "\n", doc_id="file:///w.py",
                             language="python", max_items=5, want_line=True)
        assert [c.text for c in items if c.kind == "line"] == ["getLogger(__name__)"]
        # the document's own earlier line wins over the workspace's
        text = "import logging\nlogger = logging.getLogger('mine')\nlogger = logging.getL"
        items = pred.predict(text, "\n", doc_id="file:///w.py", language="python", max_items=5, want_line=True)
        assert [c.text for c in items if c.kind == "line"] == ["getLogger('mine')"]
    finally:
        pred.set_workspace({})


def test_no_ghost_text_from_a_huge_line():
    long_line = "var a=" + ",".join(f"x{i}" for i in range(200)) + ";"
    assert line_from_document(long_line + "\nvar a=", "x0", 5) is None
    assert line_from_document("\nvar a=x0,x1;\nvar a=", "x0", 5) == "x0,x1;"
    # the text's first line may be cut (the server passes the last 64 KiB): never a line start
    assert line_from_document("var a=x0,x1;\nvar a=", "x0", 5) is None


def test_an_older_line_when_the_latest_offers_nothing():
    older = "\nzq_long_call_name(1, 'short')\n"
    assert line_from_document(older + "zq_long_call_name\n", "zq_long_call_name", 10) == "zq_long_call_name(1, 'short')"
    assert line_from_document(older + "zq_long_call_name(" + "x, " * 150 + ")\n", "zq_long_call_name",
                              10) == "zq_long_call_name(1, 'short')"
    # a line holding a lone surrogate would reach the editor as U+FFFD: skipped
    assert line_from_document(older + "zq_long_call_name(1, '\ud800')\n", "zq_long_call_name",
                              10) == "zq_long_call_name(1, 'short')"


def _applied(pred, before: str, after: str, uri: str) -> str | None:
    """The cursor's line after accepting the line item, as an editor applies it (the typed
    identifier replaced, the text after the cursor kept)."""
    from engine.text import word_prefix

    pred.reset()
    items = pred.predict(before, after, doc_id=uri, max_items=5, want_line=True)
    line = next((c.text for c in items if c.kind == "line"), None)
    if line is None:
        return None
    head = before[before.rfind("\n") + 1 : len(before) - len(word_prefix(before))]
    return head + line + after.split("\n", 1)[0]


@pytest.mark.parametrize("earlier, typed, after, expected", [
    ("items.append(make_item(name))", "items.append(make_i", ")", "items.append(make_item(name))"),
    ("result = compute(self.helper_fn(a))", "result = compute(self.helper_f", ")",
     "result = compute(self.helper_fn(a))"),
    ("row = [zq_first_value(a)][0].name", "row = [zq_first_v", "]", "row = [zq_first_value(a)]"),
    # the line goes on after the editor's closer: only the identifier fits before it (no line item)
    ("with open(zq_path_name) as fh:", "with open(zq_path_n", ")", None),
    ("key = 'zq_config_key_one' + suffix", "key = 'zq_config_k", "'", None),
])
def test_accepting_the_line_keeps_the_editor_s_closers_balanced(pred, earlier, typed, after, expected):
    # what editors auto-close after the cursor ends the inserted text where it takes over
    got = _applied(pred, f"def f():\n    {earlier}\n    {typed}", after + "\n", "file:///b.py")
    assert got == (f"    {expected}" if expected else None)


def test_an_identifier_typed_in_full_still_finds_its_line(pred):
    # the items are longer than what is typed, so the best one is another identifier
    got = _applied(pred, "def f():\n    self.assertEqual(zq_weird_name, 'qq-42')\n    self.assertEqual", "\n",
                   "file:///c.py")
    assert got == "    self.assertEqual(zq_weird_name, 'qq-42')"


@pytest.mark.parametrize("word, line, ends_word, expected", [
    ("scale", "scale_", False, "scale"),  # the next token went on with the name: none of it is offered
    ("scale", "scale_factor * 2", True, "scale_factor * 2"),
    ("scale", "scale_factor * wid", False, "scale_factor *"),  # half a name cut, and the blank before it
    ("os", "os.path.jo", False, "os.path."),
    ("os", "os.path.join", True, "os.path.join"),
    ("name", "name: '\ufffd", True, "name: '"),  # a token that stopped inside a UTF-8 sequence
    ("name", "name + '\ufffd\ufffd' + x", True, "name + '"),
    ("name", "name  ", True, "name"),
    ("total", "total = gr\ufffd", True, "total ="),  # größe cut inside its ö: no "gr" either
])
def test_a_continuation_never_ends_in_half_a_name_or_half_a_character(word, line, ends_word, expected):
    assert whole_words(line, word, ends_word) == expected


def test_a_token_that_goes_on_with_a_name_in_any_script(pred):
    """The tokens after ``gr`` in ``größe`` (the first starts inside the ö's UTF-8 bytes) and after
    ``don`` in ``données`` continue the name; a blank, ``=`` or ``(`` do not."""
    tok = pred.tok
    for text, head in (("x = größe", "x = gr"), ("x = données", "x = donn"), ("x = scale_factor", "x = scale")):
        ids = tok.encode(text).ids
        cut = next(i for i in range(len(ids)) if tok.decode(ids[:i]) == head)
        assert _continues_word(tok, ids[cut]), (text, tok.decode([ids[cut]]))
    for t in (" ", " = ", "(", "\n"):
        assert not _continues_word(tok, tok.encode("a" + t).ids[1]), t  # the token after "a"


def test_the_network_s_line_ends_on_a_whole_name(pred):
    """Every greedy line the network writes here ends where a name does (or before a blank or a
    bracket), on real code: the model is asked at each identifier start of a file."""
    import re
    import textwrap as tw
    from pathlib import Path

    src = Path(tw.__file__).read_text()[:6000]
    p = replace(pred.config, line_match_min_chars=0)
    pred.config, old = p, pred.config
    try:
        pred.reset()
        lines = 0
        for m in re.finditer(r"(?<![\w.])[A-Za-z_]\w+", src):
            items = pred.predict(src[: m.start()], "\n", want_line=True, max_items=2)
            line = next((c.text for c in items if c.kind == "line"), None)
            if line is None:
                continue
            lines += 1
            assert "\ufffd" not in line
            word = items[0].text
            ident_end = re.search(r"\w+$", line)
            assert ident_end is None or ident_end.start() >= len(word) or line == word
        assert lines > 20
    finally:
        pred.config = old


def test_the_lookup_is_cheap_on_a_huge_line_full_of_the_key():
    """The key inside one 5 MB minified line (no line end before the cursor's line): each match
    looked back to the text's start for a line end (~0.5 s at each identifier start); only the
    blanks before a match are looked at now."""
    giant = "self.assertEqual;" * 300_000 + "\n"
    best = min(_timed(lambda: line_from_document(giant + "self.", "assertEqual", 10)) for _ in range(3))
    assert best < 0.1, best
    # a match after blanks still starts its line; one after other text does not
    assert line_from_document("\n \t self.assertEqual(1)\nx self.assertEqual(2)\nself.", "assertEqual", 10) == \
        "assertEqual(1)"
    assert line_from_document(" self.assertEqual(1)\nself.", "assertEqual", 10) is None  # the text's first line


def _timed(fn) -> float:
    import time

    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


@pytest.mark.parametrize("line, suffix, before, expected", [
    # the lines agreed up to an opener (their arguments differ): inserting it would take over the
    # editor's closer (``items.append(make_item()``); the line stops before what it leaves open
    ("make_item(", ")", "items.append(", "make_item"),
    ('zq_call("', ")", "foo(", "zq_call"),
    ("RUN_TEST_CASE(UnityFixture, ", ")", "f(", "RUN_TEST_CASE"),
    ('zq_x + "abc', ")", "f(", "zq_x +"),
    ("zq_f(a, ", ";", "", "zq_f"),
    # a closer inside the line's own string is not the editor's
    ('zq_log(":)"))', ")", "print(", 'zq_log(":)")'),
    ('zq_log("a\\")b"))', ")", "print(", 'zq_log("a\\")b")'),
    # what the line opens and closes itself stays
    ("make_item(name))", ")", "items.append(", "make_item(name)"),
    ("zq_key' + x", "'", "key = '", "zq_key"),
])
def test_a_cut_line_never_leaves_an_opener_before_the_editor_s_closer(line, suffix, before, expected):
    from engine.continuation import fit_to_suffix

    assert fit_to_suffix(line, suffix, before) == expected


def test_lines_that_differ_inside_the_call_keep_the_editor_s_closer_balanced(pred):
    """Three earlier lines agree up to ``make_item(``: with the editor's ``)`` after the cursor the
    item was ``make_item(``, which left ``items.append(make_item()`` (the editor's closer taken over)."""
    earlier = "".join(f"    items.append(make_item({n}))\n" for n in ("alpha", "beta", "gamma"))
    assert _applied(pred, "def f():\n" + earlier + "    items.append(make_i", ")\n", "file:///d.py") is None


class _ScriptedKV:
    """A KV cache whose model writes ``ids`` greedily, token ``i`` with probability ``probs[i]``
    (then the end of the text): what ``continue_line`` reads of ``engine.kv_sync.KVSync``."""

    def __init__(self, ids, probs, eos, vocab):
        self.script, self.eos, self.vocab = list(zip(ids, probs)) + [(eos, 0.99)], eos, vocab
        self.cached, self.stats, self.backend = [1, 2, 3], {"forward_tokens": 0}, self
        self.capacity, self.written = 512, 0

    def extend(self, ids):
        self.cached = self.cached + list(ids)
        return len(self.cached)

    def rollback(self, n):
        self.cached = self.cached[:n]

    def logits(self, h):
        import numpy as np

        t, p = self.script[min(self.written, len(self.script) - 1)]
        self.written += 1
        lg = np.zeros(self.vocab, dtype=np.float32)
        lg[t] = np.log(p * (self.vocab - 1) / (1 - p))  # softmax gives t probability p
        return lg


PROBS = {" ": 0.99, "=": 0.95, "width": 0.6, "+": 0.7, "offset": 0.9}
"""The scripted greedy tokens' probabilities: the line's after ``total`` falls to 0.56 with
``width`` and to 0.39 with ``+``."""


@pytest.mark.parametrize("min_prob, min_joint, expected", [
    (0.0, 0.0, "total = width + offset"),  # every token: the line as written
    (0.35, 0.0, "total = width + offset"),  # each token is likely enough on its own
    (0.35, 0.4, "total = width"),  # the line's probability would fall to 0.39 with "+"
    (0.65, 0.0, "total ="),  # "width" (0.6) alone is too unlikely
    (0.0, 0.58, "total ="),  # the line's probability would fall to 0.56 with "width"
])
def test_the_network_s_line_stops_where_it_becomes_unlikely(pred, min_prob, min_joint, expected):
    """``continue_line`` stops before a token less likely than ``line_min_prob`` and before the one
    that would make the line's probability less than ``line_min_joint_prob``, and rolls back."""
    from engine.continuation import continue_line

    tok = pred.tok
    ids = tok.encode("total = width + offset").ids[len(tok.encode("total").ids):]
    assert "".join(tok.decode([t]) for t in ids) == " = width + offset"
    probs = [PROBS[tok.decode([t])] for t in ids]
    kv = _ScriptedKV(ids, probs, pred.eos, len(pred._id_to_text))
    line, complete = continue_line(kv, tok, "total", 12, min_prob, pred.eos, pred._id_to_text,
                                   min_joint_prob=min_joint)
    assert (line, complete) == (expected, True)
    assert kv.cached == [1, 2, 3]


def test_mid_line_an_earlier_line_that_goes_on_with_the_text_after_the_cursor(pred):
    """A fresh user's ``print(self.rec|, 'x done')`` (more than closers after the cursor) had no
    ghost text although an earlier line reads ``print(self.records[0], 'x done')``: the earlier
    line without the text after the cursor is offered; a line that does not end with that text
    is not (it would come twice or out of place), nor is the network's guess there."""
    from engine.continuation import line_before_suffix

    assert line_before_suffix("records[0], 'x done')", ", 'x done')\n") == "records[0]"
    assert line_before_suffix("records[0], 'y')", ", 'x done')") is None
    assert line_before_suffix("records[0]", "") is None and line_before_suffix(None, ", 'x')") is None
    assert line_before_suffix(", 'x')", ", 'x')") is None  # nothing before it
    doc = "class R:\n    def f(self):\n        print(self.records[0], 'x done')\n        "
    pred.reset()
    items = pred.predict(doc + "print(self.rec", ", 'x done')\n", doc_id="file:///mid.py", max_items=5, want_line=True)
    assert [c.text for c in items if c.kind == "line"] == ["records[0]"]
    items = pred.predict(doc + "print(self.rec", ", 'y')\n", doc_id="file:///mid.py", max_items=5, want_line=True)
    assert [c.text for c in items if c.kind == "line"] == []
