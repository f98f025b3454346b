"""The workspace index against what real clients and real projects do (``python -m laya_lsp``,
real model, driven over stdio by :class:`lsp_raw.RawServer`).

- A folder deleted, renamed or moved is reported by the client as that folder's own event only
  (VS Code sends nothing for the files under it that ``**/*.py`` matches): its files' names must
  go (or come) all the same.
- ``file://localhost/...`` folder URIs (RFC 8089) are indexed; a ``file:`` URI that names no
  absolute path (``file:///C:/x`` on a POSIX system) never makes the server read a folder
  relative to its working folder.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest

from lsp_raw import RawServer

WATCHING = {"workspace": {"didChangeWatchedFiles": {"dynamicRegistration": True},
                          "workspaceFolders": True}}


def _start(s: RawServer, folders: list[str], root_uri: str | None = None, capabilities=None) -> None:
    answer = s.call("initialize", {
        "processId": None, "rootUri": root_uri if root_uri is not None else (folders[0] if folders else None),
        "workspaceFolders": [{"uri": u, "name": f"f{i}"} for i, u in enumerate(folders)] or None,
        "capabilities": capabilities or {}, "initializationOptions": {}})
    assert "result" in answer, answer
    s.notify("initialized", {})


def _labels(s: RawServer, uri: str, text: str) -> list[str]:
    return [i["label"] for i in s.complete(uri, 0, len(text))["result"]["items"]]


def _until(s: RawServer, uri: str, text: str, pred, why: str, timeout: float = 60.0) -> list[str]:
    """Complete at the end of the one-line ``text`` every 0.2 s until ``pred(labels)``."""
    deadline = time.monotonic() + timeout
    labels = _labels(s, uri, text)
    while not pred(labels):
        assert time.monotonic() < deadline, f"{why}: {labels}"
        time.sleep(0.2)
        labels = _labels(s, uri, text)
    return labels


# --- folders deleted, renamed, moved ------------------------------------------------------------

def test_folder_watcher_is_registered():
    """Besides the source globs, a watcher whose glob matches a folder's own path, for creates and
    deletes (no changes: every write of every file would come)."""
    with RawServer() as s:
        _start(s, ["file:///nonexistent-laya-ws"], capabilities=WATCHING)
        deadline = time.monotonic() + 30
        while not (regs := [m for m in s.messages if m.get("method") == "client/registerCapability"]):
            assert time.monotonic() < deadline, "no registration"
            time.sleep(0.1)
        watchers = regs[0]["params"]["registrations"][0]["registerOptions"]["watchers"]
        folder = [w for w in watchers if w["globPattern"] == "**/*"]
        assert folder and folder[0].get("kind") == 1 | 4, watchers


def test_deleted_folder_drops_its_names(tmp_path: Path):
    root = tmp_path / "ws"
    (root / "pkg" / "sub").mkdir(parents=True)
    (root / "keep.py").write_text("def zorbl_kept_name():\n    return 1\n")
    (root / "pkg" / "sub" / "gone.py").write_text("def zorbl_deleted_folder_name():\n    return 1\n")
    with RawServer() as s:
        _start(s, [root.as_uri()], capabilities=WATCHING)
        uri, text = (root / "new.py").as_uri(), "x = zorbl"
        s.open(uri, text)
        _until(s, uri, text, lambda ls: {"zorbl_kept_name", "zorbl_deleted_folder_name"} <= set(ls),
               "the workspace was never indexed")
        shutil.rmtree(root / "pkg")
        # what VS Code sends for a folder deleted in its explorer (or by `rm -r`): the folder only
        s.notify("workspace/didChangeWatchedFiles", {"changes": [{"uri": (root / "pkg").as_uri(), "type": 3}]})
        labels = _until(s, uri, text, lambda ls: "zorbl_deleted_folder_name" not in ls,
                        "the deleted folder's names are still suggested")
        assert "zorbl_kept_name" in labels
        assert s.exit() == 0


def test_folder_moved_in_is_indexed(tmp_path: Path):
    root, outside = tmp_path / "ws", tmp_path / "outside"
    root.mkdir()
    (outside / "newpkg").mkdir(parents=True)
    (root / "keep.py").write_text("def zorbl_kept_name():\n    return 1\n")
    (outside / "newpkg" / "mod.py").write_text("def zorbl_moved_in_name():\n    return 1\n")
    with RawServer() as s:
        _start(s, [root.as_uri()], capabilities=WATCHING)
        uri, text = (root / "new.py").as_uri(), "x = zorbl"
        s.open(uri, text)
        _until(s, uri, text, lambda ls: "zorbl_kept_name" in ls, "the workspace was never indexed")
        assert "zorbl_moved_in_name" not in _labels(s, uri, text)
        (outside / "newpkg").rename(root / "newpkg")  # `mv`, or a rename in the editor
        s.notify("workspace/didChangeWatchedFiles", {"changes": [
            {"uri": (root / "newpkg").as_uri(), "type": 1}]})
        _until(s, uri, text, lambda ls: "zorbl_moved_in_name" in ls, "the moved-in folder was never indexed")
        assert s.exit() == 0


def test_folder_events_that_change_nothing_start_no_index(tmp_path: Path):
    """The real index code: only a folder that held indexed files, or a new folder holding a
    source file, re-indexes; a deleted log file, a new file of no known language, a new empty
    folder (a build's output), a folder under node_modules or outside the workspace do not."""
    from lsprotocol import types

    from laya_lsp.workspace import read_workspace
    from laya_lsp.workspace_index import WorkspaceIndex, _dirs_above

    root = tmp_path / "ws"
    (root / "a" / "b").mkdir(parents=True)
    (root / "a" / "b" / "m.py").write_text("x = 1\n")
    (root / "empty").mkdir()
    (root / "moved" / "deep").mkdir(parents=True)
    (root / "moved" / "deep" / "n.py").write_text("y = 2\n")
    (root / "node_modules" / "lib").mkdir(parents=True)
    (root / "build.log").write_text("log\n")
    (tmp_path / "elsewhere").mkdir()
    index = WorkspaceIndex(ls=None)
    index.folders = {root.as_uri(): str(root)}
    index._dirs = _dirs_above(read_workspace([root]).paths, [str(root)])

    def ev(path: Path, kind) -> bool:
        return index.folder_events([types.FileEvent(uri=path.as_uri(), type=kind)])

    deleted, created = types.FileChangeType.Deleted, types.FileChangeType.Created
    assert ev(root / "a", deleted) and ev(root / "a" / "b", deleted)
    assert not ev(root / "empty", deleted)  # held no indexed file
    assert not ev(root / "build.log", deleted) and not ev(root / "build.log", created)
    assert ev(root / "moved", created)  # a folder moved in
    assert not ev(root / "empty", created)  # nothing to index in it (yet)
    assert not ev(root / "node_modules" / "lib", created)
    assert not ev(tmp_path / "elsewhere", created)
    assert not ev(root / "a", types.FileChangeType.Changed)
    index.shutdown()


def test_a_build_s_storm_of_events_is_filtered_by_name(tmp_path: Path):
    """A build creates thousands of files: with the folder watcher every one is reported. The
    handler tests their names only (10,000 parsed and ``stat``-ed paths held the event loop ~1 s)
    and looks at 64 folder-like paths at most, off the loop; none of them re-indexes."""
    import asyncio

    from lsprotocol import types

    from laya_lsp import workspace_index as wi

    root = tmp_path / "ws"
    (root / "out").mkdir(parents=True)
    index = wi.WorkspaceIndex(ls=None)
    index.folders = {root.as_uri(): str(root)}
    index.enabled = True
    requested, looked_at = [], []
    index.request = lambda reason, supersede=False: requested.append(reason)
    real = index.folder_events
    index.folder_events = lambda changes: (looked_at.append(len(changes)), real(changes))[1]

    class Server:
        workspace_index = index

    created = types.FileChangeType.Created
    changes = [types.FileEvent(uri=(root / "out" / f"obj{i}.o").as_uri(), type=created) for i in range(10_000)]
    changes += [types.FileEvent(uri=(root / "out" / f"dir{i}").as_uri(), type=created) for i in range(100)]

    async def run():
        wi.did_change_watched_files(Server, types.DidChangeWatchedFilesParams(changes=changes))
        for _ in range(100):
            await asyncio.sleep(0.01)
            if looked_at:
                break
        await asyncio.sleep(0.1)

    asyncio.run(run())
    assert looked_at == [wi.MAX_FOLDER_EVENTS]
    assert requested == []
    index.shutdown()


# --- folder URIs ---------------------------------------------------------------------------------

def test_localhost_folder_uri_is_indexed(tmp_path: Path):
    """``file://localhost/path`` is ``file:///path`` (RFC 8089)."""
    root = tmp_path / "ws"
    root.mkdir()
    (root / "helpers.py").write_text("def zorbl_localhost_name():\n    return 1\n")
    uri = root.as_uri().replace("file:///", "file://localhost/")
    with RawServer() as s:
        _start(s, [uri])
        doc, text = (root / "new.py").as_uri(), "x = zorbl"
        s.open(doc, text)
        _until(s, doc, text, lambda ls: "zorbl_localhost_name" in ls,
               "a file://localhost/ workspace was never indexed")
        assert s.exit() == 0


def test_uri_of_no_absolute_path_reads_nothing_under_the_working_folder(tmp_path: Path, monkeypatch):
    """``file:///C:/proj`` (a Windows client's folder) is ``c:/proj`` on a POSIX system: a path
    relative to the server's working folder, which must never be read."""
    if Path("c:/proj").is_absolute():
        pytest.skip("a drive path is absolute here")
    cwd = tmp_path / "server-cwd"
    (cwd / "c:" / "proj").mkdir(parents=True)
    (cwd / "c:" / "proj" / "private.py").write_text("def zorbl_outside_secret():\n    return 1\n")
    real = tmp_path / "ws"
    real.mkdir()
    (real / "helpers.py").write_text("def zorbl_real_folder_name():\n    return 1\n")
    monkeypatch.chdir(cwd)  # the server process starts here
    with RawServer() as s:
        _start(s, ["file:///C:/proj", real.as_uri()])
        doc, text = (real / "new.py").as_uri(), "x = zorbl"
        s.open(doc, text)
        labels = _until(s, doc, text, lambda ls: "zorbl_real_folder_name" in ls,
                        "the real folder was never indexed")
        assert "zorbl_outside_secret" not in labels
        assert s.exit() == 0


# --- nested folders ------------------------------------------------------------------------------

@pytest.mark.parametrize("inner", ["vendor/lib", "node_modules/mylib", "build/gen"])
def test_nested_folder_the_outer_walk_skips_is_read_on_its_own(tmp_path: Path, inner: str):
    """A multi-root workspace of a project and a folder inside it that the project's walk never
    enters (``.gitignore``'d, ``node_modules``, build output): the user listed that folder, so
    its files are read, once, and the project's own skipped files still are not."""
    from laya_lsp.workspace import read_workspace

    root = tmp_path / "proj"
    (root / inner).mkdir(parents=True)
    (root / ".gitignore").write_text("vendor/\n")
    (root / "app.py").write_text("def app_main():\n    pass\n")
    (root / inner / "inner.py").write_text("def inner_listed_name():\n    pass\n")
    (root / inner.split("/")[0] / "other.py").write_text("def skipped_sibling_name():\n    pass\n")
    for folders in ([root, root / inner], [root / inner, root], [root, root / inner, root / inner]):
        files = read_workspace(folders)
        assert files.paths["python"] == [str((root / "app.py").resolve()),
                                         str((root / inner / "inner.py").resolve())], files.paths


def test_nested_folder_the_outer_walk_enters_is_read_once(tmp_path: Path):
    from laya_lsp.workspace import read_workspace

    root = tmp_path / "proj"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "m.py").write_text("x = 1\n")
    files = read_workspace([root / "pkg", root])
    assert files.paths["python"] == [str((root / "pkg" / "m.py").resolve())]


@pytest.mark.parametrize("depth", [40, 63, 64])
def test_a_listed_folder_deep_in_another_is_read_whole(tmp_path: Path, depth: int):
    """A listed folder that the outer folder's walk reaches near its depth limit was counted as
    entered, and its sub-folders were cut as too deep: never read. It is walked on its own."""
    import os

    from laya_lsp.workspace import read_workspace

    root = tmp_path / "ws"
    inner = root.joinpath(*["d"] * (depth - 1), "inner")
    (inner / "sub" / "more").mkdir(parents=True)
    (inner / "top.py").write_text("def inner_top():\n    pass\n")
    (inner / "sub" / "deep.py").write_text("def inner_sub():\n    pass\n")
    (inner / "sub" / "more" / "m.py").write_text("x = 1\n")
    read = read_workspace([root, inner])
    names = sorted(os.path.relpath(p, inner) for group in read.paths.values() for p in group)
    assert names == ["sub/deep.py", "sub/more/m.py", "top.py"]  # each once
