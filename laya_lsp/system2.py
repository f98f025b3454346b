"""System 2 in the server: a larger model continues the line, off the fast path.

After each completion (or inline completion) is answered, :meth:`System2Runner.request` hands
the cursor's text to a thread of its own (not the engine thread: it holds no MLX state, and
llama.cpp releases the GIL while it computes), where :class:`engine.system2.System2` continues
it to the end of the line, publishing the line as it grows. A newer request stops it between
tokens (latest wins). While the user types the identifier the line was started before (or in),
System 2 re-ranks the fast engine's first items and its own guess from the token distributions
the line kept (:meth:`System2Runner.merge`); while they type along the line, inline completion
shows the rest of it (``laya_lsp.inline``); once they type something else, the next answer
starts a new line. The fast answer never waits for it.

Off unless the ``system2`` option is on; the model file comes from ``laya system2 install`` (or
the ``system2Path`` option). A missing file or library is shown once, and completion goes on
without it.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Callable, Iterable, Sequence
from urllib.parse import unquote, urlparse

from engine.system2 import KEEP_STEPS, Continuation

log = logging.getLogger(__name__)

RANK = 0
"""The guess's place in the list (measured on the tune packages: first beats second and beats
first-only-when-confident, see README)."""
NICE = 10
"""The System 2 thread's nice value on Linux where :data:`SCHEDULING` is ``"nice"`` (or the kernel
refuses ``SCHED_IDLE``), so the fast path's threads win the cores while the user types (with one
llama.cpp thread, as on 2 cores, llama.cpp computes on this thread)."""
SCHEDULING = "idle"
"""How the System 2 thread yields the cores on Linux: ``"idle"``, the ``SCHED_IDLE`` policy (it
runs only on a core no other thread wants, and any thread that wakes takes its core at once), or
``"nice"`` (:data:`NICE`). ``$LAYA_SYSTEM2_SCHED`` overrides it (for side-by-side comparisons).
Idle because the fast engine prepares its candidate pool on a second thread beside the network
(``EngineConfig.overlap_pool``), which under nice 10 sometimes waited for System 2's core: in
process, one prediction every 10 ms with System 2 continuing lines on the other core, p99 4.46-6.00
ms at nice 10 against 2.86-2.92 ms with ``SCHED_IDLE`` (2.55-3.52 ms with System 2 idle; through
the server alone, 5.14-5.47 against 5.94-6.64 ms, and 4.61-4.63 ms with System 2 off; 2026-12-05,
a 2-core machine, Linux 6.18; see README). The cost: on a machine whose cores are all busy with
other work, System 2 waits until one is free."""
MAX_TOKENS = 12
"""Most tokens of a continuation (to the end of the line, ~10-20 ms a token on one core)."""


@dataclass(frozen=True, slots=True)
class Guess:
    """System 2's continuation after a place in one document."""

    uri: str
    continuation: Continuation


