"""The document's long-context matches (``DocLexicon.followers``) and their ``long`` prior weight."""

from __future__ import annotations

import inspect
import textwrap
from pathlib import Path

import pytest

from engine.pieces import LONG_BASE, LONG_MIN, DocLexicon, context_keys, pieces
from engine.pool import WEIGHTS, PoolBuilder

TEXT = Path(inspect.getsourcefile(textwrap)).read_text("utf-8")

DOC = """\
result = compute(alpha, beta)
check(result.total, 3)
other = compute(gamma, delta)
check(other.count, 4)
check(other.count, 5)
check(other.count, 6)
"""


def test_follower_of_the_longest_match_wins():
    doc = DocLexicon(DOC)
    # "check(result." was followed by "total" (a match of all 5 pieces, newline included)
    got = doc.followers(pieces("\ncheck(result."))
    assert max(got, key=got.get) == "total"
    # each earlier match votes base ** (pieces matched - LONG_MIN): "count" 3 times, 5 pieces each
    got = doc.followers(pieces("\ncheck(other."))
    assert set(got) == {"count"} and got["count"] == 3 * LONG_BASE ** (5 - LONG_MIN)
    # the trigram alone is not enough (min 3 pieces), nor is an unseen piece
    assert doc.followers(pieces("x = other.")) == {}
    assert doc.followers(pieces("check(unseen.")) == {}
    assert DocLexicon("").followers(pieces("a.b.")) == {}


@pytest.mark.parametrize("few", [0, 10 ** 9])
def test_numpy_and_python_paths_agree(monkeypatch, few):
    """Many earlier positions go through NumPy, a few through Python: the same weights."""
    doc = DocLexicon(TEXT)
    starts = [i for i in range(200, len(TEXT), 97) if TEXT[i - 1] in " .(\n"]
    expected = [doc.followers(pieces(TEXT[s - 200 : s])) for s in starts]
    assert sum(bool(e) for e in expected) > 20
    monkeypatch.setattr("engine.pieces.FEW_MATCHES", few)
    for s, e in zip(starts, expected):
        got = doc.followers(pieces(TEXT[s - 200 : s]))
        assert got.keys() == e.keys() and all(abs(got[k] - e[k]) < 1e-9 for k in e)


def test_long_weight_raises_the_follower_in_the_pool():
    """With the ``long`` weight the matched follower outranks the word the trigram prefers."""
    doc = DocLexicon(DOC + "check(result.count, 7)\ncheck(result.count, 8)\n")
    before = pieces("\nfinal = compute(alpha, beta)\ncheck(result.")
    firsts = lambda w: sum(map(ord, w)) % 4096  # noqa: E731
    top = {}
    for w in (0.0, 0.4):
        pb = PoolBuilder(None, firsts, {**WEIGHTS, "long": w})
        pb.begin(context_keys(before), doc, None, [], [], before)
        words, prior, _ = pb.candidates("", 8)
        top[w] = words[0]
    assert top[0.0] == "count"  # the trigram ("result", "."): count 2, total 1
    assert top[0.4] == "total"  # its context matches 12 pieces back, "count"'s only 6


def test_workspace_files_are_matched_too():
    """``build_workspace`` keeps the workspace's pieces on its merged lexicon (never on the shared
    shipped one), and with the ``wlong`` weight what followed a long match there leads the pool."""
    from engine.predictor import Predictor

    p = Predictor.load()
    shipped = p.corpus_lexicon("python")
    ws_text = DOC + "check(result.count, 7)\ncheck(result.count, 8)\n"
    merged = p.build_workspace({"python": [ws_text]})["python"]
    assert merged is not shipped and shipped.matches is None
    assert merged.matches.followers(pieces("\ncheck(other.")) == {"count": 12.0}
    assert p.build_workspace({"python": [""]})["python"].matches is None  # nothing to match
    before = pieces("\nfinal = compute(alpha, beta)\ncheck(result.")
    top = {}
    for w in (0.0, 0.4):
        pb = PoolBuilder(merged, p._first_token, {**WEIGHTS, "wlong": w})
        pb.begin(context_keys(before), None, None, [], [], before)
        words, _, _ = pb.candidates("", 8)
        top[w] = words[0]
    assert top[0.4] == "total" != top[0.0]
