"""The workspace as context, end to end: ``python -m laya_lsp`` with a workspace folder, real model.

The folder holds a Python module and a Go file with distinctive names, plus files whose names must
never be suggested: one ``.gitignore``'d, one under ``node_modules``, one in a virtual environment
and one over 1 MB. The server is driven as VS Code (pytest-lsp's recorded capabilities: work-done
progress, dynamic registration of file watching) and, for the option, by the replay client that
``laya eval --through-server --workspace`` uses.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import threading
import os
import sys
import time
from pathlib import Path

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities

from laya_tools.replay import ReplayClient

SERVER_ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONUNBUFFERED": "1"}
SERVER = [sys.executable, "-m", "laya_lsp"]
_n = itertools.count()

WIDGETS = '''"""Widgets."""

from .gizmos import SprocketQuantizer


def frobnicate_widget(widget, level=3):
    """Frobnicate a widget."""
    return widget.frobnicate(level)


class WidgetFrobber:
    def run(self, widget):
        return frobnicate_widget(widget, 2) + SprocketQuantizer(widget)
'''
GO_FILE = '''package frames

func GlorpTheFrames(n int) int {
\treturn n + 1
}

func Use() int { return GlorpTheFrames(2) }
'''
HIDDEN = {  # path -> the name it defines, which must never be suggested
    "secret_notes.py": "zanzibar_hidden_thing",  # .gitignore'd
    "node_modules/lib/index.py": "quokka_module_thing",
    ".venv/lib/site.py": "venvonly_private_thing",
    "big_generated.py": "xylophone_huge_thing",  # > 1 MB
}


def make_workspace(root: Path) -> Path:
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "widgets.py").write_text(WIDGETS)
    (root / "frames.go").write_text(GO_FILE)
    (root / ".gitignore").write_text("secret_*.py\n")
    for rel, name in HIDDEN.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        text = f"def {name}(x):\n    return {name}(x)\n\n{name}(1)\n"
        if rel.startswith("big"):
            text += "VALUE = 12345678\n" * 70_000  # ~1.2 MB
        path.write_text(text)
    return root


@pytest.fixture(scope="module")
def ws_root(tmp_path_factory) -> Path:
    return make_workspace(tmp_path_factory.mktemp("ws"))


@pytest_lsp.fixture(scope="module", config=ClientServerConfig(server_command=SERVER, server_env=SERVER_ENV))
async def client(lsp_client: LanguageClient, ws_root: Path):
    lsp_client.registrations = []

    @lsp_client.feature(types.CLIENT_REGISTER_CAPABILITY)
    def register(params: types.RegistrationParams):
        lsp_client.registrations.extend(params.registrations)

    folder = types.WorkspaceFolder(uri=ws_root.as_uri(), name="ws")
    await lsp_client.initialize_session(types.InitializeParams(
        capabilities=client_capabilities("visual-studio-code"),
        root_uri=folder.uri, workspace_folders=[folder]))
    yield
    await lsp_client.shutdown_session()


on_server = pytest.mark.asyncio(loop_scope="module")
"""The async cases share the module's server (and its event loop)."""


# --- helpers ------------------------------------------------------------------------------------

def indexes_done(client: LanguageClient) -> list[types.WorkDoneProgressEnd]:
    """The end reports of the workspace progress (title mentions the workspace), in order."""
    out = []
    for reports in client.progress_reports.values():
        if (reports and isinstance(reports[0], types.WorkDoneProgressBegin)
                and "workspace" in reports[0].title and isinstance(reports[-1], types.WorkDoneProgressEnd)):
            out.append(reports[-1])
    return out


async def wait_indexed(client: LanguageClient, count: int, timeout: float = 90) -> types.WorkDoneProgressEnd:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        done = indexes_done(client)
        if len(done) >= count:
            return done[-1]
        await asyncio.sleep(0.1)
    raise AssertionError(f"workspace index #{count} never ended: {client.progress_reports}")


async def labels_after(client: LanguageClient, root: Path, text: str, language: str = "python",
                       name: str = "new.py", path: str | None = None) -> list[str]:
    """Open a new document (not on disk) in the workspace with ``text`` (at ``path`` inside it,
    else in a new folder); complete at its end."""
    uri = (root / path if path else root / f"new{next(_n)}" / name).as_uri()
    client.text_document_did_open(types.DidOpenTextDocumentParams(
        text_document=types.TextDocumentItem(uri=uri, language_id=language, version=1, text=text)))
    lines = text.split("\n")
    result = await client.text_document_completion_async(types.CompletionParams(
        text_document=types.TextDocumentIdentifier(uri=uri),
        position=types.Position(line=len(lines) - 1, character=len(lines[-1]))))
    client.text_document_did_close(types.DidCloseTextDocumentParams(
        text_document=types.TextDocumentIdentifier(uri=uri)))
    return [i.label for i in result.items if i.kind != types.CompletionItemKind.Text]


