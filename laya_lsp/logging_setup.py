"""Logging: records at the log level go to the client as ``window/logMessage``, and to stderr or a file.

stdout is the JSON-RPC channel, so nothing here ever writes to it. pygls logs every message at
INFO; its loggers stay at WARNING unless the level is ``debug``.

Over stdio, stderr is quiet except for errors: clients file a server's stderr as errors (Neovim's
``:LspLog`` writes every stderr line under ``[ERROR]``), so our records reach the client as
``window/logMessage`` with their own level (Error, Warning, Info, Log) instead, and stderr keeps
only errors that could not be sent that way (before the connection, pygls's own). ``--log-file``
gets every record at the level.
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


def configure(level: str = "info", log_file: str | None = None, stdio: bool = False) -> None:
    """Send log records to stderr, or to ``log_file`` (appended), at ``level``.

    Args:
        level: ``debug``, ``info``, ``warning`` or ``error``.
        log_file: append here instead of writing to stderr.
        stdio: the server talks JSON-RPC over stdio, so stderr is the client's error channel:
            it gets only errors not already sent as ``window/logMessage``.

    Raises:
        OSError: ``log_file`` cannot be opened for appending.
    """
    handler: logging.Handler
    if log_file:
        handler = logging.FileHandler(log_file, encoding="utf-8")
    else:
        handler = logging.StreamHandler(sys.stderr)
        if stdio:
            handler.addFilter(_stderr_over_stdio)
    handler.setFormatter(logging.Formatter(FORMAT))
    root = logging.getLogger()
    for h in list(root.handlers):
        if not isinstance(h, LspLogHandler):
            root.removeHandler(h)
    root.addHandler(handler)
    for name in ("pygls.protocol.json_rpc", "laya_lsp.stdio", "laya_lsp.tcp"):  # the last two: the read loops'
        rpc = logging.getLogger(name)
        if not any(isinstance(f, _ClientErrorsAsWarnings) for f in rpc.filters):
            rpc.addFilter(_ClientErrorsAsWarnings())
    set_level(level)


class _ClientErrorsAsWarnings(logging.Filter):
    """pygls logs every exception of a handler with its traceback at ERROR, the client's own
    mistakes included (an unknown ``workspace/executeCommand``: -32602): those become one
    WARNING line, so an editor does not show a client error as a server error. So does a body
    that is not JSON (the client is answered -32700; over TCP, where no ``window/logMessage``
    forwarder takes the ERROR record, its traceback went to stderr)."""

    def filter(self, record: logging.LogRecord) -> bool:
        import json

        from pygls.exceptions import JsonRpcInvalidParams, JsonRpcMethodNotFound

        exc = record.exc_info[1] if record.exc_info else None
        if isinstance(exc, (JsonRpcInvalidParams, JsonRpcMethodNotFound, json.JSONDecodeError)):
            record.levelno, record.levelname = logging.WARNING, "WARNING"
            record.msg, record.args, record.exc_info, record.exc_text = f"client error: {exc}", (), None, None
        return True


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
            h.setLevel(value)


def _stderr_over_stdio(record: logging.LogRecord) -> bool:
    """stderr filter in stdio mode: errors that no ``window/logMessage`` forwarder takes."""
    if record.levelno < logging.ERROR:
        return False
    return not any(isinstance(h, LspLogHandler) and h.takes(record) for h in logging.getLogger().handlers)


class _NoTraceback(logging.Formatter):
    """``name: message`` without the traceback: tracebacks (and the paths in them) stay in the log."""

    def format(self, record: logging.LogRecord) -> str:
        return f"{record.name}: {record.getMessage()}"


class LspLogHandler(logging.Handler):
    """Forward records at the log level to the client as ``window/logMessage``, typed by level.

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
        self.setFormatter(_NoTraceback())

    def takes(self, record: logging.LogRecord) -> bool:
        """Whether this handler sends ``record`` to the client."""
        return (record.levelno >= self.level and not record.name.startswith("pygls")
                and not getattr(self._local, "busy", False) and self.server.protocol.writer is not None)

    def emit(self, record: logging.LogRecord) -> None:
        if not self.takes(record):
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
    handler = LspLogHandler(server, asyncio.get_running_loop(), LEVELS.get(level, logging.INFO))
    root.addHandler(handler)
    return handler
