"""Logging: module loggers to stderr (or a file), warnings and errors also to ``window/logMessage``.

stdout is the JSON-RPC channel, so nothing here ever writes to it. pygls logs every message at
INFO; its loggers stay at WARNING unless the level is ``debug``.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import threading
from typing import TYPE_CHECKING

from lsprotocol import types

if TYPE_CHECKING:
    from pygls.lsp.server import LanguageServer

LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING,
          "error": logging.ERROR}
FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
_OUR_LOGGERS = ("laya_lsp", "engine")


def configure(level: str = "info", log_file: str | None = None) -> None:
    """Send log records to stderr, or to ``log_file`` (appended), at ``level``."""
    handler: logging.Handler
    if log_file:
        handler = logging.FileHandler(log_file, encoding="utf-8")
    else:
        handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(FORMAT))
    root = logging.getLogger()
    for h in list(root.handlers):
        if not isinstance(h, LspLogHandler):
            root.removeHandler(h)
    root.addHandler(handler)
    set_level(level)


def set_level(level: str) -> None:
    """Apply a level name (``debug``...``error``) to our loggers, quieting pygls unless debug."""
    value = LEVELS.get(level.lower(), logging.INFO)
    root = logging.getLogger()
    root.setLevel(value)
    for name in _OUR_LOGGERS:
        logging.getLogger(name).setLevel(value)
    logging.getLogger("pygls").setLevel(logging.DEBUG if value <= logging.DEBUG else logging.WARNING)
    for h in root.handlers:
        if isinstance(h, LspLogHandler):
            h.setLevel(max(value, logging.WARNING))


class LspLogHandler(logging.Handler):
    """Forward records (WARNING and above by default) to the client as ``window/logMessage``.

    Safe from any thread: records are handed to the event loop with ``call_soon_threadsafe``.
    Records of pygls itself are not forwarded (it reports its errors with ``window/showMessage``
    already, and a failure while sending must not loop back here).
    """

    _TYPES = ((logging.ERROR, types.MessageType.Error), (logging.WARNING, types.MessageType.Warning),
              (logging.INFO, types.MessageType.Info))

    def __init__(self, server: LanguageServer, loop: asyncio.AbstractEventLoop,
                 level: int = logging.WARNING) -> None:
        super().__init__(level)
        self.server = server
        self.loop = loop
        self._local = threading.local()
        self.setFormatter(logging.Formatter("%(name)s: %(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        if record.name.startswith("pygls") or getattr(self._local, "busy", False):
            return
        try:
            message = self.format(record)
            kind = next((t for lvl, t in self._TYPES if record.levelno >= lvl), types.MessageType.Log)
            self.loop.call_soon_threadsafe(self._send, kind, message)
        except RuntimeError:
            pass  # the loop is closed: the session is over
        except Exception:  # noqa: BLE001
            self.handleError(record)

    def _send(self, kind: types.MessageType, message: str) -> None:
        if self.server.protocol.writer is None:
            return
        self._local.busy = True
        try:
            self.server.window_log_message(types.LogMessageParams(type=kind, message=message))
        except Exception:  # noqa: BLE001 - the client went away; stderr still has the record
            pass
        finally:
            self._local.busy = False


def attach(server: LanguageServer, level: str = "info") -> LspLogHandler:
    """Install (once) the ``window/logMessage`` forwarder on the root logger. Call on the loop."""
    root = logging.getLogger()
    for h in root.handlers:
        if isinstance(h, LspLogHandler):
            root.removeHandler(h)
    handler = LspLogHandler(server, asyncio.get_running_loop(),
                            max(LEVELS.get(level, logging.INFO), logging.WARNING))
    root.addHandler(handler)
    return handler
