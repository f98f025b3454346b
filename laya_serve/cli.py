"""``laya serve``: load the model on the engine thread, bind (loopback by default), serve.

``laya_tools/cli.py`` adds the subcommand with :func:`add_arguments` and calls :func:`main`.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys

from .params import MAX_TOKENS_LIMIT

log = logging.getLogger(__name__)


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The subcommand's flags."""
    p.add_argument("--host", default="127.0.0.1",
                   help="address to bind (default: %(default)s, loopback only; any other address is "
                        "reachable from the network, without authentication: a warning is printed)")
    p.add_argument("--port", type=int, default=8899, help="TCP port (default: %(default)s; 0: any free port)")
    p.add_argument("--model", default=None,
                   help="model folder (default: the shipped model); a folder that is not a Laya model "
                        "(no lexicon-*.npz) is opened with mlx-lm: any mlx-lm model, e.g. a 4-bit Qwen coder")
    p.add_argument("--backend", default=None, help="numpy, numba, mlx or auto (default: the variant's)")
    p.add_argument("--max-seq-len", type=int, default=256,
                   help="context: at most the prompt's last this-many tokens, at least half as many (8-512; default: %(default)s, as the seed)")
    p.add_argument("--max-tokens", type=int, default=MAX_TOKENS_LIMIT,
                   help="most tokens one request may ask for (default: %(default)s)")
    p.add_argument("--max-body", type=int, default=1 << 20,
                   help="largest request body in bytes; larger ones get 413 (default: %(default)s)")
    p.add_argument("--read-timeout", type=float, default=10.0, metavar="SECONDS",
                   help="a request's body must arrive within this many seconds of its headers, else 408 "
                        "(default: %(default)s)")
    p.add_argument("--prefix-cache-mb", type=int, default=128,
                   help="memory for recent prompts' KV states, reused by later prompts that share their "
                        "start (default: %(default)s MB: ~26 states of this model's 4.9 MB)")
    p.add_argument("--allow-origin", action="append", default=[], metavar="ORIGIN",
                   help="a browser origin (e.g. http://localhost:3000, or '*') allowed to call the "
                        "service; requests carrying any other Origin header get 403 (repeatable)")


def main(a: argparse.Namespace) -> int:
    """Run the service until interrupted. Returns the exit status (1: the port cannot be bound)."""
    try:
        from aiohttp import web  # noqa: F401
    except ImportError:
        print("laya serve: needs aiohttp: pip install 'laya[serve]'", file=sys.stderr)
        return 2
    from .app import is_loopback

    for name, lo, hi in (("--port", 0, 65535), ("--max-seq-len", 8, 512), ("--max-tokens", 1, 4096),
                         ("--max-body", 1024, 1 << 30), ("--prefix-cache-mb", 0, 1 << 16)):
        v = getattr(a, name[2:].replace("-", "_"))
        if not lo <= v <= hi:
            print(f"laya serve: {name} must be between {lo} and {hi}, got {v}", file=sys.stderr)
            return 2
    if not 0.1 <= a.read_timeout <= 3600:
        print(f"laya serve: --read-timeout must be between 0.1 and 3600, got {a.read_timeout}", file=sys.stderr)
        return 2
    from engine.worker import set_switch_interval

    try:
        set_switch_interval()  # requests must not queue behind the engine thread's GIL
    except ValueError as e:
        print(f"laya serve: {e}", file=sys.stderr)
        return 2
    if not is_loopback(a.host):
        print(f"laya serve: warning: listening on {a.host}, not loopback: anyone who can reach this "
              "machine can use the service (there is no authentication)", file=sys.stderr)
    return asyncio.run(_serve(a))


def _load(a: argparse.Namespace):
    """Engine thread: ``(model name, backend name, generator)``, warmed up: a Laya model folder
    (the default) gets :class:`~laya_serve.generate.Generator` over a Predictor; any other folder
    is opened with mlx-lm (:class:`~laya_serve.mlx_lm_generate.MlxLmGenerator`)."""
    from pathlib import Path

    from engine.predictor import Predictor

    from .generate import Generator
    from .mlx_lm_generate import MlxLmGenerator, is_laya_folder

    if a.model and Path(a.model).is_dir() and not is_laya_folder(Path(a.model)):
        g = MlxLmGenerator(a.model, a.max_seq_len, a.prefix_cache_mb)
        g.warmup()
        return g.name, "mlx-lm", g
    p = Predictor.load(a.model, backend=a.backend)
    p.warmup()
    g = Generator(p, a.max_seq_len, a.prefix_cache_mb)
    g.warmup()
    return (p.folder.name if p.folder is not None else "laya"), p.backend.name, g


async def _serve(a: argparse.Namespace) -> int:
    from laya_lsp.scheduling import EngineBridge

    from .app import ServiceConfig, base_url, make_app, start_site

    bridge = EngineBridge()
    try:
        name, backend, gen = await bridge.run(_load, a)
    except ImportError as e:
        print(f"laya serve: {a.model} is not a Laya model folder, and serving other mlx-lm models "
              f"needs mlx-lm: pip install 'laya[convert]' ({e})", file=sys.stderr)
        bridge.shutdown()
        return 2
    cfg = ServiceConfig(host=a.host, model_name=name, max_body=a.max_body, max_tokens=a.max_tokens,
                        allow_origins=frozenset(a.allow_origin), read_timeout=a.read_timeout)
    try:
        runner, port = await start_site(make_app(bridge, gen, cfg), a.host, a.port)
    except OSError as e:
        print(f"laya serve: cannot listen on {a.host}:{a.port}: {e.strerror or e}", file=sys.stderr)
        bridge.shutdown()
        return 1
    print(f"laya serve: serving on {base_url(a.host, port)} ({name}, {backend} backend)", file=sys.stderr, flush=True)
    try:
        await asyncio.Event().wait()
    finally:
        await runner.cleanup()
        bridge.shutdown()
    return 0
