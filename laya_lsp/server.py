"""The language server: typed state, lifecycle and document handlers, feature registration.

Feature handlers live in their own modules (:mod:`.completion`, :mod:`.inline`); each takes the
server as its first parameter (named ``ls``, which is how pygls injects it), so a test can call
it directly.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import select
import time
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import unquote

from lsprotocol import types
from pygls.capabilities import get_capability
from pygls.lsp.server import LanguageServer
from pygls.workspace import TextDocument

from engine import languages

from . import (__version__, completion, http_service, inline, logging_setup, predictions, protocol,
               settings_change, system2, workspace_index)
from .config import InitializationOptions, parse_options
from .documents import clamp_position, document_head, normalize_newlines, position_after_change
from .inline_model import InlineModel
from .loading import ModelHandle, report_loading
from .scheduling import EngineBridge, Sequencer, Throttle
from .text_document import LspTextDocument

log = logging.getLogger(__name__)

OBSERVE_INTERVAL_S = 0.25
"""Most one document refresh of the engine's online n-grams per document per this many seconds.
Once a second (until 2026-12-02) left a fast typist's or a paste's last second of text out of the
document's n-grams: through the server, typing back to back, the eval packages (6 files x 8,000
characters) saved Go 49.2 -> 50.5%, JavaScript 50.5 -> 51.8%, Python 57.6 -> 58.4% with 0.25 s,
the round trips the same (side by side, ``python -m laya_tools.bench_jumps typing --runs 3000``:
p99 9.48 / 8.40 against 9.72 / 8.81 ms in two runs)."""
OBSERVE_CHARS_PER_INTERVAL = 25_000
"""A larger document is refreshed less often: at most every ``OBSERVE_INTERVAL_S`` per this many
characters counted (400K characters: every 4 s), so counting (~0.5 us a character, holding the
GIL, pausing while a request is on the engine thread) costs about the same share of the CPU
whatever the file's size, at most ~5% of one core while the document changes (a keystroke in a
5 MB file measured within 1.2-2.5x of one in a 20 KB file at p99 with a refresh every 4 s)."""
COUNTING_PAUSES = os.environ.get("LAYA_COUNTING_PAUSES", "1") != "0"
"""A document count waits while a request is on the engine thread (``LAYA_COUNTING_PAUSES=0``:
off, for side-by-side benchmarks)."""
MAX_COUNTING_PAUSE_S = 0.05
"""Longest a document count waits for requests at one pause (typing never starves it)."""
MAX_OBSERVE_CHARS = 400_000
"""Most characters of a document handed to ``observe_document`` (the start of the file): counting
2 M characters blocked the engine thread ~430 ms; 400 K costs under ~100 ms, once a second."""


class LayaServer(LanguageServer):
    """The Laya language server and its state (options, engine bridge, model, latest-wins)."""

    def __init__(self, *, cli_log_level: str | None = None) -> None:
        super().__init__("laya-lsp", __version__, protocol_cls=protocol.LayaProtocol,
                         text_document_sync_kind=types.TextDocumentSyncKind.Incremental)
        self.options = InitializationOptions()
        """The options in force (``initializationOptions``, then settings changes that apply live)."""
        self.option_problems: list[str] = []
        self.settings = settings_change.SettingsState()
        """What the client asked for, for ``workspace/didChangeConfiguration``."""
        self.cli_log_level = cli_log_level
        """``--log-level`` from the command line; overrides the ``logLevel`` option when set."""
        self.sequencer = Sequencer()
        self.bridge = EngineBridge()
        self.model = ModelHandle()
        self.observer = Throttle(OBSERVE_INTERVAL_S)
        self.counting = ThreadPoolExecutor(max_workers=1, thread_name_prefix="laya-count")
        """Builds documents' n-grams off the engine thread (``Predictor.build_document``)."""
        self.workspace_index = workspace_index.WorkspaceIndex(self)
        self.typing_at: dict[str, types.Position] = {}
        """Per document, where its last edit left the cursor (client units): the word there is
        left out of the document's n-gram until the user moves on (it is likely half typed)."""
        self.prefetch_timer: asyncio.TimerHandle | None = None
        """The pending ``predictions.prefetch_after_change`` of the latest edit."""
        self.http: http_service.HttpSettings | None = None
        """The in-process HTTP completion service to start (``laya-lsp --http``), if any."""
        self.http_runner = None
        self.http_task: asyncio.Future | None = None
        self.inline_model = InlineModel()
        """An mlx-lm model folder given as ``modelPath`` writes inline completion's ghost text."""
        self.prose_model = ModelHandle()
        """The typing variant's model for prose documents (the ``prose`` option), loaded when the
        first one is opened or completed."""
        self._prose_reported = False
        self.system2 = system2.System2Runner()
        """The optional slow model (the ``system2`` option), on its own thread."""
        self.input_fd: int | None = None
        """The file descriptor the requests are read from (stdin as a pipe), where known: a
        document count also waits while bytes are waiting in it (``_yield_to_requests``)."""
        self._opens = itertools.count(1)
        self.opened: dict[str, int] = {}
        """Open documents -> the number of their ``didOpen``; the engine thread checks it before
        installing a document's n-grams, so a ``didClose`` that lands at any moment wins."""

    def exit(self, code: int) -> None:
        """End the process with ``code`` (the ``exit`` notification; tests replace this)."""
        from . import cli

        cli.exit_cleanly(self, code)

    def report_server_error(self, error, source) -> None:
        protocol.report_server_error(self, error, source)

    @property
    def client_supports_progress(self) -> bool:
        return bool(get_capability(self.client_capabilities, "window.work_done_progress", False))

    @property
    def client_supports_insert_replace(self) -> bool:
        return bool(get_capability(
            self.client_capabilities,
            "text_document.completion.completion_item.insert_replace_support", False))

    def open_document(self, uri: str) -> TextDocument | None:
        """The synced document, or None when the client has not opened it (never read from disk)."""
        return self.workspace.text_documents.get(unquote(uri))

    def uses_prose_model(self, language: str) -> bool:
        """True when documents of ``language`` are served by the typing variant's model (starting
        its load on first use)."""
        if language != languages.PROSE.name or not self.options.prose or self.model.task is None:
            return False
        if self.prose_model.task is None:
            self.prose_model.start_variant(self, "typing", self.options.backend)
        return True

    async def predictor_for(self, language: str):
        """The loaded predictor for a document of ``language`` (None: no model could be loaded).

        Prose gets the typing variant's model; when that cannot load, the code model (the reason
        is shown once, as a warning)."""
        if self.uses_prose_model(language):
            predictor = await self.prose_model.wait()
            if predictor is not None:
                return predictor
            if not self._prose_reported:
                self._prose_reported = True
                self.window_show_message(types.ShowMessageParams(
                    type=types.MessageType.Warning,
                    message=f"Laya: the prose model could not be loaded ({self.prose_model.error}); "
                            "prose documents get the code model"))
        return await self.model.wait()

    def loaded_predictor_for(self, language: str):
        """The predictor that serves ``language`` now, if loaded (None while it is loading)."""
        if self.uses_prose_model(language):
            if self.prose_model.loaded is None or not self.prose_model.loaded.done():
                return None
            if self.prose_model.predictor is not None:
                return self.prose_model.predictor
        return self.model.predictor

    def observe(self, uri: str) -> None:
        """Refresh the engine's online n-gram for ``uri`` from its current text (low priority)."""
        doc = self.open_document(uri)
        if doc is None:
            return
        cursor = self.typing_at.get(uri)
        at = clamp_position(doc, cursor) if cursor is not None else None
        text = normalize_newlines(document_head(doc, MAX_OBSERVE_CHARS, typing_at=at))
        language = languages.for_document(doc.language_id, uri).name
        predictor = self.loaded_predictor_for(language)
        if predictor is None:
            return  # its model is loading: the load observes every open document when done
        # Counting runs on a helper thread (it touches no model state); only installing the
        # result is an engine job, so a large file never holds the engine thread for long.
        pause = self._yield_to_requests if COUNTING_PAUSES else None
        future = self.counting.submit(predictor.build_document, text, language, pause)
        opened = self.opened.get(uri)
        future.add_done_callback(lambda f: self._install(uri, f, predictor, language, opened))

    def _yield_to_requests(self) -> None:
        """Counting thread: wait (up to :data:`MAX_COUNTING_PAUSE_S`) while a request is on the
        engine thread or a completion request is being answered at all (read, its edit ranges
        and items built, its answer serialized and written: ``LayaProtocol.answering``), so
        the two never share the GIL (a 20 KB file's count holds it ~12 ms). Waiting only for the
        engine job left the event loop's part to share it: typing after jumps back to back, the
        requests that overlapped a count took 6-12 ms where the engine job took 0.2-0.4 ms
        (2026-12-03, traced in the server). It also waits while the next message is still
        waiting to be read (:attr:`input_fd`): on two cores, reading it competed with the count
        for the GIL, and a completion that came during a count was read 1.2 ms late at the
        median, 4.5 ms at p90, against 0.6 / 0.8 ms for the others (typing with 60 ms pauses)."""
        deadline = time.monotonic() + MAX_COUNTING_PAUSE_S
        while ((self.bridge.busy() or self.protocol.answering() or self._input_waiting())
               and time.monotonic() < deadline):
            time.sleep(0.0005)

    def _input_waiting(self) -> bool:
        """Whether bytes wait in :attr:`input_fd` (a ``select`` with no timeout, ~2 us)."""
        fd = self.input_fd
        if fd is None:
            return False
        try:
            return bool(select.select([fd], [], [], 0)[0])
        except (OSError, ValueError):  # closed meanwhile
            return False

    def _install(self, uri: str, future, predictor, language: str, opened: int | None = None) -> None:
        if future.cancelled() or future.exception() is not None:
            if not future.cancelled():
                log.error("counting %s failed: %s", uri, future.exception())
            return
        self.bridge.submit_background(_install_job, self, uri, predictor, future.result(), language, opened)


