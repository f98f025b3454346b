"""``laya tune``: choose the ranking options per language on the ``tune`` packages.

Coordinate search: starting from the variant's values, try each option's candidate values in
turn (``GRID``), keep a change only when it raises keystrokes saved on the language's ``tune``
files by more than ``MIN_GAIN`` points, and print the resulting ``[language.<name>]`` tables for
the variant file. Only the ``tune`` split is read (``laya_tools.evaluate.pick_files`` refuses any
other), so the reported ``eval`` numbers stay untouched by tuning.
"""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

GRID = {
    "net_weight": (0.15, 0.3, 0.45, 0.6),
    "cache_weight": (0.2, 0.4, 0.6),
    "doc_confidence": (0.5, 1.0, 3.0),
    "prior_scale": ("doc", "corpus"),
}
"""Values tried per option. ``prior_scale`` moves 0.1 of interpolation weight from the corpus
n-grams to the document's (``doc``) or back (``corpus``)."""
WEIGHT_FACTORS = (0.5, 2.0)
"""Each interpolation weight of the prior (``EngineConfig.prior_weights``) is also tried halved
and doubled, one at a time, after ``GRID``."""
MIN_GAIN = 0.2
"""Points of keystrokes saved a change must add to be kept (smaller gains are noise here)."""


def _shift(weights: dict[str, float], to_doc: bool, amount: float = 0.1) -> dict[str, float]:
    w = dict(weights)
    src, dst = (("cor3", "cor2", "cor1"), ("doc3", "doc2", "doc1")) if to_doc else \
        (("doc3", "doc2", "doc1"), ("cor3", "cor2", "cor1"))
    take = min(amount, sum(w[k] for k in src) - 0.03)
    tot_src = sum(w[k] for k in src)
    tot_dst = sum(w[k] for k in dst)
    for k in src:
        w[k] -= take * w[k] / tot_src
    for k in dst:
        w[k] += take * w[k] / tot_dst
    return {k: round(v, 4) for k, v in w.items()}


def _saved(predictor, files) -> float:
    from .evaluate import evaluate_in_process

    scores, _ = evaluate_in_process(files, predictor)
    eng = next(iter(scores.values()))[0]
    return 100 * eng.saved / max(1, eng.chars)


def tune_language(predictor, files, name: str, log=print) -> dict:
    """Greedy coordinate search for one language; returns its overrides."""
    base_cfg = predictor.config
    over: dict = dict(base_cfg.language.get(name, {}))

    def run(o: dict) -> float:
        predictor.config = replace(base_cfg, language={**base_cfg.language, name: o})
        predictor._pools.clear()
        predictor.language = predictor._language("unknown")
        return _saved(predictor, files)

    best = run(over)
    log(f"[{name}] start {best:.2f}%")
    for option, values in GRID.items():
        for v in values:
            trial = dict(over)
            if option == "prior_scale":
                cur = over.get("prior_weights", base_cfg.prior_weights)
                trial["prior_weights"] = _shift(cur, v == "doc")
            else:
                if over.get(option, getattr(base_cfg, option)) == v:
                    continue
                trial[option] = v
            s = run(trial)
            log(f"[{name}] {option}={v}: {s:.2f}%")
            if s > best + MIN_GAIN:
                best, over = s, trial
    for key in base_cfg.prior_weights:
        for f in WEIGHT_FACTORS:
            cur = over.get("prior_weights", base_cfg.prior_weights)
            trial = {**over, "prior_weights": {**cur, key: round(cur[key] * f, 4)}}
            s = run(trial)
            log(f"[{name}] {key} x{f}: {s:.2f}%")
            if s > best + MIN_GAIN:
                best, over = s, trial
    predictor.config = base_cfg
    predictor._pools.clear()
    log(f"[{name}] best {best:.2f}% with {over}")
    return over


def main(a) -> int:
    from .evaluate import pick_files
    from engine.predictor import Predictor

    p = Predictor.load(a.model)
    langs = a.languages.split(",") if a.languages else None
    files = pick_files(Path(a.corpus), a.files, a.max_chars, split="tune", languages=langs)
    if not files:
        print(f"no tune files under {a.corpus}/tune: run `laya corpus` first", file=sys.stderr)
        return 2
    result = {}
    for name in sorted({f.language for f in files}):
        result[name] = tune_language(p, [f for f in files if f.language == name], name)
    print("\n# paste into the variant file (engine/configs/<variant>.toml):")
    for name, over in result.items():
        if over:
            print(f"\n[language.{name}]")
            for k, v in over.items():
                if isinstance(v, dict):
                    print(f"{k} = {{ " + ", ".join(f"{kk} = {vv}" for kk, vv in v.items()) + " }")
                else:
                    print(f"{k} = {v}")
    return 0
