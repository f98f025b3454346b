"""``laya bench --jumps``: LSP round trips while typing one key at a time after jumps in a file.

The workload an editor produces when the user moves around a file: the whole file is open; the
cursor jumps to a random identifier start; the next ``keys`` characters of the file there are
deleted (one ``didChange``, untimed) and typed back one at a time, each followed by a timed
``textDocument/completion`` at the cursor. The first request after each jump is the one that
needs a new window. Several servers (e.g. before/after a change, each with its own
``initializationOptions`` and environment) get the same edits, interleaved request by request,
so background load hits them alike and their ratio holds on a noisy machine; the order in which
they are asked is random per request (the first one asked after an edit has had the least time
to take it in: two identical servers in a fixed order measured 4.6 / 6.6 / 8.6 against 3.1 / 4.6 /
5.9 ms on the first keystroke after a paste, 2026-12-01). Each server is
driven by the lean client of ``laya_tools.pipe_client`` (the round trip an editor sees).

``python -m laya_tools.bench_jumps {jumps,pastes,typing} --gap-ms 100 --env LAYA_PREFETCH=0`` runs the
default server side by side with one started with that environment (an engine switch off);
``--tree DIR`` with one run from another checkout (``git worktree add DIR <commit>``: before and
after a change); ``--options '{"system2": true}'`` with one given those ``initializationOptions``
(with ``--alone``, the one server: System 2's cost to the fast answer is timed with the server
alone, off and on in turn, since a second server would share its cores);
``indexing --workspace DIR`` times keystrokes into a server indexing that folder and one without
a workspace, from their start, in windows of time.
"""

from __future__ import annotations

import json
import random
import re
import sys
import time
from contextlib import contextmanager
from pathlib import Path

from .pipe_client import PipeClient

TREE = "__LAYA_TREE"
"""Key of a server's environment (in ``servers``) naming another checkout of this project to run
that server from (its working directory and ``PYTHONPATH``), not passed on to it."""

WORD_START = re.compile(r"(?<![A-Za-z0-9_])[A-Za-z_][A-Za-z0-9_]{3,}")


class _Server:
    """One server and its lean client (``laya_tools.pipe_client``), counting empty answers."""

    def __init__(self, name: str, options: dict | None, env: dict | None, model=None):
        env = dict(env or {})
        tree = env.pop(TREE, None)  # another checkout's server (``--tree``)
        if tree:
            env["PYTHONPATH"] = tree
        self.client = PipeClient(model, init_options=options, env=env, cwd=tree)
        self.name = name
        self.empty = 0

    @property
    def text(self) -> str:
        return self.client.text

    def open(self, uri: str, text: str) -> None:
        self.client.open(uri, text)

    def edit(self, start: int, end: int, new: str) -> None:
        """Replace ``text[start:end]`` by ``new`` (one incremental ``didChange``)."""
        self.client.edit(start, end, new)

    def complete(self, offset: int) -> float:
        """Seconds for a completion at ``offset``; counts answers without items in ``self.empty``."""
        items, dt = self.client.complete_at(offset)
        self.empty += not items
        return dt


@contextmanager
def _servers(servers: dict, model, uri: str, text: str):
    """Start each server, open ``uri`` with ``text``, wait for its model; yield ``{name: _Server}``;
    shut them down. The caller fills each one's ``empty_answers`` from ``_Server.empty``."""
    live = {name: _Server(name, opts, env, model) for name, (opts, env) in servers.items()}
    try:
        for s in live.values():
            s.open(uri, text)
            s.complete(len(text))  # waits for the model to load
        yield live
    finally:
        for s in live.values():
            for m in s.client.messages:  # e.g. System 2 asked for but off: say so beside the numbers
                print(f"  [{s.name}] the server said: {m}", file=sys.stderr)
            s.client.shutdown()


def _in_turn(live: dict, rnd: random.Random) -> list:
    """The servers in a new random order for each request, so none is always the first asked
    after an edit (the others have had that round trip longer to take the edit in)."""
    order = list(live.values())
    rnd.shuffle(order)
    return order