def _install_job(ls: LayaServer, uri: str, predictor, doc, language: str, opened: int | None) -> None:
    # checked here, on the engine thread, where the forget job of a didClose also runs: a check
    # before queueing could pass just before the close and install the closed document after it
    if opened is not None and ls.opened.get(uri) == opened:
        predictor.set_document(uri, doc, language)


def _forget_job(ls: LayaServer, uri: str) -> None:
    for handle in (ls.model, ls.prose_model):
        if handle.predictor is not None:
            handle.predictor.forget_document(uri)


# --- lifecycle ----------------------------------------------------------------------------------

def on_initialize(ls: LayaServer, params: types.InitializeParams) -> None:
    ls.options, ls.option_problems = parse_options(params.initialization_options)
    ls.settings.started(ls.options, params.initialization_options)
    logging_setup.set_level(ls.cli_log_level or ls.options.log_level)
    logging_setup.attach(ls, ls.cli_log_level or ls.options.log_level)
    for problem in ls.option_problems:
        log.warning("initializationOptions: %s", problem)
    if ls.options.enable_inline and types.TEXT_DOCUMENT_INLINE_COMPLETION not in ls.protocol.fm.features:
        # registered once per process (a feature cannot be registered twice)
        ls.feature(types.TEXT_DOCUMENT_INLINE_COMPLETION, inline.OPTIONS)(inline.inline_completion)
    client = params.client_info.name if params.client_info else "unknown client"
    log.info("initialize from %s; options %s", client, ls.options)
    ls.workspace_index.configure(params, ls.options)
    ls.model.start(ls, ls.options)
    if ls.options.system2:
        loop = asyncio.get_running_loop()

        def show(reason: str) -> None:  # on the System 2 thread
            loop.call_soon_threadsafe(ls.window_show_message, types.ShowMessageParams(
                type=types.MessageType.Warning, message=f"Laya: System 2 is off: {reason}"))

        ls.system2.start(ls.options.system2_path, on_error=show)


