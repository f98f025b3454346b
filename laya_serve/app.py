"""The aiohttp application: routes, security checks, latest-wins per client.

A request's path: :func:`guard` (Host, Origin, errors as JSON) -> a route handler ->
``params.parse`` (400 on a bad body) -> ``EngineBridge.run(Generator.complete)``, awaited on the
event loop while the engine thread computes (the LSP server's rule: one thread owns all model
state) -> JSON. A client that names itself (OpenAI's ``user`` field or the ``X-Laya-Client``
header) gets latest-wins: its older request still waiting or generating answers ``409``.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import secrets
import time
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from aiohttp import web
from aiohttp.http import HttpProcessingError

from laya_lsp.scheduling import EngineBridge, Sequencer

from .generate import Completion, Generator, Superseded
from .params import MAX_TOKENS_LIMIT, BadRequest, CompletionRequest, parse

log = logging.getLogger(__name__)

LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
COMPLETION_PATHS = ("/complete", "/v1/completions")
GET_PATHS = ("/health", "/v1/models")
DEFAULT_PORTS = {"http": 80, "https": 443}
READ_TIMEOUT_S = 10.0
"""Seconds a request's body may take to arrive after its headers (408 after that)."""
LINGER_S = 2.0
"""Seconds the server keeps reading and dropping an unread body after answering (aiohttp's
``lingering_time``, 10 s by default), then closes the connection."""


@dataclass(kw_only=True)
class ServiceConfig:
    """What ``laya serve``'s flags set."""

    host: str = "127.0.0.1"
    model_name: str = "laya-code"
    max_body: int = 1 << 20
    """Bytes; a larger body answers 413."""
    max_tokens: int = MAX_TOKENS_LIMIT
    """The bound on a request's ``max_tokens`` (400 above it)."""
    allow_origins: frozenset[str] = field(default_factory=frozenset)
    """Browser origins allowed to call (``*``: any); a request with another ``Origin`` gets 403."""
    read_timeout: float = READ_TIMEOUT_S
    """Seconds the body may take to arrive after the headers (``408`` after that)."""


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and loopback addresses (127.0.0.0/8, ::1)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def host_name(host: str) -> str | None:
    """The name in a ``Host`` header (``name``, ``name:port``, ``[v6]``, ``[v6]:port``), lower
    case, without brackets; None when the header is not of that form (``user@name``, a bad port)."""
    h = host.strip().lower()
    if h.startswith("["):
        name, sep, rest = h[1:].partition("]")
    else:
        name, sep, rest = h.partition(":")
        rest = sep + rest
    if not name or (rest and not (rest.startswith(":") and rest[1:].isdigit() and rest[1:].isascii())):
        return None
    if any(c in name for c in "@/\\?#[] "):
        return None
    return name


def normalize_origin(origin: str) -> str:
    """An origin as browsers serialise it (``scheme://host[:port]``: lower case, no default port,
    no trailing slash), so ``--allow-origin HTTP://LocalHost:5173/`` names ``http://localhost:5173``;
    ``*``, ``null`` and anything that is no URL are kept as they are (lower case)."""
    o = origin.strip()
    try:
        u = urlsplit(o)
        host, port = u.hostname, u.port
    except ValueError:
        return o.lower()
    if not u.scheme or not host or u.username is not None or u.password is not None \
            or u.path not in ("", "/") or u.query or u.fragment:
        return o.lower()
    scheme = u.scheme.lower()
    netloc = f"[{host}]" if ":" in host else host
    if port is not None and port != DEFAULT_PORTS.get(scheme):
        netloc += f":{port}"
    return f"{scheme}://{netloc}"


def _error(status: int, message: str, kind: str = "invalid_request_error") -> web.Response:
    return web.json_response({"error": {"message": message, "type": kind, "code": status}}, status=status)


