"""Finding and reading a workspace's source files (no LSP here; :mod:`.workspace_index` drives it).

:func:`read_workspace` walks the workspace folders and returns the text of each source file of a
language the engine knows (``engine.languages.for_path``), grouped by language. It honours the
``.gitignore`` files it meets (and ``.git/info/exclude``), with git's rules as implemented by
``pathspec.GitIgnoreSpec``; it never enters version-control folders, ``node_modules``, virtual
environments (a folder named ``.venv``/``venv`` or holding ``pyvenv.cfg``) or build output; it
skips binary files (a NUL byte in the first 8 KB, unless the file starts with a UTF-16 byte order
mark; files that are not UTF-8 are read as Windows-1252), files over 1 MB, symbolic links (a file
linked from inside the folder is read where it lies, if it is not skipped there) and folders nested
over 64 deep, and stops at 20,000 files, 30 MB of text or 500,000 directory entries. Rules files
are bounded too: one that is not a regular file (a link, a FIFO), is binary or does not fit in the
512 KB read in one workspace folder's walk is ignored, and at most 2,000 patterns are in force in a
folder, 10,000 in a workspace folder's walk (with a warning in the log). It reads nothing outside the folders: not the user's global git
excludes, not a symlinked folder (never followed), not the rules of a ``.git`` linked elsewhere; a
file is opened without following a link, so one swapped for a link after it was listed is not
read through it.
"""

from __future__ import annotations

import logging
import os
import re
import stat
import threading
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pathspec

from engine.languages import CODE_LANGUAGES, for_path

log = logging.getLogger(__name__)

MAX_FILES = 20_000
"""Most source files read in one walk (all folders together)."""
MAX_BYTES = 30_000_000
"""Most bytes of source read in one walk; the counts built from them stay well under this."""
MAX_FILE_BYTES = 1_000_000
"""Larger files are skipped: generated code, bundles and data, not what the user types."""
MAX_ENTRIES = 500_000
"""Most directory entries looked at, folders included (a tree of many non-source files or empty
folders stops here)."""
MAX_DEPTH = 64
"""Folders nested deeper than this are not entered (a tree ~1,000 deep overflowed ``os.walk``'s
recursion and ended the whole walk)."""
BINARY_PROBE = 8192
"""A file with a NUL byte in its first this-many bytes is binary (git's own test)."""

SKIP_DIRS = frozenset({
    ".git", ".hg", ".svn", ".jj",  # version control
    "node_modules", "bower_components", ".venv", "venv", "site-packages",  # dependencies
    "build", "dist", "target", "__pycache__", ".tox", ".nox", ".eggs", ".next", ".gradle",
    ".mypy_cache", ".pytest_cache", ".ruff_cache", ".cache",  # build output and caches
})
"""Folder names never entered, wherever they are (``*.egg-info`` too)."""


@dataclass
class WorkspaceFiles:
    """What one walk read."""

    texts: dict[str, list[str]] = field(default_factory=dict)
    """Language name (``engine.languages``) -> the texts of that language's files."""
    paths: dict[str, list[str]] = field(default_factory=dict)
    """Language name -> the paths of those files, in the same order (the folder's path joined with
    the file's path inside it)."""
    files: int = 0
    bytes: int = 0
    skipped: Counter = field(default_factory=Counter)
    """Why files or folders were passed over -> how many (``"ignored"``, ``"binary"``, ...)."""
    stopped: str | None = None
    """The bound that ended the walk early (``"20000 files"``, ...), or ``"cancelled"``."""


MAX_PATTERN_STARS = 3
"""Most ``*`` wildcards in one ``.gitignore`` pattern, all its path segments together (a segment
that is just ``**`` counts as one). pathspec matches with backtracking regular expressions,
exponential in that number: ``a*a*a*a*a*a*a*a*a*a*b`` against a 40-letter file name took 10 s,
holding the GIL, so every completion waited on it (a cloned repository could freeze the server).
Counting per segment was not enough: the wildcards of different segments multiply too
(``**/a*a*a*/**/a*a*a*/**/a*a*a*/b``, 3 per segment, took 2.2 s against a 30-deep path, and
``**/a/**/a/**/a/**/a/**/a/**/a/**/a/**/a/b`` 9.5 s against a 40-deep one). With 3 in all, a
check costs at most ~10 ms on a 255-character name (``**/a/**/a/**/a/b`` 3 ms on a 64-deep
path). A line with more is dropped with a warning (the files it would ignore are read)."""
_STAR = re.compile(r"(?<!\\)\*")


