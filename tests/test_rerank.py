"""The learned re-ranker (``engine.rerank``): its file, its features, its fit."""

import inspect
import json
import shutil
import textwrap

import numpy as np
import pytest

from engine.model_io import DEFAULT_MODEL_DIR, ModelLoadError
from engine.predictor import Predictor
from engine.rerank import BUCKETS, FEATURES, FILE, MLP, TOP_K, Reranker, recency_ranks
from laya_tools.evaluate import EvalFile
from tests.rerank_decisions import marked_decisions
from laya_tools.rerank_fit import collect, fit, fit_mlp, identity_weights, load_decisions, save_decisions

TEXT = open(inspect.getsourcefile(textwrap), encoding="utf-8").read()[:8000]
"""A real file every Python install has (the model never trained on the standard library's
``textwrap``)."""


@pytest.fixture(scope="module")
def predictor():
    p = Predictor.load()
    p.warmup()
    return p


def _items(p, text, doc="file:///t.py"):
    """The items at the end of ``text`` once the window is prefilled (right after a jump the
    engine answers from the n-gram prior alone, which is not re-ranked)."""
    p.reset()
    p.observe_document(doc, text[: len(text) // 2], "python")
    for _ in range(100):
        items = [c.text for c in p.predict(text, doc_id=doc, max_items=10)]
        if p._hidden is not None:
            return items
    raise AssertionError("the window was never prefilled")


def test_the_shipped_model_has_a_reranker_for_each_language():
    r = Reranker.load(DEFAULT_MODEL_DIR / FILE)
    assert r.mlp is not None
    assert sorted(r.mlp.languages) == ["c", "go", "javascript", "python", "rust", "typescript"]
    f = np.random.default_rng(0).normal(size=(TOP_K, len(FEATURES)))
    for lang in ("python", "go", "javascript", "typescript", "rust", "c", "lua"):  # lua: the generic view
        s = r.scorer(lang)(f, 1)
        assert s.shape == (TOP_K,) and np.isfinite(s).all()
    assert not np.allclose(r.scorer("go")(f, 0), r.scorer("python")(f, 0))
    assert r.meta["split"] == "tune"  # fitted on the tune packages, never on eval's


def _mlp(seed=0, hidden=8, languages=("go", "python")):
    rng = np.random.default_rng(seed)
    d = len(FEATURES) + BUCKETS + len(languages)
    return MLP(list(languages), rng.normal(size=(d, hidden)), rng.normal(size=hidden), rng.normal(size=hidden),
               rng.normal(size=d))


@pytest.mark.parametrize("lang", ["go", "python", "lua"])
def test_the_mlp_scores_by_its_formula(lang):
    m = _mlp()
    f = np.random.default_rng(1).normal(size=(TOP_K, len(FEATURES)))
    for typed in (0, 1, 5):
        z = np.zeros((TOP_K, m.w1.shape[0]))
        z[:, : len(FEATURES)] = f
        z[:, len(FEATURES) + min(typed, BUCKETS - 1)] = 1
        if lang in m.languages:
            z[:, len(FEATURES) + BUCKETS + m.languages.index(lang)] = 1
        ref = np.maximum(z @ m.w1 + m.b1, 0) @ m.w2 + z @ m.skip
        got = m.score(f, typed, lang)
        assert np.allclose(got - got[0], ref - ref[0])  # the same up to a constant: the same order


def test_an_mlp_file_round_trips(tmp_path):
    r = Reranker(None, 16, {"split": "tune"}, _mlp())
    r.save(tmp_path / FILE)
    back = Reranker.load(tmp_path / FILE)
    f = np.random.default_rng(2).normal(size=(16, len(FEATURES)))
    assert back.k == 16 and back.mlp.languages == ["go", "python"]
    assert np.allclose(back.scorer("go")(f, 2), r.scorer("go")(f, 2), atol=1e-3)


def test_identity_weights_keep_the_engines_order(predictor):
    cut = TEXT.index("self.width")  # a word start inside the class body
    saved = predictor.reranker
    try:
        predictor.reranker = None
        plain = _items(predictor, TEXT[:cut])
        predictor.reranker = Reranker({"*": identity_weights()})
        same = _items(predictor, TEXT[:cut])
    finally:
        predictor.reranker = saved
    assert plain and plain == same


def test_identity_weights_keep_the_engines_order_at_every_keystroke(predictor):
    """Tied scores too: the re-ranked best are taken in the pool's order, as the engine's list is
    (a fresh reviewer found 70 of 450 decisions ordered otherwise among ties)."""
    import re

    doc = "file:///ties.py"
    starts = [m.start() for m in re.finditer(r"\b[A-Za-z_]\w{2,}", TEXT)][40:160:3]
    saved = predictor.reranker
    try:
        for rr in (None, Reranker({"*": identity_weights()})):
            predictor.reranker = rr
            predictor.reset()
            predictor.observe_document(doc, TEXT[: starts[0]], "python")
            got = []
            for s in starts:
                for c in range(3):
                    got.append([x.text for x in predictor.predict(TEXT[: s + c], doc_id=doc, max_items=20)])
            if rr is None:
                plain = got
    finally:
        predictor.reranker = saved
    assert got == plain


def test_a_name_used_hundreds_of_times_stays_first(predictor):
    """The document's counts are capped (``engine.rerank.COUNT_CAP``): uncapped, 300 lines of
    ``self.assertEqual`` pushed it below ``assertEquals``, a name the document never used."""
    body = "".join(f"    r{i} = compute(x{i})\n    self.assertEqual(r{i}, expected)\n" for i in range(300))
    text = "import unittest\nclass T(unittest.TestCase):\n  def test(self):\n" + body + "    self.assertE"
    predictor.reset()
    predictor.observe_document("file:///rep.py", text, "python")
    for _ in range(100):
        items = [c.text for c in predictor.predict(text, doc_id="file:///rep.py", max_items=3)]
        if predictor._hidden is not None:
            break
    assert predictor._hidden is not None and items[0] == "assertEqual"


def test_weights_change_the_order_and_the_option_turns_them_off(predictor):
    cut = TEXT.index("self.width")
    saved, cfg = predictor.reranker, predictor.config
    try:
        predictor.reranker = None
        plain = _items(predictor, TEXT[:cut])
        w = identity_weights()
        w[:, FEATURES.index("rest_length")] = 50.0  # longest first
        predictor.reranker = Reranker({"*": w})
        longest = _items(predictor, TEXT[:cut])
        assert longest != plain
        assert len(longest[0]) == max(len(x) for x in longest[:TOP_K])
        from dataclasses import replace

        predictor.config = replace(cfg, rerank=False)
        assert _items(predictor, TEXT[:cut]) == plain
    finally:
        predictor.reranker, predictor.config = saved, cfg


def test_features_of_a_decision(predictor):
    seen = []
    saved = predictor.reranker
    predictor.reranker = Reranker({"*": identity_weights()})
    predictor.rerank_log = lambda f, ws, typed, lang: seen.append((f, ws, typed, lang))
    try:
        text = "import os\n\ndef load(path):\n    data = open(path).read()\n    return da"
        predictor.reset()
        predictor.observe_document("file:///f.py", text, "python")
        predictor.predict(text, doc_id="file:///f.py")
    finally:
        predictor.rerank_log = None
        predictor.reranker = saved
    f, ws, typed, lang = seen[-1]
    assert typed == "da" and lang == "python" and f.shape == (len(ws), len(FEATURES))
    row = dict(zip(FEATURES, f[ws.index("data")]))
    assert row["in_document"] == 1 and row["document_count"] == pytest.approx(np.log1p(1))
    assert row["on_line"] == 0 and row["recent_lines"] == 1 and row["not_in_window"] == 0
    assert row["rest_length"] == pytest.approx(np.log(2))
    assert f[0, FEATURES.index("score")] == 0 and (f[:, FEATURES.index("score")] <= 0).all()


def _passed_over(predictor, text, doc="file:///p.py"):
    """``{word: passed_over}`` of the re-ranked candidates at the end of ``text``."""
    seen = []
    predictor.rerank_log = lambda f, ws, typed, lang: seen.append(dict(zip(ws, f[:, FEATURES.index("passed_over")])))
    try:
        predictor.predict(text, doc_id=doc)
    finally:
        predictor.rerank_log = None
    return seen[-1] if seen else {}


def test_the_first_item_typed_past_is_marked_passed_over(predictor):
    """``passed_over``: the first item at an earlier keystroke of the same word, typed past; not
    when the same text is asked again, not at another word, not after a reset, nor with the
    option off."""
    text = "class Reader:\n    def load(self, path):\n        self.records = load(path)\n        self.recorder = 1\n\n    def again(self):\n        self.rec"
    predictor.reset()
    predictor.observe_document("file:///p.py", text, "python")
    for _ in range(100):
        first = predictor.predict(text, doc_id="file:///p.py")[0].text
        if predictor._hidden is not None:
            break
    again = _passed_over(predictor, text)  # the same keystroke asked again: nothing typed past
    assert first in again and not any(again.values())
    first = predictor.shown_first
    assert first.startswith("reco")
    marks = _passed_over(predictor, text + "o")
    assert marks[first] == 1 and sum(marks.values()) == 1
    second = predictor.shown_first
    marks = _passed_over(predictor, text + "or")
    assert marks[first] == 1 and (second == first or marks.get(second, 1) == 1)
    # another word (the text before it differs) starts afresh
    assert not any(_passed_over(predictor, text + "or.x + self.rec").values())
    from dataclasses import replace

    cfg = predictor.config
    try:
        predictor.config = replace(cfg, rerank_passed_over=False)
        _passed_over(predictor, text)
        assert not any(_passed_over(predictor, text + "o").values())
    finally:
        predictor.config = cfg
    predictor.reset()
    assert predictor.shown_first is None and not predictor._passed


def test_a_file_fitted_before_the_last_features_loads_with_zero_weights_on_them(tmp_path):
    full = Reranker.load(DEFAULT_MODEL_DIR / FILE)
    full.save(tmp_path / "full.json")
    d = json.loads((tmp_path / "full.json").read_text())
    nf = len(FEATURES)
    # drop the last feature from the file: its rows in w1 and skip
    d["features"] = d["features"][:-1]
    m = d["mlp"]
    m["w1"] = m["w1"][: nf - 1] + m["w1"][nf:]
    m["skip"] = m["skip"][: nf - 1] + m["skip"][nf:]
    (tmp_path / FILE).write_text(json.dumps(d))
    old = Reranker.load(tmp_path / FILE)
    assert (old.mlp.w1[nf - 1] == 0).all() and old.mlp.skip[nf - 1] == 0
    f = np.random.default_rng(0).normal(size=(6, nf))
    f0 = f.copy()
    f0[:, nf - 1] = 0
    assert np.allclose(old.mlp.score(f, 1, "go"), old.mlp.score(f0, 1, "go"))
    assert np.allclose(old.mlp.score(f, 1, "go"), full.mlp.score(f0, 1, "go"), atol=1e-4)
    # a linear file too
    lin = Reranker({"*": identity_weights()})
    lin.save(tmp_path / "lin.json")
    e = json.loads((tmp_path / "lin.json").read_text())
    e["features"] = e["features"][:-1]
    e["weights"] = {k: [row[:-1] for row in w] for k, w in e["weights"].items()}
    (tmp_path / "lin.json").write_text(json.dumps(e))
    assert np.array_equal(Reranker.load(tmp_path / "lin.json").weights["*"], identity_weights())


def test_recency_ranks_count_distinct_names_newest_first():
    r = recency_ranks(["x", "y"], [["a", "b"], ["b", "c", "y"]])
    assert r == {"y": 0, "x": 1, "c": 2, "b": 3, "a": 4}


def test_fit_learns_which_feature_marks_the_answer():
    data = marked_decisions(600, 8)  # the answer is the one on the line
    weights, stats = fit(data, iters=150)
    assert stats["top1_after"] > 0.8 > 0.3 > stats["top1_before"]
    assert set(weights) == {"*", "go", "c"}
    assert (weights["go"][:, FEATURES.index("on_line")] > 1).all()


def test_fit_mlp_learns_which_feature_marks_the_answer(tmp_path):
    n = 2000
    data = marked_decisions(n, 8)
    F, label = data["F"], data["label"]
    half = {key: v[: n // 2] for key, v in data.items()}
    save_decisions(half, tmp_path / "a.npz", {"seed": 3})
    save_decisions({key: v[n // 2:] for key, v in data.items()}, tmp_path / "b.npz")
    back, metas = load_decisions([tmp_path / "a.npz", tmp_path / "b.npz"])
    assert all(np.array_equal(back[key], data[key]) for key in data) and metas == [{"seed": 3}, {}]
    mlp, stats = fit_mlp(back, hidden=8, epochs=20, batch=256)
    assert stats["top1_after"] > 0.8 > 0.3 > stats["top1_before"]
    assert mlp.languages == ["c", "go"]
    hits = [mlp.score(F[i].astype(np.float64), int(data["bucket"][i]), "go").argmax() == label[i] for i in range(200)]
    assert np.mean(hits) > 0.8


def test_weighted_collections_decide_what_the_fit_learns(tmp_path):
    """``load_decisions(paths, weights)``: each file's decisions weigh by its weight in the loss
    (``laya tune --rerank --decisions-weights``). Two collections disagree on which feature marks the
    answer; the fit follows the heavier one, and a weight of 0 leaves a file out."""
    n = 1200
    for seed, (name, feature) in enumerate((("a", "on_line"), ("b", "keyword"))):
        save_decisions(marked_decisions(n, 6, seed=seed, feature=feature, languages=("go",)), tmp_path / f"{name}.npz")
    paths = [tmp_path / "a.npz", tmp_path / "b.npz"]
    learned = {}
    for weights in ([1.0, 0.1], [0.1, 1.0]):
        data, _ = load_decisions(paths, weights)
        assert np.allclose(sorted(set(data["weight"].tolist())), sorted(weights))
        w, _ = fit(data, iters=150)
        learned[tuple(weights)] = w["go"][:, FEATURES.index("on_line")].mean() - w["go"][:, FEATURES.index("keyword")].mean()
    assert learned[(1.0, 0.1)] > 0.5 and learned[(0.1, 1.0)] < -0.5
    only_a, _ = load_decisions(paths, [1.0, 0.0])
    assert len(only_a["label"]) == n
    for bad in ([1.0], [1.0, -1.0], [0.0, 0.0], [1.0, float("nan")]):
        with pytest.raises(ValueError, match="weights"):
            load_decisions(paths, bad)


@pytest.mark.parametrize("bad", ["label", "features", "bucket", "nan", "empty", "not npz", "language"])
def test_bad_decisions_are_named(tmp_path, bad):
    from laya_tools.rerank_fit import DECISION_KEYS

    n, k = 20, 4
    data = {"F": np.zeros((n, k, len(FEATURES)), np.float32), "mask": np.ones((n, k), bool),
            "label": np.zeros(n, np.int64), "rest": np.full(n, 3), "bucket": np.zeros(n, np.int64),
            "language": np.array(["go"] * n)}
    path = tmp_path / "d.npz"
    if bad == "label":
        data["label"][3] = k
    elif bad == "features":
        data["F"] = data["F"][:, :, :-1]
    elif bad == "bucket":
        data["bucket"][0] = BUCKETS
    elif bad == "nan":
        data["F"][1, 1, 1] = np.nan
    elif bad == "empty":
        data = {key: v[:0] for key, v in data.items()}
    elif bad == "language":
        data["language"] = np.arange(n)
    if bad == "not npz":
        np.save(path.with_suffix(".npy"), data["F"])
        path.write_bytes(path.with_suffix(".npy").read_bytes())
    else:
        np.savez(path, **{key: data[key] for key in DECISION_KEYS})
    with pytest.raises(ValueError, match="d.npz"):
        load_decisions([path])


def test_collect_notes_the_right_candidate(predictor):
    files = [EvalFile("python", "textwrap.py", TEXT, None)]
    data = collect(predictor, files)
    n = len(data["label"])
    assert n > 100 and data["F"].shape == (n, TOP_K, len(FEATURES))
    assert (data["mask"][np.arange(n), data["label"]]).all()
    assert set(data["language"].tolist()) == {"python"} and (data["rest"] > 0).all()
    assert predictor.rerank_log is None  # collect leaves the predictor as it found it


def test_collect_faced_only_leaves_out_the_keystrokes_after_a_right_first_item(predictor):
    files = [EvalFile("python", "textwrap.py", TEXT[:4000], None)]
    every = collect(predictor, files)
    faced = collect(predictor, files, faced_only=True)
    # nothing typed yet: every word's first decision is faced, the same rows
    at0 = every["bucket"] == 0
    assert np.array_equal(faced["F"][faced["bucket"] == 0], every["F"][at0])
    # later keystrokes: only those of words whose first item was not yet right
    assert 0 < (faced["bucket"] > 0).sum() < 0.8 * (every["bucket"] > 0).sum()
    # every collection marks them: the faced-only one holds exactly the marked decisions
    assert faced["faced"].all() and every["faced"].sum() == len(faced["label"]) < len(every["label"])
    assert np.array_equal(every["F"][every["faced"]], faced["F"])
    assert predictor.rerank_log is None and predictor.reranker is not None


def test_collect_with_the_workspace_types_each_file_twice(predictor, tmp_path):
    import shlex

    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "textwrap.py").write_text(TEXT[:2500])
    (pkg / "shlex.py").write_text(open(inspect.getsourcefile(shlex), encoding="utf-8").read())
    files = [EvalFile("python", "pkg/textwrap.py", TEXT[:2500], pkg)]
    alone = collect(predictor, files)
    both = collect(predictor, files, workspace=True)
    assert len(both["label"]) > 1.5 * len(alone["label"])
    assert predictor._workspace == {}  # and the workspace is gone again


@pytest.fixture
def copy(tmp_path):
    dst = tmp_path / "model"
    shutil.copytree(DEFAULT_MODEL_DIR, dst)
    return dst


LINEAR_CHANGES = ("shape", "nan", "weights list", "weight string")


@pytest.mark.parametrize("change", ["features", "shape", "nan", "json", "weights list", "weight string",
                                    "k inf", "k one", "k bool", "meta list", "nested", "mlp nan", "mlp shape",
                                    "mlp languages", "mlp object", "mlp and weights", "mlp repeated language",
                                    "mlp huge", "mlp big integer"])
def test_a_bad_rerank_file_is_named(copy, change):
    path = copy / FILE
    if change in LINEAR_CHANGES:
        Reranker({lang: identity_weights() for lang in ("*", "python", "go")}).save(path)
    d = json.loads(path.read_text())
    if change == "features":
        d["features"] = d["features"][::-1]
    elif change == "shape":
        d["weights"]["python"] = d["weights"]["python"][:2]
    elif change == "nan":
        d["weights"]["go"][0][0] = float("nan")
    elif change == "weights list":
        d["weights"] = []
    elif change == "weight string":
        d["weights"]["go"][0][0] = "1.5"
    elif change == "meta list":
        d["meta"] = [1]
    elif change == "mlp nan":
        d["mlp"]["w1"][3][1] = float("nan")
    elif change == "mlp shape":
        d["mlp"]["w2"] = d["mlp"]["w2"][:-1]
    elif change == "mlp languages":
        d["mlp"]["languages"] = d["mlp"]["languages"][:-1]
    elif change == "mlp object":
        d["mlp"] = [1, 2]
    elif change == "mlp and weights":
        d["weights"] = [1, 2]
    elif change == "mlp repeated language":
        d["mlp"]["languages"][1] = d["mlp"]["languages"][0]
    elif change == "mlp huge":
        d["mlp"]["w2"] = [1e308] * len(d["mlp"]["w2"])
    text = json.dumps(d)
    if change == "k inf":
        text = text.replace('"k": 32', '"k": 1e400')
    elif change == "k one":
        text = text.replace('"k": 32', '"k": 1')
    elif change == "k bool":
        text = text.replace('"k": 32', '"k": true')
    if change == "mlp big integer":  # a JSON integer too large for a float (OverflowError in Python)
        d["mlp"]["b1"][0] = 12345.5
        text = json.dumps(d).replace("12345.5", "1" + "0" * 400)
    path.write_text({"json": "{", "nested": "[" * 100_000}.get(change, text))
    with pytest.raises(ModelLoadError, match=r"rerank\.json"):
        Predictor.load(copy)


def test_a_model_folder_without_one_ranks_as_before(copy):
    (copy / FILE).unlink()
    assert Predictor.load(copy).reranker is None


def test_the_best_of_a_pool_are_taken_with_ties_in_pool_order():
    """``engine.predictor._best_stable`` is a full stable sort's first ``m``: ``np.argpartition``
    alone took another member of a tie at the cut on an AVX-512 machine, so the re-ranked list and
    the engine's differed there."""
    from engine.predictor import _best_stable

    rng = np.random.default_rng(0)
    for _ in range(500):
        score = rng.integers(0, 5, rng.integers(1, 200)).astype(np.float32)  # many ties
        m = int(rng.integers(1, 40))
        assert _best_stable(score, m).tolist() == np.argsort(-score, kind="stable")[:m].tolist()
