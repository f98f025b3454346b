"""Benchmarks of the server's memory and of the cost of a keystroke against document size.

Two measurements through the real server (``python -m laya_lsp`` over stdio, driven by pygls's
client), printed, never asserted:

* :func:`bench_memory`: resident memory (``VmRSS``, and the peak ``VmHWM``) while documents of 1
  or of 6 languages are open and 10,000 edits go to them in turn (a document switch every 100
  edits, a completion every 4 edits).
* :func:`bench_doc_size`: a keystroke (one ``didChange`` and a ``textDocument/completion`` at the
  cursor) in a 20 KB file against one in a 5 MB file, two servers side by side, interleaved
  keystroke by keystroke so background load hits both alike (seed method: 100 warm-up, 1000 timed).

* :func:`bench_first_start`: a server's first start on a machine (no kernel caches, no lexicon
  cache): seconds to the first completion items, resident memory then and after typing on, and
  when the ahead-of-time kernels came in; servers from other checkouts alternated with it.

Run: ``.venv/bin/python -m laya_tools.bench_docs memory --languages 1`` (or ``6``),
``.venv/bin/python -m laya_tools.bench_docs docsize`` and
``.venv/bin/python -m laya_tools.bench_docs firststart [--trees /other/checkout]``.
"""

from __future__ import annotations

import argparse
import inspect
import sys
import time
from pathlib import Path

from lsprotocol import types

from .replay import ReplayClient, pct

LANGS = ["python", "javascript", "typescript", "go", "rust", "c"]
_EXT = {"python": ".py", "javascript": ".js", "typescript": ".ts", "go": ".go", "rust": ".rs", "c": ".c"}
_CORPUS = Path(__file__).resolve().parent.parent / "corpus" / "build"


def sample_text(language: str, chars: int = 20_000) -> str:
    """About ``chars`` characters of real code in ``language``: corpus files when the corpus is
    built here, else the standard library's ``textwrap.py`` (any text loads the lexicon)."""
    out, n = [], 0
    for split in ("eval", "tune", "train"):
        for path in sorted((_CORPUS / split / language).rglob("*" + _EXT[language]))[:200]:
            try:
                t = path.read_text("utf-8")
            except (OSError, UnicodeDecodeError):
                continue
            out.append(t)
            n += len(t)
            if n >= chars:
                return "".join(out)[:chars]
    import textwrap

    base = Path(inspect.getsourcefile(textwrap)).read_text("utf-8")
    return (base * (chars // len(base) + 1))[:chars]


def _status(pid: int) -> dict[str, float]:
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(("VmRSS:", "VmHWM:")):
            out[line.split(":")[0]] = int(line.split()[1]) / 1024
    return out


class _Doc:
    """An open document the benchmark edits at a fixed place (insert, then delete back)."""

    def __init__(self, client: ReplayClient, uri: str, text: str, language: str, line: int):
        self.c, self.uri, self.version = client, uri, 1
        lines = text.split("\n")
        self.line = min(line, len(lines) - 1)
        self.col = len(lines[self.line])
        self.typed = ""
        client.client.text_document_did_open(types.DidOpenTextDocumentParams(
            text_document=types.TextDocumentItem(uri=uri, language_id=language, version=1, text=text)))

    def edit(self, word: str) -> types.Position:
        """One keystroke: the next character of ``word`` at the place, or, once it is all there,
        delete it all (one edit) and start again. Returns the cursor."""
        self.version += 1
        if len(self.typed) < len(word):
            ch = word[len(self.typed)]
            at = types.Position(line=self.line, character=self.col + len(self.typed))
            change = types.TextDocumentContentChangePartial(range=types.Range(start=at, end=at), text=ch)
            self.typed += ch
        else:
            change = types.TextDocumentContentChangePartial(range=types.Range(
                start=types.Position(line=self.line, character=self.col),
                end=types.Position(line=self.line, character=self.col + len(self.typed))), text="")
            self.typed = ""
        self.c.client.text_document_did_change(types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=self.uri, version=self.version),
            content_changes=[change]))
        return types.Position(line=self.line, character=self.col + len(self.typed))

    def complete(self, pos: types.Position):
        return self.c._run(self.c.client.text_document_completion_async(types.CompletionParams(
            text_document=types.TextDocumentIdentifier(uri=self.uri), position=pos)))