def _ask_in_turn(live: dict, turns: random.Random, offset: int, out: dict, timed: bool, kind: str) -> None:
    """One completion at ``offset`` from each server, in a new random order (:func:`_in_turn`);
    when ``timed``, its round trip goes to the server's ``all`` and ``kind`` lists in ``out``."""
    for s in _in_turn(live, turns):
        dt = s.complete(offset)
        if timed:
            out[s.name]["all"].append(dt)
            out[s.name][kind].append(dt)


def bench_jumps(text: str, servers: dict[str, tuple[dict | None, dict | None]], warmup: int = 100,
                runs: int = 1000, keys: int = 10, seed: int = 0, model=None, gap: float = 0.0) -> dict:
    """Time completion round trips after jumps, servers side by side.

    Args:
        text: the file (opened whole).
        servers: name -> ``(initializationOptions, extra environment)`` of each server.
        warmup, runs: untimed, then timed keystrokes (each server gets all of them).
        keys: characters typed at each place before jumping on.
        gap: seconds between keystrokes (0: back to back, the seed method; a person: ~0.1-0.25),
            which lets a server use the pause (``engine.worker.EngineThread.idle``).

    Returns:
        name -> ``{"all": [seconds...], "after_jump": [...], "typing": [...], "empty_answers": n}``
        (answers without items, warm-up included: a server that answers nothing is fast but wrong).
    """
    starts = [m.start() for m in WORD_START.finditer(text) if 2000 < m.start() < len(text) - keys]
    rnd = random.Random(seed)
    turns = random.Random(seed + 1)  # the servers' order per request
    out = {name: {"all": [], "after_jump": [], "typing": []} for name in servers}
    with _servers(servers, model, "file:///bench/jumps.py", text) as live:
        n = 0
        while n < warmup + runs:
            p = rnd.choice(starts)
            typed = text[p : p + keys]
            for s in live.values():
                s.edit(p, p + keys, "")
            for k in range(1, keys + 1):
                for s in live.values():
                    s.edit(p + k - 1, p + k - 1, typed[k - 1])
                _ask_in_turn(live, turns, p + k, out, n >= warmup, "after_jump" if k == 1 else "typing")
                n += 1
                if gap:
                    time.sleep(gap)
                if n >= warmup + runs:
                    break
            if k < keys:  # stopped mid-word: put back what was not typed (the file stays the same)
                for s in live.values():
                    s.edit(p + k, p + k, typed[k:])
        for s in live.values():
            out[s.name]["empty_answers"] = s.empty
    return out


def bench_typing(text: str, servers: dict[str, tuple[dict | None, dict | None]], warmup: int = 100,
                 runs: int = 1000, model=None, gap: float = 0.06, start: int = 0) -> dict:
    """Time completion round trips while a file is typed from ``start`` one key at a time, as an
    editor asks: every key is a ``didChange``, and only a key that types an identifier character
    is followed by a timed ``textDocument/completion`` (VS Code's and Neovim's default triggers),
    so comments, strings, blanks and line breaks reach the server as edits no request follows.
    ``gap``: seconds of pause after each key (a person: ~0.1-0.25 s), in which a server can
    use its idle time (``Predictor.prefetch``, speculative prefill).

    Returns:
        name -> ``{"all": [...], "after_other": [...], "typing": [...], "empty_answers": n}``:
        ``after_other`` is the first completion after 8 or more keys that asked none (the next
        word after a comment, a string or an indented line break), ``typing`` the others.
    """
    turns = random.Random(1)
    out = {name: {"all": [], "after_other": [], "typing": []} for name in servers}
    with _servers(servers, model, "file:///bench/typing.py", text[:start]) as live:
        n = 0
        quiet = 0  # keys since the last completion request
        pos = start
        while n < warmup + runs:
            pos, ident = _type_key(live.values(), text, pos)
            if ident:
                _ask_in_turn(live, turns, pos, out, n >= warmup, "after_other" if quiet >= 8 else "typing")
                n += 1
                quiet = 0
            else:
                quiet += 1
            if gap:
                time.sleep(gap)
        for s in live.values():
            out[s.name]["empty_answers"] = s.empty
    return out


