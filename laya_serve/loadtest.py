"""Bounded load test of ``laya serve`` on loopback: p50/p99 latency under 1, 4 and 16 clients.

Each client types a real source file forward (a request every few characters, the prompt being
the file up to the cursor, ``max_tokens`` 8, its own ``user``), on one keep-alive connection, one
request at a time. Every answer must be a 200 with candidates: anything else counts as dropped.
Bounded: ``--requests`` per level and ``--seconds`` per level, whichever comes first.

Run: ``python -m laya_serve.loadtest`` (starts a server on a free loopback port) or
``python -m laya_serve.loadtest --url http://127.0.0.1:8899`` (an already running one).
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path
from urllib.parse import urlsplit

DEFAULT_FILE = Path(__file__).resolve().parent.parent / "engine" / "predictor.py"


def start_server(extra: list[str] | None = None, timeout: float = 120.0,
                 log: list[str] | None = None) -> tuple[subprocess.Popen, str]:
    """Start ``laya serve --port 0`` and return the process and its base URL (after the bind).

    ``log``, if given, gets the server's stderr lines after the bind as they come (complete once
    the process has been waited for: the reading thread is ``proc.log_reader``)."""
    env = dict(os.environ, HF_HUB_OFFLINE="1")
    proc = subprocess.Popen([sys.executable, "-m", "laya_tools.cli", "serve", "--port", "0", *(extra or [])],
                            stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, env=env,
                            cwd=Path(__file__).resolve().parent.parent)
    deadline = time.monotonic() + timeout
    lines = []
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line:
            break
        lines.append(line)
        m = re.search(r"serving on (http://\S+)", line)
        if m:
            proc.log_reader = threading.Thread(target=_drain, args=(proc.stderr, log), daemon=True)
            proc.log_reader.start()
            return proc, m.group(1)
    proc.kill()
    raise RuntimeError("laya serve did not start:\n" + "".join(lines[-20:]))


def _drain(f, into: list[str] | None) -> None:
    for line in f:
        if into is not None:
            into.append(line)


def _client(url: str, text: str, start: int, step: int, user: str, stop_at: float, budget: list,
            lock: threading.Lock, lat: list, errors: list) -> None:
    u = urlsplit(url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=60)
    pos = start
    while time.monotonic() < stop_at:
        with lock:
            if budget[0] <= 0:
                break
            budget[0] -= 1
        pos = pos + step if pos + step < len(text) else step
        body = json.dumps({"prompt": text[:pos], "max_tokens": 8, "user": user})
        t = time.perf_counter()
        try:
            conn.request("POST", "/complete", body, {"Content-Type": "application/json"})
            r = conn.getresponse()
            data = r.read()
            ok = r.status == 200 and json.loads(data)["choices"]
        except Exception as e:  # noqa: BLE001 - counted as dropped
            errors.append(repr(e))
            conn.close()
            conn = http.client.HTTPConnection(u.hostname, u.port, timeout=60)
            continue
        ms = (time.perf_counter() - t) * 1e3
        if ok:
            lat.append(ms)
        else:
            errors.append(f"HTTP {r.status}: {data[:200]!r}")
    conn.close()


def run_level(url: str, text: str, clients: int, requests: int, seconds: float) -> dict:
    """``requests`` requests from ``clients`` concurrent clients (at most ``seconds``)."""
    lat: list[float] = []
    errors: list[str] = []
    budget = [requests]
    lock = threading.Lock()
    stop_at = time.monotonic() + seconds
    threads = [threading.Thread(target=_client, args=(url, text, 500 + i * len(text) // clients, 7, f"client-{i}",
                                                      stop_at, budget, lock, lat, errors))
               for i in range(clients)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    lat.sort()

    def q(p: float) -> float:
        return lat[min(len(lat) - 1, int(p * len(lat)))] if lat else float("nan")

    return {"clients": clients, "answered": len(lat), "dropped": len(errors), "p50_ms": q(0.5),
            "p99_ms": q(0.99), "max_ms": lat[-1] if lat else float("nan"), "req_per_s": len(lat) / wall,
            "errors": errors[:3]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m laya_serve.loadtest", description=__doc__.split("\n\n")[0])
    ap.add_argument("--url", default=None, help="a running service (default: start one on a free loopback port)")
    ap.add_argument("--file", default=str(DEFAULT_FILE), help="source file the clients type (default: engine/predictor.py)")
    ap.add_argument("--clients", default="1,4,16", help="concurrency levels (default: %(default)s)")
    ap.add_argument("--requests", type=int, default=400, help="requests per level (default: %(default)s)")
    ap.add_argument("--seconds", type=float, default=30.0, help="most seconds per level (default: %(default)s)")
    ap.add_argument("--warmup", type=int, default=20, help="untimed requests first (default: %(default)s)")
    a = ap.parse_args(argv)
    text = Path(a.file).read_text("utf-8")
    proc = None
    url = a.url
    if url is None:
        proc, url = start_server()
    try:
        if a.url is not None and urlsplit(url).hostname not in ("127.0.0.1", "localhost", "::1"):
            print("loadtest: only loopback URLs are allowed", file=sys.stderr)
            return 2
        run_level(url, text, 1, a.warmup, a.seconds)
        print(f"{url}, {Path(a.file).name}, max_tokens 8, {a.requests} requests per level (at most {a.seconds:g} s)")
        print(f"{'clients':>7} {'answered':>8} {'dropped':>7} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8} {'req/s':>7}")
        dropped = 0
        for c in (int(x) for x in a.clients.split(",")):
            r = run_level(url, text, c, a.requests, a.seconds)
            dropped += r["dropped"]
            print(f"{r['clients']:7d} {r['answered']:8d} {r['dropped']:7d} {r['p50_ms']:8.2f} {r['p99_ms']:8.2f} "
                  f"{r['max_ms']:8.2f} {r['req_per_s']:7.1f}", flush=True)
            for e in r["errors"]:
                print(f"        error: {e}")
        return 1 if dropped else 0
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(10)


if __name__ == "__main__":
    sys.exit(main())