# --- cases --------------------------------------------------------------------------------------

@on_server
async def test_index_reports_progress(client: LanguageClient):
    end = await wait_indexed(client, 1)
    assert end.message.startswith("2 files"), end.message  # widgets.py and frames.go
    assert not [m for m in client.messages if m.type == types.MessageType.Error], client.messages


@on_server
async def test_workspace_name_comes_first(client: LanguageClient, ws_root: Path):
    await wait_indexed(client, 1)
    labels = await labels_after(client, ws_root, "import os\n\n\ndef main():\n    w = frob")
    assert labels and labels[0] == "frobnicate_widget", labels


@pytest.mark.parametrize("name", sorted(HIDDEN.values()))
@on_server
async def test_ignored_and_skipped_files_are_not_read(client: LanguageClient, ws_root: Path, name: str):
    await wait_indexed(client, 1)
    labels = await labels_after(client, ws_root, f"import os\n\nx = {name[:4]}")
    assert name not in labels, labels


@on_server
async def test_a_new_module_is_offered_what_the_workspace_imports_from_it(client: LanguageClient, ws_root: Path):
    # pkg/widgets.py does `from .gizmos import SprocketQuantizer`; pkg/gizmos.py is new
    await wait_indexed(client, 1)
    labels = await labels_after(client, ws_root, '"""Gizmos."""\n\n\nclass ', path="pkg/gizmos.py")
    assert labels and labels[0] == "SprocketQuantizer", labels
    # only where the module defines it at its top level: not in another new module, not for a
    # method, not after a keyword that defines nothing in Python
    for path, text in (("pkg/other.py", '"""Other."""\n\n\nclass '),
                       ("pkg/gizmos.py", "class A:\n    def "),
                       ("pkg/gizmos.py", "for type ")):
        labels = await labels_after(client, ws_root, text, path=path)
        assert not labels or labels[0] != "SprocketQuantizer", (text, labels)


@on_server
async def test_workspace_words_stay_in_their_language(client: LanguageClient, ws_root: Path):
    await wait_indexed(client, 1)
    go = await labels_after(client, ws_root, "package main\n\nfunc main() {\n\tx := Glor", "go", "main.go")
    assert go and go[0] == "GlorpTheFrames", go
    py = await labels_after(client, ws_root, "import os\n\nx = Glor")
    assert "GlorpTheFrames" not in py, py


@on_server
async def test_file_watching_is_registered(client: LanguageClient):
    await wait_indexed(client, 1)
    (reg,) = [r for r in client.registrations if r.method == types.WORKSPACE_DID_CHANGE_WATCHED_FILES]
    globs = [w["globPattern"] if isinstance(w, dict) else w.glob_pattern
             for w in (reg.register_options["watchers"] if isinstance(reg.register_options, dict)
                       else reg.register_options.watchers)]
    assert {"**/*.py", "**/*.go", "**/*.rs", "**/*.ts", "**/.gitignore"} <= set(globs), globs


@on_server
async def test_watched_file_change_reindexes(client: LanguageClient, ws_root: Path):
    await wait_indexed(client, 1)
    before = len(indexes_done(client))
    assert "quibble_sprocket" not in await labels_after(client, ws_root, "x = quib")
    new = ws_root / "pkg" / "sprockets.py"
    new.write_text("def quibble_sprocket(n):\n    return n\n\n\nquibble_sprocket(3)\n")
    client.workspace_did_change_watched_files(types.DidChangeWatchedFilesParams(changes=[
        types.FileEvent(uri=new.as_uri(), type=types.FileChangeType.Created)]))
    end = await wait_indexed(client, before + 1)  # throttled: up to 10 s after the last index
    assert end.message.startswith("3 files"), end.message
    labels = await labels_after(client, ws_root, "import os\n\nx = quib")
    assert labels and labels[0] == "quibble_sprocket", labels


@on_server
async def test_did_save_reindexes(client: LanguageClient, ws_root: Path):
    await wait_indexed(client, 1)
    path = ws_root / "pkg" / "gizmos.py"
    text = "def plonk_gizmo_twice(g):\n    return plonk_gizmo_twice(g)\n"
    path.write_text(text)
    uri = path.as_uri()
    before = len(indexes_done(client))
    client.text_document_did_open(types.DidOpenTextDocumentParams(
        text_document=types.TextDocumentItem(uri=uri, language_id="python", version=1, text=text)))
    client.text_document_did_save(types.DidSaveTextDocumentParams(
        text_document=types.TextDocumentIdentifier(uri=uri)))
    client.text_document_did_close(types.DidCloseTextDocumentParams(
        text_document=types.TextDocumentIdentifier(uri=uri)))
    await wait_indexed(client, before + 1)
    labels = await labels_after(client, ws_root, "import os\n\nx = plon")
    assert labels and labels[0] == "plonk_gizmo_twice", labels



