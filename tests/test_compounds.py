"""Compound candidates (``engine.compounds``): a typed head plus a segment seen elsewhere, in the
head's style, offered by the candidate filter and ranked first where nothing else fits."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

import pytest

from engine import compounds as C


def test_segments_of_identifiers():
    assert C.SEGMENT_RE.findall("parseHTTPHeader_v2") == ["parse", "HTTP", "Header", "v", "2"]
    index = C.SegmentIndex.from_words([("use_months", 2), ("MONTHS_PER_YEAR", 1), ("x_y", 5)])
    assert index.segments == ["months", "per", "use", "year"]  # one-letter segments are dropped
    assert index.counts.tolist() == [3.0, 1.0, 2.0, 1.0]
    # only compound ASCII identifiers give segments: not keywords or comment words (one segment),
    # nor the ASCII runs of an accented name (caf, cr, me)
    index = C.SegmentIndex.from_words([("return", 9), ("the", 9), ("café_crème", 3), ("naïveValue", 1)])
    assert len(index) == 0


@pytest.mark.parametrize("typed, expected", [
    ("num_mo", [("num_", "mo", "lower")]),
    ("num_", []),  # no tail yet: any segment would be a guess
    ("__name__", []),  # a finished dunder
    ("__init_su", [("__init_", "su", "lower")]),
    ("x" * 65 + "_ab", []),  # too long to look at
    ("MAX_W", [("MAX_", "W", "upper")]),
    ("_DEFAULT_AL", [("_DEFAULT_", "AL", "upper")]),
    ("rowTy", [("row", "Ty", "cap")]),
    ("UnusedIm", [("Unused", "Im", "cap")]),
    ("getHTTP", []),  # "HTTP" cannot grow into a capitalised segment
    ("getHTTPRe", [("getHTTP", "Re", "cap")]),  # after an acronym
    ("HTTPCl", [("HTTP", "Cl", "cap")]),
    ("getHTTPR", []),  # "PR" may still be one acronym
    ("userIDs", []),  # a plural acronym is a finished name, not userI + Ds
    ("numGPUs", []),
    ("OAu", []),  # one capital is no acronym: OAuth
    ("MAX_HTTPRe", []),  # a SCREAMING_CASE head takes no camelCase tail
    ("getHTTP\u212aey", []),  # the Kelvin sign lowercases to ASCII k: not an ASCII tail
    ("userIDsBy", [("userIDs", "By", "cap")]),
    ("__in", []),  # no segment before the underscores
    ("num_Mo", []),  # a lowercase head takes lowercase segments
    ("plain", []),
    ("a_b_c", [("a_b_", "c", "lower")]),  # "b_c" is no segment's start
])
def test_boundaries(typed, expected):
    assert C.boundaries(typed) == expected


def test_compounds_take_the_heads_style_and_sum_the_sources():
    doc = C.SegmentIndex(Counter({"months": 3, "mode": 1, "width": 2}))
    corpus = C.SegmentIndex(Counter({"months": 10, "module": 30}))
    got = C.compounds("num_mo", [(doc, 1.0), (corpus, 0.1)])
    assert set(got) == {"num_months", "num_mode", "num_module"}
    assert got["num_months"] == pytest.approx(3 / 6 + 0.1 * 10 / 40)
    assert max(got, key=got.get) == "num_months"
    assert set(C.compounds("MAX_W", [(doc, 1.0)])) == {"MAX_WIDTH"}
    assert set(C.compounds("maxWi", [(doc, 1.0)])) == {"maxWidth"}
    assert C.compounds("num_months", [(doc, 1.0)]) == {}  # nothing longer than what is typed
    assert C.compounds("__name__", [(doc, 1.0)]) == {}
    long = "a_" * 5000  # a 10,000-character prefix: no compounds, and no quadratic walk
    assert C.compounds(long + "mo", [(doc, 1.0)]) == {}
    assert C.compounds("num_mo", [(None, 1.0), (C.SegmentIndex(Counter()), 1.0)]) == {}


def test_camelcase_compounds_spell_acronyms_as_the_sources_do():
    index = C.SegmentIndex.from_words([("userID", 3), ("HTTPClient", 2), ("httpGet", 1), ("MAX_ID", 9),
                                       ("parseId", 1), ("getRequest", 2), ("userName", 1)])
    assert index.acronyms == {"id", "http"}  # MAX_ID is no camelCase spelling; ID beats Id 3:1
    assert C.SEGMENT_RE.findall("parseURLs") == ["parse", "URL", "s"]  # no "ur", no "ls"
    assert set(C.compounds("userI", [(index, 1.0)])) == {"userID"}
    assert set(C.compounds("userId", [(index, 1.0)])) == set()  # nothing longer than "id" starts so
    assert set(C.compounds("getHTTPRe", [(index, 1.0)])) == {"getHTTPRequest"}
    assert set(C.compounds("newHt", [(index, 1.0)])) == {"newHttp"}  # typed so: kept so
    assert set(C.compounds("user_i", [(index, 1.0)])) == {"user_id"}


def test_top_keeps_the_most_frequent_segments():
    index = C.SegmentIndex(Counter({f"seg{i:03d}": i for i in range(100)}))
    top = index.top("seg", 5)
    assert [s for s, _ in top] == ["seg099", "seg098", "seg097", "seg096", "seg095"]
    assert top[0][1] == pytest.approx(99 / sum(range(100)))
    assert index.top("seg", 5) is top  # remembered


DOC = """\
def frobnicate(items):
    zorblax_total = 0
    for item in items:
        zorblax_total += item.weight
    return zorblax_total


def report(items):
    count = len(items)
    quuxed_
"""


def test_the_server_engine_offers_a_compound_first():
    """``quuxed_zo`` is in no lexicon and not in the document, but ``zorblax`` is a segment of a
    document name: the compound comes first; with the ``seg`` weight at 0 it is not offered."""
    from engine.predictor import Predictor

    p = Predictor.load()
    assert p.config.prior_weights["seg"] > 0
    p.observe_document("file:///a.py", DOC, "python")
    prefix = DOC.rstrip("\n") + "zo"
    items = [c.text for c in p.predict(prefix, doc_id="file:///a.py")]
    assert items and items[0] == "quuxed_zorblax", items
    # a finished dunder name is no head (its items were "__name__value", "__name__self", ...)
    items = [c.text for c in p.predict(DOC + "\nif __name__", doc_id="file:///a.py")]
    assert not [w for w in items if w.startswith("__name__")], items
    p.config = replace(p.config, prior_weights={**p.config.prior_weights, "seg": 0.0})
    p._pools.clear()
    p.pool = p._pool_for(p.language)
    p.reset()
    p.observe_document("file:///a.py", DOC, "python")
    items = [c.text for c in p.predict(prefix, doc_id="file:///a.py")]
    assert "quuxed_zorblax" not in items
