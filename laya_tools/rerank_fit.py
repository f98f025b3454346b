"""``laya tune --rerank``: fit the learned re-ranker (``engine.rerank``) on the ``tune`` packages.

1. Collect: type the ``tune`` files as ``laya eval`` does (``laya_tools.evaluate.score_file``),
   with a re-ranker that keeps the engine's order (weight 1 on ``score``, 0 elsewhere), and note at
   every decision the features of its best ``TOP_K`` candidates and which one is the identifier
   being typed (decisions where it is not among them are left out).
2. Fit: a listwise softmax (ListNet, Cao et al., 2007) over those candidates, each decision weighed
   by the square root of the characters its answer saves (``len - typed - 1``, at least 0.5), by
   Adam on the whole batch. Weighed by the characters themselves, the fit learned to put long
   words first once two characters are typed (``make_i``: ``make_install_req_from_editable``
   over the ``make_item`` of the three lines above; top-1 at 2 typed characters in C 72 -> 46%),
   and saved fewer keystrokes on the tune packages (six languages' mean 53.82% against 54.25%;
   unweighted 53.68%; 2026-12-03). Every language's weights are the shared ones plus its own offsets, and an L2 penalty
   pulls the offsets to 0 (``--rerank-shrink``) and the shared weights to the engine's order.
   With ``--rerank-model mlp`` (the shipped one since 2026-12-03, night), a two-layer network
   (``engine.rerank.MLP``) over the same features, the typed length and the language takes the
   linear model's place, fitted by the same loss (:func:`fit_mlp`).
3. Write ``rerank.json`` where ``--out`` says (a candidate: copy it into a model folder when
   ``laya eval`` shows it saves more).

Only the ``tune`` split is read, so ``laya eval``'s packages stay unseen.
"""

from __future__ import annotations

import datetime
import json
import logging
import sys
import time
from pathlib import Path

import numpy as np

log = logging.getLogger(__name__)


def identity_weights() -> np.ndarray:
    """Weights that keep the engine's order: 1 on ``score``, 0 elsewhere."""
    from engine.rerank import BUCKETS, FEATURES

    w = np.zeros((BUCKETS, len(FEATURES)))
    w[:, FEATURES.index("score")] = 1.0
    return w


