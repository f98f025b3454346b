"""Giving freed heap memory back to the operating system, and keeping the loaded objects out of
the garbage collector's way.

Loading the model, a language's lexicon or the workspace index allocates and frees tens of
megabytes of temporaries (decoded weights, parsed JSON, sorted arrays). glibc's ``malloc`` keeps
freed memory in its arenas, so the server's resident size stays at the high-water mark:
measured here (2-core x86_64, Debian bookworm), right after ``Predictor.load`` and ``warmup``
103 MB resident, 86 MB after ``malloc_trim(0)`` (2.5 ms; 0.2 ms when there is nothing to give
back). Elsewhere (macOS, musl) this does nothing: those allocators return memory themselves or
have no such call.
"""

from __future__ import annotations

import ctypes
import gc
import os
import sys

_trim = None  # glibc's malloc_trim, looked up once; False when there is none


def release_free_heap() -> bool:
    """Return the heap's free memory to the OS (glibc ``malloc_trim(0)``); True if anything was
    given back. Takes ~0.2-3 ms: call it off the keystroke path (after a load, in a pause)."""
    global _trim
    if _trim is None:
        _trim = False
        if sys.platform.startswith("linux"):
            try:  # the process's own symbols: libc is loaded (find_library would run ldconfig)
                fn = ctypes.CDLL(None).malloc_trim
                fn.argtypes, fn.restype = [ctypes.c_size_t], ctypes.c_int
                _trim = fn
            except (OSError, AttributeError):  # not glibc
                pass
    return bool(_trim(0)) if _trim else False


GC_FREEZE = os.environ.get("LAYA_GC_FREEZE", "1") != "0"
"""Whether :func:`freeze_loaded_objects` freezes (``LAYA_GC_FREEZE=0``: off, for side-by-side
benchmarks)."""


def freeze_loaded_objects() -> bool:
    """Collect the garbage there is now, then move every live object into the collector's
    permanent generation (``gc.freeze``, Python 3.7+), so that later collections never walk them.

    Why: CPython's cyclic garbage collector walks every tracked object in a full (generation 2)
    collection, which runs now and then on whichever thread allocates at that moment, a request's
    too. After a load the server holds tens of thousands of long-lived objects (the tokenizer's
    and lexicons' tables, the parsed model config, pygls's and cattrs's classes): a full
    collection took 5.4 ms in process after ``Predictor.load`` and ``warmup`` (33,564 objects) and
    20.9 ms inside the language server, whose round trips it lands on (2026-12-03, 2-core
    x86_64). Frozen, they cost it nothing (0.00 ms). Frozen objects are still freed by reference
    counting when the last reference goes; only a reference cycle among them is kept until exit,
    so call this after loads of things kept for the session (the model, a language's lexicon,
    the workspace index), in a pause. The collection itself takes as long as one full collection.

    Returns:
        True if it froze (False with ``LAYA_GC_FREEZE=0``).
    """
    if not GC_FREEZE:
        return False
    gc.collect()
    gc.freeze()
    return True