def bench_pastes(text: str, servers: dict[str, tuple[dict | None, dict | None]], warmup: int = 100,
                 runs: int = 1000, keys: int = 6, seed: int = 0, model=None, gap: float = 0.0) -> dict:
    """Time completion round trips while the file grows by pasted chunks, servers side by side.

    The file starts empty; repeatedly, the next 5-40 lines of ``text`` are pasted at its end (one
    ``didChange``, untimed), and the ``keys`` characters that follow are typed one at a time, each
    followed by a timed completion. The first request after a paste needs the new lines in the
    window (the paste-sized prefill the short window avoids). When the text runs out, it starts
    again from an empty document. ``gap``: seconds of pause after the paste and after each key
    (0: back to back), which a server may use (``laya_lsp.prefetch``, the idle steps).

    Returns:
        name -> ``{"all": [...], "after_paste": [...], "typing": [...], "empty_answers": n}``.
    """
    rnd = random.Random(seed)
    turns = random.Random(seed + 1)  # the servers' order per request
    out = {name: {"all": [], "after_paste": [], "typing": []} for name in servers}
    with _servers(servers, model, "file:///bench/pastes.py", "") as live:
        n, pos = 0, 0  # the document is always text[:pos]
        while n < warmup + runs:
            if pos >= len(text) - keys - 1:  # the text ran out: start again from an empty document
                for s in live.values():
                    s.edit(0, len(s.text), "")
                pos = 0
            end = pos
            for _ in range(rnd.randint(5, 40)):
                nl = text.find("\n", end)
                end = len(text) if nl < 0 else nl + 1
            for s in live.values():
                s.edit(pos, pos, text[pos:end])
            pos = end
            if gap:
                time.sleep(gap)
            for k in range(1, keys + 1):
                if pos >= len(text) or n >= warmup + runs:
                    break
                for s in live.values():
                    s.edit(pos, pos, text[pos])
                pos += 1
                _ask_in_turn(live, turns, pos, out, n >= warmup, "after_paste" if k == 1 else "typing")
                n += 1
                if gap:
                    time.sleep(gap)
        for s in live.values():
            out[s.name]["empty_answers"] = s.empty
    return out


def _type_key(clients, text: str, pos: int) -> tuple[int, bool]:
    """Type ``text[pos]`` into each client's document (which is ``text[:pos]``; at the end of
    ``text``, first empty them all and start again); returns the next ``pos`` and whether the key
    was an identifier character (one an editor asks a completion after)."""
    if pos >= len(text):
        for c in clients:
            c.edit(0, len(c.text), "")
        pos = 0
    ch = text[pos]
    for c in clients:
        c.edit(pos, pos, ch)
    return pos + 1, ch.isalnum() or ch == "_"


def bench_indexing(text: str, root: str, seconds: float = 60.0, gap: float = 0.02, model=None
                   ) -> list[tuple[float, float, float]]:
    """Round trips while a workspace is indexed: a server started with ``root`` as its workspace
    folder and one without, side by side from their start (no warm-up: the index starts with the
    server), ``text`` typed one key at a time into both with ``gap`` seconds between keys, each
    identifier character followed by a completion (the two asked in a random order).

    Returns:
        ``(seconds since the start, round trip with the workspace, without)`` per completion.
    """
    turns = random.Random(1)
    t0 = time.perf_counter()
    ws, plain = PipeClient(model, root=root), PipeClient(model)
    rows = []
    try:
        for c in (ws, plain):
            c.open("file:///bench/indexing.py", "")
        pos = 0
        while time.perf_counter() - t0 < seconds:
            pos, ident = _type_key((ws, plain), text, pos)
            if ident:
                dt = {}
                for c in turns.sample([ws, plain], 2):
                    dt[c is ws] = c.complete_at(pos)[1]
                rows.append((time.perf_counter() - t0, dt[True], dt[False]))
            time.sleep(gap)
    finally:
        for c in (ws, plain):
            c.shutdown()
    return rows