def _options(backend: str | None) -> dict:
    return {"workspaceIndex": False, **({"backend": backend} if backend else {})}


def bench_memory(n_langs: int = 1, edits: int = 10_000, switch_every: int = 100, every: int = 1000,
                 backend: str | None = None) -> dict:
    """Server memory over ``edits`` edits to documents of ``n_langs`` languages (MB)."""
    c = ReplayClient(None, init_options=_options(backend))
    try:
        t0 = time.perf_counter()
        docs = []
        for k, lang in enumerate(LANGS[:n_langs]):
            for j in range(2):  # two documents per language, so switches also stay within one
                d = _Doc(c, f"file:///bench/doc{j}{_EXT[lang]}", sample_text(lang), lang, 200 + 37 * j)
                docs.append(d)
                d.complete(types.Position(line=d.line, character=d.col))  # loads the language
        rss = [(0, _status(c.pid)["VmRSS"])]
        print(f"[memory] {n_langs} language(s), {len(docs)} documents open: "
              f"{rss[0][1]:.0f} MB after opening ({time.perf_counter() - t0:.1f} s)", flush=True)
        words = ["self", "result", "value", "index", "path"]
        for i in range(1, edits + 1):
            d = docs[(i // switch_every) % len(docs)]
            pos = d.edit(words[(i // 7) % len(words)])
            if i % 4 == 0:
                d.complete(pos)
            if i % every == 0:
                rss.append((i, _status(c.pid)["VmRSS"]))
        st = _status(c.pid)
        print(f"[memory] RSS every {every} edits (MB): " + " ".join(f"{r:.0f}" for _, r in rss)
              + f"; peak (VmHWM) {st['VmHWM']:.0f} MB; {time.perf_counter() - t0:.0f} s", flush=True)
        return {"curve": rss, "peak": st["VmHWM"]}
    finally:
        c.shutdown()


def large_text(chars: int = 5_000_000) -> str:
    """About ``chars`` characters of the standard library's modules, concatenated."""
    import sysconfig

    out, n = [], 0
    for path in sorted(Path(sysconfig.get_paths()["stdlib"]).glob("*.py")):
        t = path.read_text("utf-8", errors="replace")
        out.append(t)
        n += len(t)
        if n >= chars:
            break
    return "".join(out)[:chars]


def bench_doc_size(warmup: int = 100, runs: int = 1000, small_chars: int = 20_000,
                   large_chars: int = 5_000_000, backend: str | None = None) -> dict:
    """Keystroke round trips (``didChange`` + completion) in a small and a large file, two servers
    interleaved; in the middle of each file. Returns the timings in seconds."""
    big = large_text(large_chars)
    small = big[:small_chars]
    small = small[: small.rfind("\n") + 1]
    clients = [ReplayClient(None, init_options=_options(backend)) for _ in range(2)]
    try:
        docs = [_Doc(clients[0], "file:///bench/small.py", small, "python", small.count("\n") // 2),
                _Doc(clients[1], "file:///bench/large.py", big, "python", big.count("\n") // 2)]
        for d in docs:
            d.complete(types.Position(line=d.line, character=d.col))
        times: list[list[float]] = [[], []]
        word = "result_value"
        for k in range(warmup + runs):
            for j, d in enumerate(docs):
                t = time.perf_counter()
                d.complete(d.edit(word))
                if k >= warmup:
                    times[j].append(time.perf_counter() - t)
        import numpy as np

        print(f"[doc size] keystroke (didChange + completion), {len(small) / 1e3:.0f} KB file: {pct(times[0])}")
        print(f"[doc size] keystroke (didChange + completion), {len(big) / 1e6:.1f} MB file:  {pct(times[1])}")
        print(f"[doc size] ratio large/small: median {np.median(times[1]) / np.median(times[0]):.2f}x, "
              f"p90 {np.percentile(times[1], 90) / np.percentile(times[0], 90):.2f}x, "
              f"p99 {np.percentile(times[1], 99) / np.percentile(times[0], 99):.2f}x")
        return {"small": times[0], "large": times[1]}
    finally:
        for c in clients:
            c.shutdown()


def _first_start(tree: Path, text: str, keys: int, pause_s: float) -> dict:
    """One first start of ``python -m laya_lsp`` from ``tree``, with empty caches."""
    import shutil
    import subprocess
    import tempfile

    import numpy as np

    from .pipe_client import PipeClient

    for f in (tree / "engine" / "__pycache__").glob("kernels_numba*.nb*"):
        f.unlink()  # numba's own JIT cache: as after an install
    cache = tempfile.mkdtemp(prefix="laya-first-start-")
    c = PipeClient(env={"LAYA_CACHE_DIR": cache, "PYTHONPATH": str(tree)}, cwd=str(tree))
    try:
        start = len(text) - keys
        c.open("file:///bench/first.py", text[:start])
        deadline = time.monotonic() + 120
        while not c.complete()[0]:
            if time.monotonic() > deadline:
                raise RuntimeError(f"the server from {tree} gave no items for 120 s")
            time.sleep(0.01)
        ready = time.perf_counter() - c.t_spawn
        rss0, aot_at, lat = c.rss_mb(), None, []
        for i in range(start, len(text)):
            c.type_to(text[: i + 1])
            lat.append(c.complete()[1])
            if aot_at is None and "laya_kernels_aot" in Path(f"/proc/{c.proc.pid}/maps").read_text():
                aot_at = time.perf_counter() - c.t_spawn
            time.sleep(pause_s)
        llvm = "llvmlite" in Path(f"/proc/{c.proc.pid}/maps").read_text()
        return {"initialize_ms": c.t_initialized * 1e3, "ready_s": ready, "rss_ready": rss0, "rss_end": c.rss_mb(),
                "aot_at_s": aot_at, "llvm": llvm, "median_ms": float(np.median(lat)) * 1e3}
    finally:
        c.shutdown()
        deadline = time.monotonic() + 600
        while (subprocess.run(["pgrep", "-f", f"engine.kernels build {cache}"], capture_output=True).returncode == 0
               and time.monotonic() < deadline):
            time.sleep(0.5)  # the background build of this start: not into the next one's time
        shutil.rmtree(cache, ignore_errors=True)


def bench_first_start(trees: list[Path], rounds: int = 2, keys: int = 600, pause_s: float = 0.05) -> list:
    """First starts of servers from ``trees`` (checkouts of this project), alternated ``rounds``
    times: seconds from process start to the first completion items, resident memory (MB) then
    and after ``keys`` keystrokes ``pause_s`` apart, when the ahead-of-time kernels were loaded
    and whether LLVM (numba's JIT) was ever mapped. Linux only (``/proc``). Deletes each tree's
    numba JIT cache (``engine/__pycache__/kernels_numba*``): the next JIT user there compiles again."""
    text = sample_text("python", 20_000)[: 2000 + keys]
    out = []
    for r in range(rounds):
        for tree in (trees if r % 2 == 0 else trees[::-1]):
            m = _first_start(tree, text, keys, pause_s)
            out.append((str(tree), m))
            aot = f"{m['aot_at_s']:.1f} s" if m["aot_at_s"] is not None else "never"
            print(f"[first start] {tree}: initialize {m['initialize_ms']:.0f} ms, first items {m['ready_s']:.2f} s, "
                  f"RSS {m['rss_ready']:.0f} MB then, {m['rss_end']:.0f} MB after {keys} keys; AOT kernels at {aot}, "
                  f"LLVM mapped: {m['llvm']}; round trip median {m['median_ms']:.2f} ms", flush=True)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m laya_tools.bench_docs")
    ap.add_argument("what", choices=["memory", "docsize", "firststart"])
    ap.add_argument("--trees", nargs="*", default=[],
                    help="firststart: other checkouts to alternate with this one")
    ap.add_argument("--languages", type=int, default=1, help="memory: languages open (1-6)")
    ap.add_argument("--edits", type=int, default=10_000)
    ap.add_argument("--runs", type=int, default=1000)
    ap.add_argument("--backend", help="the server's backend option (numpy, numba, ...); default: the variant's")
    a = ap.parse_args(argv)
    if a.what == "memory":
        bench_memory(a.languages, a.edits, backend=a.backend)
    elif a.what == "firststart":
        bench_first_start([Path(__file__).resolve().parent.parent, *map(Path, a.trees)])
    else:
        bench_doc_size(runs=a.runs, backend=a.backend)
    return 0


if __name__ == "__main__":
    sys.exit(main())
