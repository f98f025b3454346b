"""``laya-lsp``: start the language server (stdio by default, or TCP), or ``--check`` the model.

Logging goes to stderr or ``--log-file``; stdout carries only JSON-RPC. In stdio mode the real
stdout is kept for the protocol and file descriptor 1 is pointed at stderr, so a stray ``print``
or a native library writing to stdout cannot corrupt the channel.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time

from . import __version__, logging_setup

log = logging.getLogger(__name__)

CHECK_SAMPLE = "import os\n\n\ndef main(argv):\n    path = os.path.join(argv[0], 'x')\n    return pa"


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="laya-lsp", description=__doc__.split("\n\n")[0])
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--stdio", action="store_true", help="serve over stdin/stdout (the default)")
    mode.add_argument("--tcp", action="store_true", help="serve over TCP on --host:--port")
    mode.add_argument("--check", action="store_true",
                      help="load the model, complete a sample, print the candidates and exit "
                           "(status 0 when the model works)")
    ap.add_argument("--host", default="127.0.0.1", help="TCP host (default: %(default)s)")
    ap.add_argument("--port", type=int, default=2087, help="TCP port (default: %(default)s)")
    ap.add_argument("--log-file", default=None, help="append logs here instead of stderr")
    ap.add_argument("--log-level", choices=sorted(logging_setup.LEVELS), default=None,
                    help="overrides the logLevel initialization option (default: info)")
    ap.add_argument("--model-path", default=None, help="--check: model folder (default: shipped)")
    ap.add_argument("--variant", default="code", help="--check: engine variant")
    ap.add_argument("--backend", default=None, help="--check: numpy, mlx or auto")
    ap.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    return ap


def _claim_stdio():
    """Reserve the process's stdout for JSON-RPC; everything else written to fd 1 goes to stderr.

    Returns:
        ``(rpc_in, rpc_out)`` binary streams for :meth:`pygls.server.JsonRPCServer.start_io`.
    """
    rpc_out = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    sys.stdout.flush()
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    sys.stdout = sys.stderr
    return sys.stdin.buffer, rpc_out


def check(args: argparse.Namespace) -> int:
    """Load the model on an engine thread and complete :data:`CHECK_SAMPLE`."""
    from engine.worker import EngineThread

    def job():
        from engine.predictor import Predictor

        t0 = time.perf_counter()
        p = Predictor.load(model_dir=args.model_path, variant=args.variant, backend=args.backend)
        load_ms = (time.perf_counter() - t0) * 1e3
        p.warmup()
        t1 = time.perf_counter()
        cands = p.predict(CHECK_SAMPLE, max_items=5, want_line=True)
        return cands, load_ms, (time.perf_counter() - t1) * 1e3

    engine = EngineThread()
    try:
        cands, load_ms, predict_ms = engine.call(job)
    except Exception as e:  # noqa: BLE001 - the message names the file at fault
        print(f"laya-lsp: the model could not be loaded: {e}", file=sys.stderr)
        return 1
    finally:
        engine.shutdown()
    # --check is a command-line report, not a server run: stdout carries no JSON-RPC here
    print(f"model loaded in {load_ms:.0f} ms; one decision in {predict_ms:.1f} ms")
    for c in cands:
        print(f"  {c.kind:10s} {c.score:8.2f}  {c.text!r}")
    return 0 if cands else 1


def main(argv: list[str] | None = None) -> int:
    # One decision is a few dozen tiny matrix products: one BLAS thread is fastest and steadiest
    # (measured: a fresh 245-token context took 23-30 ms on one thread, 660 ms with a thread per
    # core on a busy 2-core machine). Must be set before NumPy / MLX load their BLAS.
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    args = build_parser().parse_args(argv)
    logging_setup.configure(args.log_level or "info", args.log_file)
    if args.check:
        return check(args)

    from .server import create_server

    server = create_server(cli_log_level=args.log_level)
    code = 0
    try:
        if args.tcp:
            log.info("laya-lsp %s serving on %s:%d", __version__, args.host, args.port)
            server.start_tcp(args.host, args.port)
        else:
            rpc_in, rpc_out = _claim_stdio()
            log.info("laya-lsp %s serving on stdio", __version__)
            server.start_io(rpc_in, rpc_out)
    except SystemExit as e:  # pygls exits from the `exit` notification's handler
        code = e.code if isinstance(e.code, int) else 0
    except OSError as e:  # e.g. the TCP port is in use
        log.error("laya-lsp: %s", e)
        code = 1
    exit_cleanly(server, code)
    return code


def exit_cleanly(server, code: int = 0) -> None:
    """Stop the engine thread, then leave without running interpreter finalizers.

    MLX aborts the process (``terminate called without an active exception``) when the
    interpreter finalizes while the engine thread is inside an MLX call, which happens when the
    client exits mid-request. Waiting for the engine thread's current job and then ``os._exit``
    avoids tearing MLX down under a running thread.
    """
    try:
        server.bridge.shutdown(wait=2.0)
    except Exception:  # noqa: BLE001 - exiting anyway
        pass
    logging.shutdown()
    sys.stderr.flush()
    os._exit(code)
