"""Reading JSON-RPC from stdin on the event loop itself, without a thread hop per line.

pygls 2's stdio server reads every header line and every body through
``loop.run_in_executor`` (``pygls.io_.StdinAsyncReader``): three or four thread hand-offs per
message, each a wake-up of an executor thread and of the event loop. Profiled with py-spy on the
2-core dev machine, typing through the server: those hand-offs were the largest share of the
event loop's busy time. :class:`PipeReader` gives pygls's loop (``pygls.io_.run_async``) the same
``readline`` / ``readexactly`` interface over an :class:`asyncio.StreamReader` on the stdin pipe.

It is used when stdin is a pipe, socket or terminal on a POSIX system (what every editor
gives a language server); anything else (a regular file, Windows) keeps pygls's own reader.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import stat
import sys
from threading import Event
from typing import BinaryIO

from pygls.io_ import StdoutWriter, run_async

log = logging.getLogger(__name__)

LINE_LIMIT = 1 << 20
"""Longest header line accepted (asyncio's default is 64 KiB; headers are tens of bytes)."""


class PipeReader:
    """``readline`` / ``readexactly`` coroutines over an asyncio stream on ``stdin``."""

    def __init__(self, stdin: BinaryIO):
        self.stdin = stdin
        self._reader: asyncio.StreamReader | None = None

    async def _stream(self) -> asyncio.StreamReader:
        if self._reader is None:
            loop = asyncio.get_running_loop()
            reader = asyncio.StreamReader(limit=LINE_LIMIT)
            await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), self.stdin)
            self._reader = reader
        return self._reader

    async def readline(self) -> bytes:
        """One line with its ``\\n`` (b"" at end of input), as ``BinaryIO.readline``; a
        ``Content-Length`` header in any spelling comes back as pygls's loop expects it."""
        stream = await self._stream()
        try:
            line = await stream.readline()
        except ValueError:  # longer than LINE_LIMIT: no LSP header is; drop it and go on
            log.warning("skipping a header line over %d bytes", LINE_LIMIT)
            return b"X-Skipped: line too long\r\n"
        return canonical_header(line)

    async def readexactly(self, n: int) -> bytes:
        """``n`` bytes, or fewer at end of input (as ``BinaryIO.read(n)``); a body that is not
        UTF-8 comes back as :func:`utf8_body` makes it."""
        stream = await self._stream()
        try:
            return utf8_body(await stream.readexactly(n))
        except asyncio.IncompleteReadError as e:
            return e.partial


_STRAY_BYTE = re.compile("[\udc80-\udcff]")


def utf8_body(body: bytes) -> bytes:
    """``body`` with each byte that is not part of valid UTF-8 written as the JSON escape of a lone
    surrogate (``\\udcXX``, Python's ``surrogateescape``), so that the message parses and the
    byte stays one character. JSON-RPC bodies are UTF-8, but Neovim sends a buffer's bytes as
    they are (``:e ++bad=keep`` of a Latin-1 file): ``json.loads`` refused the whole ``didOpen``,
    and the document was never opened. One lone surrogate per byte is also how Neovim counts them
    in UTF-16 positions (one unit each); the engine sees each as U+FFFD. A stray byte outside a
    JSON string leaves the message as unparsable as it was. Costs ~0.1 ms per MB when the body is
    all ASCII (``bytes.isascii``), ~1.1 ms per MB of other UTF-8 (a strict decode)."""
    if body.isascii():
        return body
    try:
        body.decode("utf-8")
        return body
    except UnicodeDecodeError:
        text = body.decode("utf-8", "surrogateescape")
        return _STRAY_BYTE.sub(lambda m: f"\\u{ord(m.group()):04x}", text).encode("utf-8")


_CONTENT_LENGTH = re.compile(rb"content-length[ \t]*:[ \t]*(\d+)[ \t]*\r?\n?$", re.IGNORECASE)


def canonical_header(line: bytes) -> bytes:
    """``line``, or ``Content-Length: N\\r\\n`` when it ends with a Content-Length header.

    pygls's read loop (``pygls.io_.run_async``) matches exactly ``Content-Length: N\\r\\n``. A
    header spelled otherwise (``content-length:``, no or two spaces, a bare ``\\n``, which header
    names' case-insensitivity and lenient peers allow) would never match, and neither would the
    next message's header when a wrong length leaves body bytes in front of it (a body has no
    line end of its own): the loop would swallow every later message. Matching the header at the
    end of the line resynchronizes on the next message instead.
    """
    if line.startswith(b"Content-Length: ") and line.endswith(b"\r\n"):
        return line  # the usual spelling: no regex
    m = _CONTENT_LENGTH.search(line)
    if m is None:
        return line
    if m.start():
        log.warning("dropping %d bytes in front of a Content-Length header", m.start())
    return b"Content-Length: " + m.group(1) + b"\r\n"


def pipe_capable(stdin: BinaryIO) -> bool:
    """True when ``stdin`` can be read by the event loop (POSIX pipe, socket or terminal)."""
    if os.name != "posix":
        return False
    try:
        mode = os.fstat(stdin.fileno()).st_mode
    except (OSError, ValueError, AttributeError):
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or stat.S_ISCHR(mode)


class ExitOnClosedWriter(StdoutWriter):
    """pygls's stdout writer, ending the server when the client has closed its end: pygls logs
    and swallows the ``BrokenPipeError`` of each write, so the server would run on, unheard."""

    def __init__(self, stdout: BinaryIO, server):
        super().__init__(stdout)
        self.server = server

    def write(self, data: bytes) -> None:
        try:
            super().write(data)
        except (BrokenPipeError, ConnectionResetError):
            log.error("the client closed the server's output; exiting")
            from .cli import exit_cleanly

            exit_cleanly(self.server, 1)


def start_io(server, stdin: BinaryIO | None = None, stdout: BinaryIO | None = None) -> None:
    """Serve ``server`` (a pygls ``LanguageServer``) over stdio, as its ``start_io`` does, but
    reading with :class:`PipeReader` when :func:`pipe_capable` (else pygls's own reader)."""
    stdin = stdin or sys.stdin.buffer
    if not pipe_capable(stdin):
        server.start_io(stdin, stdout)
        return
    server._stop_event = Event()  # what pygls's shutdown() sets to end the loop
    if hasattr(server, "input_fd"):
        server.input_fd = stdin.fileno()  # a document count waits while a message waits there
    server.protocol.set_writer(ExitOnClosedWriter(stdout or sys.stdout.buffer, server))
    try:
        asyncio.run(run_async(stop_event=server._stop_event, reader=PipeReader(stdin),
                              protocol=server.protocol, logger=log,
                              error_handler=server.report_server_error))
    except BrokenPipeError:
        log.error("the client closed the connection; shutting down")
    except (KeyboardInterrupt, SystemExit):
        pass  # as pygls's start_io
    finally:
        server.shutdown()
