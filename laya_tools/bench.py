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


def time_decisions(predictors: dict, text: str, warmup: int, runs: int, pauses: bool = False) -> dict:
    """Interleave the predictors over the same keystrokes; returns timings per name and kind.
    ``pauses``: after each keystroke, run each predictor's idle work (``Predictor.idle_step``),
    untimed, as a person's pause between keys lets the server do."""
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
            while pauses and p.idle_step():
                pass
        n_net += net_this
        n += 1
    return out


def time_jumps(predictors: dict, text: str, warmup: int, runs: int, keys: int = 10, seed: int = 0) -> dict:
    """In process, no IPC: type ``keys`` characters at random identifier starts (the workload of
    ``laya_tools.bench_jumps``), the predictors interleaved keystroke by keystroke."""
    import random
    import re

    starts = [m.start() for m in re.finditer(r"(?<![A-Za-z0-9_])[A-Za-z_][A-Za-z0-9_]{3,}", text)
              if 2000 < m.start() < len(text) - keys]
    rnd = random.Random(seed)
    out = {name: {"all": [], "after_jump": [], "typing": []} for name in predictors}
    n = 0
    while n < warmup + runs:
        p0 = rnd.choice(starts)
        for k in range(1, keys + 1):
            prefix, suffix = text[: p0 + k], text[p0 + k :]
            for name, p in predictors.items():
                t = time.perf_counter()
                p.predict(prefix, suffix, doc_id="bench")
                dt = time.perf_counter() - t
                if n >= warmup:
                    out[name]["all"].append(dt)
                    out[name]["after_jump" if k == 1 else "typing"].append(dt)
            n += 1
            if n >= warmup + runs:
                break
    return out


def summary(xs) -> dict:
    """Median, p90, p99 (ms) and count of a list of seconds."""
    a = np.asarray(xs, dtype=float) * 1e3
    if not len(a):
        return {"n": 0}
    return {"p50": float(np.median(a)), "p90": float(np.percentile(a, 90)), "p99": float(np.percentile(a, 99)),
            "n": int(len(a))}


def machine() -> dict:
    """What the numbers were measured on, and what else was running (load average, busiest processes)."""
    import os
    import platform
    import subprocess

    info = {"platform": platform.platform(), "cpus": os.cpu_count(), "python": platform.python_version()}
    try:
        info["loadavg"] = os.getloadavg()
        ps = subprocess.run(["ps", "-eo", "pcpu,args", "--sort=-pcpu"], capture_output=True, text=True, timeout=5)
        info["busiest"] = [ln.strip()[:160] for ln in ps.stdout.splitlines()[1:6]]
    except (OSError, subprocess.SubprocessError):
        pass
    return info


def write_results(results: dict, series: dict[str, list[float]], out_dir: str) -> str:
    """Write ``bench-<time>.json`` (and ``.png`` of the latency distributions when matplotlib is
    installed: ``pip install -e '.[bench]'``) under ``out_dir``; returns the JSON path."""
    import json
    import os

    os.makedirs(out_dir, exist_ok=True)
    stem = os.path.join(out_dir, time.strftime("bench-%Y%m%d-%H%M%S"))
    results["latencies_ms"] = {k: [round(x * 1e3, 4) for x in v] for k, v in series.items()}
    with open(stem + ".json", "w", encoding="utf-8") as f:
        json.dump(results, f, indent=1)
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print(f"results: {stem}.json (no plot: matplotlib is not installed)")
        return stem + ".json"
    fig, ax = plt.subplots(figsize=(9, 5))
    for name, xs in series.items():
        if len(xs):
            a = np.sort(np.asarray(xs) * 1e3)
            ax.plot(a, np.arange(1, len(a) + 1) / len(a), label=f"{name} (p50 {np.median(a):.2f}, p99 {np.percentile(a, 99):.1f} ms)")
    ax.set_xscale("log")
    ax.set_xlabel("latency (ms, log scale)")
    ax.set_ylabel("share of requests at or below")
    ax.set_title("laya bench: latency distributions (" + time.strftime("%Y-%m-%d") + ")")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    fig.savefig(stem + ".png", dpi=110)
    print(f"results: {stem}.json, {stem}.png")
    return stem + ".json"


