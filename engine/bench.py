"""``laya bench``: decision latency by the seed method, backends side by side.

Seed method: 100 warm-up runs, then 1000 timed runs; report median, p90, p99. The workload replays
typing a real source file top to bottom (one ``predict`` per keystroke, as the server calls it).
A "network decision" is a keystroke whose context changed (a new word start: prefill of the new
tokens plus scoring of the candidate pool); keystrokes inside a word only re-rank. Both backends run
on the same keystrokes in one process, interleaved, so the ratio is robust to a noisy machine.
"""

from __future__ import annotations

import inspect
import resource
import sys
import textwrap
import time

import numpy as np


def default_text() -> tuple[str, str]:
    """A real file every Python install has (the stdlib's ``textwrap``)."""
    path = inspect.getsourcefile(textwrap)
    with open(path, encoding="utf-8") as f:
        return path, f.read()


def pct(xs) -> str:
    a = np.asarray(xs) * 1e3
    return f"median {np.median(a):6.3f} ms  p90 {np.percentile(a, 90):6.3f} ms  p99 {np.percentile(a, 99):6.3f} ms  (n={len(a)})"


def keystrokes(text: str, start: int = 2000):
    """Prefixes a typist produces going forward through ``text`` from ``start``."""
    i = start
    while True:
        if i >= len(text):
            i = start
        i += 1
        yield text[:i]


def time_decisions(predictors: dict, text: str, warmup: int, runs: int) -> dict:
    """Interleave the predictors over the same keystrokes; returns timings per name and kind."""
    out = {name: {"all": [], "network": [], "rerank": []} for name in predictors}
    ks = keystrokes(text)
    n_net = 0
    n = 0
    while n_net < runs + warmup:
        prefix = next(ks)
        net_this = False
        for name, p in predictors.items():
            before = p.stats["forward_tokens"]
            t = time.perf_counter()
            p.predict(prefix, doc_id="bench")
            dt = time.perf_counter() - t
            network = p.stats["forward_tokens"] != before
            net_this |= network
            if n_net >= warmup:
                out[name]["network" if network else "rerank"].append(dt)
                out[name]["all"].append(dt)
        n_net += net_this
        n += 1
    return out


def main(a) -> int:
    from .predictor import Predictor

    path, text = default_text()
    names = [n.strip() for n in a.backends.split(",") if n.strip()]
    predictors = {}
    for name in names:
        t = time.perf_counter()
        p = Predictor.load(a.model, backend=name)
        p.observe_document("bench", text)
        p.warmup()
        predictors[name] = p
        print(f"{name:5s} backend loaded and warmed in {1e3 * (time.perf_counter() - t):.0f} ms", file=sys.stderr)
    print(f"workload: typing {path} top to bottom; {a.warmup} warm-up, then {a.runs} timed network decisions")
    res = time_decisions(predictors, text, a.warmup, a.runs)
    for name in names:
        r = res[name]
        print(f"\n[{name}] backend")
        print(f"  network decision (prefill + pool scoring): {pct(r['network'][: a.runs])}")
        print(f"  re-rank inside a word (no forward pass):   {pct(r['rerank'][: a.runs])}")
        print(f"  any keystroke:                             {pct(r['all'][: a.runs])}")
    if "mlx" in res and "numpy" in res:
        ratio = np.median(res["mlx"]["network"]) / np.median(res["numpy"]["network"])
        print(f"\nmedian network decision, mlx / numpy: {ratio:.1f}x (interleaved keystroke by "
              "keystroke, so each backend also evicts the other's weights from the caches)")
    print(f"peak RSS of this process: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")
    if a.lsp:
        from laya_client.replay import bench_round_trip

        bench_round_trip(text, a.warmup, a.runs, a.model)
    return 0
