"""Replay typing into the server over stdio, as an editor would (the demo, eval and benchmark).

The client is pygls's ``LanguageClient`` driving ``python -m laya_lsp``: ``didOpen`` with an empty
document, then one incremental ``didChange`` per keystroke and a ``textDocument/completion`` at the
cursor. Items are ranked as a client ranks them: keep those whose ``filterText`` starts with the
typed prefix, then order by ``sortText``. Rest-of-line items (``detail`` "Laya: rest of line") are
shown in the demo but left out of the identifier metrics.
"""

from __future__ import annotations

import asyncio
import os
import sys
import threading
import time
from pathlib import Path

from lsprotocol import types
from pygls.lsp.client import LanguageClient

from laya_lsp.completion import LINE_DETAIL

from .pipe_client import changed_from, rss_mb, utf16_len

from engine.text import word_prefix


def is_line_item(item: types.CompletionItem) -> bool:
    """A rest-of-line continuation (not an identifier or a prose word)."""
    return item.detail == LINE_DETAIL


class ReplayClient:
    """A synchronous facade over an async pygls client running in its own thread."""

    def __init__(self, model: str | None = None, init_options: dict | None = None,
                 root_uri: str | None = None):
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.client = LanguageClient("laya-replay", "0.1")
        self.messages: list[str] = []
        self.client.feature(types.WINDOW_SHOW_MESSAGE)(lambda p: self.messages.append(p.message))
        self.client.feature(types.WINDOW_LOG_MESSAGE)(lambda p: None)
        opts = dict(init_options or {})
        if model:
            opts["modelPath"] = str(model)
        self.t_spawn = time.perf_counter()
        self._run(self.client.start_io(sys.executable, "-m", "laya_lsp",
                                       env={**os.environ, "HF_HUB_OFFLINE": "1"}))
        self.progress_done: set = set()
        self._progress_titles: dict[str, str] = {}
        self.client.feature(types.PROGRESS)(lambda p: self._on_progress(p))  # pygls tags the function: no bound methods
        self.client.feature(types.WINDOW_WORK_DONE_PROGRESS_CREATE)(lambda p: None)
        folders = [types.WorkspaceFolder(uri=root_uri, name="workspace")] if root_uri else None
        result = self._run(self.client.initialize_async(types.InitializeParams(
            capabilities=types.ClientCapabilities(
                window=types.WindowClientCapabilities(work_done_progress=bool(root_uri))),
            initialization_options=opts,
            root_uri=root_uri,
            workspace_folders=folders,
        )))
        self.t_initialized = time.perf_counter() - self.t_spawn
        self.server_info = result.server_info
        self.client.initialized(types.InitializedParams())
        self.uri = None
        self.text = ""
        self.version = 0

    def _on_progress(self, params: types.ProgressParams) -> None:
        """Record the titles of work-done progress that ended (the server's ``$/progress``)."""
        value = params.value
        get = value.get if isinstance(value, dict) else (lambda k, v=value: getattr(v, k, None))
        if get("kind") == "begin":
            self._progress_titles[str(params.token)] = get("title") or ""
        elif get("kind") == "end":
            self.progress_done.add(self._progress_titles.get(str(params.token), ""))

    def wait_for_workspace(self, timeout: float = 120) -> bool:
        """Wait until the server reports the workspace index done (work-done progress whose
        title mentions the workspace); False on timeout."""
        t = time.perf_counter()
        while time.perf_counter() - t < timeout:
            if any("workspace" in (d or "").lower() for d in self.progress_done):
                return True
            time.sleep(0.05)
        return False

    def _run(self, coro, timeout: float = 60):
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    @property
    def pid(self) -> int | None:
        proc = getattr(self.client, "_server", None)
        return getattr(proc, "pid", None)

    def rss_mb(self) -> float:
        """Resident memory of the server process, in MB (``laya_tools.pipe_client.rss_mb``)."""
        return rss_mb(self.pid)

    def open(self, uri: str, text: str = "", language: str = "python") -> None:
        self.uri, self.text, self.version = uri, text, 1
        self.client.text_document_did_open(types.DidOpenTextDocumentParams(
            text_document=types.TextDocumentItem(uri=uri, language_id=language, version=1, text=text)))

    def close(self) -> None:
        self.client.text_document_did_close(types.DidCloseTextDocumentParams(
            text_document=types.TextDocumentIdentifier(uri=self.uri)))

    def _end(self, text: str) -> types.Position:
        line = text.count("\n")
        last = text[text.rfind("\n") + 1 :]
        return types.Position(line=line, character=utf16_len(last))

    def type_to(self, text: str) -> None:
        """Bring the document to ``text`` with one incremental change (append, or delete back)."""
        if text == self.text:
            return
        n = changed_from(self.text, text)
        start = self._end(self.text[:n])
        end = self._end(self.text)
        self.version += 1
        self.client.text_document_did_change(types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=self.uri, version=self.version),
            content_changes=[types.TextDocumentContentChangePartial(
                range=types.Range(start=start, end=end), text=text[n:])]))
        self.text = text

    def complete(self) -> tuple[list[types.CompletionItem], float]:
        """Completion at the end of the document: ``(items ranked as a client ranks them, seconds)``."""
        pos = self._end(self.text)
        t = time.perf_counter()
        res = self._run(self.client.text_document_completion_async(types.CompletionParams(
            text_document=types.TextDocumentIdentifier(uri=self.uri), position=pos)))
        dt = time.perf_counter() - t
        items = res.items if isinstance(res, types.CompletionList) else (res or [])
        typed = word_prefix(self.text)
        items = [i for i in items if (i.filter_text or i.label).startswith(typed)]
        items.sort(key=lambda i: i.sort_text or i.label)
        return items, dt

    def shutdown(self) -> None:
        try:
            self._run(self.client.shutdown_async(None), timeout=10)
            self.client.exit(None)
            self._run(self.client.stop(), timeout=10)
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)


