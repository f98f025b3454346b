"""Serving over TCP (``laya-lsp --tcp``): one editor session at a time, headers read as on stdio.

pygls's ``start_tcp`` hands every connection the server's one protocol object: a second
connection while a session ran (another editor window pointed at the port, a port probe) took the
session over. The new socket became the writer, so the first editor's answers went to the newcomer,
and the lifecycle state went back to uninitialized, so the first editor's next requests were
refused with -32002 on the other socket while it waited forever. Here a connection made while
another is being served is closed at once (a warning in the log) and the session goes on. As with
pygls, the server ends when the session's connection ends; but a connection that ends before it
sent a byte (a port probe, ``nc -z``, a readiness check) is no session: the server goes on
listening (it ended there before). Header lines are read as on stdio
(:func:`.stdio.canonical_header`: ``content-length:`` in any case and spacing).
"""

from __future__ import annotations

import asyncio
import logging
from threading import Event

from pygls.io_ import run_async

from .stdio import LINE_LIMIT, canonical_header

log = logging.getLogger(__name__)


class StreamReader:
    """``readline`` / ``readexactly`` over a connection's :class:`asyncio.StreamReader`, as
    :class:`.stdio.PipeReader` gives them over stdin."""

    def __init__(self, stream: asyncio.StreamReader) -> None:
        self.stream = stream
        self.received = False
        """Whether the connection has carried a byte."""

    async def readline(self) -> bytes:
        """One header line (b"" at end of input); a Content-Length header in any spelling comes
        back as pygls's loop expects it."""
        try:
            line = await self.stream.readline()
        except ValueError:  # longer than LINE_LIMIT: no LSP header is; drop it and go on
            log.warning("skipping a header line over %d bytes", LINE_LIMIT)
            return b"X-Skipped: line too long\r\n"
        except ConnectionError as e:  # reset by the peer (an editor killed): the end of the session
            log.info("the connection was lost: %s", e)
            return b""
        self.received = self.received or bool(line)
        return canonical_header(line)

    async def readexactly(self, n: int) -> bytes:
        """``n`` bytes, or fewer at end of input."""
        try:
            return await self.stream.readexactly(n)
        except asyncio.IncompleteReadError as e:
            return e.partial
        except ConnectionError as e:
            log.info("the connection was lost: %s", e)
            return b""


def start_tcp(server, host: str, port: int, on_listening=None) -> None:
    """Serve ``server`` (a pygls ``LanguageServer``) on ``host:port`` until its session ends.

    ``on_listening()``, if given, is called once the socket listens (a client may connect then).

    Raises:
        OSError: the address cannot be bound.
    """
    server._stop_event = stop_event = Event()  # what pygls's shutdown() sets to end the loop
    serving: list[str] = []  # the peer being served (at most one)

    async def connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = str(writer.get_extra_info("peername"))
        if serving:
            log.warning("refusing a TCP connection from %s: the session of %s is under way",
                        peer, serving[0])
            writer.close()
            return
        serving.append(peer)
        log.debug("connected to %s", peer)
        stream = StreamReader(reader)
        probe = False
        try:
            server.protocol.set_writer(writer)
            await run_async(stop_event=stop_event, reader=stream, protocol=server.protocol,
                            logger=log, error_handler=server.report_server_error)
            probe = not stream.received and not stop_event.is_set()
            log.log(logging.INFO if probe else logging.DEBUG, "the connection of %s ended%s", peer,
                    " before it sent anything: still listening" if probe else "")
        finally:  # any other end (the session's, an error): else the server, refusing every new
            # connection, ran on forever
            if probe:
                serving.clear()
                writer.close()
            else:
                server.shutdown()

    async def serve() -> None:
        loop = asyncio.get_running_loop()

        def quiet_after_the_session(loop, context) -> None:
            # the session's end cancels the handlers still waiting (``initialized`` waits for the
            # model), and pygls reads their cancelled futures in a callback: not an error then
            if not (stop_event.is_set() and isinstance(context.get("exception"), asyncio.CancelledError)):
                loop.default_exception_handler(context)

        loop.set_exception_handler(quiet_after_the_session)
        server._server = await asyncio.start_server(connection, host, port, limit=LINE_LIMIT)
        if on_listening is not None:
            on_listening()
        async with server._server:
            await server._server.serve_forever()

    try:
        asyncio.run(serve())
    except asyncio.CancelledError:  # shutdown() closed the listening socket
        log.debug("the TCP server was closed")
