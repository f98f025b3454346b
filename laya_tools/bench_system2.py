"""How long System 2 takes to write a line, for several GGUF files side by side.

Each model continues the same held-out file cut at successive places (``engine.system2.System2
.continuation``, up to 12 tokens, as the server asks), the models taking turns at every cut so
that a noisy machine slows them alike. Prints per model the time of a whole continuation
(prompt reading from the KV cache's end included) and per generated token: median, p90, p99 (ms).

    python -m laya_tools.bench_system2 A.gguf B.gguf [--threads 1] [--warmup 10] [--runs 100]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

DEFAULT_FILE = "corpus/build/eval/go/golang-github-gorilla-mux-dev/usr/share/gocode/src/github.com/gorilla/mux/regexp.go"
"""The text typed (an eval file of the corpus; any text file will do)."""


def main(argv: list[str] | None = None) -> int:
    from engine.system2 import System2, System2Error

    ap = argparse.ArgumentParser(prog="python -m laya_tools.bench_system2", description=__doc__.split("\n")[0])
    ap.add_argument("gguf", nargs="+", type=Path)
    ap.add_argument("--file", type=Path, default=Path(DEFAULT_FILE))
    ap.add_argument("--threads", type=int, default=1, help="llama.cpp threads (the server's default: 1 here)")
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--runs", type=int, default=100, help="timed continuations per model")
    ap.add_argument("--step", type=int, default=37, help="characters between two cuts")
    a = ap.parse_args(argv)
    try:
        text = a.file.read_text("utf-8")
        models = [System2(p, n_threads=a.threads) for p in a.gguf]
    except (OSError, System2Error) as e:
        print(f"bench_system2: {e}", file=sys.stderr)
        return 1
    cuts = [200 + a.step * i for i in range(a.warmup + a.runs)]
    if cuts[-1] > len(text):
        print(f"bench_system2: {a.file} is too short for {len(cuts)} cuts {a.step} characters apart",
              file=sys.stderr)
        return 1
    calls: list[list[float]] = [[] for _ in models]
    tokens: list[list[float]] = [[] for _ in models]
    for i, c in enumerate(cuts):
        for k, m in enumerate(models):
            t = time.perf_counter()
            cont = m.continuation(text[:c], max_tokens=12)
            dt = (time.perf_counter() - t) * 1000
            if i >= a.warmup:
                calls[k].append(dt)
                tokens[k].append(dt / max(1, len(cont.logprobs) if cont else 1))
    print(f"{a.runs} continuations each after {a.warmup} warm-up ones, {a.threads} thread(s), {a.file.name}")
    print(f"{'model':40s} {'line: median':>12s} {'p90':>7s} {'p99':>7s}   {'a token: median':>15s} {'p90':>7s}")
    for p, c, t in zip(a.gguf, calls, tokens):
        q = np.percentile(c, [50, 90, 99])
        r = np.percentile(t, [50, 90])
        print(f"{p.name:40s} {q[0]:12.1f} {q[1]:7.1f} {q[2]:7.1f}   {r[0]:15.1f} {r[1]:7.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
