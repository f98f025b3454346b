"""The local HTTP completion service inside the language server (``laya-lsp --http PORT``).

One process, one engine thread: editors talk LSP over stdio (or TCP) and input methods, shells or
chat boxes on the same machine call ``POST /complete`` or ``/v1/completions`` (``laya serve``'s
routes and rules, ``laya_serve.app``) on the same engine. The service has its own ``Predictor``
over the same model folder (``laya_serve.generate.Generator`` sets its window to the request's
``max_seq_len``, which must not move the editor's window); both run their jobs on the server's
engine thread, so a request of one waits at most for the current job of the other.

It starts when the client sends ``initialized`` (with the client's ``modelPath``, ``variant`` and
``backend`` options) and ends with the server. A port in use or a missing ``aiohttp`` (the
``serve`` extra) is logged and shown to the user; the language server goes on without it.
"""

from __future__ import annotations

import logging
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING

from lsprotocol import types

from .config import InitializationOptions

if TYPE_CHECKING:
    from .server import LayaServer

log = logging.getLogger(__name__)

MAX_SEQ_LEN = 256
"""Context tokens of a service request (the seed's ``--max-seq-len``)."""


@dataclass(frozen=True)
class HttpSettings:
    """``--http``/``--http-host`` from the command line."""

    port: int
    """TCP port; 0 picks a free one (the log says which)."""
    host: str = "127.0.0.1"
    """Address to listen on; loopback unless told otherwise (there is no authentication)."""


def _load_generator(options: InitializationOptions):
    """Engine thread: the service's own Predictor and its Generator, warmed up."""
    from engine.predictor import Predictor
    from laya_serve.generate import Generator

    p = Predictor.load(model_dir=options.model_path, variant=options.variant, backend=options.backend,
                       defer_jit=True)  # switches at a keystroke once the kernels are built
    gen = Generator(p, MAX_SEQ_LEN)
    gen.warmup()
    return (p.folder.name if p.folder is not None else "laya"), gen


async def start(ls: LayaServer, settings: HttpSettings) -> int | None:
    """Start the service on ``settings``; returns the bound port, or None when it cannot run
    (the reason is logged and shown as a ``window/showMessage`` warning)."""
    try:
        from laya_serve.app import ServiceConfig, base_url, is_loopback, make_app, start_site
    except ImportError as e:
        return _cannot(ls, f"needs aiohttp, the serve extra: pip install -e '.[serve]' in a checkout, "
                           f"'laya[serve]' from a wheel ({e})")
    if not is_loopback(settings.host):
        log.warning("HTTP service on %s, not loopback: anyone who can reach this machine can use it "
                    "(there is no authentication)", settings.host)
    try:
        name, gen = await ls.bridge.run(_load_generator, ls.options)
    except Exception as e:  # noqa: BLE001 - the editor's completion goes on without the service
        return _cannot(ls, f"the model could not be loaded: {e}")
    app = make_app(ls.bridge, gen, ServiceConfig(host=settings.host, model_name=name))
    try:
        ls.http_runner, port = await start_site(app, settings.host, settings.port)
    except OSError as e:
        return _cannot(ls, f"cannot listen on {settings.host}:{settings.port}: {e.strerror or e}")
    url = base_url(settings.host, port)
    log.info("HTTP completion service on %s (%s)", url, name)
    print(f"laya-lsp: HTTP completion service on {url}", file=sys.stderr, flush=True)
    return port


def _cannot(ls: LayaServer, reason: str) -> None:
    log.error("HTTP completion service not started: %s", reason)
    # asked for on the command line: the person at the terminal hears it too (stderr, not stdout)
    print(f"laya-lsp: the HTTP completion service is off: {reason}", file=sys.stderr, flush=True)
    ls.window_show_message(types.ShowMessageParams(
        type=types.MessageType.Warning, message=f"Laya: the HTTP completion service is off: {reason}"))
    return None