def make_app(bridge: EngineBridge, generator: Generator, config: ServiceConfig | None = None) -> web.Application:
    """Build the application over an engine thread and a generator that lives on it.

    Args:
        bridge: submits jobs to the engine thread (the LSP server's ``EngineBridge`` may be shared).
        generator: the :class:`~laya_serve.generate.Generator`; only called on the engine thread.
        config: limits and security settings.
    """
    cfg = config or ServiceConfig()
    seq = Sequencer(open_only=False)  # named clients: no document to open first
    loopback = is_loopback(cfg.host)
    host_names = LOOPBACK_NAMES | {cfg.host.strip("[]").lower()}
    allowed = frozenset(normalize_origin(o) for o in cfg.allow_origins)
    in_flight = [0]  # completion requests received and not yet answered

    def origin_allowed(origin: str) -> bool:
        return "*" in allowed or normalize_origin(origin) in allowed

    def host_allowed(request: web.Request) -> bool:
        # the Host header as sent (a rebound page's own name), not the URL aiohttp builds from an
        # absolute-form target or the socket; none at all (HTTP/1.0) is no browser's request
        host = request.headers.get("Host")
        return host is None or host_name(host) in host_names

    def refusal(request: web.Request) -> web.Response | None:
        """The answer to a request refused before its body is read (Host, Origin, size), or None."""
        origin = request.headers.get("Origin")
        if loopback and not host_allowed(request):
            # DNS rebinding: a web page whose name resolves to 127.0.0.1 sends its own Host
            return _error(403, "Host header names no loopback address", "forbidden")
        if origin is not None and not origin_allowed(origin):
            return _error(403, f"requests from browser origin {origin!r} are refused "
                               "(start the service with --allow-origin to allow one)", "forbidden")
        if request.content_length is not None and request.content_length > cfg.max_body:
            return _error(413, f"the body is larger than {cfg.max_body} bytes")
        return None

    async def expect(request: web.Request) -> web.Response | None:
        """``Expect: 100-continue`` (curl's, for large bodies): a request that will be refused is
        refused now, before the client is told to send its body (aiohttp runs this before the
        middleware)."""
        refused = refusal(request)
        if refused is not None:
            return refused
        # what aiohttp's default expect handler does (a private function of aiohttp's)
        if request.version >= (1, 1):
            if request.headers.get("Expect", "").lower() != "100-continue":
                return _error(417, f"unknown Expect: {request.headers.get('Expect')!r} (only 100-continue)")
            await request.writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
            request.writer.output_size = 0  # the body has not started
        return None

    @web.middleware
    async def guard(request: web.Request, handler):
        origin = request.headers.get("Origin")
        try:
            refused = refusal(request)
            if refused is not None:
                return refused
            resp = await handler(request)
        except web.HTTPException as e:
            if e.status < 400:
                raise
            resp = _error(e.status, e.reason if e.status != 413 else f"the body is larger than {cfg.max_body} bytes")
        except Exception:  # a bug: the client gets no details, the log gets the traceback
            log.exception("%s %s failed", request.method, request.path)
            resp = _error(500, "internal error", "server_error")
        if origin is not None and origin_allowed(origin):
            resp.headers["Access-Control-Allow-Origin"] = origin
            resp.headers["Vary"] = "Origin"
        return resp

    async def run(request: web.Request) -> tuple[CompletionRequest, Completion] | web.Response:
        in_flight[0] += 1
        try:
            return await run_counted(request)
        finally:
            in_flight[0] -= 1

    async def run_counted(request: web.Request) -> tuple[CompletionRequest, Completion] | web.Response:
        try:
            # asyncio.timeout, not wait_for: Python 3.11's wait_for can swallow the handler's
            # cancellation (a client that hung up) when the read ends at that moment
            async with asyncio.timeout(cfg.read_timeout):
                body = await request.read()
        except TimeoutError:
            # a stalled or trickling client (a Content-Length above what it sends): not forever
            resp = _error(408, f"the body did not arrive within {cfg.read_timeout:g} s")
            resp.force_close()
            return resp
        except (web.RequestPayloadError, HttpProcessingError) as e:
            # a Content-Encoding the body does not decode with, or a body cut short: the client's
            # error, not ours
            encoding = request.headers.get("Content-Encoding", "")
            detail = str(getattr(e, "message", None) or e).strip()
            return _error(400, f"the body could not be read (Content-Encoding: {encoding}): {detail}" if encoding
                          else f"the body could not be read: {detail}")
        try:
            req = parse(body, cfg.max_tokens)
        except BadRequest as e:
            return _error(400, str(e))
        client = req.user or request.headers.get("X-Laya-Client")
        is_current = lambda: True  # noqa: E731
        ticket = None
        if client:
            ticket = seq.ticket(client, "completion")
            is_current = lambda: seq.is_current(ticket)  # noqa: E731
        try:
            done = await bridge.run(generator.complete, req, is_current)
        except Superseded:
            return _error(409, "superseded by a newer request from the same client", "superseded")
        finally:
            if ticket is not None and seq.is_current(ticket):
                seq.forget(client)  # keep the table to the requests in flight
        return req, done

    def choices(done: Completion, **extra) -> list[dict]:
        return [{"text": c.text, "index": i, **extra, "finish_reason": c.finish_reason}
                for i, c in enumerate(done.choices)]

    def usage(done: Completion) -> dict:
        n = sum(c.tokens for c in done.choices)
        return {"prompt_tokens": done.prompt_tokens, "completion_tokens": n,
                "total_tokens": done.prompt_tokens + n}

    async def complete(request: web.Request) -> web.Response:
        """The seed's ``POST /complete``."""
        out = await run(request)
        if isinstance(out, web.Response):
            return out
        _, done = out
        return web.json_response({
            "model": cfg.model_name,
            "choices": choices(done),
            "usage": usage(done),
            "latency_ms": round(done.ms, 3),
            "prefilled_tokens": done.prefilled_tokens,  # prompt tokens not found in a KV cache
        })

    async def completions(request: web.Request) -> web.Response:
        """OpenAI's ``POST /v1/completions``."""
        out = await run(request)
        if isinstance(out, web.Response):
            return out
        _, done = out
        return web.json_response({
            "id": "cmpl-" + secrets.token_hex(12),
            "object": "text_completion",
            "created": int(time.time()),
            "model": cfg.model_name,
            "choices": choices(done, logprobs=None),
            "usage": usage(done),
        })

    async def health(_request: web.Request) -> web.Response:
        # in_flight: completion requests being read, waiting for the engine or generating
        return web.json_response({"status": "ok", "model": cfg.model_name, "in_flight": in_flight[0]})

    async def models(_request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [
            {"id": cfg.model_name, "object": "model", "created": 0, "owned_by": "laya"}]})

    def preflight(methods: str):
        async def answer(request: web.Request) -> web.Response:
            """CORS preflight, answered only for allowed origins (the guard refused the others):
            the headers the page asks for are allowed (an OpenAI client sends ``Authorization``
            and ``x-stainless-*``); only allowed origins get this far."""
            asked = request.headers.get("Access-Control-Request-Headers", "")
            return web.Response(status=204, headers={
                "Access-Control-Allow-Methods": methods,
                "Access-Control-Allow-Headers": asked or "Content-Type, X-Laya-Client",
                "Access-Control-Max-Age": "600"})
        return answer

    app = web.Application(middlewares=[guard], client_max_size=cfg.max_body)
    app.router.add_post("/complete", complete, expect_handler=expect)
    app.router.add_post("/v1/completions", completions, expect_handler=expect)
    for path in COMPLETION_PATHS:
        app.router.add_route("OPTIONS", path, preflight("POST, OPTIONS"))
    for path in GET_PATHS:
        app.router.add_route("OPTIONS", path, preflight("GET, OPTIONS"))
    app.router.add_get("/health", health)
    app.router.add_get("/v1/models", models)
    return app