def main(a) -> int:
    from engine.predictor import Predictor

    path, text = default_text()
    results: dict = {"date": time.strftime("%Y-%m-%d %H:%M:%S"), "argv": sys.argv[1:], "machine": machine(),
                     "workload": path}
    series: dict[str, list[float]] = {}
    if getattr(a, "peers", False):  # the model step against llama.cpp (laya_tools/bench_peers.py) only
        from . import bench_peers

        names = [n.strip() for n in a.backends.split(",") if n.strip() and n.strip() != "mlx"]
        results["peers"], series = bench_peers.run(a.model, names, a.warmup, a.runs, text)
        write_results(results, series, getattr(a, "out", "results"))
        return 0
    if getattr(a, "kernels", False):
        from . import bench_kernels
        from engine.model_io import DEFAULT_MODEL_DIR

        results["kernels"] = bench_kernels.main(a.model or DEFAULT_MODEL_DIR)
        results["kernels_batched"] = bench_kernels.batched(a.model or DEFAULT_MODEL_DIR)
    names = [n.strip() for n in a.backends.split(",") if n.strip()]
    predictors = {}
    for name in names:
        t = time.perf_counter()
        p = Predictor.load(a.model, backend=name)
        p.observe_document("bench", text)
        p.warmup()
        predictors[name] = p
        print(f"{name:5s} backend loaded and warmed in {1e3 * (time.perf_counter() - t):.0f} ms", file=sys.stderr)
    if getattr(a, "ablate", None) and names:
        # the first backend again, with some of the prior's terms off (their cost, side by side)
        from dataclasses import replace

        off = [k.strip() for k in a.ablate.split(",") if k.strip()]
        p = Predictor.load(a.model, backend=names[0])
        switches = ("rerank", "overlap")
        unknown = [k for k in off if k not in p.config.prior_weights and k not in switches]
        if unknown:
            print(f"laya bench --ablate: no prior weight {', '.join(unknown)} "
                  f"(known: {', '.join(p.config.prior_weights)}; or rerank, overlap)", file=sys.stderr)
            return 2
        p.config = replace(p.config, rerank="rerank" not in off, overlap_pool="overlap" not in off,
                           prior_weights={**p.config.prior_weights, **{k: 0.0 for k in off if k not in switches}})
        p.overlap = p.config.overlap_pool
        p._pools.clear()
        p.pool = p._pool_for(p.language)
        p.observe_document("bench", text)
        p.warmup()
        name = f"{names[0]} without {'+'.join(off)}"
        predictors[name] = p
        names.append(name)
    pauses = getattr(a, "pauses", False)
    if pauses and names:
        # the first backend again, never speculating: the speculative prefill's effect, side by side
        p = Predictor.load(a.model, backend=names[0])
        p.speculate = False
        p.observe_document("bench", text)
        p.warmup()
        name = f"{names[0]} without speculative prefill"
        predictors[name] = p
        names.append(name)
    if predictors:
        print(f"workload: typing {path} top to bottom; {a.warmup} warm-up, then {a.runs} timed network decisions"
              + ("; idle work run between keystrokes, untimed (--pauses)" if pauses else ""))
        res = time_decisions(predictors, text, a.warmup, a.runs, pauses)
        results["decisions"] = {}
        for name in names:
            r = res[name]
            print(f"\n[{name}] backend")
            print(f"  network decision (prefill + pool scoring): {pct(r['network'][: a.runs])}")
            print(f"  re-rank inside a word (no forward pass):   {pct(r['rerank'][: a.runs])}")
            print(f"  any keystroke:                             {pct(r['all'][: a.runs])}")
            results["decisions"][name] = {k: summary(v[: a.runs]) for k, v in r.items()}
            series[f"{name}: network decision"] = r["network"][: a.runs]
        base = names[0]
        for name in names[1:]:
            ratio = np.median(res[base]["network"]) / np.median(res[name]["network"])
            print(f"median network decision, {base} / {name}: {ratio:.2f}x (interleaved keystroke by keystroke)")
            results["decisions"][f"ratio {base}/{name}"] = float(ratio)
            inword = np.median(res[base]["rerank"]) / np.median(res[name]["rerank"])
            print(f"median keystroke inside a word, {base} / {name}: {inword:.2f}x")
            results["decisions"][f"ratio inside a word {base}/{name}"] = float(inword)
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(f"peak RSS of this process: {rss:.0f} MB")
        results["peak_rss_mb"] = rss
        predictors.clear()
    if a.lsp:
        from laya_tools.replay import bench_round_trip

        rt = bench_round_trip(text, a.warmup, a.runs, a.model)
        results["lsp"] = {"typing": summary(rt["typing"]), **{k: v for k, v in rt.items() if k != "typing"}}
        series["LSP: typing forward"] = rt["typing"]
    if getattr(a, "jumps", False):
        before = Predictor.load(a.model, backend="numpy")
        before.fast_path = False
        after = Predictor.load(a.model)
        after.advance_on_keystroke = False  # as in the server: full windows are finished in pauses,
        # and back-to-back keystrokes leave none (laya_lsp.loading, engine.worker)
        pj = {"before (numpy, whole window)": before, f"after (default: {after.backend.name})": after}
        for p in pj.values():
            p.observe_document("bench", text)
            p.warmup()
        print(f"\n[in process] typing one key at a time after jumps to random identifiers; {a.warmup} warm-up, "
              f"{a.runs} timed keystrokes; predictors interleaved keystroke by keystroke")
        ij = time_jumps(pj, text, a.warmup, a.runs)
        results["jumps_in_process"] = {}
        for name, r in ij.items():
            print(f"  {name:30s} any keystroke:        {pct(r['all'])}")
            print(f"  {'':30s} first after a jump:   {pct(r['after_jump'])}")
            results["jumps_in_process"][name] = {k: summary(v) for k, v in r.items()}
            series[f"in process after jumps: {name}"] = r["all"]
        b, f = (ij[n]["all"] for n in pj)
        for q in (50, 90, 99):
            print(f"  p{q} before / after: {np.percentile(b, q) / np.percentile(f, q):.2f}x")
        del before, after, pj

        from laya_tools.bench_jumps import bench_jumps

        servers = {"before (numpy, whole window)": ({"backend": "numpy"}, {"LAYA_FAST_PATH": "0"}),
                   "after (default)": (None, None)}
        print(f"\n[LSP over stdio] typing one key at a time after jumps to random identifiers of {path}; "
              f"{a.warmup} warm-up, {a.runs} timed keystrokes; servers interleaved request by request")
        gap = getattr(a, "gap_ms", 0.0) / 1e3
        if gap:
            print(f"  {gap * 1e3:.0f} ms between keystrokes (a typist's pause; idle work may run in it)")
        jr = bench_jumps(text, servers, a.warmup, a.runs, model=a.model, gap=gap)
        results["jumps_gap_ms"] = gap * 1e3
        _lsp_rows(jr, "jumps", "after_jump", "first after a jump:  ", results, series)
        # the absolute numbers a user sees: the default server alone on the cores (above, each
        # of its requests follows the other server's, whose 30 ms prefills share the 2 cores)
        print(f"\n[LSP over stdio] the same jumps, the default server alone; {a.warmup} warm-up, {a.runs} timed keystrokes")
        ja = bench_jumps(text, {"after (default), alone": (None, None)}, a.warmup, a.runs, model=a.model, gap=gap)
        _lsp_rows(ja, "jumps_alone", "after_jump", "first after a jump:  ", results, series)

        from laya_tools.bench_jumps import bench_pastes

        print(f"\n[LSP over stdio] the file grows by pasted chunks of 5-40 lines of {path}, 6 keys typed after "
              f"each; {a.warmup} warm-up, {a.runs} timed keystrokes; servers interleaved request by request")
        pr = bench_pastes(text, servers, a.warmup, a.runs, model=a.model, gap=gap)
        _lsp_rows(pr, "pastes", "after_paste", "first after a paste: ", results, series)
    write_results(results, series, getattr(a, "out", "results"))
    return 0


def _lsp_rows(runs: dict, key: str, first: str, label: str, results: dict, series: dict) -> None:
    """Print one LSP workload's rows (servers "before" then "after", see ``laya_tools.bench_jumps``,
    or one server alone), record them under ``results[key]`` and ``series``, and print the
    before / after ratios (two servers)."""
    from laya_tools.replay import pct as lpct

    results[key] = {}
    for name, r in runs.items():
        empty = r.pop("empty_answers")
        print(f"  {name:30s} any keystroke:        {lpct(r['all'])}")
        print(f"  {'':30s} {label} {lpct(r[first])}   ({empty} answers without items)")
        results[key][name] = {**{k: summary(v) for k, v in r.items()}, "empty_answers": empty}
        series[f"LSP {key}: {name}"] = r["all"]
    if len(runs) != 2:
        return
    b, f = (r["all"] for r in runs.values())
    for q in (50, 90, 99):
        print(f"  p{q} before / after: {np.percentile(b, q) / np.percentile(f, q):.2f}x")