class System2Runner:
    """One System 2 model on one thread; at most one guess in flight, the latest request wins."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._job: tuple[int, str, str, str | None] | None = None
        self._seq = 0
        self._asked: tuple[str, str] | None = None  # the latest request's place
        self._result: Guess | None = None
        self._thread: threading.Thread | None = None
        self._closed = False
        self.model = None
        self.error: str | None = None
        """Why System 2 is not running (a missing file or library), once it failed to load."""

    @property
    def enabled(self) -> bool:
        return self._thread is not None and self.error is None

    def start(self, path: str | None, n_threads: int | None = None,
              on_error: Callable[[str], None] | None = None) -> None:
        """Load the model on the System 2 thread (``path`` None: ``laya system2 install``'s file).

        Args:
            on_error: called on the System 2 thread with the reason when the model cannot load.
        """
        if self._thread is not None:
            return
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 2)
        threads = n_threads or max(1, cores // 2)  # half the cores this process may use
        self._thread = threading.Thread(target=self._run, args=(path, threads, on_error),
                                        name="laya-system2", daemon=True)
        self._thread.start()

    def shutdown(self) -> None:
        with self._cond:
            self._closed = True
            self._seq += 1
            self._cond.notify()

    def request(self, uri: str, prefix: str, folders: Iterable[str] = ()) -> None:
        """Continue the text after ``prefix`` (the text before the cursor in ``uri``), unless
        the user is still on the line in hand and some of it is left. ``folders``: the workspace
        folders' URIs, for the file's path in the prompt (:func:`prompt_path`)."""
        if not self.enabled:
            return
        cont = self.continuation_for(uri)
        if cont is not None and cont.rest_at(prefix) is not None:
            return  # the user is still on its line: a new one would only replace it
        with self._cond:
            if self._asked == (uri, prefix):
                return  # already on it (completion and inline completion of one keystroke)
            self._asked = (uri, prefix)
            self._seq += 1
            self._job = (self._seq, uri, prefix, prompt_path(uri, folders))
            self._cond.notify()

    def continuation_for(self, uri: str) -> Continuation | None:
        """The latest continuation (possibly still growing) for ``uri``."""
        res = self._result
        return res.continuation if res is not None and res.uri == uri else None

    def guess_for(self, uri: str, prefix: str) -> str | None:
        """The identifier the continuation has at this place (it starts with what was typed and
        is longer) when System 2 is confident enough of it, or None
        (``engine.system2.confident_word_at``)."""
        from engine.system2 import confident_word_at

        return confident_word_at(self.continuation_for(uri), prefix)

    def merge(self, uri: str, prefix: str, candidates: list) -> list:
        """``candidates`` (``engine.types.Candidate``, best first) as System 2 would have them.

        Where the latest continuation was made before the identifier at the cursor (or in it),
        System 2 re-ranks the fast engine's first ``engine.system2.RERANK_TOP`` items and its own
        guess (``engine.system2.rerank``: the best moves first, the rest keep their order).
        Otherwise the fitting guess goes to :data:`RANK` (``engine.system2.merge``) when System 2
        is sure enough of it (``engine.system2.MIN_WORD_LOGPROB``)."""
        try:
            reranked = self._rerank(uri, prefix, candidates)
        except Exception:  # noqa: BLE001 - a failed re-ranking must not fail the completion
            log.exception("System 2 could not re-rank; its guess alone is used")
            reranked = None
        if reranked is not None:
            return reranked
        guess = self.guess_for(uri, prefix)
        if guess is None:
            return candidates
        from engine.system2 import merge
        from engine.text import word_prefix
        from engine.types import Candidate

        order = merge([c.text for c in candidates], guess, word_prefix(prefix), RANK)
        by_text = {c.text: c for c in candidates}
        top = candidates[0].score if candidates else 0.0
        return [by_text.get(t) or Candidate(t, top, "identifier") for t in order]

    def _rerank(self, uri: str, prefix: str, candidates: list) -> list | None:
        """:meth:`merge`'s re-ranking, or None where System 2 has no scores for this place."""
        from engine.system2 import rerank_at
        from engine.types import Candidate

        if self.model is None:
            return None
        words = [c for c in candidates if c.kind != "line"]
        order = rerank_at(self.model, self.continuation_for(uri), prefix, [c.text for c in words],
                          [c.score for c in words])
        if order is None:
            return None
        if candidates and order[0] == candidates[0].text:
            return candidates
        first = next((c for c in candidates if c.text == order[0]), None)
        if first is None:  # System 2's own guess
            first = Candidate(order[0], candidates[0].score if candidates else 0.0, "identifier")
        return [first] + [c for c in candidates if c.text != order[0]]

    def _run(self, path: str | None, threads: int, on_error) -> None:
        from engine.system2 import System2, System2Error, default_path

        if sys.platform.startswith("linux"):
            _yield_cores(os.environ.get("LAYA_SYSTEM2_SCHED") or SCHEDULING)
        try:
            self.model = System2(path or default_path(), n_threads=threads)
            log.info("System 2: %s loaded (%d threads)", self.model.path, threads)
        except (System2Error, RuntimeError) as e:  # RuntimeError: a ``~user`` that names no user
            self.error = str(e) or type(e).__name__
            log.warning("System 2 is off: %s", e)
            if on_error is not None:
                on_error(self.error)
            return
        while True:
            with self._cond:
                while self._job is None and not self._closed:
                    self._cond.wait()
                if self._closed:
                    return
                seq, uri, prefix, path = self._job
                self._job = None
            def publish(cont: Continuation, seq=seq, uri=uri) -> None:
                if self._seq == seq:  # the line so far: its first identifier is usable already
                    self._result = Guess(uri, cont)

            try:
                cont = self.model.continuation(prefix, max_tokens=MAX_TOKENS, stop=lambda: self._seq != seq,
                                               on_text=publish, path=path, keep_steps=KEEP_STEPS)
            except Exception:  # noqa: BLE001 - a failed guess must not end the thread
                log.exception("System 2 failed")
                continue
            if cont is not None and self._seq == seq:
                self._result = Guess(uri, cont)



def _yield_cores(how: str) -> None:
    """Give the calling thread (Linux: a thread has its own policy and nice value) ``SCHED_IDLE``
    (``how == "idle"``) or :data:`NICE`; the fast path's threads keep theirs. A policy the kernel
    refuses falls back to the nice value, and that failing, the thread runs as it is."""
    tid = threading.get_native_id()
    if how == "idle" and hasattr(os, "SCHED_IDLE"):
        try:
            os.sched_setscheduler(tid, os.SCHED_IDLE, os.sched_param(0))
            return
        except OSError as e:
            log.info("System 2: SCHED_IDLE refused (%s); nice %d instead", e, NICE)
    try:
        os.setpriority(os.PRIO_PROCESS, tid, NICE)
    except OSError:
        pass


AUTO_CLOSED = ("()", "[]", "{}", '""', "''", "``")
"""Changes an editor makes for one key when it closes the pair itself: the cursor is between."""



def after_change(runner: System2Runner, uri: str, doc, changes: Sequence, cursor,
                 folders: Iterable[str]) -> None:
    """After a key that leaves the cursor at a word boundary (a space, a bracket, a line break:
    keys an editor asks no completion for), start System 2's next line there when the user has
    left the one in hand, so that the next word finds it ready: the next key comes ~100-300 ms
    later, the line's first identifier ~20-60 ms after the start.

    Args:
        doc: the open document (``pygls.workspace.TextDocument``), already changed.
        changes: the ``didChange`` content changes; only one ranged change that inserts text
            ending in a non-identifier character counts (an auto-closed pair puts the cursor
            between its two characters); several at once (multiple cursors, a formatter) do not.
        cursor: the end of the last change's text (``documents.position_after_change``).
        folders: the workspace folders' URIs (:func:`prompt_path`).
    """
    from .documents import cursor_context

    if not runner.enabled or len(changes) != 1:
        return
    text = changes[0].text
    if not text or text[-1] == "_" or text[-1].isalnum() or getattr(changes[0], "range", None) is None:
        return
    if text in AUTO_CLOSED:
        cursor = type(cursor)(line=cursor.line, character=cursor.character - 1)
    ctx = cursor_context(doc, cursor)
    if ctx is not None and not ctx.word:
        runner.request(uri, ctx.prefix, folders)


def prompt_path(uri: str, folders: Iterable[str]) -> str | None:
    """The document's path as System 2's prompt names it (``engine.system2.FILE_TOKEN``): relative
    to the workspace folder that holds it (``src/app/models.py``), else its file name; the last
    part of the URI for other schemes (``untitled:Untitled-1``); None when there is none, or the
    URI does not parse. Paths are pygls's (``to_fs_path``: percent-decoded, a Windows drive in
    lower case; ``file://localhost/x`` is ``file:///x``, ``FILE:`` is ``file:``).

    Args:
        uri: the document's URI.
        folders: the workspace folders' URIs (``WorkspaceIndex.folders``' keys).
    """
    from pygls.uris import to_fs_path

    from .workspace_index import local_file_uri

    try:
        local = local_file_uri(uri)
        if local is None:
            name = unquote(urlparse(uri).path).rstrip("/").rsplit("/", 1)[-1]
            return " ".join(name.split()) or None
        doc = PurePosixPath(to_fs_path(local).replace("\\", "/"))
        best: PurePosixPath | None = None
        for folder_uri in folders:
            folder = local_file_uri(folder_uri)
            if folder is None:
                continue
            root = PurePosixPath(to_fs_path(folder).replace("\\", "/"))
            if doc.is_relative_to(root) and doc != root and (best is None or len(root.parts) > len(best.parts)):
                best = root
    except ValueError:  # urlparse: "Invalid IPv6 URL" and the like
        return None
    rel = str(doc.relative_to(best)) if best is not None else doc.name
    return " ".join(rel.split()) or None  # no line break inside the prompt's first line