async def on_initialized(ls: LayaServer, params: types.InitializedParams) -> None:
    if ls.http is not None:
        ls.http_task = asyncio.ensure_future(http_service.start(ls, ls.http))
    if ls.process_id and ls.options.watch_process_id:
        from . import cli, parent

        if parent.alive(ls.process_id):
            ls.parent_watch = asyncio.ensure_future(
                parent.watch(ls.process_id, lambda: cli.exit_cleanly(ls, 0)))
        else:  # the client that just sent it is alive: it names a process we cannot see
            log.warning("processId %d is not visible here (another PID namespace: a container or "
                        "a remote editor?); not watching it", ls.process_id)
    settings_change.show_problems(ls, ls.option_problems, "initializationOptions")
    ls.workspace_index.start()
    await report_loading(ls)


def on_shutdown(ls: LayaServer, params: None) -> None:
    predictions.cancel_prefetch(ls)
    ls.workspace_index.shutdown()
    ls.system2.shutdown()
    ls.bridge.shutdown()


# --- document sync ------------------------------------------------------------------------------

def did_open(ls: LayaServer, params: types.DidOpenTextDocumentParams) -> None:
    uri = params.text_document.uri
    ls.opened[uri] = next(ls._opens)
    ls.typing_at.pop(uri, None)
    ls.sequencer.opened(uri)
    ls.observer.cancel(uri)
    ls.observer.trigger(uri, lambda: ls.observe(uri))