def main(argv: list[str] | None = None) -> int:
    """The default server against one with ``--env`` set, side by side (seed method)."""
    import argparse

    import numpy as np

    from .bench import default_text

    ap = argparse.ArgumentParser(prog="python -m laya_tools.bench_jumps")
    ap.add_argument("workload", choices=["jumps", "pastes", "typing", "indexing"])
    ap.add_argument("--env", action="append", default=[], metavar="VAR=VALUE",
                    help="environment of the second server (with --alone: of the one server; repeatable)")
    ap.add_argument("--tree", metavar="DIR",
                    help="run the second server from this other checkout of the project (e.g. a "
                         "`git worktree` of an older commit), side by side with this one")
    ap.add_argument("--options", metavar="JSON",
                    help="initializationOptions of the second server (with --alone: of the one server), "
                         "e.g. '{\"system2\": true}' (nothing waits for System 2 to load, ~1-2 s: "
                         "let the warm-up cover it)")
    ap.add_argument("--alone", action="store_true",
                    help="one server only (what a user's machine runs: no second server's background "
                         "work on the cores; no ratio either)")
    ap.add_argument("--gap-ms", type=float, default=0.0, help="pause between keystrokes (and after a paste)")
    ap.add_argument("--warmup", type=int, default=100)
    ap.add_argument("--runs", type=int, default=1000)
    ap.add_argument("--workspace", metavar="DIR", help="indexing: the workspace folder indexed")
    ap.add_argument("--seconds", type=float, default=60.0, help="indexing: how long to type")
    a = ap.parse_args(argv)
    if a.workload == "indexing":
        if not a.workspace:
            ap.error("indexing needs --workspace DIR")
        rows = np.asarray(bench_indexing(default_text()[1], a.workspace, a.seconds, (a.gap_ms or 20.0) / 1e3))
        print(f"typing while {a.workspace} is indexed; with / without the workspace, interleaved "
              "(ms: median / p90 / p99)")
        for lo, hi in ((0, 5), (5, 30), (30, 60), (60, float("inf"))):
            m = (rows[:, 0] >= lo) & (rows[:, 0] < hi) if len(rows) else np.zeros(0, bool)
            if m.sum() >= 5:
                w, n = rows[m, 1] * 1e3, rows[m, 2] * 1e3
                print(f"  {lo:3.0f}-{hi:<4.0f} s after the start (n={m.sum():4d})  "
                      + "   ".join(f"{name} {np.median(x):6.2f} / {np.percentile(x, 90):6.2f} / {np.percentile(x, 99):7.2f}"
                                   for name, x in (("with", w), ("without", n))))
        return 0
    if any("=" not in kv for kv in a.env):
        ap.error("--env takes VAR=VALUE")
    env = dict(kv.split("=", 1) for kv in a.env)
    options = None
    if a.options is not None:
        try:
            options = json.loads(a.options)
        except ValueError as e:
            ap.error(f"--options is no JSON: {e}")
        if not isinstance(options, dict):
            ap.error("--options must be a JSON object")
    if a.alone and a.tree:
        ap.error("--alone runs this checkout's server only: no --tree")
    label = " ".join([*a.env, *([f"tree {a.tree}"] if a.tree else []), *([a.options] if a.options else [])])
    if a.tree:
        env[TREE] = str(Path(a.tree).resolve())
    servers = ({label or "default": (options, env)} if a.alone
               else {"default": (None, None), label or "default again": (options, env)})
    _, text = default_text()
    run = {"jumps": bench_jumps, "pastes": bench_pastes, "typing": bench_typing}[a.workload]
    out = run(text, servers, a.warmup, a.runs, gap=a.gap_ms / 1e3)
    first = {"jumps": "after_jump", "pastes": "after_paste", "typing": "after_other"}[a.workload]
    print(f"{a.workload} in textwrap.py, {a.gap_ms:.0f} ms pauses, {a.warmup} warm-up + {a.runs} timed keystrokes, "
          + ("one server" if a.alone else "servers interleaved request by request") + " (ms: median / p90 / p99)")
    for name, r in out.items():
        for key in (first, "typing", "all"):
            x = np.asarray(r[key]) * 1e3
            if not len(x):
                print(f"  {name:28s} {key:12s} none   (n=0)")
                continue
            print(f"  {name:28s} {key:12s} {np.median(x):6.2f} / {np.percentile(x, 90):6.2f} / {np.percentile(x, 99):6.2f}"
                  f"   (n={len(x)})")
        print(f"  {name:28s} answers without items: {r['empty_answers']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