WARM_REQUESTS = 10
"""Completions per server left out of the latencies (the first waits for the model to load)."""


def evaluate_through_server(files, model=None, workspace: bool = False, gap_ms: float = 0.0,
                            init_options: dict | None = None, latencies: list | None = None):
    """The ``laya_tools.evaluate`` protocol with every completion asked over LSP stdio.

    Args:
        files: ``laya_tools.evaluate.EvalFile`` list.
        workspace: give each file's package (less the typed files) to the server as its workspace
            folder (a temporary copy), one server per package.
        gap_ms: the typist's pause after each answer before the next keystroke (0: back to back;
            150 is ~7 keys a second), in which the server's idle-time work (System 2, windows
            left by a jump, the document's n-grams) can run. With a pause, the keys typed
            between two completions (the spaces and brackets between identifiers) are sent as
            two changes, the last key a pause after the rest, as an editor sends each key.
        init_options: ``initializationOptions`` for the server (e.g. ``{"system2": true}``).
        latencies: if given, each completion's round trip (ms) is appended to it.

    Returns:
        ``({language: (engine score, baseline score)}, seconds)``.
    """
    import shutil
    import tempfile

    from .evaluate import Score, WordCompletion, score_file, workspace_files

    scores: dict = {}
    t0 = time.perf_counter()
    groups: dict = {}
    for f in files:  # one server (and workspace) per package in workspace mode, else one in all
        groups.setdefault(f.package_dir if workspace else None, []).append(f)
    typed = {f.name for f in files}
    for pkg_dir, group in groups.items():
        tmp = None
        opts = init_options
        root = None
        if pkg_dir is not None:
            tmp = tempfile.mkdtemp(prefix="laya-ws-")
            for rel, text in workspace_files(group[0], typed):
                dst = Path(tmp) / rel
                dst.parent.mkdir(parents=True, exist_ok=True)
                dst.write_text(text, "utf-8")
            root = Path(tmp).as_uri()
        c = ReplayClient(model, init_options=opts, root_uri=root)
        asked = [0]
        try:
            if root is not None:
                c.wait_for_workspace()
            for f in group:
                eng, base = scores.setdefault(f.language, (Score(), Score()))
                base_dir = Path(tmp) if tmp else Path("/heldout")
                c.open((base_dir / f.name.split("/", 1)[1]).as_uri(), "", _LANGUAGE_IDS.get(f.language, f.language))

                def ask(prefix):
                    if gap_ms and len(prefix) > len(c.text) + 1 and prefix.startswith(c.text):
                        # the keys since the last answer: all but the last, a pause, the last
                        c.type_to(prefix[:-1])
                        time.sleep(gap_ms / 1000)
                    c.type_to(prefix)
                    items, secs = c.complete()
                    asked[0] += 1
                    if latencies is not None and asked[0] > WARM_REQUESTS:
                        latencies.append(secs * 1000)
                    if gap_ms:
                        time.sleep(gap_ms / 1000)
                    return [i.label for i in items if not is_line_item(i)]

                score_file(f.text, ask, eng, WordCompletion(), base, language=f.language)
                c.close()
        finally:
            for message in c.messages:  # what the server showed the user (e.g. an option it refused)
                print(f"server: {message}", file=sys.stderr)
            c.shutdown()
            if tmp:
                shutil.rmtree(tmp, ignore_errors=True)
    return scores, time.perf_counter() - t0