def _wildcards(line: str) -> int:
    """The ``*`` wildcards of a ``.gitignore`` line (a ``**`` segment counts once)."""
    return sum(1 if seg == "**" else len(_STAR.findall(seg)) for seg in line.strip().split("/"))


def _costly(line: str) -> bool:
    """Whether a ``.gitignore`` line has more than :data:`MAX_PATTERN_STARS` wildcards."""
    return _wildcards(line) > MAX_PATTERN_STARS


MAX_RULES_BYTES = 512_000
"""Most bytes of rules files (``.gitignore``, ``.git/info/exclude``) read in one walk of a workspace
folder, all of them together; a file that does not fit in what is left is ignored whole, with a
warning (git ignores
one over 100 MB). pathspec compiles each line to a regular expression in Python, up to ~5 us a
byte: a 900 KB ``.gitignore`` of random bytes took 12 s."""
MAX_RULES = 10_000
"""Most pattern lines compiled in one walk of a workspace folder, all rules files together (~0.2 ms each: a 0.9 MB
``.gitignore`` of 120,000 short lines took 25 s); the lines past it are dropped, with a warning."""
MAX_RULES_IN_FORCE = 2_000
"""Most patterns in force in one folder (its ``.gitignore``'s and those of the folders above it):
every file and folder is checked against each of them (~0.3 us each; 120,000 patterns cost 30 ms
a file, 10 minutes for 20,000 files). A rules file's lines past it are dropped, with a warning."""
MAX_RULES_WARNINGS = 10
"""Warnings about rules files logged in one walk; the others go to the debug log, counted in a
last warning (a tree of 10,000 oversized ``.gitignore`` files must not flood the log)."""


@dataclass
class _RulesBudget:
    """What is left of one workspace folder's bounds on rules files (reset for each), and the walk's
    warnings about them."""

    bytes: int = MAX_RULES_BYTES
    lines: int = MAX_RULES
    warnings: int = 0

    def warn(self, msg: str, *args) -> None:
        self.warnings += 1
        log.log(logging.WARNING if self.warnings <= MAX_RULES_WARNINGS else logging.DEBUG,
                "workspace: " + msg, *args)


def _patterns(lines: list[str], room: int, where: str, budget: _RulesBudget) -> list[str]:
    """The lines of a rules file worth compiling: no blank line or comment, no line too costly to
    match (:data:`MAX_PATTERN_STARS`), and the first ``room`` of the others; what is dropped is
    warned about once per file."""
    lines = [line for line in lines if line.strip() and not line.startswith("#")]
    costly = [line for line in lines if _costly(line)]
    if costly:
        budget.warn("%s: %d line(s) dropped (over %d wildcards: too slow to match), e.g. %r",
                    where, len(costly), MAX_PATTERN_STARS, costly[0][:200])
        lines = [line for line in lines if not _costly(line)]
    if len(lines) > room:
        budget.warn("%s: %d of its %d patterns dropped (at most %d in force in a folder, %d in a "
                    "walk)", where, len(lines) - max(room, 0), len(lines), MAX_RULES_IN_FORCE, MAX_RULES)
        lines = lines[:max(room, 0)]
    return lines


