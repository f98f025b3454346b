"""Rest-of-line items from the document's earlier lines (``engine.continuation.line_from_document``)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from engine.continuation import line_from_document
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


def test_the_latest_line_starting_the_same_way_gives_its_rest():
    assert line_from_document(DOC + "    self.", "assertEqual", 10) == "assertEqual(zq_weird_name, 'qq-42')"
    # indentation does not matter; the key is the line's text before the word plus the word
    assert line_from_document(DOC + "self.", "assertEqual", 10) == "assertEqual(zq_weird_name, 'qq-42')"
    assert line_from_document(DOC + "  x = ", "zq_weird_name", 10) is None  # no line starts "x = zq..."


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
    assert lines == ["assertEqual(zq_weird_name, 'qq-42')"]
    # the rest of the line already there is not repeated
    items = pred.predict(DOC + "    self.assertE", "')\n", doc_id="file:///t.py", max_items=5, want_line=True)
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
