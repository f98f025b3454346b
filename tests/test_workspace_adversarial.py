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

import os
import shutil
import subprocess
import sys
import textwrap
import threading
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


# --- a workspace folder that is a symbolic link ------------------------------------------------

@pytest.mark.parametrize("event", ["didSave", "didChangeWatchedFiles"])
def test_a_linked_folder_is_kept_current_by_events_under_its_real_path(tmp_path: Path, event: str):
    """The folder's URI is a symbolic link (``~/proj`` -> ``/data/proj``): it is indexed (the walk
    reads its real path), and an editor that resolved the link reports saves and changes under
    the real path. Those were taken for paths outside the workspace: no re-index, the new names
    never came."""
    real, link = tmp_path / "real", tmp_path / "link"
    real.mkdir()
    link.symlink_to(real, target_is_directory=True)
    (real / "keep.py").write_text("def zorbl_kept_name():\n    return 1\n")
    with RawServer() as s:
        _start(s, [link.as_uri()], capabilities=WATCHING)
        uri, text = (link / "new.py").as_uri(), "x = zorbl"
        s.open(uri, text)
        _until(s, uri, text, lambda ls: "zorbl_kept_name" in ls, "the linked folder was never indexed")
        (real / "added.py").write_text("def zorbl_added_name():\n    return 1\n")
        added = (real / "added.py").as_uri()
        if event == "didSave":
            s.notify("textDocument/didSave", {"textDocument": {"uri": added}})
        else:
            s.notify("workspace/didChangeWatchedFiles", {"changes": [{"uri": added, "type": 1}]})
        labels = _until(s, uri, text, lambda ls: "zorbl_added_name" in ls,
                        "a change under the folder's real path was not indexed")
        assert "zorbl_kept_name" in labels
        assert s.exit() == 0


def test_a_linked_folder_and_its_target_are_read_once(tmp_path: Path):
    from laya_lsp.workspace import read_workspace

    real, link = tmp_path / "real", tmp_path / "link"
    (real / "pkg").mkdir(parents=True)
    link.symlink_to(real, target_is_directory=True)
    (real / "pkg" / "m.py").write_text("x = 1\n")
    for folders in ([link], [link, real], [real, link], [link / "pkg", link]):
        assert read_workspace(folders).paths == {"python": [str((real / "pkg" / "m.py").resolve())]}


# --- files and folders changing while they are walked -------------------------------------------

def _walks_while(script: str, folders, seconds: float) -> list:
    """:func:`_walks` while another process runs ``script`` in a loop (no GIL shared with the
    walk: its changes land between any two of the walk's system calls)."""
    mutator = subprocess.Popen([sys.executable, "-c", "import os, shutil\nwhile True:\n"
                                + textwrap.indent(textwrap.dedent(script), "    ")])
    try:
        return _walks(folders, seconds)
    finally:
        mutator.kill()
        mutator.wait()


def _walks(folders, seconds: float) -> list:
    """Walk ``folders`` again and again for ``seconds`` (each walk on a thread, given 10 s: a
    FIFO read blocks forever); the results."""
    from laya_lsp.workspace import read_workspace

    out, end = [], time.monotonic() + seconds
    while time.monotonic() < end:
        got = []
        t = threading.Thread(target=lambda: got.append(read_workspace(folders)), daemon=True)
        t.start()
        t.join(10)
        assert got, "a walk blocked or failed (see the thread's exception above)"
        out.append(got[0])
    return out