_LANGUAGE_IDS = {"c": "c"}
"""LSP ``languageId`` for each engine language whose id differs from its name (none do today)."""


def pct(xs) -> str:
    import numpy as np

    a = np.asarray(xs) * 1e3
    return (f"median {np.median(a):6.3f} ms  p90 {np.percentile(a, 90):6.3f} ms  "
            f"p99 {np.percentile(a, 99):6.3f} ms  (n={len(a)})")


def bench_round_trip(text: str, warmup: int = 100, runs: int = 1000, model=None, edits: int = 10000) -> dict:
    """LSP completion round trips (seed method), start-up times and resident memory over edits.

    Timed with the lean client (``laya_tools.pipe_client.PipeClient``: one thread, blocking pipe
    I/O, ``json.loads``), as an editor's native JSON-RPC client sees the server.

    Returns:
        ``{"typing": [seconds per round trip], "rss_mb": [every 2000 edits], "initialize_ms",
        "first_completion_ms"}``.
    """
    import numpy as np

    from .pipe_client import PipeClient

    c = PipeClient(model)
    try:
        c.open("file:///bench/typing.py", text[:2000])
        items, _ = c.complete()  # waits for the model to load
        first = time.perf_counter() - c.t_spawn
        print(f"\n[LSP over stdio] initialize answered {c.t_initialized * 1e3:.0f} ms after spawn; "
              f"first completion {first * 1e3:.0f} ms after spawn ({len(items)} items)")
        times = []
        i = 2000
        for k in range(warmup + runs):
            i += 1
            if i > len(text):
                i = 2000
            c.type_to(text[:i])
            _, dt = c.complete()
            if k >= warmup:
                times.append(dt)
        print(f"  completion round trip, typing forward: {pct(times)}")
        # Memory: edits that keep the document's size steady (type 400 characters forward, then
        # delete them one by one, repeatedly), a completion every 4 edits.
        base = i
        rss = [c.rss_mb()]
        step = 1
        for done in range(1, edits + 1):
            i += step
            if i >= min(len(text), base + 400) or i <= base:
                step = -step
            c.type_to(text[:i])
            if done % 4 == 0:
                c.complete()
            if done % 2000 == 0:
                rss.append(c.rss_mb())
        print(f"  server resident memory over {edits} edits (MB, every 2000): "
              + " ".join(f"{r:.0f}" for r in rss) + f"; max {np.nanmax(rss):.0f}")
    finally:
        c.shutdown()
    return {"typing": times, "rss_mb": rss, "initialize_ms": c.t_initialized * 1e3, "first_completion_ms": first * 1e3}


