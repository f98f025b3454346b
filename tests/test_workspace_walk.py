"""The workspace walker (``laya_lsp.workspace.read_workspace``): what it reads, skips and stops at."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from laya_lsp.workspace import read_workspace


def _write(root: Path, rel: str, text: str = "", data: bytes | None = None) -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    if data is not None:
        path.write_bytes(data)
    else:
        path.write_text(text, "utf-8")
    return path


def _names(ws) -> set[str]:
    """The first word after ``def``/``func`` in every text read (one per test file)."""
    out = set()
    for texts in ws.texts.values():
        for t in texts:
            out.add(t.split()[1].split("(")[0])
    return out


def test_reads_known_languages_grouped_by_language(tmp_path):
    _write(tmp_path, "a.py", "def alpha(): pass\n")
    _write(tmp_path, "sub/b.go", "func beta() {}\n")
    _write(tmp_path, "web/c.ts", "function gamma() {}\n")
    _write(tmp_path, "web/c.d.ts", "declare delta(): void\n")  # declarations are not typed code
    _write(tmp_path, "notes.txt", "def epsilon(): pass\n")
    _write(tmp_path, "crlf.py", "def zeta():\r\n    pass\r\n")
    ws = read_workspace([tmp_path])
    assert set(ws.texts) == {"python", "go", "typescript"}
    assert _names(ws) == {"alpha", "beta", "gamma", "zeta"}
    assert ws.files == 4 and ws.stopped is None
    assert all("\r" not in t for t in ws.texts["python"])


def test_gitignore_nested_and_negated(tmp_path):
    _write(tmp_path, ".gitignore", "secret*.py\ngenerated/\n/top_only.py\n")
    _write(tmp_path, "secret_a.py", "def hidden_a(): pass\n")
    _write(tmp_path, "generated/g.py", "def hidden_g(): pass\n")
    _write(tmp_path, "top_only.py", "def hidden_top(): pass\n")
    _write(tmp_path, "pkg/top_only.py", "def kept_deep(): pass\n")  # anchored pattern: root only
    _write(tmp_path, "pkg/.gitignore", "!secret_keep.py\nlocal.py\n")
    _write(tmp_path, "pkg/secret_keep.py", "def kept_negated(): pass\n")
    _write(tmp_path, "pkg/local.py", "def hidden_local(): pass\n")
    _write(tmp_path, "local.py", "def kept_local(): pass\n")  # pkg/.gitignore does not reach up
    _write(tmp_path, ".git/info/exclude", "excluded.py\n")
    _write(tmp_path, "excluded.py", "def hidden_excluded(): pass\n")
    ws = read_workspace([tmp_path])
    assert _names(ws) == {"kept_deep", "kept_negated", "kept_local"}
    assert ws.skipped["ignored"] >= 5


def test_skips_dependencies_envs_build_output_and_vcs(tmp_path):
    _write(tmp_path, "main.py", "def kept(): pass\n")
    for rel in ("node_modules/lib/x.js", ".venv/lib/y.py", "venv/z.py", "build/b.py", "dist/d.py",
                "target/t.rs", "__pycache__/c.py", ".tox/t.py", ".git/hooks/h.py", "pkg.egg-info/e.py"):
        _write(tmp_path, rel, f"def hidden_{len(rel)}(): pass\n")
    _write(tmp_path, "myenv/pyvenv.cfg", "home = /usr/bin\n")  # a virtual environment by any name
    _write(tmp_path, "myenv/lib/site.py", "def hidden_env(): pass\n")
    ws = read_workspace([tmp_path])
    assert _names(ws) == {"kept"}


def test_skips_binary_and_large_files(tmp_path):
    _write(tmp_path, "ok.py", "def kept(): pass\n")
    _write(tmp_path, "blob.py", data=b"def hidden_bin(): pass\n\0\1\2")
    _write(tmp_path, "huge.py", "def hidden_huge(): pass\n" + "x = 1\n" * 200_000)  # 1.2 MB
    ws = read_workspace([tmp_path])
    assert _names(ws) == {"kept"}
    assert ws.skipped["binary"] == 1 and ws.skipped["too large"] == 1


@pytest.mark.skipif(not hasattr(os, "symlink"), reason="no symlinks")
def test_symlinks_out_of_the_folder_are_not_followed(tmp_path):
    outside = tmp_path / "outside"
    _write(outside, "o.py", "def hidden_outside(): pass\n")
    root = tmp_path / "root"
    _write(root, "in.py", "def kept(): pass\n")
    (root / "link_dir").symlink_to(outside, target_is_directory=True)
    (root / "link_file.py").symlink_to(outside / "o.py")
    (root / "same.py").symlink_to(root / "in.py")  # inside: read once
    # .git linked to a folder outside: its info/exclude is outside, so it is not read
    _write(outside, "info/exclude", "*.py\n")
    (root / ".git").symlink_to(outside, target_is_directory=True)
    ws = read_workspace([root])
    assert _names(ws) == {"kept"}
    assert ws.files == 1


@pytest.mark.skipif(not hasattr(os, "symlink"), reason="no symlinks")
def test_a_link_does_not_read_what_the_walk_skips(tmp_path):
    root = tmp_path / "root"
    _write(root, "in.py", "def kept(): pass\n")
    _write(root, "node_modules/pkg/index.js", "function fromNodeModules() {}\n")
    _write(root, "secret/keys.py", "def ignored_secret(): pass\n")
    _write(root, ".gitignore", "secret/\n")
    (root / "vendored.js").symlink_to(root / "node_modules/pkg/index.js")
    (root / "keys.py").symlink_to(root / "secret/keys.py")
    ws = read_workspace([root])
    assert _names(ws) == {"kept"}
    assert ws.skipped["symlink"] == 2


def test_bounds_stop_the_walk(tmp_path, caplog):
    for i in range(30):
        _write(tmp_path, f"m{i:02d}.py", f"def f{i:02d}(): pass\n" + "#" * 100 + "\n")
    ws = read_workspace([tmp_path], max_files=10)
    assert ws.files == 10 and ws.stopped == "10 files"
    assert _names(ws) == {f"f{i:02d}" for i in range(10)}  # sorted order: the same files each time
    assert "stopped at 10 files" in caplog.text
    ws = read_workspace([tmp_path], max_bytes=1000)
    assert ws.bytes <= 1000 and ws.files == 8 and "MB" in ws.stopped


def test_stop_event_and_nested_or_missing_folders(tmp_path):
    _write(tmp_path, "a.py", "def alpha(): pass\n")
    _write(tmp_path, "sub/b.py", "def beta(): pass\n")
    ws = read_workspace([tmp_path, tmp_path / "sub", tmp_path / "missing"])
    assert ws.files == 2  # sub/ is inside the first folder: read once
    stop = threading.Event()
    stop.set()
    ws = read_workspace([tmp_path], stop=stop)
    assert ws.files == 0 and ws.stopped == "cancelled"


@pytest.mark.parametrize("bad", ["!", "[z-a]", "trailing\\"])
def test_a_line_git_would_not_take_drops_only_that_line(tmp_path, bad):
    """pathspec raises on lines git passes over; the rest of the file stays in force (it was the
    whole index that failed)."""
    _write(tmp_path, "pkg/.gitignore", f"{bad}\nhidden*.py\n")
    _write(tmp_path, "pkg/hidden_one.py", "def hidden_one(): pass\n")
    _write(tmp_path, "pkg/shown.py", "def kept(): pass\n")
    _write(tmp_path, "top.py", "def kept_top(): pass\n")
    ws = read_workspace([tmp_path])
    assert _names(ws) == {"kept", "kept_top"}


def test_gitignore_idioms_git_keeps(tmp_path):
    # "ignore everything but Python files": folders are re-included by !*/, as git does
    _write(tmp_path, "a/.gitignore", "*\n!*/\n!*.py\n")
    _write(tmp_path, "a/src/core.py", "def kept_core(): pass\n")
    _write(tmp_path, "a/src/skip.go", "func hidden_go() {}\n")
    # a byte order mark (Windows Notepad) before the first pattern: git drops it
    _write(tmp_path, "b/.gitignore", data="\ufeffsecret_gen.py\n".encode("utf-8"))
    _write(tmp_path, "b/secret_gen.py", "def hidden_bom(): pass\n")
    _write(tmp_path, "b/main.py", "def kept_b(): pass\n")
    ws = read_workspace([tmp_path])
    assert _names(ws) == {"kept_core", "kept_b"}


def test_deep_trees_and_empty_folders_are_bounded(tmp_path, monkeypatch):
    import laya_lsp.workspace as W

    deep = tmp_path / "deep"
    chain = [str(deep)]
    for _ in range(1100):  # os.walk recursed past Python's limit: no index at all
        chain.append(os.path.join(chain[-1], "d"))
    for path in chain:
        os.mkdir(path)  # one at a time: os.makedirs recurses too
    deepest = os.path.join(chain[-1], "x.py")
    with open(deepest, "w") as fh:
        fh.write("def hidden_deep(): pass\n")
    _write(deep, "d/near.py", "def kept_near(): pass\n")
    try:
        ws = read_workspace([deep])
        assert _names(ws) == {"kept_near"} and ws.skipped["too deep"] == 1
    finally:  # bottom up: shutil.rmtree (pytest's clean-up of old runs) recurses too
        os.remove(deepest)
        os.remove(deep / "d" / "near.py")
        for path in reversed(chain):
            os.rmdir(path)
    # folders count as entries, and the stop event is seen per folder: a tree of empty folders
    # cannot keep a cancelled or bounded walk going
    wide = tmp_path / "wide"
    for i in range(300):
        (wide / f"e{i:03d}" / "f").mkdir(parents=True)
    ws = read_workspace([wide], max_entries=100)
    assert ws.stopped == "100 directory entries"
    stop = threading.Event()
    stop.set()
    assert read_workspace([wide], stop=stop).stopped == "cancelled"


def test_legacy_encodings_keep_their_letters(tmp_path):
    """A latin-1 file was decoded as UTF-8 with replacement (``größe_berechnen`` became ``gr``,
    two U+FFFD, ``e_berechnen``, and the fragment could be suggested); a UTF-16 file with a byte
    order mark was skipped as binary."""
    _write(tmp_path, "legacy.py", data="def größe_berechnen(): pass\n".encode("latin-1"))
    _write(tmp_path, "wide.py", data="def breite_messen(): pass\r\n".encode("utf-16"))
    _write(tmp_path, "bom8.py", data="def mit_bom(): pass\n".encode("utf-8-sig"))
    ws = read_workspace([tmp_path])
    assert _names(ws) == {"größe_berechnen", "breite_messen", "mit_bom"}
    assert not any("\ufffd" in t or "\ufeff" in t for t in ws.texts["python"])


# --- hostile .gitignore files: the walk stays bounded, what is left out is logged ------------------

def _walk_within(folders, seconds: float):
    """``read_workspace(folders)`` on a thread; fails if it takes over ``seconds`` (a FIFO read
    would block forever)."""
    result = []
    t = threading.Thread(target=lambda: result.append(read_workspace(folders)), daemon=True)
    t.start()
    t.join(seconds)
    assert result, f"the walk took over {seconds} s"
    return result[0]


@pytest.mark.parametrize("kind", ["20 MB", "binary", "500k short lines"])
def test_an_oversized_or_binary_gitignore_is_ignored_with_a_warning(tmp_path, caplog, kind):
    """A 20 MB ``.gitignore`` was dropped silently; one under 1 MB of random bytes took 12 s to
    compile (every line a regular expression) and hid every file; 500,000 short lines (1 MB) took
    minutes. Each is ignored whole, with a warning, and the walk reads the rest at once."""
    if kind == "20 MB":
        data = b"".join(b"generated_%07d/*.py\n" % i for i in range(1_000_000))
    elif kind == "binary":
        data = os.urandom(500_000)
    else:
        data = b"x\n" * 500_000
    _write(tmp_path, ".gitignore", data=data)
    _write(tmp_path, "pkg/kept.py", "def kept(): pass\n")
    ws = _walk_within([tmp_path], 10)
    assert _names(ws) == {"kept"}
    assert ".gitignore ignored" in caplog.text, caplog.text


def test_a_gitignore_of_many_patterns_keeps_its_first_ones(tmp_path, caplog):
    """30,000 patterns in 440 KB took 7 s to compile and cost every file checked 7 ms: at most
    2,000 are in force in a folder (its file's and those above it), 10,000 in a walk; the first
    ones stay in force, the rest are dropped with one warning per file."""
    _write(tmp_path, ".gitignore", "".join(f"secret{i}.py\n" for i in range(30_000)))
    _write(tmp_path, "secret0.py", "def hidden_first(): pass\n")
    _write(tmp_path, "secret1999.py", "def hidden_last_in_force(): pass\n")
    _write(tmp_path, "secret2000.py", "def kept_dropped_pattern(): pass\n")
    _write(tmp_path, "sub/.gitignore", "deeper.py\n")  # no room left below the root's 2,000
    _write(tmp_path, "sub/deeper.py", "def kept_no_room(): pass\n")
    _write(tmp_path, "other.py", "def kept(): pass\n")
    ws = _walk_within([tmp_path], 8)
    assert _names(ws) == {"kept", "kept_dropped_pattern", "kept_no_room"}
    assert "28000 of its 30000 patterns dropped" in caplog.text, caplog.text
    assert caplog.text.count("patterns dropped") == 2


def test_warnings_about_gitignore_files_are_bounded(tmp_path, caplog):
    """A tree of 200 oversized ``.gitignore`` files logs 10 warnings and a count, not 200."""
    for i in range(200):
        _write(tmp_path, f"d{i:03d}/.gitignore", data=b"\0binary")
        _write(tmp_path, f"d{i:03d}/m.py", f"def kept_{i}(): pass\n")
    ws = _walk_within([tmp_path], 20)
    assert ws.files == 200
    assert caplog.text.count("ignored (binary)") == 10
    assert "190 more warnings about .gitignore files" in caplog.text


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs")
@pytest.mark.parametrize("kind", ["fifo", "folder", "dangling link", "link inside", "exclude fifo"])
def test_a_gitignore_that_is_no_regular_file_is_passed_over(tmp_path, caplog, kind):
    """A ``.gitignore`` that is a FIFO (reading it would block the walk forever), a folder, or a
    symbolic link (git does not follow one either): passed over, logged; the walk goes on."""
    import logging

    caplog.set_level(logging.INFO, logger="laya_lsp.workspace")
    gi = tmp_path / ".gitignore"
    _write(tmp_path, "pkg/kept.py", "def kept(): pass\n")
    _write(tmp_path, "real_rules", "kept.py\n")
    if kind == "fifo":
        os.mkfifo(gi)
    elif kind == "folder":
        _write(tmp_path, ".gitignore/inner.py", "def kept_inner(): pass\n")
    elif kind == "dangling link":
        gi.symlink_to(tmp_path / "missing")
    elif kind == "link inside":
        gi.symlink_to(tmp_path / "real_rules")
    else:
        (tmp_path / ".git" / "info").mkdir(parents=True)
        os.mkfifo(tmp_path / ".git" / "info" / "exclude")
    ws = _walk_within([tmp_path], 10)
    assert _names(ws) == ({"kept", "kept_inner"} if kind == "folder" else {"kept"})
    if kind not in ("folder",):
        assert "(not a regular file)" in caplog.text, caplog.text


def test_pathological_patterns_are_dropped_with_one_warning(tmp_path, caplog):
    """1,000 lines like ``**/**/**/**/a*b*c*d*`` (too slow to match) logged 1,000 warnings: one
    per file now, with the count. A 100,000-character line is a plain pattern: kept, bounded by
    the bytes read."""
    _write(tmp_path, ".gitignore", "**/**/**/**/a*b*c*d*\n" * 1000 + "a" * 100_000 + "\nsecret*.py\n")
    _write(tmp_path, "secret_x.py", "def hidden_secret(): pass\n")
    _write(tmp_path, "abcd.py", "def kept(): pass\n")
    ws = _walk_within([tmp_path], 10)
    assert _names(ws) == {"kept"}
    assert caplog.text.count("too slow to match") == 1
    assert "1000 line(s) dropped" in caplog.text


def test_each_workspace_folder_has_its_own_gitignore_bounds(tmp_path, caplog):
    """Two workspace folders: the first one's large ``.gitignore`` (500 KB of comments) used up the
    walk's 512 KB, so the second one's ``gen/`` line was never read and its generated files were
    indexed. Each folder's rules are bounded on their own."""
    a, b = tmp_path / "a", tmp_path / "b"
    _write(a, ".gitignore", "# " + "x" * 500_000 + "\nsecret_a.py\n")
    _write(a, "secret_a.py", "def hidden_a(): pass\n")
    _write(a, "src/m.py", "def kept_a(): pass\n")
    _write(b, ".gitignore", "# " + "y" * 20_000 + "\ngen/\n")
    _write(b, "gen/out.py", "def hidden_gen(): pass\n")
    _write(b, "src/n.py", "def kept_b(): pass\n")
    ws = _walk_within([a, b], 10)
    assert _names(ws) == {"kept_a", "kept_b"}, caplog.text
    # a single file over the bound: the warning says how large it is and that its rules are not used
    _write(b, ".gitignore", "# " + "y" * 600_000 + "\ngen/\n")
    ws = _walk_within([b], 10)
    assert _names(ws) == {"kept_b", "hidden_gen"}
    assert "ignored: 600 KB, over the 512 KB" in caplog.text and "its rules are not applied" in caplog.text, \
        caplog.text