@pytest.mark.skipif(not hasattr(os, "symlink"), reason="no symlinks")
def test_a_file_swapped_for_a_link_out_of_the_folder_is_never_read(tmp_path: Path):
    """A file swapped for a link to a file outside the folder (and back) while the walk reads it:
    ``os.path.realpath`` raised (``EINVAL``: the link was a file again by ``readlink``) and ended
    the whole index; and a link made after the check was followed by ``open``, reading the file
    outside (24 times in 1,500 walks)."""
    root, outside = tmp_path / "ws", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (outside / "secret.py").write_text("def outside_secret(): pass\n")
    for i in range(20):
        (root / f"f{i}.py").write_text("def inside(): pass\n")
    walks = _walks_while(f"""
        for i in range(20):
            p, t = os.path.join({str(root)!r}, f"f{{i}}.py"), os.path.join({str(root)!r}, f".t{{i}}")
            os.symlink({str(outside / "secret.py")!r}, t)
            os.replace(t, p)
            with open(t, "w") as fh:
                fh.write("def inside(): pass\\n")
            os.replace(t, p)
    """, [root], 6)
    assert len(walks) > 20
    assert not any("outside_secret" in t for w in walks for t in w.texts.get("python", []))


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs")
def test_files_and_folders_changing_while_walked(tmp_path: Path):
    """A file that grows past 1 MB after it was listed, a file replaced by a folder of the same
    name (and by a FIFO), a folder renamed back and forth: every walk ends, nothing over 1 MB is
    read, and the steady files are read each time."""
    root = tmp_path / "ws"
    (root / "pkg").mkdir(parents=True)
    for i in range(30):
        (root / "pkg" / f"m{i}.py").write_text(f"def moving_{i}(): pass\n")
        (root / f"steady{i}.py").write_text(f"def steady_{i}(): pass\n")
    r = str(root)
    walks = _walks_while(f"""
        with open({r!r} + "/grow.py", "w") as fh:
            fh.write("def grow(): pass\\n")
            fh.flush()
            fh.write("x = 1\\n" * 200_000)
        os.mkdir({r!r} + "/flip.py")
        os.rmdir({r!r} + "/flip.py")
        os.mkfifo({r!r} + "/flip.py")
        os.remove({r!r} + "/flip.py")
        os.remove({r!r} + "/grow.py")
        os.rename({r!r} + "/pkg", {r!r} + "/pkg2")
        os.rename({r!r} + "/pkg2", {r!r} + "/pkg")
    """, [root], 5)
    assert len(walks) > 5
    for w in walks:
        assert all(len(t) <= 1_000_000 for t in w.texts["python"])
        assert sum(t.startswith("def steady_") for t in w.texts["python"]) == 30


def test_the_folder_deleted_while_walked(tmp_path: Path):
    """The workspace folder renamed, then deleted, while walks go on: each ends, with what it
    read."""
    root = tmp_path / "ws"
    for d in range(20):
        (root / f"d{d}").mkdir(parents=True)
        for i in range(50):
            (root / f"d{d}" / f"m{i}.py").write_text(f"def name_{d}_{i}(): pass\n")
    done = []
    walker = threading.Thread(target=lambda: done.append(_walks([root], 4)), daemon=True)
    walker.start()
    time.sleep(1)
    root.rename(tmp_path / "moved")
    time.sleep(1)
    shutil.rmtree(tmp_path / "moved")
    walker.join(20)
    assert done and done[0][-1].files == 0


# --- a hostile .gitignore, end to end ------------------------------------------------------------

def test_a_hostile_gitignore_neither_hangs_the_index_nor_delays_completions(tmp_path: Path):
    """A cloned repository whose ``.gitignore`` is 500,000 short lines (1 MB, under the old
    bound): compiling them took minutes and every file then cost ~0.1 s to check, so the
    workspace was never indexed in practice. It is ignored with a warning in the log, the index
    finishes at once, and completions stay prompt meanwhile."""
    root = tmp_path / "ws"
    for i in range(200):
        (root / f"p{i % 20}").mkdir(parents=True, exist_ok=True)
        (root / f"p{i % 20}" / f"m{i}.py").write_text(f"def zorbl_name_{i}():\n    return 1\n")
    (root / ".gitignore").write_bytes(b"x\n" * 500_000)
    with RawServer() as s:
        _start(s, [root.as_uri()])
        uri, text = (root / "new.py").as_uri(), "x = zorbl_name_19"
        s.open(uri, text)
        _labels(s, uri, text)  # the model is loaded
        slowest, deadline = 0.0, time.monotonic() + 30
        while True:
            t = time.monotonic()
            labels = _labels(s, uri, text)
            slowest = max(slowest, time.monotonic() - t)
            if "zorbl_name_199" in labels:
                break
            assert time.monotonic() < deadline, "the workspace was never indexed"
            time.sleep(0.2)
        assert slowest < 2.0
        logged = [m["params"]["message"] for m in s.messages if m.get("method") == "window/logMessage"]
        assert any(".gitignore ignored" in m for m in logged), logged
        assert s.exit() == 0


# --- the counting child process -----------------------------------------------------------------