def collect(predictor, files, workspace: bool = False, faced_only: bool = False) -> dict[str, np.ndarray]:
    """Type ``files`` (``evaluate.EvalFile``) and return the decisions: ``F`` ``(n, k, features)``,
    ``mask`` ``(n, k)``, ``label`` (index of the right candidate), ``rest`` (its characters past the
    typed ones), ``bucket`` (typed length, capped), ``language`` and ``faced`` (below) per decision. With
    ``workspace``, each file is typed twice: alone, then with the rest of its package as the
    workspace (as ``laya eval --workspace both`` does).

    ``faced``: the decision is one a user of the predictor's own re-ranker faces: no earlier
    keystroke of the word had the right first item (ranked by that re-ranker where it re-ranks,
    else in the engine's order); after one, that user took it, and the word's later keystrokes
    are the ones ``evaluate.score_file`` still asks, up to 2 typed characters, for its top-1
    counts. With ``faced_only``, only those are kept; otherwise all, as the re-ranker shipped on
    2026-12-03 was fitted. The ``passed_over`` feature follows that re-ranker's first items too."""
    from engine.rerank import BUCKETS, FEATURES, TOP_K, Reranker

    from .evaluate import Score, score_file, targets, use_package_workspace

    saved = predictor.reranker
    predictor.reranker = Reranker({"*": identity_weights()}, TOP_K)
    target: list[str | None] = [None]
    rows: list[tuple] = []
    # ``faced``: where the word being typed starts (``at``), whether its first item was right at
    # an earlier keystroke (``taken``), and whether this keystroke's first item is the word by the
    # re-ranker (``first``: None where it did not re-rank)
    at, taken, first = [0], [False], [None]
    shown = [None]  # the first item by that re-ranker, where it re-ranked

    def note(f, ws, typed, language):
        t = target[0]
        scorer = saved.scorer(language) if saved is not None else None
        shown[0] = ws[int(np.argmax(scorer(f, len(typed))))] if scorer is not None else ws[0]
        first[0] = shown[0] == t
        if faced_only and taken[0]:
            return
        if t is not None and t in ws and t.startswith(typed):
            rows.append((min(len(typed), BUCKETS - 1), f.astype(np.float32), ws.index(t),
                         len(t) - len(typed), language, not taken[0]))

    predictor.rerank_log = note
    try:
        typed = {f.name for f in files}
        for fl, ws in [(f, False) for f in files] + ([(f, True) for f in files] if workspace else []):
            doc = f"file:///{fl.name}"
            if ws:
                use_package_workspace(predictor, fl, typed)
            predictor.reset()
            predictor.observe_document(doc, "", fl.language)

            def ask(prefix, doc=doc):
                first[0] = shown[0] = None
                items = [c.text for c in predictor.predict(prefix, doc_id=doc, max_items=20) if c.kind != "line"]
                if shown[0] is not None:
                    predictor.shown_first = shown[0]  # what that re-ranker shows first (``passed_over``)
                if target[0] is not None:
                    if first[0] is None:  # not re-ranked: the engine's order, as score_file filters it
                        c = len(prefix) - at[0]
                        typed = target[0][:c]
                        head = next((w for w in items if w.startswith(typed) and len(w) > c), None)
                        first[0] = head == target[0]
                    taken[0] = taken[0] or first[0]
                return items

            def target_fn(text, language):
                for start, w in targets(text, language):
                    target[0], at[0], taken[0] = w, start, False
                    yield start, w
                target[0] = None

            score_file(fl.text, ask, Score(), language=fl.language, target_fn=target_fn,
                       on_refresh=lambda t, doc=doc, lang=fl.language: predictor.observe_document(doc, t, lang))
            target[0] = None
            predictor.forget_document(doc)
            if ws:
                predictor.set_workspace({})
            log.info("%s%s: %d decisions so far", fl.name, " (+ workspace)" if ws else "", len(rows))
    finally:
        predictor.set_workspace({})
        predictor.rerank_log = None
        predictor.reranker = saved
        predictor.reset()
    n, k = len(rows), TOP_K
    F = np.zeros((n, k, len(FEATURES)), np.float32)
    mask = np.zeros((n, k), bool)
    for i, r in enumerate(rows):
        F[i, : len(r[1])] = r[1]
        mask[i, : len(r[1])] = True
    return {"F": F, "mask": mask, "label": np.array([r[2] for r in rows], np.int64),
            "rest": np.array([r[3] for r in rows], np.int64),
            "bucket": np.array([r[0] for r in rows], np.int64),
            "language": np.array([r[4] for r in rows]), "faced": np.array([r[5] for r in rows], bool)}


