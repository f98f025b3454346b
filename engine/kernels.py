"""Load the numba backend's kernels: compiled ahead of time when possible, else JIT.

numba's JIT keeps LLVM in the process: importing numba and llvmlite and loading the compiled
kernels costs ~100-110 MB of resident memory, more than the rest of the server. The same two
functions (``engine.kernels_numba``) compiled ahead of time into a small extension module
(numba ``pycc``, ~0.7 MB) run at the same speed without numba in the process.

So: the first start on a machine uses the JIT (the language server instead serves on the NumPy
backend meanwhile, :func:`prepare`, ``engine.backends.NumbaUpgrade``) and, when a C compiler is
there, builds the module in a background process (``python -m engine.kernels build``, at low
priority, ~5 s of CPU) into
the cache folder (``$LAYA_CACHE_DIR/kernels/<key>``, see ``engine.lexicon_cache.cache_root``); later
starts load it. The key covers the kernels' source, numba's and Python's versions and this CPU
(the module is compiled for it), so an upgrade or another machine sharing the home folder never
loads a stale or foreign build. ``LAYA_AOT=0`` turns all of this off (JIT only).
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import logging
import os
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path

log = logging.getLogger(__name__)

MODULE = "laya_kernels_aot"
LOCK_STALE_S = 600
"""A build lock older than this (a build that died) no longer blocks a new build."""

_loaded = None
_source = "jit"
_builds: dict[str, subprocess.Popen] = {}
"""Builds this process started, by PID."""


def _cpu_id() -> str:
    """What the compiled code depends on: the CPU model and its feature flags."""
    try:
        with open("/proc/cpuinfo") as fh:
            lines = [ln for ln in fh if ln.startswith(("model name", "flags", "Features", "CPU part"))]
        return "".join(sorted(set(lines)))
    except OSError:
        return platform.processor() or platform.machine()


def _numba_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("numba")
    except PackageNotFoundError:
        return "none"


def aot_folder() -> Path | None:
    """Where this machine's ahead-of-time build lives (None: no cache folder)."""
    from .lexicon_cache import cache_root

    root = cache_root()
    if root is None:
        return None
    src = (Path(__file__).with_name("kernels_numba.py")).read_bytes()
    key = hashlib.sha1(src + f"|{_numba_version()}|{sys.version}|{platform.machine()}|{_cpu_id()}".encode())
    return root / "kernels" / key.hexdigest()[:16]


def _aot_enabled() -> bool:
    return os.environ.get("LAYA_AOT", "1") != "0"


def _import_built(folder: Path):
    for path in sorted(folder.glob(f"{MODULE}*")):
        if path.suffix in (".so", ".pyd"):
            spec = importlib.util.spec_from_file_location(
                MODULE, path, loader=importlib.machinery.ExtensionFileLoader(MODULE, str(path)))
            mod = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(mod)
            return mod
    return None


def source() -> str:
    """``"aot"`` or ``"jit"``: which kernels :func:`load` returned."""
    return _source


def load():
    """The kernels (an object with ``step`` and ``qgemv``, see ``engine.kernels_numba``).

    Ahead-of-time ones when this machine has a build; otherwise the JIT ones, and (once) a
    background build is started for the next process. Never raises for a missing or broken
    build: it logs and falls back to the JIT.
    """
    global _loaded, _source
    if _loaded is not None:
        return _loaded
    folder = aot_folder() if _aot_enabled() else None
    if folder is not None and folder.is_dir() and load_built(folder) is not None:
        return _loaded
    from . import kernels_numba

    _loaded, _source = kernels_numba, "jit"
    if folder is not None and not folder.is_dir():
        start_build(folder)
    return kernels_numba


def load_built(folder: Path):
    """The kernels of the ahead-of-time build in ``folder`` (and :func:`load` returns them from
    now on), or None when it cannot be imported (logged; nothing else changes)."""
    global _loaded, _source
    if _loaded is not None and _source == "aot":
        return _loaded
    try:
        mod = _import_built(folder)
    except (ImportError, OSError) as e:
        log.warning("numba kernels: cannot load the build in %s (%s); using the JIT", folder, e)
        return None
    if mod is not None:
        _loaded, _source = mod, "aot"
        log.info("numba kernels: loaded the ahead-of-time build in %s", folder)
    return mod


def _lock_held(lock: Path) -> bool:
    """Whether a build holds ``lock``: its process (the PID written in it) is alive, or, with no
    PID yet, the lock is younger than :data:`LOCK_STALE_S`. A build killed by a signal leaves its
    lock behind (``build`` removes it in a ``finally``)."""
    try:
        text = lock.read_text().strip()
        age = time.time() - lock.stat().st_mtime
    except OSError:
        return False
    ours = _builds.get(text)
    if ours is not None:  # started by this process: poll() also reaps it (no zombie to signal)
        return ours.poll() is None
    if text.isdigit():
        try:
            os.kill(int(text), 0)
        except ProcessLookupError:
            return False
        except OSError:
            pass  # alive, another user's
        return age <= 10 * LOCK_STALE_S  # a PID reused by another process: not for ever
    return age <= LOCK_STALE_S


