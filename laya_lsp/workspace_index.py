"""The workspace as context: index the workspace folders' source files into the engine, per language.

Path of an index: ``initialize`` names the folders; after ``initialized`` a walk
(:func:`.workspace.read_workspace`) reads them on the ``laya-workspace`` thread, then, once the model
is loaded, :func:`engine.workspace_counts.count_workspace` counts them in a niced child process
(:func:`count_in_child`: counting on a thread of the server held the GIL for up to ~240 ms at a
time and slowed every completion while it ran; see that module), killed when the index is
stopped or superseded, ``Predictor.merge_workspace`` merges the counts into
the shipped lexicons on the ``laya-workspace`` thread and ``set_workspace`` installs the result on
the engine thread (a background job: a completion never waits for it).
``didChangeWorkspaceFolders``, ``didSave`` and ``didChangeWatchedFiles`` (registered dynamically
where the client allows) start a full re-index, at most once per :data:`REINDEX_INTERVAL_S`; a
change of folders stops an index under way, a changed file lets it finish and re-indexes after it
(saves every few seconds, as an editor's autosave sends them, stopped every index of a large
workspace before it was installed). Each index shows work-done progress titled "Laya: indexing
workspace" (the replay client's ``wait_for_workspace`` waits for its end). The ``workspaceIndex``
option turns all of it off.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import multiprocessing
import os
import sys
import threading
import traceback
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Iterable

from lsprotocol import types
from pygls.capabilities import get_capability
from pygls.uris import from_fs_path, to_fs_path

from engine.languages import CODE_LANGUAGES, for_path
from engine.workspace_counts import count_workspace

from .config import InitializationOptions
from .loading import create_progress
from .scheduling import Throttle
from .workspace import SKIP_DIRS, WorkspaceFiles, read_workspace

if TYPE_CHECKING:
    from .server import LayaServer

log = logging.getLogger(__name__)

REINDEX_INTERVAL_S = 10.0
"""Most one re-index per this many seconds; changes inside the interval wait for its end (one
trailing re-index for a burst of saves, a branch switch, a formatter run)."""
PROGRESS_TITLE = "Laya: indexing workspace"
WATCH_ID = "laya-workspace-watch"


def local_file_uri(uri: str) -> str | None:
    """``uri`` as pygls's ``to_fs_path`` reads a local file's URI, or None for another scheme:
    the scheme's case does not matter, and ``file://localhost/x`` is ``file:///x`` (RFC 8089;
    pygls made it ``//localhost/x``, no folder here, so such a client's workspace was never
    indexed)."""
    if uri[:5].lower() != "file:":
        return None
    uri = "file:" + uri[5:]
    return "file:///" + uri[17:] if uri[:17].lower() == "file://localhost/" else uri


def _folder_path(uri: str | None) -> str | None:
    """The local path of a ``file:`` URI (:func:`local_file_uri`; None for other schemes, and for
    a URI that names no absolute local path). A path that is not absolute (``file:///C:/x`` on a
    POSIX system is ``c:/x``, ``file:x``) would be read relative to the server's working folder:
    never."""
    uri = local_file_uri(uri) if uri else None
    if uri is None:
        return None
    path = to_fs_path(uri)
    return path if path and os.path.isabs(path) else None


def _real(path: str) -> str:
    """``path``'s real path, or ``path`` where it cannot be resolved (a link swapped as it is
    resolved): for matching paths only, nothing is read through it."""
    try:
        return os.path.realpath(path)
    except OSError:
        return path


def _relative(path: str, root: str) -> str | None:
    """``path`` relative to the folder ``root``, or None where it is not inside it (string
    operations only: no file system access)."""
    try:
        rel = os.path.relpath(path, root)
    except ValueError:  # another drive (Windows)
        return None
    return None if rel.split(os.sep)[0] == os.pardir else rel


def _executor() -> ThreadPoolExecutor:
    return ThreadPoolExecutor(max_workers=1, thread_name_prefix="laya-workspace")


COUNT_POLL_S = 0.1
"""How often the ``laya-workspace`` thread looks for a stop while the child counts."""


def count_in_child(files: WorkspaceFiles, tokenizer, stop: threading.Event):
    """:func:`engine.workspace_counts.count_workspace` in a child process (``spawn``: it inherits
    none of the server's threads or locks), niced; one per index, so what it holds after counting
    (~180 MB for 2.4 MB of source) goes with it.

    Returns:
        The counts, or None when ``stop`` was set meanwhile (the child is killed).

    Raises:
        OSError, ImportError: no child process can start here (the caller counts on its thread).
        ChildFailed: the child died, or ``count_workspace`` raised in it (its traceback in the
            message).
    """
    mp = multiprocessing.get_context("spawn")
    results, child_end = mp.Pipe(duplex=False)
    child_data, data = mp.Pipe(duplex=False)
    child = mp.Process(target=_count_and_send, name="laya-count", daemon=True, args=(child_end, child_data))
    try:
        child.start()
    finally:
        child_end.close()
        child_data.close()
        if child.pid is None:  # did not start
            results.close()
            data.close()
    try:
        try:  # the texts go through a pipe of their own, not ``Process``'s arguments (see the child)
            data.send((files.texts, tokenizer, files.paths))
        except OSError:
            raise ChildFailed(f"the counting process ended with status {child.exitcode}") from None
        finally:
            data.close()
        while not results.poll(COUNT_POLL_S):
            if stop.is_set():
                return None
            if not child.is_alive() and not results.poll(0):
                raise ChildFailed(f"the counting process ended with status {child.exitcode}")
        try:
            ok, value = results.recv()
        except EOFError:
            raise ChildFailed(f"the counting process ended with status {child.exitcode}") from None
        if not ok:
            raise ChildFailed(value)
        return value
    finally:
        if child.is_alive():
            child.kill()
        child.join(5)
        results.close()


class ChildFailed(RuntimeError):
    """The counting child process died, or its count raised."""


def _count_and_send(results, data) -> None:
    """In the child: niced, ended with the server, stdin and stdout on the null device (nothing of
    the server's is to be read or written here); receive ``(texts, tokenizer, paths)`` from
    ``data``, count and send ``(True, counts)`` or ``(False, traceback)`` on ``results``.

    The texts come through ``data`` rather than as the process's arguments: ``spawn`` unpickles
    those before any code of ours runs, so a server that exited while it was still sending them
    left ``_pickle.UnpicklingError: pickle data was truncated`` and its traceback on the server's
    stderr (the editor's log); here a pipe cut short ends the child quietly."""
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
    sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - for the child's lifetime
    try:
        os.nice(10)
    except (AttributeError, OSError):  # Windows, or not allowed
        pass
    threading.Thread(target=_exit_with_server, name="laya-parent-watch", daemon=True).start()
    try:
        texts, tokenizer, paths = data.recv()
    except (EOFError, OSError):  # the server is gone (the length-prefixed message cut short)
        os._exit(0)
    data.close()
    try:
        out = (True, count_workspace(texts, tokenizer, paths))
    except BaseException:  # noqa: BLE001 - reported to the server, which logs it
        out = (False, traceback.format_exc())
    results.send(out)
    results.close()


def _exit_with_server() -> None:
    """In the child: exit as soon as the server is gone, however it ended (killed, or ``exit``,
    which leaves through ``os._exit``): ``multiprocessing.parent_process()``'s sentinel, the end
    of a pipe on POSIX, the server's process handle on Windows."""
    multiprocessing.parent_process().join()
    os._exit(0)


def watch_globs() -> list[str]:
    """Glob patterns for ``didChangeWatchedFiles``: each known language's extensions, .gitignore."""
    exts = sorted({e for lang in CODE_LANGUAGES for e in lang.extensions})
    return [f"**/*{e}" for e in exts] + ["**/.gitignore"]


FOLDER_WATCH_GLOB = "**/*"
FOLDER_WATCH_KIND = types.WatchKind.Create | types.WatchKind.Delete
"""A watcher for folders created and deleted: a client reports a folder deleted, renamed or moved
only as the folder's own event (VS Code sends nothing for the files under it that ``**/*.py``
matches, microsoft/vscode#90746), so a deleted package's names were suggested until the next save.
Change events are not asked for (every write of any file would come); a created or deleted path
that is not a source file re-indexes only when it is such a folder (:meth:`WorkspaceIndex.folder_events`)."""


class WorkspaceIndex:
    """The workspace folders and the index of their files (loop-thread state)."""

    def __init__(self, ls: LayaServer) -> None:
        self.ls = ls
        self.enabled = False
        self.folders: dict[str, str] = {}
        """Folder URI -> local path."""
        self.executor = _executor()
        self._count_on_thread = False  # no child process can start here (logged once)
        self.throttle = Throttle(REINDEX_INTERVAL_S)
        self.generation = 0
        self._stop = threading.Event()
        self._task: asyncio.Task | None = None
        self._pending: str | None = None  # a file change seen while an index ran: re-index after it
        self._watching = False
        self.last: WorkspaceFiles | None = None
        """What the last completed index read, less the texts (for logs and tests)."""
        self._dirs: frozenset[str] = frozenset()
        """The folders (real paths) that held the files of the last index, and the folders above
        them up to the workspace folder: deleting one of them changes the index."""
        self._real: dict[str, str] = {}
        """Folder path -> its real path, as the last walk found it (a folder that is a symbolic
        link: an editor that resolved it reports its files under the real path)."""

    # -- folders -----------------------------------------------------------------------------------
    def configure(self, params: types.InitializeParams, options: InitializationOptions) -> None:
        """Take the folders from ``initialize`` (``workspaceFolders``, else ``rootUri``/``rootPath``)."""
        self.enabled = options.workspace_index
        self.folders.clear()
        self._watching = False
        if self.executor._shutdown:  # a TCP server initialized again after a shutdown
            self.executor = _executor()
        if params.workspace_folders:
            uris = [f.uri for f in params.workspace_folders]
        elif params.root_uri:
            uris = [params.root_uri]
        elif params.root_path:
            uris = [from_fs_path(params.root_path) or ""]
        else:
            uris = []
        self._add(uris)

    def _add(self, uris: Iterable[str]) -> None:
        for uri in uris:
            path = _folder_path(uri)
            if path is not None:
                self.folders[uri] = path
            else:
                log.info("workspace folder %s is not a local folder: not indexed", uri)

    def change_folders(self, event: types.WorkspaceFoldersChangeEvent) -> None:
        for f in event.removed or []:
            self.folders.pop(f.uri, None)
        self._add(f.uri for f in event.added or [])
        self.request("workspace folders changed", supersede=True)
        self._watch()

    def in_workspace(self, uri: str) -> bool:
        """True for a file of a known language (or a ``.gitignore``) inside a folder and outside
        the folders a walk never enters."""
        path = _folder_path(uri)
        if path is None:
            return False
        name = os.path.basename(path)
        if for_path(name) not in CODE_LANGUAGES and name != ".gitignore":
            return False
        return bool(self._roots_holding(path, parents_only=True))

    def _roots_holding(self, path: str, parents_only: bool = False) -> list[tuple[str, str]]:
        """``(folder, path relative to it)`` for each workspace folder holding ``path`` outside
        the folders a walk never enters (the path's own name is not checked with
        ``parents_only``)."""
        out = []
        for root in self.folders.values():
            rel = _relative(path, root) or _relative(path, self._real.get(root, root))
            if rel is None:
                continue
            parts = rel.split(os.sep)
            if not any(p in SKIP_DIRS for p in (parts[:-1] if parents_only else parts)):
                out.append((root, rel))
        return out

    def folder_events(self, changes: list[types.FileEvent]) -> bool:
        """Whether one of these created or deleted paths (no source file's name: a folder, as a
        client reports a folder deleted, renamed or moved) changes the index: a folder deleted
        that held indexed files (or was above them), or a folder created in the workspace that
        holds a source file within its first :data:`FOLDER_PROBE_ENTRIES` entries (a build's new
        output folder holds none yet). Runs on the index's thread (``stat`` and ``scandir``, no
        file is read); at most :data:`MAX_FOLDER_EVENTS` paths are looked at."""
        for change in changes[:MAX_FOLDER_EVENTS]:
            path = _folder_path(change.uri)
            if path is None or change.type == types.FileChangeType.Changed:
                continue
            for root, rel in self._roots_holding(path):
                if change.type == types.FileChangeType.Deleted:
                    if os.path.normpath(os.path.join(_real(root), rel)) in self._dirs:
                        return True
                elif _holds_source(path):
                    return True
        return False

    # -- indexing ----------------------------------------------------------------------------------
    def request(self, reason: str, supersede: bool = False) -> None:
        """Re-index soon (throttled). With ``supersede`` (the folders changed) an index under way
        is stopped; otherwise (a file changed) it finishes, and the re-index follows it. Loop thread."""
        if not self.enabled:
            return
        log.debug("workspace re-index requested: %s", reason)
        if not supersede and self._task is not None and not self._task.done():
            self._pending = reason
            return
        self._pending = None
        if supersede:  # what an index under way reads is stale: stop it (and its counting process) now
            self._stop.set()
        self.throttle.trigger("workspace", self._launch)

    def _launch(self) -> None:
        self.generation += 1
        self._stop.set()  # a walk still running is superseded
        self._stop = threading.Event()
        self._task = asyncio.ensure_future(self._index(self.generation, self._stop, list(self.folders.values())))

    async def _index(self, generation: int, stop: threading.Event, folders: list[str]) -> None:
        progress = await _Progress.start(self.ls)
        outcome = "stopped"
        try:
            loop = asyncio.get_running_loop()
            files, real = await loop.run_in_executor(self.executor, lambda: (
                read_workspace(folders, stop=stop), {f: _real(f) for f in folders}))
            if self._ended(generation, stop):
                outcome = "superseded" if generation != self.generation else "stopped"
                return
            self._real = real
            progress.report(f"counting {files.files} files", 50)
            predictor = await self.ls.model.wait()
            if predictor is None:
                outcome = "model not loaded"
                return
            if self._ended(generation, stop):  # shut down while the model loaded
                return
            counts = await loop.run_in_executor(self.executor, self._count, predictor, files, stop)
            if self._ended(generation, stop):
                outcome = "superseded" if generation != self.generation else "stopped"
                return
            merged = await loop.run_in_executor(self.executor, predictor.merge_workspace, counts)
            if self._ended(generation, stop):
                outcome = "superseded" if generation != self.generation else "stopped"
                return
            await asyncio.wrap_future(self._install(predictor, merged))
            self._dirs = _dirs_above(files.paths, folders)
            files.texts, files.paths = {}, {}  # the counts are built: let the 30 MB of text go
            self.last = files
            outcome = f"{files.files} files, {files.bytes / 1e6:.1f} MB"
            if files.stopped:
                outcome += f" (stopped at {files.stopped})"
            log.info("workspace indexed: %s; skipped %s", outcome, dict(files.skipped) or "nothing")
        except Exception:
            log.exception("workspace index failed")
            outcome = "failed (see the log)"
        finally:
            progress.end(outcome)
            if generation == self.generation and self._pending is not None:
                reason, self._pending = self._pending, None
                asyncio.get_running_loop().call_soon(self.request, f"after the last index: {reason}")

    def _count(self, predictor, files: WorkspaceFiles, stop: threading.Event):
        """``laya-workspace`` thread: the workspace's counts (:func:`count_in_child`; on this thread
        where no child process can start), or None when the index was stopped."""
        if not self._count_on_thread:
            try:
                return count_in_child(files, predictor.tok, stop)
            except (OSError, ImportError) as e:
                log.warning("workspace counting cannot start a child process (%s: %s): counting on a "
                            "thread of the server", type(e).__name__, e)
                self._count_on_thread = True
        return count_workspace(files.texts, predictor.tok, files.paths)

    def _ended(self, generation: int, stop: threading.Event) -> bool:
        """Whether this index must end here: a newer one superseded it, or ``shutdown`` stopped
        it (its executor and the engine thread then take no more work: scheduling more raised
        "cannot schedule new futures after shutdown", logged as a failed index at each shutdown
        during an index)."""
        return generation != self.generation or stop.is_set()

    def _install(self, predictor, merged) -> concurrent.futures.Future:
        """Queue ``set_workspace`` on the engine thread; the future resolves once it has run."""
        done: concurrent.futures.Future = concurrent.futures.Future()

        def install() -> None:
            try:
                predictor.set_workspace(merged)
            finally:
                done.set_result(None)

        self.ls.bridge.submit_background(install)
        return done

    def start(self) -> None:
        """After ``initialized``: the first index and the file-watcher registration. Loop thread."""
        if not self.enabled:
            log.info("workspace index off (workspaceIndex: false)")
            return
        if self.folders:
            self.request("initialized")
            self._watch()

    def set_enabled(self, enabled: bool) -> None:
        """The ``workspaceIndex`` option changed while running. On: index now (and watch the
        files). Off: stop an index under way and drop the workspace's names from the model (a
        background engine job). Loop thread."""
        if enabled == self.enabled:
            return
        self.enabled = enabled
        if enabled:
            self.throttle.cancel("workspace")  # index at once, not at the end of the last interval
            if self.folders:
                # supersede: an index still under way was stopped when the option went off; a plain
                # request would wait for it, and a superseded index runs no follow-up (off then on
                # during an index left the workspace unindexed)
                self.request("workspaceIndex turned on", supersede=True)
                self._watch()
            return
        self.generation += 1  # an index under way ends at its next check and installs nothing
        self._stop.set()
        self._stop = threading.Event()
        self._pending = None
        self.throttle.cancel("workspace")
        self.last = None
        self._dirs = frozenset()
        self.ls.bridge.submit_background(_drop_workspace, self.ls)

    def _watch(self) -> None:
        """Ask the client to send ``didChangeWatchedFiles`` (once, and only with a folder to watch)."""
        if (self.enabled and self.folders and not self._watching
                and get_capability(self.ls.client_capabilities,
                                   "workspace.did_change_watched_files.dynamic_registration", False)):
            self._watching = True
            asyncio.ensure_future(self._register_watchers())

    async def _register_watchers(self) -> None:
        options = types.DidChangeWatchedFilesRegistrationOptions(
            watchers=[types.FileSystemWatcher(glob_pattern=g) for g in watch_globs()]
            + [types.FileSystemWatcher(glob_pattern=FOLDER_WATCH_GLOB, kind=FOLDER_WATCH_KIND)])
        try:
            await self.ls.client_register_capability_async(types.RegistrationParams(registrations=[
                types.Registration(id=WATCH_ID, method=types.WORKSPACE_DID_CHANGE_WATCHED_FILES,
                                   register_options=options)]))
        except Exception as e:  # noqa: BLE001 - the client may refuse; didSave still re-indexes
            log.info("client/registerCapability for file watching failed: %s", e)

    def shutdown(self) -> None:
        self.enabled = False
        self._stop.set()
        self.executor.shutdown(wait=False, cancel_futures=True)  # a count under way kills its child


MAX_FOLDER_EVENTS = 64
"""Most folder-like created or deleted paths of one notification that are looked at."""
FOLDER_PROBE_ENTRIES = 200
"""Entries of a created folder looked at for a source file (breadth first)."""


def _holds_source(path: str) -> bool:
    """Whether ``path`` is a folder (not a link) with a file of a known language among its first
    ``FOLDER_PROBE_ENTRIES`` entries (folders the walk skips are not entered)."""
    try:
        if os.path.islink(path) or not os.path.isdir(path):
            return False
        queue, seen = [path], 0
        while queue and seen < FOLDER_PROBE_ENTRIES:
            with os.scandir(queue.pop(0)) as it:
                for entry in it:
                    seen += 1
                    if seen > FOLDER_PROBE_ENTRIES:
                        break
                    if entry.is_dir(follow_symlinks=False):
                        if entry.name not in SKIP_DIRS:
                            queue.append(entry.path)
                    elif for_path(entry.name) in CODE_LANGUAGES:
                        return True
    except (OSError, ValueError):
        return False
    return False


def _dirs_above(paths: dict[str, list[str]], folders: list[str]) -> frozenset[str]:
    """The folders of the indexed files (real paths, as the walk gives them) and those above them
    up to their workspace folder."""
    roots = {os.path.realpath(f) for f in folders}
    roots = {r for r in roots if not any(o != r and r.startswith(o.rstrip(os.sep) + os.sep) for o in roots)}
    out: set[str] = set()
    for group in paths.values():
        for p in group:
            d = os.path.dirname(p)
            while d not in out:
                out.add(d)
                if d in roots or os.path.dirname(d) == d:
                    break
                d = os.path.dirname(d)
    return frozenset(out)


def _drop_workspace(ls: LayaServer) -> None:
    """Engine thread: the model forgets the workspace's names (after any install queued earlier)."""
    if ls.model.predictor is not None:
        ls.model.predictor.set_workspace({})


class _Progress:
    """Work-done progress for one index, when the client supports it (else log lines only)."""

    def __init__(self, ls: LayaServer, token: str | None) -> None:
        self.ls, self.token = ls, token

    @classmethod
    async def start(cls, ls: LayaServer) -> _Progress:
        token = None
        if ls.client_supports_progress:
            token = f"laya-workspace-{uuid.uuid4()}"
            if await create_progress(ls, token):  # else indexing goes on without progress
                ls.work_done_progress.begin(token, types.WorkDoneProgressBegin(
                    title=PROGRESS_TITLE, message="reading files", percentage=0, cancellable=False))
            else:
                token = None
        return cls(ls, token)

    def report(self, message: str, percentage: int) -> None:
        if self.token:
            self.ls.work_done_progress.report(self.token, types.WorkDoneProgressReport(
                message=message, percentage=percentage))

    def end(self, message: str) -> None:
        if self.token:
            self.ls.work_done_progress.end(self.token, types.WorkDoneProgressEnd(message=message))


# --- handlers (registered in server.create_server) -----------------------------------------------

def did_change_workspace_folders(ls: LayaServer, params: types.DidChangeWorkspaceFoldersParams) -> None:
    ls.workspace_index.change_folders(params.event)


def did_save(ls: LayaServer, params: types.DidSaveTextDocumentParams) -> None:
    if ls.workspace_index.in_workspace(params.text_document.uri):
        ls.workspace_index.request(f"saved {params.text_document.uri}")


def did_change_watched_files(ls: LayaServer, params: types.DidChangeWatchedFilesParams) -> None:
    """A source file (or a ``.gitignore``) changed in the workspace: re-index. Other paths come from
    the folder watcher (created or deleted): those named like a folder (no file extension) are
    checked off the event loop (:meth:`WorkspaceIndex.folder_events`). A build's storm of events
    costs a string test each here: 10,000 events took ~1 s of the loop when every one was parsed
    and ``stat``-ed."""
    index = ls.workspace_index
    if not index.enabled:
        return
    folders = []
    for c in params.changes:
        name = c.uri.rstrip("/").rsplit("/", 1)[-1]
        if name == ".gitignore" or for_path(name) in CODE_LANGUAGES:
            if index.in_workspace(c.uri):
                index.request(f"{c.uri} changed ({len(params.changes)} changes)")
                return
        elif c.type != types.FileChangeType.Changed and "." not in name[1:] and len(folders) < MAX_FOLDER_EVENTS:
            folders.append(c)
    if folders:
        asyncio.ensure_future(_check_folders(index, folders))


async def _check_folders(index: WorkspaceIndex, changes: list[types.FileEvent]) -> None:
    try:
        if await asyncio.get_running_loop().run_in_executor(index.executor, index.folder_events, changes):
            index.request(f"a folder created or deleted, e.g. {changes[0].uri}")
    except RuntimeError:  # the executor shut down (shutdown, exit)
        pass