def before_cursor(text: str, cursor: int, width: int = 40) -> str:
    """The last ``width`` characters before ``cursor`` on one line, then ``|`` for the cursor.

    Line breaks show as ``\\n`` (the blanks around them dropped, indentation included) and other
    runs of blanks shrink to one space, so a cursor at the start of a line still shows what came
    before it (the end of the previous line).
    """
    import re

    head = text[max(0, cursor - 4 * width) : cursor]
    head = re.sub(r"[ \t]*\n[ \t]*", r"\\n", head)  # "\n" + indentation -> a visible \n
    head = re.sub(r"[ \t]+", " ", head)
    return head[-width:] + "|"


def ranked(items: list[dict], typed: str) -> list[dict]:
    """Completion items (JSON objects) as a client shows them for the ``typed`` prefix: those whose
    ``filterText`` (else ``label``) starts with it, ordered by ``sortText`` (else ``label``)."""
    items = [i for i in items if (i.get("filterText") or i["label"]).startswith(typed)]
    return sorted(items, key=lambda i: i.get("sortText") or i["label"])


def demo(path: str | None = None, model=None, every: int = 40, limit_chars: int = 12000) -> int:
    """Type a real file into the server and print what it suggests, with latencies.

    The round trips are timed by the lean client of ``laya_tools.pipe_client`` (blocking pipe
    I/O, ``json.loads``), as an editor's native JSON-RPC client sees the server, like ``laya
    bench``: pygls's own client (an asyncio thread, cattrs structuring every item) added its own
    cost to the tail (the demo's file, two servers side by side: 14.2 against 11.0 ms at p99).
    """
    import inspect
    import pygls.workspace.text_document as held_out  # a dependency that is in no corpus split

    from .evaluate import targets as identifier_targets
    from .pipe_client import PipeClient

    from engine.languages import for_path

    path = path or inspect.getsourcefile(held_out)
    text = Path(path).read_text("utf-8").replace("\r\n", "\n")
    if len(text) > limit_chars:  # cut at a line end, or mid-line when the first line is longer
        cut = text.rfind("\n", 0, limit_chars) + 1
        text = text[: cut or limit_chars]
    language = for_path(path).name
    language = language if language != "unknown" else "python"
    if not identifier_targets(text, language):
        print(f"laya demo: {path} has no identifiers to type", file=sys.stderr)
        return 2
    from engine.kernels import local_build_state

    first_start = local_build_state() not in (None, "built")  # the server starts on NumPy
    c = PipeClient(model)
    version = (c.server_info or {}).get("version", "")
    print(f"laya-lsp {version}: initialize answered in {c.t_initialized * 1e3:.0f} ms; typing {path} "
          f"({len(text)} chars)")
    print(f"every {every}th identifier: the text before the cursor (\\n: a line break, indentation "
          f"dropped), then the first 3 items once the identifier is first and that keystroke's round trip")
    times, shown, saved, total = [], 0, 0, 0
    try:
        c.open(Path(path).resolve().as_uri(), language=language)
        targets = identifier_targets(text, language)
        for n, (start, word) in enumerate(targets):
            total += len(word)
            for k in range(len(word)):
                c.type_to(text[: start + k])
                items, dt = c.complete()
                times.append(dt)
                top = [i["label"] for i in ranked(items, word_prefix(c.text)) if i.get("detail") != LINE_DETAIL]
                if top and top[0] == word:
                    saved += len(word) - k - 1
                    if n % every == 0:
                        print(f"  {before_cursor(text, start + k):42s} -> {', '.join(top[:3]):48s} {dt * 1e3:5.1f} ms")
                        shown += 1
                    break
            else:
                if n % every == 0:
                    print(f"  {before_cursor(text, start):42s} -> ({word!r} was never the first item: typed in full)")
        c.type_to(text)
    finally:
        c.shutdown()
    print(f"\n{len(times)} completion requests: round trip {pct(times)}")
    if first_start:
        print("(a first start: the numba kernels were being built in the background meanwhile, so the "
              "NumPy backend answered at first, more slowly; the next start uses them)")
    print(f"identifier keystrokes saved (accepting the first item with one key): {100 * saved / max(1, total):.1f}%")
    return 0
