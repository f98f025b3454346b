"""Exit when the editor that started us is gone (LSP ``initialize`` ``processId``).

The stdio pipe usually tells us (EOF), but not when a forked helper of the dead editor still holds
it open. pygls 2 records ``processId`` without watching it, so this does, as the LSP spec asks.
"""

from __future__ import annotations

import asyncio
import logging
import os

log = logging.getLogger(__name__)

INTERVAL_S = 3.0
"""Seconds between checks (one ``kill(pid, 0)`` each)."""


def alive(pid: int) -> bool:
    """True while a process with this id exists (POSIX; always True elsewhere).

    An id no process can have is False: 0 and negative ids (``kill`` would test a process group,
    or with -1 every process we may signal, so -1 looked alive forever) and ids past the C range
    (``kill`` raised ``OverflowError``, which ended the ``initialized`` handler before the
    workspace index started)."""
    if os.name != "posix":
        return True
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, OverflowError):
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    return True


async def watch(pid: int, on_gone, interval: float = INTERVAL_S) -> None:
    """Call ``on_gone()`` once ``pid`` has exited."""
    while alive(pid):
        await asyncio.sleep(interval)
    log.warning("the client process %d has exited: shutting down", pid)
    on_gone()