@on_server
async def test_added_workspace_folder_is_indexed(client: LanguageClient, ws_root: Path, tmp_path: Path):
    await wait_indexed(client, 1)
    other = tmp_path / "other"
    other.mkdir()
    (other / "snorkels.py").write_text("def snorkel_folder_added(s):\n    return snorkel_folder_added(s)\n")
    before = len(indexes_done(client))
    client.workspace_did_change_workspace_folders(types.DidChangeWorkspaceFoldersParams(
        event=types.WorkspaceFoldersChangeEvent(
            added=[types.WorkspaceFolder(uri=other.as_uri(), name="other")], removed=[])))
    await wait_indexed(client, before + 1)
    labels = await labels_after(client, ws_root, "import os\n\nx = snork")
    assert labels and labels[0] == "snorkel_folder_added", labels
    # both folders are indexed: the first one's names are still offered. (Which of its two
    # ``frob`` names comes first on a file's first line is a near-tie, log prior -1.85 against
    # -1.87, the other signals the same but length and place: the two-layer re-ranker puts the
    # shorter ``frobnicate`` first.)
    assert "frobnicate_widget" in await labels_after(client, ws_root, "x = frob")

# --- the option, through the replay client (the eval's client) -----------------------------------

@pytest.mark.parametrize("enabled", [True, False], ids=["on", "off"])
def test_workspace_index_option(tmp_path: Path, enabled: bool):
    root = make_workspace(tmp_path / "ws")
    c = ReplayClient(init_options={"workspaceIndex": enabled}, root_uri=root.as_uri())
    try:
        assert c.wait_for_workspace(timeout=90 if enabled else 0) is enabled
        c.open((root / "new.py").as_uri(), "")
        c.type_to("import os\n\n\ndef main():\n    w = frob")
        labels = [i.label for i in c.complete()[0]]  # waits for the model
        assert ("frobnicate_widget" in labels) is enabled, labels
        if not enabled:
            time.sleep(1.0)
            assert not any("workspace" in t.lower() for t in c.progress_done), c.progress_done
            assert "frobnicate_widget" not in [i.label for i in c.complete()[0]]
    finally:
        c.shutdown()


def test_which_changes_start_a_reindex(tmp_path: Path):
    from laya_lsp.workspace_index import WorkspaceIndex

    index = WorkspaceIndex(ls=None)
    index.folders = {tmp_path.as_uri(): str(tmp_path)}
    assert index.in_workspace((tmp_path / "pkg" / "a.py").as_uri())
    assert index.in_workspace((tmp_path / "sub" / ".gitignore").as_uri())
    assert not index.in_workspace((tmp_path / "node_modules" / "x" / "a.js").as_uri())
    assert not index.in_workspace((tmp_path / ".venv" / "lib" / "a.py").as_uri())
    assert not index.in_workspace((tmp_path / "README.md").as_uri())
    assert not index.in_workspace((tmp_path.parent / "elsewhere.py").as_uri())
    assert not index.in_workspace("untitled:Untitled-1")
    index.shutdown()


def test_client_that_never_answers_progress_create_still_gets_the_workspace(tmp_path):
    """A client may declare work-done progress and never answer ``window/workDoneProgress/create``:
    the index must not wait for it forever."""
    from lsp_raw import RawServer

    (tmp_path / "helpers.py").write_text("def workspace_alpha_identifier():\n    return 1\n")
    root = tmp_path.as_uri()
    with RawServer() as s:  # answers no server request
        answer = s.call("initialize", {"processId": None, "rootUri": root,
                                       "workspaceFolders": [{"uri": root, "name": "ws"}],
                                       "capabilities": {"window": {"workDoneProgress": True}},
                                       "initializationOptions": {}})
        assert "result" in answer
        s.notify("initialized", {})
        uri = root + "/main.py"
        s.open(uri, "x = workspace_al")
        s.complete_until(uri, 0, 16, "workspace_alpha_identifier", why="the workspace never reached the pool")
        creates = [m for m in s.messages if m.get("method") == "window/workDoneProgress/create"]
        assert creates, "the server did not ask for progress (the case under test)"
        assert s.exit() == 0


def _index_without_a_server(tmp_path: Path, predictor):
    """A ``WorkspaceIndex`` of ``tmp_path`` whose model is ``predictor`` (None: not loaded), no
    throttle, and no server around it (its walk is the test's)."""
    import laya_lsp.workspace_index as wi

    class Model:
        async def wait(self):
            return predictor

    class Server:
        client_supports_progress = False
        model = Model()

    index = wi.WorkspaceIndex(Server())
    index.enabled = True
    index.throttle.interval_s = 0.0
    index.folders = {tmp_path.as_uri(): str(tmp_path)}
    return index


