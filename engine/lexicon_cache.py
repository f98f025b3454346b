"""Shipped lexicons memory-mapped from an uncompressed copy in the user's cache.

``lexicon-<language>.npz`` is compressed, so it cannot be mapped; read into memory, each language
costs 5-21 MB of arrays. On first use :func:`load_mapped` writes the file's parts once, uncompressed
(in the narrow types :func:`engine.lexicon.narrow` picks), with the offsets and hash indices of its
strings, to ``$LAYA_CACHE_DIR`` (default ``$XDG_CACHE_HOME/laya`` or ``~/.cache/laya``), under
``lexicons/<name>-<key>/`` (~11 MB per language); the key is a hash of the file's content and the
cache format, so every checkout of the same model shares one copy and a changed model gets a new
one (copies beyond the ``KEEP_COPIES`` most recently used of a name are removed). Later loads map
those files read-only: only the
pages that lookups touch count in the server's memory, and processes share them.

The copy is written to a temporary folder and renamed into place, so a reader never sees half of
one and two servers starting together both end up with a complete copy. Anything that fails (no
writable cache, a damaged copy, ``LAYA_CACHE_DIR=""``) falls back to reading the file into memory.
"""

from __future__ import annotations

import hashlib
import logging
import mmap
import os
import shutil
import tempfile
from pathlib import Path

import numpy as np

log = logging.getLogger(__name__)

FORMAT = 1
"""Bump when the cached layout changes (old copies are then ignored)."""
STRINGS = ("words", "bi_keys", "tri_keys")
ARRAYS = ("counts", "first_tokens", "bi_offsets", "bi_ix", "bi_cnt", "tri_offsets", "tri_ix", "tri_cnt")


def cache_root() -> Path | None:
    """The cache folder (``$LAYA_CACHE_DIR``, else ``$XDG_CACHE_HOME/laya``, else
    ``~/.cache/laya``); None when ``LAYA_CACHE_DIR`` is set empty (caching off)."""
    env = os.environ.get("LAYA_CACHE_DIR")
    if env is not None:
        return Path(env) if env else None
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "laya"


def cache_folder(path: Path) -> Path | None:
    """Where the mapped copy of lexicon file ``path`` lives (whether or not it exists yet)."""
    root = cache_root()
    if root is None:
        return None
    digest = hashlib.sha1(f"{FORMAT}|".encode())
    with open(path, "rb") as fh:  # ~10 ms for a 5 MB file, once per language per process
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return root / "lexicons" / f"{path.stem}-{digest.hexdigest()[:16]}"


def load_mapped(cls, path: Path):
    """``cls`` (:class:`engine.lexicon.CorpusLexicon`) mapped from the cached copy of ``path``,
    written first if missing; None when that is not possible (the reason is logged)."""
    try:
        folder = cache_folder(Path(path))
        if folder is None:
            return None
        if not (folder / "done").exists():
            _write(cls, Path(path), folder)
        return _open(cls, folder)
    except Exception as e:  # noqa: BLE001 - any failure: the caller reads the file into memory
        log.warning("lexicon %s: no memory-mapped copy (%s: %s); reading it into memory",
                    path, type(e).__name__, e)
        return None


def _write(cls, path: Path, folder: Path) -> None:
    lex = cls.load(path, mapped=False)  # raises ValueError for a corrupt file, as load does
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=folder.name + ".tmp-", dir=folder.parent))
    try:
        for name in STRINGS:
            sa = lex.words if name == "words" else getattr(lex, name[:-5]).keys
            hashes, order = sa.hash_index()
            (tmp / f"{name}.bin").write_bytes(sa.data[:])
            np.save(tmp / f"{name}.starts.npy", sa.starts)
            np.save(tmp / f"{name}.hashes.npy", hashes)
            np.save(tmp / f"{name}.order.npy", order)
        for name in ARRAYS:
            table, _, part = name.partition("_")
            arr = getattr(lex, name) if not part or name == "first_tokens" else getattr(getattr(lex, table), part)
            np.save(tmp / f"{name}.npy", arr)
        (tmp / "done").write_text(f"{path}\n")
        try:
            os.rename(tmp, folder)
        except OSError:  # another process put its copy there first: use that one
            if not (folder / "done").exists():  # a damaged copy (never renamed in so): replace it
                shutil.rmtree(folder)
                os.rename(tmp, folder)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    _prune(path, folder)


KEEP_COPIES = 2
"""Copies kept per lexicon name (e.g. two installed model versions); older ones are removed."""


def _prune(path: Path, keep: Path) -> None:
    """Remove all but the ``KEEP_COPIES`` most recently written copies of lexicons of this name."""
    copies = []
    for other in keep.parent.glob(f"{path.stem}-*"):
        try:
            copies.append(((other / "done").stat().st_mtime, other))
        except OSError:
            continue  # one being written
    copies.sort(reverse=True)
    for _, other in copies[KEEP_COPIES:]:
        if other != keep:
            shutil.rmtree(other, ignore_errors=True)


def _array(file: Path) -> np.ndarray:
    try:
        return np.asarray(np.load(file, mmap_mode="r", allow_pickle=False))
    except ValueError:  # an empty array cannot be mapped
        return np.load(file, allow_pickle=False)


def _bytes(file: Path):
    with open(file, "rb") as fh:
        if os.fstat(fh.fileno()).st_size == 0:
            return b""
        return mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)


def _open(cls, folder: Path):
    from .string_array import StringArray

    strings = {}
    for name in STRINGS:
        index = (_array(folder / f"{name}.hashes.npy"), _array(folder / f"{name}.order.npy"))
        strings[name] = StringArray(_bytes(folder / f"{name}.bin"), _array(folder / f"{name}.starts.npy"), index)
    return cls({name: _array(folder / f"{name}.npy") for name in ARRAYS}, strings)