def fit(data: dict[str, np.ndarray], shrink: float = 0.01, l2: float = 1e-3, iters: int = 300,
        lr: float = 0.05, weighting: str = "sqrt") -> tuple[dict[str, np.ndarray], dict]:
    """Fit the weights (see the module docstring); returns ``({language: weights, "*": shared},
    stats)`` with the weighted top-1 share of the decisions before and after."""
    from engine.rerank import BUCKETS, FEATURES

    langs = sorted(set(data["language"].tolist()))
    F = data["F"].astype(np.float64)
    mask, y, b = data["mask"], data["label"], data["bucket"]
    saves = np.maximum(data["rest"] - 1, 0.5).astype(np.float64)
    wt = {"saved": saves, "sqrt": np.sqrt(saves), "none": np.ones_like(saves)}[weighting]
    if "weight" in data:  # a per-decision multiplier (load_decisions' weights)
        wt = wt * data["weight"]
    wt /= wt.sum()
    li = np.searchsorted(np.array(langs), data["language"])
    nf = len(FEATURES)
    base = identity_weights()
    shared = base.copy()
    off = np.zeros((len(langs), BUCKETS, nf))
    groups = [(L, k, np.flatnonzero((li == L) & (b == k))) for L in range(len(langs)) for k in range(BUCKETS)]

    def step(shared, off):
        loss, top1 = 0.0, 0.0
        g_sh, g_off = np.zeros_like(shared), np.zeros_like(off)
        for L, k, rows in groups:
            if not len(rows):
                continue
            f, m, yy, w = F[rows], mask[rows], y[rows], wt[rows]
            z = np.where(m, f @ (shared[k] + off[L, k]), -1e9)
            z -= z.max(1, keepdims=True)
            e = np.exp(z) * m
            pr = e / e.sum(1, keepdims=True)
            r = np.arange(len(rows))
            loss -= (w * np.log(pr[r, yy] + 1e-12)).sum()
            top1 += (w * (z.argmax(1) == yy)).sum()
            pr[r, yy] -= 1
            g = np.einsum("n,nk,nkf->f", w, pr, f)
            g_sh[k] += g
            g_off[L, k] += g
        loss += l2 * ((shared - base) ** 2).sum() + shrink * (off ** 2).sum()
        g_sh += 2 * l2 * (shared - base)
        g_off += 2 * shrink * off
        return loss, top1, g_sh, g_off

    before = step(shared, off)[1]
    params = [shared, off]
    mom = [np.zeros_like(x) for x in params]
    var = [np.zeros_like(x) for x in params]
    loss = top1 = 0.0
    for it in range(1, iters + 1):
        loss, top1, *grads = step(*params)
        for x, g, m_, v_ in zip(params, grads, mom, var):
            m_ *= 0.9
            m_ += 0.1 * g
            v_ *= 0.999
            v_ += 0.001 * g * g
            x -= lr * (m_ / (1 - 0.9 ** it)) / (np.sqrt(v_ / (1 - 0.999 ** it)) + 1e-8)
        if it % 50 == 0:
            log.info("fit step %d: loss %.4f, weighted top-1 %.4f", it, loss, top1)
    weights = {"*": shared.copy()}
    for L, name in enumerate(langs):
        weights[name] = shared + off[L]
    return weights, {"decisions": int(len(y)), "top1_before": round(float(before), 4),
                     "top1_after": round(float(top1), 4), "loss": round(float(loss), 4)}


MIN_STEPS = 300
""":func:`fit_mlp` takes at least this many Adam steps (more passes over a small collection; the
shipped fit's 472,468 decisions took 4 passes of 116 steps)."""