def _specs(lines: list[str]) -> tuple[pathspec.GitIgnoreSpec, pathspec.PathSpec]:
    """One ``.gitignore``'s rules for files (``GitIgnoreSpec``: git's rules) and for folders (plain
    last-match-wins: ``GitIgnoreSpec`` lets ``*`` win over a later ``!*/`` for a folder, which
    would hide every folder of the common "ignore all but ..." idiom). A line git would not take
    (``!`` alone, ``[z-a]``, a trailing ``\\``) is dropped; the others stay in force, as in git."""
    try:
        return pathspec.GitIgnoreSpec.from_lines(lines), pathspec.PathSpec.from_lines("gitignore", lines)
    except (ValueError, re.error):
        good = []
        for line in lines:
            try:
                pathspec.GitIgnoreSpec.from_lines([line])
                pathspec.PathSpec.from_lines("gitignore", [line])
            except (ValueError, re.error):
                log.debug("workspace: .gitignore line %r dropped (not a valid pattern)", line)
                continue
            good.append(line)
        return pathspec.GitIgnoreSpec.from_lines(good), pathspec.PathSpec.from_lines("gitignore", good)


class _Ignores:
    """The ``.gitignore`` rules in force in one folder: ``(base, file spec, folder spec)`` from the
    top down."""

    def __init__(self, rules: tuple[tuple[str, pathspec.GitIgnoreSpec, pathspec.PathSpec], ...] = ()) -> None:
        self.rules = rules
        self.count = sum(len(files.patterns) for _, files, _ in rules)
        """Patterns in force (bounded by :data:`MAX_RULES_IN_FORCE`)."""

    def child(self, base: str, lines: list[str], where: str, budget: _RulesBudget) -> _Ignores:
        """With the rules of the file ``where`` (its ``lines``) of the folder ``base``, within
        what is left of ``budget`` (its lines are taken from it)."""
        lines = _patterns(lines, min(MAX_RULES_IN_FORCE - self.count, budget.lines), where, budget)
        if not lines:
            return self
        budget.lines -= len(lines)
        files, folders = _specs(lines)
        return _Ignores(self.rules + ((base, files, folders),)) if len(files.patterns) else self

    def ignored(self, rel: str, is_dir: bool) -> bool:
        """Is ``rel`` (posix, relative to the walked folder) ignored? A deeper file's verdict wins
        over a shallower one's, and the last matching pattern in a file wins (git's rules)."""
        verdict = False
        for base, files, folders in self.rules:
            sub = rel[len(base) + 1:] if base else rel
            result = folders.check_file(sub + "/") if is_dir else files.check_file(sub)
            if result.include is not None:
                verdict = result.include
        return verdict