def test_changed_files_let_a_running_index_finish(tmp_path: Path, monkeypatch):
    """Saves while an index runs wait for it and re-index once after it (an autosave every few
    seconds used to stop each index of a large workspace before it was installed); a change of
    folders stops it."""
    import threading

    import laya_lsp.workspace_index as wi
    from laya_lsp.workspace import WorkspaceFiles

    gate = threading.Event()
    walks: list[threading.Event] = []

    def slow_walk(folders, stop=None):
        walks.append(stop)
        gate.wait(30)
        return WorkspaceFiles()

    monkeypatch.setattr(wi, "read_workspace", slow_walk)

    async def scenario():
        # no model: the index ends at "model not loaded": the scheduling is under test
        index = _index_without_a_server(tmp_path, predictor=None)
        try:
            index.request("initialized")
            await asyncio.sleep(0.1)
            first = index._task
            for i in range(5):
                index.request(f"saved {i}")
                await asyncio.sleep(0.02)
            assert index._task is first and len(walks) == 1 and not walks[0].is_set()
            gate.set()
            await first
            await asyncio.sleep(0.2)
            assert len(walks) == 2  # one re-index for the five saves, after the first one
            await index._task
            gate.clear()
            index.request("saved again")
            await asyncio.sleep(0.1)
            index.request("workspace folders changed", supersede=True)
            await asyncio.sleep(0.1)
            assert walks[2].is_set() and len(walks) == 3  # stopped; the new walk waits its turn
            gate.set()
            await asyncio.sleep(0.3)
            assert len(walks) == 4
            await index._task
        finally:
            gate.set()
            index.shutdown()

    asyncio.run(scenario())


def test_shutdown_during_an_index_logs_no_error(tmp_path: Path, monkeypatch, caplog):
    """``shutdown`` while the walk runs (a large workspace: a few seconds) ended the index with
    "workspace index failed" at ERROR (sent to the editor's log as ``window/logMessage``): the
    counting step was scheduled on the executor ``shutdown`` had just closed."""
    import laya_lsp.workspace_index as wi
    from laya_lsp.workspace import WorkspaceFiles

    gate = threading.Event()
    counted: list[int] = []

    def slow_walk(folders, stop=None):
        gate.wait(30)
        return WorkspaceFiles()

    class Predictor:
        tok = None  # count_workspace in the child process needs none for no files

        def merge_workspace(self, counts, weight=None):
            counted.append(1)
            return {}

    monkeypatch.setattr(wi, "read_workspace", slow_walk)

    async def scenario():
        index = _index_without_a_server(tmp_path, Predictor())
        try:
            index.request("initialized")
            await asyncio.sleep(0.1)
            task = index._task
            index.shutdown()  # what the server's shutdown handler does
            gate.set()
            await asyncio.wait_for(task, 5)
        finally:
            gate.set()

    with caplog.at_level(logging.DEBUG, logger="laya_lsp"):
        asyncio.run(scenario())
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert errors == [], errors
    assert counted == []  # nothing is counted after shutdown


def test_workspace_index_off_then_on_during_an_index_indexes_again(tmp_path: Path, monkeypatch):
    """``workspaceIndex`` turned off and on again (two settings changes) while an index ran: the
    request of the "on" waited for the running index, which the "off" had superseded, and a
    superseded index runs no follow-up, so the workspace stayed unindexed until a save."""
    import laya_lsp.workspace_index as wi
    from laya_lsp.workspace import WorkspaceFiles

    gate = threading.Event()
    walks: list[int] = []
    built: list[int] = []

    def slow_walk(folders, stop=None):
        walks.append(1)
        gate.wait(30)
        return WorkspaceFiles()

    class Predictor:
        tok = None  # count_workspace in the child process needs none for no files

        def merge_workspace(self, counts, weight=None):
            built.append(1)
            return {}

        def set_workspace(self, merged):
            pass

    class Bridge:
        def submit_background(self, fn, *args):
            fn(*args)

    monkeypatch.setattr(wi, "read_workspace", slow_walk)

    async def scenario():
        index = _index_without_a_server(tmp_path, Predictor())
        index.ls.bridge = Bridge()
        index.ls.client_capabilities = None
        index.ls.model.predictor = None
        try:
            index.request("initialized")
            await asyncio.sleep(0.1)
            index.set_enabled(False)
            index.set_enabled(True)
            gate.set()
            deadline = time.monotonic() + 10
            while not built:
                assert time.monotonic() < deadline, f"no index after turning it on again ({len(walks)} walks)"
                await asyncio.sleep(0.05)
        finally:
            gate.set()
            index.shutdown()

    asyncio.run(scenario())
    assert len(walks) == 2