def fit_mlp(data: dict[str, np.ndarray], hidden: int = 32, epochs: int = 4, batch: int = 4096,
            lr: float = 0.01, seed: int = 0, language_dropout: float = 0.1):
    """Fit an ``engine.rerank.MLP`` by the loss of :func:`fit` (sqrt-weighted ListNet) with Adam
    on mini-batches (MLX). The language one-hot of ``language_dropout`` of the decisions is zeroed
    so that a language the fit never saw gets a trained generic view. Returns ``(mlp, stats)``."""
    import mlx.core as mx
    import mlx.nn as nn
    import mlx.optimizers as optim

    from engine.rerank import BUCKETS, MLP

    langs = sorted(set(data["language"].tolist()))
    n, k, nf = data["F"].shape
    rng = np.random.default_rng(seed)
    mx.random.seed(seed)
    li = np.searchsorted(np.array(langs), data["language"])
    onehot = np.zeros((n, BUCKETS + len(langs)), np.float32)
    onehot[np.arange(n), data["bucket"]] = 1
    keep = rng.random(n) >= language_dropout
    onehot[np.arange(n)[keep], BUCKETS + li[keep]] = 1
    saves = np.maximum(data["rest"] - 1, 0.5).astype(np.float32)
    wt = np.sqrt(saves)
    if "weight" in data:  # a per-decision multiplier (a mixture of collections)
        wt = wt * data["weight"].astype(np.float32)
    wt /= wt.mean()
    d_in = nf + BUCKETS + len(langs)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.l1 = nn.Linear(d_in, hidden)
            self.l2 = nn.Linear(hidden, 1)
            self.skip = nn.Linear(d_in, 1, bias=False)

        def __call__(self, z):
            return (self.l2(nn.relu(self.l1(z))) + self.skip(z))[..., 0]

    net = Net()

    def inputs(j):
        z = np.concatenate([data["F"][j], np.broadcast_to(onehot[j, None, :], (len(j), k, onehot.shape[1]))], -1)
        return mx.array(z), mx.array(data["mask"][j]), mx.array(data["label"][j]), mx.array(wt[j] / len(j))

    def loss_fn(model, z, m, y, w):
        s = mx.where(m, model(z), -1e9)
        lp = s - mx.logsumexp(s, axis=1, keepdims=True)
        return -(w * mx.take_along_axis(lp, y[:, None], 1)[:, 0]).sum()

    def top1(model) -> float:
        """The share of ``wt`` whose right candidate the model puts first."""
        best = np.concatenate([np.array(mx.argmax(mx.where(m, model(z), -1e9), axis=1))
                               for z, m, _, _ in (inputs(np.arange(s0, min(n, s0 + 16384)))
                                                  for s0 in range(0, n, 16384))])
        return float((wt * (best == data["label"])).sum() / n)

    opt = optim.Adam(learning_rate=lr)
    step = nn.value_and_grad(net, loss_fn)
    loss = 0.0
    per_epoch = -(-n // batch)
    epochs = max(epochs, -(-MIN_STEPS // per_epoch))  # a small collection: more passes
    for ep in range(epochs):
        perm = rng.permutation(n)
        for s0 in range(0, n, batch):
            l, g = step(net, *inputs(perm[s0:s0 + batch]))
            opt.update(net, g)
            mx.eval(net.parameters(), opt.state)
            loss = float(l)
        log.info("fit epoch %d: loss %.4f", ep + 1, loss)
    w1 = np.array(net.l1.weight).T
    mlp = MLP(langs, w1.astype(np.float64), np.array(net.l1.bias, np.float64),
              np.array(net.l2.weight, np.float64)[0], np.array(net.skip.weight, np.float64)[0])
    # identity order for "before": the engine's first candidate is index 0
    before = float((wt * (data["label"] == 0)).sum() / n)
    return mlp, {"decisions": int(n), "top1_before": round(before, 4), "top1_after": round(top1(net), 4),
                 "loss": round(loss, 4)}


DECISION_KEYS = ("F", "mask", "label", "rest", "bucket", "language")
"""The arrays of one collection (:func:`collect`), and ``faced`` where it has it (collections
before 2026-12-04 do not)."""


def save_decisions(data: dict[str, np.ndarray], path: Path, meta: dict | None = None) -> None:
    """Write collected decisions (:func:`collect`) and what collected them (``meta``: files,
    seed, ...) to an ``.npz``, to fit later or elsewhere."""
    np.savez_compressed(path, **{k: data[k] for k in DECISION_KEYS + ("faced",) if k in data},
                        meta=np.array(json.dumps(meta or {})))


def load_decisions(paths: list[Path], weights: list[float] | None = None) -> tuple[dict[str, np.ndarray], list[dict]]:
    """Read and concatenate ``.npz`` files of :func:`save_decisions`: ``(decisions, [meta per file])``.
    With ``weights`` (one per file), the decisions get a ``weight`` array: their file's, which
    :func:`fit_mlp` multiplies into each decision's loss (a mixture of collections, e.g. all the
    decisions and the faced-only ones of the same files); files of weight 0 are left out.

    Raises:
        ValueError: a file is missing, not an ``.npz`` of :func:`save_decisions` for this engine
            (arrays, shapes, labels, finite features), or the files hold no decision (the message
            names the file).
    """
    import zipfile

    from engine.rerank import BUCKETS, FEATURES

    parts, metas = [], []
    for p in paths:
        try:
            if not Path(p).is_file():
                raise ValueError("no such file")
            if not zipfile.is_zipfile(p):
                raise ValueError("not an .npz file")
            with np.load(p, allow_pickle=False) as z:
                missing = [k for k in DECISION_KEYS if k not in z.files]
                if missing:
                    raise ValueError(f"no {', '.join(missing)} array")
                d = {k: z[k] for k in DECISION_KEYS + ("faced",) if k in z.files}
                meta = json.loads(str(z["meta"])) if "meta" in z.files else {}
            F, n = d["F"], len(d["label"])
            if F.ndim != 3 or F.shape[0] != n or F.shape[2] != len(FEATURES):
                raise ValueError(f"F is {F.shape}, not (decisions, candidates, {len(FEATURES)})")
            if d["mask"].shape != F.shape[:2] or any(d[k].shape != (n,) for k in ("rest", "bucket", "language")) \
                    or ("faced" in d and (d["faced"].shape != (n,) or d["faced"].dtype != bool)):
                raise ValueError("the arrays do not hold the same decisions")
            if not np.isfinite(F).all() or d["language"].dtype.kind != "U" or not isinstance(meta, dict):
                raise ValueError("features not finite, languages not text or meta not an object")
            if n and ((d["label"] < 0).any() or (d["label"] >= F.shape[1]).any()
                      or not d["mask"][np.arange(n), d["label"]].all()
                      or (d["bucket"] < 0).any() or (d["bucket"] >= BUCKETS).any()):
                raise ValueError("a label or typed-length bucket out of range")
        except (OSError, ValueError, KeyError, TypeError, zipfile.BadZipFile, json.JSONDecodeError) as e:
            raise ValueError(f"{p}: {e}") from e
        parts.append(d)
        metas.append(meta)
    if len({part["F"].shape[1] for part in parts}) > 1:
        raise ValueError(f"{', '.join(map(str, paths))}: the files re-rank different numbers of candidates")
    if weights is not None:
        if len(weights) != len(paths) or not all(0 <= w < float("inf") for w in weights) or not any(weights):
            raise ValueError(f"weights {weights}: give one number >= 0 per file, not all 0")
        for d, w in zip(parts, weights):
            d["weight"] = np.full(len(d["label"]), w, np.float32)
        parts = [d for d, w in zip(parts, weights) if w > 0]
    keys = [k for k in parts[0] if all(k in d for d in parts)]  # ``faced``: where every file has it
    data = {k: np.concatenate([d[k] for d in parts]) for k in keys}
    if not len(data["label"]):
        raise ValueError(f"{', '.join(map(str, paths))}: no decisions")
    return data, metas


def main(a) -> int:
    """``laya tune --rerank``: collect on the tune packages, fit, write ``rerank.json``."""
    from engine.predictor import Predictor
    from engine.rerank import TOP_K, Reranker

    from .evaluate import pick_files

    if not a.out:
        print("laya tune --rerank: give --out FILE (a candidate; the model folder's rerank.json is what "
              "the engine loads)", file=sys.stderr)
        return 2
    problem = None
    names = a.decisions_in.split(",") if a.decisions_in is not None else []
    if a.decisions_in is not None and (not all(x.strip() for x in names) or len(set(names)) != len(names)):
        problem = f"--decisions-in {a.decisions_in!r}: name each .npz file once, separated by commas"
    elif not 0 <= getattr(a, "rerank_unfaced_weight", 1.0) <= 1:
        problem = f"--rerank-unfaced-weight {a.rerank_unfaced_weight}: give a number from 0 to 1"
    elif a.decisions_weights is not None and a.decisions_in is None:
        problem = "--decisions-weights weighs the --decisions-in files: give those"
    elif a.decisions_in and a.decisions_out:
        problem = "--decisions-in fits saved decisions; --decisions-out saves a new collection: give one"
    elif a.decisions_out and not a.decisions_out.endswith(".npz"):
        problem = f"--decisions-out {a.decisions_out}: name an .npz file"
    else:
        for x in (a.out, a.decisions_out):
            if x and not Path(x).resolve().parent.is_dir():
                problem = f"{x}: its folder does not exist"
            elif x and Path(x).is_dir():
                problem = f"{x} is a folder: name the file to write"
    if problem:
        print(f"laya tune --rerank: {problem}", file=sys.stderr)
        return 2
    meta = {"fitted": datetime.date.today().isoformat(), "split": "tune", "weighting": "sqrt",
            "model": a.rerank_model}
    if a.decisions_in is not None:
        paths = [Path(x) for x in names]
        weights = None
        if a.decisions_weights is not None:
            try:
                weights = [float(x) for x in a.decisions_weights.split(",")]
            except ValueError:
                weights = []
            if len(weights) != len(paths) or not all(0 <= w < float("inf") for w in weights) or not any(weights):
                print(f"laya tune --rerank: --decisions-weights {a.decisions_weights!r}: give one number >= 0 "
                      f"per --decisions-in file ({len(paths)}), separated by commas, not all 0", file=sys.stderr)
                return 2
        try:
            data, metas = load_decisions(paths, weights)
        except ValueError as e:
            print(f"laya tune --rerank: cannot read the decisions ({e})", file=sys.stderr)
            return 2
        meta["collections"] = [{"file": x.name, **m, **({"weight": w} if weights else {})}
                               for x, m, w in zip(paths, metas, weights or [None] * len(paths))]
        if getattr(a, "rerank_faced_only", False):
            meta["faced_only"] = True  # from saved decisions: the unfaced ones weigh 0 (below)
    else:
        corpus = Path(a.corpus)
        langs = a.languages.split(",") if a.languages else None
        files = pick_files(corpus, a.files, a.max_chars, seed=a.seed, split="tune", languages=langs)
        p = Predictor.load(a.model)
        p.warmup()
        t0 = time.perf_counter()
        data = collect(p, files, workspace=a.rerank_workspace, faced_only=getattr(a, "rerank_faced_only", False))
        log.info("collected %d decisions from %d files in %.0f s", len(data["label"]), len(files),
                 time.perf_counter() - t0)
        collection = {"seed": a.seed, "files_per_language": a.files, "max_chars": a.max_chars,
                      "workspace": a.rerank_workspace, "faced_only": getattr(a, "rerank_faced_only", False),
                      "files": [f"{f.language}:{f.name}" for f in files]}
        meta.update(collection)
        if a.decisions_out:
            save_decisions(data, Path(a.decisions_out), collection)
            print(f"saved {len(data['label'])} decisions to {a.decisions_out}")
    faced_in = a.decisions_in is not None and getattr(a, "rerank_faced_only", False)
    uw = 0.0 if faced_in else getattr(a, "rerank_unfaced_weight", 1.0)
    if uw != 1.0 and len(data["label"]):
        if "faced" not in data:
            flag = "--rerank-faced-only" if faced_in else "--rerank-unfaced-weight"
            print(f"laya tune --rerank: {flag}: {a.decisions_in} do not all mark the faced "
                  "decisions (collected before 2026-12-04): collect again", file=sys.stderr)
            return 2
        w = np.where(data["faced"], 1.0, uw).astype(np.float32)
        keep = w > 0
        data = {k: v[keep] for k, v in data.items()}
        data["weight"] = data["weight"] * w[keep] if "weight" in data else w[keep]
        meta["unfaced_weight"] = uw
    if not len(data["label"]):
        print("laya tune --rerank: no decisions were collected (no tune files for these languages?)",
              file=sys.stderr)
        return 2
    out = Path(a.out)
    if a.rerank_model == "mlp":
        mlp, stats = fit_mlp(data, seed=a.rerank_fit_seed)
        meta["fit_seed"] = a.rerank_fit_seed
        Reranker(None, TOP_K, {**meta, **stats}, mlp).save(out)
        if stats["top1_after"] <= stats["top1_before"]:
            print(f"laya tune --rerank: warning: the fit ranks the collected decisions no better than the "
                  f"engine's own order ({stats['top1_after']:.4f} <= {stats['top1_before']:.4f}); too few "
                  f"decisions?", file=sys.stderr)
    else:
        weights, stats = fit(data, shrink=a.rerank_shrink)
        meta["shrink"] = a.rerank_shrink
        Reranker(weights, TOP_K, {**meta, **stats}).save(out)
    print(f"wrote {out}: {stats['decisions']} decisions, weighted top-1 of the candidates "
          f"{stats['top1_before']:.4f} -> {stats['top1_after']:.4f}")
    return 0