def _read_rules(path: str, root: str, budget: _RulesBudget) -> list[str]:
    """The lines of a rules file inside ``root``, within what is left of ``budget``'s bytes (taken
    from it); a UTF-8 byte order mark is dropped, as git drops it. No lines (with a warning, or an
    info line) for a file that is not a regular file (a symbolic link, which git does not follow either,
    a folder, a FIFO, which must never block the walk), is reached through a link out of ``root``
    (``.git`` linked elsewhere), does not fit in the budget or is binary (a NUL byte in its first
    :data:`BINARY_PROBE` bytes)."""
    try:
        st = os.lstat(path)
        if not stat.S_ISREG(st.st_mode):
            log.info("workspace: %s ignored (not a regular file)", path)
            return []
        if not _inside(os.path.realpath(path), root):
            return []
        data = _read_regular(path, budget.bytes)
    except (FileNotFoundError, NotADirectoryError):  # no .git/info/exclude (or .git is a file)
        return []
    except OSError as e:
        log.info("workspace: %s ignored (%s)", path, e)
        return []
    if data is None:
        log.info("workspace: %s ignored (not a regular file)", path)
        return []
    if len(data) > budget.bytes:
        budget.warn("%s ignored: %d KB, over the %d KB of rules files read in a workspace folder's "
                    "walk (%d KB left): its rules are not applied", path, max(len(data), st.st_size) // 1000,
                    MAX_RULES_BYTES // 1000, budget.bytes // 1000)
        return []
    if b"\0" in data[:BINARY_PROBE]:
        budget.warn("%s ignored (binary)", path)
        return []
    budget.bytes -= len(data)
    return data.decode("utf-8-sig", errors="replace").splitlines()


def _read_regular(path: str, limit: int) -> bytes | None:
    """At most ``limit + 1`` bytes of the regular file ``path`` (None for anything else: what
    ``path`` names is checked once opened, without following a link or waiting on a FIFO, so a
    file swapped since it was listed cannot block the walk or read elsewhere). A file whose size
    is over ``limit`` is not read: ``limit + 1`` empty bytes stand for it.

    Raises:
        OSError: it cannot be opened or read (gone, a link, no permission).
    """
    flags = (os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOFOLLOW", 0)
             | getattr(os, "O_BINARY", 0))
    fd = os.open(path, flags)
    with open(fd, "rb", closefd=True) as fh:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return None
        if st.st_size > limit:
            return bytes(limit + 1)
        return fh.read(limit + 1)


def _stopped(out: WorkspaceFiles, entries: int, max_entries: int, stop: threading.Event | None) -> bool:
    """Whether the walk must end here: too many entries looked at, or a newer walk's stop (said in
    ``out.stopped``)."""
    if entries > max_entries:
        out.stopped = f"{max_entries} directory entries"
    elif stop is not None and stop.is_set():
        out.stopped = "cancelled"
    return out.stopped is not None


def _is_skipped_dir(path: str, name: str) -> bool:
    return (name in SKIP_DIRS or name.endswith(".egg-info")
            or os.path.exists(os.path.join(path, "pyvenv.cfg")))  # a virtual environment under any name


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def read_workspace(folders: list[str | Path], *, max_files: int = MAX_FILES, max_bytes: int = MAX_BYTES,
                   max_file_bytes: int = MAX_FILE_BYTES, max_entries: int = MAX_ENTRIES,
                   stop: threading.Event | None = None) -> WorkspaceFiles:
    """Read the source files of ``folders`` (see the module docstring for what is skipped).

    Args:
        folders: local folder paths. A folder inside another one listed is read once: with the
            outer one, or, where the outer one's walk does not enter it (``.gitignore``'d,
            ``node_modules``, build output, too deep), on its own (the user listed it); one that
            is missing or not a folder is skipped.
        max_files, max_bytes: bounds on what is read (all folders together); the walk stops at the
            first one reached and says so in ``stopped`` (and in the log).
        max_file_bytes: larger files are skipped.
        max_entries: most directory entries looked at.
        stop: set it to end the walk early (a newer walk supersedes this one).

    Returns:
        The texts per language, newlines normalized to ``\\n``, in a stable order (sorted paths).
    """
    out = WorkspaceFiles()
    budget = _RulesBudget()
    entries = 0
    roots = _real_folders(folders)
    nested = {r for r in roots if any(o != r and _inside(r, o) for o in roots)}
    entered: set[str] = set()  # the nested folders a walk went into
    for root in roots:
        if root in entered:
            continue
        # each folder's rules files have their own bounds: one folder's must not leave another's
        # top .gitignore unread (its build output indexed)
        budget.bytes, budget.lines = MAX_RULES_BYTES, MAX_RULES
        exclude = os.path.join(root, ".git", "info", "exclude")
        ignores = {root: _Ignores().child("", _read_rules(exclude, root, budget), exclude, budget)}
        for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
            here = ignores.pop(dirpath)
            if dirpath in nested:
                entered.add(dirpath)
            entries += 1 + len(dirnames)  # folders count too: a tree of empty folders is bounded
            if _stopped(out, entries, max_entries, stop):
                break
            rel_dir = os.path.relpath(dirpath, root).replace(os.sep, "/")
            rel_dir = "" if rel_dir == "." else rel_dir
            if ".gitignore" in filenames:
                rules = os.path.join(dirpath, ".gitignore")
                here = here.child(rel_dir, _read_rules(rules, root, budget), rules, budget)
            deep = rel_dir.count("/") + 1 >= MAX_DEPTH if rel_dir else MAX_DEPTH <= 0
            keep = []
            for name in sorted(dirnames):
                rel = f"{rel_dir}/{name}" if rel_dir else name
                path = os.path.join(dirpath, name)
                if path in nested and rel.count("/") + 1 >= MAX_DEPTH // 2:
                    continue  # a listed folder deep in this one: walked on its own, with its own depth
                if deep:
                    out.skipped["too deep"] += 1
                elif os.path.islink(path):
                    out.skipped["symlink"] += 1
                elif _is_skipped_dir(path, name):
                    out.skipped["skipped folder"] += 1
                elif here.ignored(rel, is_dir=True):
                    out.skipped["ignored"] += 1
                else:
                    keep.append(name)
                    ignores[path] = here
            dirnames[:] = keep  # os.walk descends only into these
            for name in sorted(filenames):
                entries += 1
                if _stopped(out, entries, max_entries, stop):
                    break
                lang = for_path(name)
                if lang not in CODE_LANGUAGES:  # prose (README.md, notes.txt) is not indexed
                    continue
                rel = f"{rel_dir}/{name}" if rel_dir else name
                if here.ignored(rel, is_dir=False):
                    out.skipped["ignored"] += 1
                    continue
                text = _read_source(os.path.join(dirpath, name), root, max_file_bytes, out)
                if text is None:
                    continue
                size = len(text.encode("utf-8"))
                if out.files >= max_files:
                    out.stopped = f"{max_files} files"
                elif out.bytes + size > max_bytes:
                    out.stopped = f"{max_bytes / 1e6:.0f} MB of text"
                if out.stopped:
                    break
                out.texts.setdefault(lang.name, []).append(text)
                out.paths.setdefault(lang.name, []).append(os.path.join(dirpath, name))
                out.files += 1
                out.bytes += size
            if out.stopped:
                break
        if out.stopped:
            break
    if budget.warnings > MAX_RULES_WARNINGS:
        log.warning("workspace: %d more warnings about .gitignore files (see the debug log)",
                    budget.warnings - MAX_RULES_WARNINGS)
    if out.stopped and out.stopped != "cancelled":
        log.warning("workspace index stopped at %s (%d files, %.1f MB read); the rest is left out",
                    out.stopped, out.files, out.bytes / 1e6)
    return out


def _real_folders(folders: list[str | Path]) -> list[str]:
    """The real paths of those of ``folders`` that are folders, sorted (outer ones first); one
    that cannot be resolved (a link swapped for a folder as it is resolved) is left out."""
    out = set()
    for folder in folders:
        try:
            if os.path.isdir(folder):
                out.add(os.path.realpath(folder))
        except OSError as e:
            log.info("workspace folder %s not read: %s", folder, e)
    return sorted(out)


def _read_source(path: str, root: str, max_file_bytes: int,
                 out: WorkspaceFiles) -> str | None:
    """A source file's text, or None (counted in ``out.skipped``) when it must be passed over."""
    try:
        real = os.path.realpath(path)  # OSError where a link is swapped for a file as it is resolved
        if os.path.islink(path) or not _inside(real, root):
            # A link's target inside the folder is read where it lies, if the walk reads it there:
            # one into node_modules, build output or a .gitignore'd file must not be read through it
            out.skipped["symlink"] += 1
            return None
        if not os.path.isfile(real):
            return None
        data = _read_regular(real, max_file_bytes)  # a file swapped since: not read, no wait
        if data is None:
            return None
    except OSError as e:
        log.debug("workspace: cannot read %s: %s", path, e)
        out.skipped["unreadable"] += 1
        return None
    if len(data) > max_file_bytes:
        out.skipped["too large"] += 1
        return None
    if data[:2] in (b"\xff\xfe", b"\xfe\xff"):  # UTF-16 with a byte order mark (NULs are expected)
        text = data.decode("utf-16", errors="replace")
    elif b"\0" in data[:BINARY_PROBE]:
        out.skipped["binary"] += 1
        return None
    else:
        try:
            text = data.decode("utf-8-sig")
        except UnicodeDecodeError:  # a legacy 8-bit file (PEP 263's latin-1): its letters stay whole
            text = data.decode("cp1252", errors="replace")
    return text.replace("\r\n", "\n")