def did_change(ls: LayaServer, params: types.DidChangeTextDocumentParams) -> None:
    uri = params.text_document.uri
    ls.sequencer.edited(uri)
    doc = ls.open_document(uri)
    if doc is None:  # not open (ignored by the workspace): nothing to count, and no throttle entry
        return  # for its URI (one was kept per such URI for good)
    if params.content_changes:
        cursor = position_after_change(params.content_changes[-1], doc)
        if cursor is None:
            ls.typing_at.pop(uri, None)
        else:
            ls.typing_at[uri] = cursor
            predictions.prefetch_after_change(ls, uri)
            if ls.system2.enabled:
                try:
                    system2.after_change(ls.system2, uri, doc, params.content_changes, cursor,
                                         ls.workspace_index.folders)
                except Exception:  # noqa: BLE001 - optional; the document's n-grams must still be counted
                    log.exception("System 2 after a change")
    chars = min(MAX_OBSERVE_CHARS, doc.chars if isinstance(doc, LspTextDocument) else 0)
    ls.observer.trigger(uri, lambda: ls.observe(uri),
                        OBSERVE_INTERVAL_S * max(1.0, chars / OBSERVE_CHARS_PER_INTERVAL))


def did_close(ls: LayaServer, params: types.DidCloseTextDocumentParams) -> None:
    uri = params.text_document.uri
    ls.opened.pop(uri, None)
    ls.typing_at.pop(uri, None)
    ls.sequencer.forget(uri)
    ls.observer.cancel(uri)
    ls.bridge.submit_background(_forget_job, ls, uri)


def create_server(*, cli_log_level: str | None = None) -> LayaServer:
    """A :class:`LayaServer` with every feature registered (inline completion is registered
    during ``initialize``, when the ``enableInline`` option says so)."""
    ls = LayaServer(cli_log_level=cli_log_level)
    ls.feature(types.INITIALIZE)(on_initialize)
    ls.feature(types.INITIALIZED)(on_initialized)
    ls.feature(types.SHUTDOWN)(on_shutdown)
    ls.feature(types.TEXT_DOCUMENT_DID_OPEN)(did_open)
    ls.feature(types.TEXT_DOCUMENT_DID_CHANGE)(did_change)
    ls.feature(types.TEXT_DOCUMENT_DID_CLOSE)(did_close)
    ls.feature(types.TEXT_DOCUMENT_COMPLETION, completion.OPTIONS)(completion.completion)
    ls.feature(types.TEXT_DOCUMENT_DID_SAVE)(workspace_index.did_save)
    ls.feature(types.WORKSPACE_DID_CHANGE_WATCHED_FILES)(workspace_index.did_change_watched_files)
    ls.feature(types.WORKSPACE_DID_CHANGE_WORKSPACE_FOLDERS)(workspace_index.did_change_workspace_folders)
    ls.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)(settings_change.did_change_configuration)
    return ls