def prepare() -> str:
    """How this process can have the kernels without compiling them itself, as a server that may
    start on the NumPy backend and switch later (``engine.backends.NumbaUpgrade``) asks.

    Returns:
        ``"ready"``: loaded already, or this machine's ahead-of-time build is there;
        ``"building"``: not yet: a background build is running (started now if none was; ~5-10
        s of CPU at low priority), where the JIT would compile for ~10 s of CPU in this process
        (measured on the 2-core dev machine, 2026-12-01: ``laya-lsp --check`` with no caches at
        all took 9.8-10.6 s, 1.2 s on the NumPy backend);
        ``"jit"``: only the JIT can give them (ahead-of-time builds are off, failed before for
        this key, or impossible: no C compiler, no cache folder).
    """
    if _loaded is not None:
        return "ready"
    folder = aot_folder() if _aot_enabled() else None
    if folder is None:
        return "jit"
    state = build_state(folder)
    if state == "none":
        state = "building" if start_build(folder) else "built" if folder.is_dir() else "failed"
    return {"built": "ready", "building": "building"}.get(state, "jit")


FAILED_COMPILER = "compiler: "
"""The first line of a ``FOLDER.failed`` marker: the C compiler the build failed with
(:func:`_compiler`); with another one there now (one installed since), the build is tried again."""


def _compiler() -> str:
    """The C compiler a build would use, as its real path and modification time ("" for none)."""
    for name in ("cc", "gcc", "clang"):
        path = shutil.which(name)
        if path:
            try:
                return f"{os.path.realpath(path)} {os.stat(path).st_mtime_ns}"
            except OSError:
                continue
    return ""


def _failed_before(folder: Path) -> bool:
    """Whether a build into ``folder`` failed with the compiler there now. A marker naming another
    compiler (a fresh user had none, then installed gcc) is removed, so the build runs again; one
    naming none (written before markers named it) stands."""
    marker = folder.with_name(folder.name + ".failed")
    try:
        first = marker.read_text(errors="replace").split("\n", 1)[0]
    except OSError:
        return False
    if first.startswith(FAILED_COMPILER) and first[len(FAILED_COMPILER):] != _compiler():
        marker.unlink(missing_ok=True)
        return False
    return True


def build_state(folder: Path) -> str:
    """The ahead-of-time build into ``folder`` (:func:`aot_folder`), in a few ``stat`` calls:
    ``"built"``; ``"failed"`` (for this key and C compiler, not retried); ``"building"`` (a live
    process holds the lock); ``"none"`` (none has run, or its process was killed before a result)."""
    if folder.is_dir():
        return "built"
    if folder.with_name(folder.name + ".failed").exists() and _failed_before(folder):
        return "failed"
    if _lock_held(folder.with_name(folder.name + ".lock")):
        return "building"
    return "built" if folder.is_dir() else "none"  # (it may have landed just now)


def local_build_state() -> str | None:
    """:func:`build_state` of this machine's build (:func:`aot_folder`); None where there is none
    to have (no cache folder, or no numba: the NumPy or MLX backend serves)."""
    folder = aot_folder()
    if folder is None or _numba_version() == "none":
        return None
    return build_state(folder)


def start_build(folder: Path) -> bool:
    """Start ``python -m engine.kernels build FOLDER`` in the background (low priority, detached,
    output to ``FOLDER.log``) unless one is running, one failed before with this C compiler, or
    there is no C compiler.

    Returns:
        True when a build was started.
    """
    if not (shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")):
        log.info("numba kernels: no C compiler, so no ahead-of-time build (the JIT costs ~100 MB more memory)")
        return False
    lock = folder.with_name(folder.name + ".lock")
    if _failed_before(folder):
        return False
    try:
        folder.parent.mkdir(parents=True, exist_ok=True)
        if lock.exists() and not _lock_held(lock):
            lock.unlink(missing_ok=True)  # its build died
        fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except OSError:
        return False  # a build is running (or the cache is not writable)
    if folder.is_dir():  # landed while we looked
        os.close(fd)
        lock.unlink(missing_ok=True)
        return False
    cmd = [sys.executable, "-m", "engine.kernels", "build", str(folder)]
    if shutil.which("nice"):  # low priority: it must not slow the editor's first minutes
        cmd = ["nice", "-n", "19", *cmd]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(Path(__file__).resolve().parent.parent),
                                                       os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep))
    with open(folder.with_name(folder.name + ".log"), "w") as out:
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True, env=env)
    _builds[str(proc.pid)] = proc
    os.write(fd, str(proc.pid).encode())  # who holds the lock (see _lock_held)
    os.close(fd)
    log.info("numba kernels: building ahead of time into %s (background)", folder)
    return True


def build(folder: Path) -> None:
    """Compile into a temporary sibling of ``folder``, then rename it into place (so a reader
    never sees half a build). On failure write ``FOLDER.failed`` (no retry for this key while the
    C compiler stays the same: :func:`_failed_before`)."""
    from .kernels_numba import build_aot

    lock = folder.with_name(folder.name + ".lock")
    tmp = folder.with_name(folder.name + f".tmp{os.getpid()}")
    try:
        if folder.is_dir():
            return  # another build landed first
        tmp.mkdir(parents=True, exist_ok=True)
        build_aot(tmp, MODULE)
        os.replace(tmp, folder)
    except Exception as e:
        if not folder.is_dir():  # (not a second build losing the race to rename)
            folder.with_name(folder.name + ".failed").write_text(
                f"{FAILED_COMPILER}{_compiler()}\n{type(e).__name__}: {e}\n")
        raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        lock.unlink(missing_ok=True)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "build":
        t0 = time.perf_counter()
        build(Path(sys.argv[2]))
        print(f"built in {time.perf_counter() - t0:.1f} s")
    else:
        print("usage: python -m engine.kernels build FOLDER", file=sys.stderr)
        sys.exit(2)