def _counting_children(pid: int) -> list[int]:
    """The server's ``multiprocessing`` children (``/proc``; Linux)."""
    out = []
    for d in Path("/proc").iterdir():
        try:
            if d.name.isdigit() and int((d / "stat").read_text().rsplit(")", 1)[1].split()[1]) == pid \
                    and b"multiprocessing.spawn" in (d / "cmdline").read_bytes():
                out.append(int(d.name))
        except (OSError, ValueError, IndexError):
            continue
    return out


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc (Linux)")
@pytest.mark.parametrize("how", ["exit", "killed"])
def test_the_counting_process_ends_with_the_server(tmp_path: Path, how: str):
    """The workspace is counted in a child process (``laya_lsp.workspace_index.count_in_child``);
    it must not outlive the server, however the server ends while it counts (killed, or ``exit``,
    which leaves through ``os._exit``)."""
    root = tmp_path / "ws"
    _big_workspace(root, 1500)  # tens of seconds of counting here
    with RawServer() as s:
        _start(s, [root.as_uri()])
        children = _counting(s)
        if how == "killed":
            s.kill()
        else:
            assert s.exit(shutdown=False) == 1  # exit without shutdown: status 1 (the spec)
    _ended_soon(children, "outlived the server")


def _counting(s: RawServer) -> list[int]:
    """The server's counting processes once they count: started and niced (a child killed before
    that ends by another path)."""
    deadline = time.monotonic() + 60
    while not (children := _counting_children(s.proc.pid)) or not all(map(_niced, children)):
        assert time.monotonic() < deadline, "no counting child process"
        time.sleep(0.05)
    return children


def _ended_soon(children: list[int], what: str) -> None:
    """``children`` end within 3 s, long before their count would."""
    deadline = time.monotonic() + 3
    while alive := [c for c in children if _running(c)]:
        assert time.monotonic() < deadline, f"counting process {alive} {what}"
        time.sleep(0.05)


def _big_workspace(root: Path, files: int) -> None:
    root.mkdir()
    for i in range(files):  # ~7 KB each: seconds of counting per 300 files here
        (root / f"mod{i}.py").write_text("".join(f"def zorbl_{i}_{j}(a, b):\n    return a.zq_{j} + b.zq_{i}\n"
                                                 for j in range(150)))


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc (Linux)")
def test_a_superseded_count_ends_its_process_at_once(tmp_path: Path):
    """The folder goes while its 1,500 files are counted (tens of seconds here): the counting
    process is killed at once, not left to count for nothing beside the next index's."""
    root = tmp_path / "ws"
    _big_workspace(root, 1500)
    with RawServer() as s:
        _start(s, [root.as_uri()])
        children = _counting(s)
        s.notify("workspace/didChangeWorkspaceFolders",
                 {"event": {"added": [], "removed": [{"uri": root.as_uri(), "name": "f0"}]}})
        _ended_soon(children, "went on counting for a superseded index")
        assert s.exit() == 0


def _niced(pid: int) -> bool:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[16]) > 0
    except (OSError, IndexError, ValueError):
        return False


def _running(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"  # not a zombie
    except (OSError, IndexError):
        return False


EXIT_WHILE_SENDING = r"""
import os, sys, threading, time, types
from laya_lsp.workspace_index import count_in_child

def children():
    out = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if int(open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[1]) == os.getpid():
                out.append(pid)
        except OSError:
            pass
    return out

def exit_once_the_child_runs():
    while not children():
        time.sleep(0.002)
    time.sleep(0.05)
    os._exit(0)  # as the server leaves after ``exit``, while the texts are still on their way

threading.Thread(target=exit_once_the_child_runs, daemon=True).start()
texts = ["def f(a):\n    return a.zq + 1\n" * 40_000] * 200  # ~250 MB: a send that takes a while
count_in_child(types.SimpleNamespace(texts=texts, paths=[f"m{i}.py" for i in range(200)]), None,
               threading.Event())
"""


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc (Linux)")
def test_a_server_gone_while_its_texts_are_sent_leaves_no_traceback():
    """The server exits while the counting child is still receiving the workspace's texts (an
    editor closing right after opening a project): the child ends quietly, with nothing on the
    stderr it shares with the server (the editor's log). It printed ``_pickle.UnpicklingError:
    pickle data was truncated`` and its traceback when the texts were ``spawn``'s arguments."""
    done = subprocess.run([sys.executable, "-c", EXIT_WHILE_SENDING], cwd=Path(__file__).resolve().parent.parent, capture_output=True,
                          text=True, timeout=120)  # stderr's end: the child's end too
    assert done.returncode == 0
    assert "Traceback" not in done.stderr and "Error" not in done.stderr, done.stderr[-2000:]