class ClientErrorsAsWarnings(logging.Filter):
    """aiohttp logs a request it could not parse (a bad ``Content-Length``, a header line over 8 KB)
    or a body it could not decode (``Content-Encoding: gzip`` on text) at ERROR with a traceback,
    although the client got its 400: those become one WARNING line (any local process could fill
    the log with tracebacks otherwise). Installed on the ``aiohttp.server`` logger by
    :func:`start_site`."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if isinstance(exc, (HttpProcessingError, web.RequestPayloadError)):
            detail = " ".join(str(getattr(exc, "message", None) or exc).split())[:200]
            record.levelno, record.levelname = logging.WARNING, "WARNING"
            record.msg, record.args, record.exc_info, record.exc_text = f"client error: {detail}", (), None, None
        return True


def base_url(host: str, port: int) -> str:
    """``http://host:port``, an IPv6 host in brackets."""
    return f"http://{f'[{host}]' if ':' in host else host}:{port}"


async def start_site(app: web.Application, host: str, port: int) -> tuple[web.AppRunner, int]:
    """Serve ``app`` on ``host:port`` (0: a free port); returns the runner (``cleanup()`` it to
    stop) and the bound port.

    Raises:
        OSError: the address cannot be listened on (the runner is cleaned up first).
    """
    server_log = logging.getLogger("aiohttp.server")
    if not any(isinstance(f, ClientErrorsAsWarnings) for f in server_log.filters):
        server_log.addFilter(ClientErrorsAsWarnings())
    # handler_cancellation: a client that hangs up cancels its handler, and so its engine job
    # (``await_job``: dropped while queued, stopped between tokens while running)
    # lingering_time: after an answer sent before its body was read (408, 413), aiohttp reads and
    # drops the rest for this long before closing, so that the client gets the answer (10 s by
    # default: a stalled client's connection stayed open that long after its 408)
    runner = web.AppRunner(app, access_log=None, handle_signals=False, handler_cancellation=True,
                           lingering_time=LINGER_S)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    try:
        await site.start()
    except OSError:
        await runner.cleanup()
        raise
    bound = site._server.sockets[0].getsockname()[1] if site._server and site._server.sockets else port
    return runner, bound

