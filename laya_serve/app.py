"""The aiohttp application: routes, security checks, latest-wins per client.

A request's path: :func:`guard` (Host, Origin, errors as JSON) -> a route handler ->
``params.parse`` (400 on a bad body) -> ``EngineBridge.run(Generator.complete)``, awaited on the
event loop while the engine thread computes (the LSP server's rule: one thread owns all model
state) -> JSON. A client that names itself (OpenAI's ``user`` field or the ``X-Laya-Client``
header) gets latest-wins: its older request still waiting or generating answers ``409``.
"""

from __future__ import annotations

import ipaddress
import logging
import secrets
import time
from dataclasses import dataclass, field

from aiohttp import web

from laya_lsp.scheduling import EngineBridge, Sequencer

from .generate import Completion, Generator, Superseded
from .params import MAX_TOKENS_LIMIT, BadRequest, CompletionRequest, parse

log = logging.getLogger(__name__)

LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
COMPLETION_PATHS = ("/complete", "/v1/completions")


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


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and loopback addresses (127.0.0.0/8, ::1)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


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

    def origin_allowed(origin: str) -> bool:
        return "*" in cfg.allow_origins or origin in cfg.allow_origins

    @web.middleware
    async def guard(request: web.Request, handler):
        origin = request.headers.get("Origin")
        try:
            if loopback and (request.url.host or "").strip("[]").lower() not in LOOPBACK_NAMES | {cfg.host}:
                # DNS rebinding: a web page whose name resolves to 127.0.0.1 sends its own Host
                return _error(403, "Host header names no loopback address", "forbidden")
            if origin is not None and not origin_allowed(origin):
                return _error(403, f"requests from browser origin {origin!r} are refused "
                                   "(start the service with --allow-origin to allow one)", "forbidden")
            if request.content_length is not None and request.content_length > cfg.max_body:
                return _error(413, f"the body is larger than {cfg.max_body} bytes")
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
        try:
            req = parse(await request.read(), cfg.max_tokens)
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
        return web.json_response({"status": "ok", "model": cfg.model_name})

    async def models(_request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [
            {"id": cfg.model_name, "object": "model", "created": 0, "owned_by": "laya"}]})

    async def preflight(request: web.Request) -> web.Response:
        """CORS preflight, answered only for allowed origins (the guard refused the others)."""
        return web.Response(status=204, headers={
            "Access-Control-Allow-Methods": "POST, OPTIONS",
            "Access-Control-Allow-Headers": "Content-Type, X-Laya-Client",
            "Access-Control-Max-Age": "600"})

    app = web.Application(middlewares=[guard], client_max_size=cfg.max_body)
    app.router.add_post("/complete", complete)
    app.router.add_post("/v1/completions", completions)
    for path in COMPLETION_PATHS:
        app.router.add_route("OPTIONS", path, preflight)
    app.router.add_get("/health", health)
    app.router.add_get("/v1/models", models)
    return app


def base_url(host: str, port: int) -> str:
    """``http://host:port``, an IPv6 host in brackets."""
    return f"http://{f'[{host}]' if ':' in host else host}:{port}"


async def start_site(app: web.Application, host: str, port: int) -> tuple[web.AppRunner, int]:
    """Serve ``app`` on ``host:port`` (0: a free port); returns the runner (``cleanup()`` it to
    stop) and the bound port.

    Raises:
        OSError: the address cannot be listened on (the runner is cleaned up first).
    """
    runner = web.AppRunner(app, access_log=None, handle_signals=False)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    try:
        await site.start()
    except OSError:
        await runner.cleanup()
        raise
    bound = site._server.sockets[0].getsockname()[1] if site._server and site._server.sockets else port
    return runner, bound
