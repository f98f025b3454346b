"""``laya-lsp``: start the language server (stdio by default, or TCP), or ``--check`` the model.

Logging goes to stderr or ``--log-file``; stdout carries only JSON-RPC. In stdio mode the real
stdout is kept for the protocol and file descriptor 1 is pointed at stderr, so a stray ``print``
or a native library writing to stdout cannot corrupt the channel.
"""

from __future__ import annotations

import argparse
import logging
import os
import socket
import sys
import time

from . import __version__, logging_setup

log = logging.getLogger(__name__)

CHECK_SAMPLE = "import os\n\n\ndef main(argv):\n    path = os.path.join(argv[0], 'x')\n    return pa"


def _port_type(lowest: int):
    """An argparse type: a TCP port number from ``lowest`` to 65535 (``--port``: 1; ``--http``:
    0, any free port)."""

    def port_number(text: str) -> int:
        try:
            port = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if not lowest <= port <= 65535:
            raise argparse.ArgumentTypeError(f"{port} is not a TCP port ({lowest}-65535)")
        return port

    return port_number


_port, _http_port = _port_type(1), _port_type(0)


def build_parser() -> argparse.ArgumentParser:
    from .protocol import GUARANTEES

    ap = argparse.ArgumentParser(prog="laya-lsp", description=__doc__.split("\n\n")[0].replace("``", ""),
                                 epilog=GUARANTEES, formatter_class=argparse.RawDescriptionHelpFormatter)
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--stdio", action="store_true", help="serve over stdin/stdout (the default)")
    mode.add_argument("--tcp", action="store_true", help="serve over TCP on --host:--port")
    mode.add_argument("--check", action="store_true",
                      help="load the model, complete a sample, print the candidates and exit "
                           "(status 0 when the model works)")
    ap.add_argument("--host", default=None, help="--tcp: host to listen on (default: 127.0.0.1)")
    ap.add_argument("--port", type=_port, default=None, help="--tcp: port to listen on (default: 2087)")
    ap.add_argument("--http", type=_http_port, default=None, metavar="PORT",
                    help="also serve the local HTTP completion service (POST /complete, /v1/completions; "
                         "needs the serve extra) on this port, on the same engine; 0: a free port "
                         "(stderr says which)")
    ap.add_argument("--http-host", default="127.0.0.1",
                    help="--http: address to listen on (default: 127.0.0.1; no authentication)")
    ap.add_argument("--log-file", default=None, help="append logs here instead of stderr")
    ap.add_argument("--log-level", choices=sorted(logging_setup.LEVELS), default=None,
                    help="overrides the logLevel initialization option (default: info)")
    ap.add_argument("--model-path", default=None, help="--check: model folder (default: shipped)")
    ap.add_argument("--variant", default=None, help="--check: engine variant (default: code)")
    ap.add_argument("--backend", default=None, choices=("numpy", "numba", "mlx", "auto"),
                    help="--check: override the variant's backend")
    ap.add_argument("--version", action="version", version=f"%(prog)s {__version__}",
                    help="print the version and exit")
    return ap


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Parse and cross-check the flags; a usage error exits with status 2 and one line on stderr."""
    ap = build_parser()
    args = ap.parse_args(argv)
    if not args.tcp and (args.host is not None or args.port is not None):
        ap.error("--host and --port need --tcp")
    if not args.check and (args.model_path or args.variant or args.backend):
        # a server takes them from its client, which would otherwise be silently overridden or ignored
        ap.error("--model-path, --variant and --backend need --check; a server takes them as the "
                 "initializationOptions modelPath, variant and backend")
    args.variant = args.variant or "code"
    args.host = args.host or "127.0.0.1"
    args.port = args.port or 2087
    return args


def _check_bind(host: str, port: int) -> None:
    """Raise ``OSError`` now if ``host:port`` cannot be listened on (in use, no such address).

    The server binds inside ``asyncio.run``, where an error would come out as a traceback, so the
    bind is tried here first, for a clear message; "serving on" is logged once the server listens
    (``tcp.start_tcp``'s ``on_listening``), so a client may connect as soon as it reads it.
    """
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as asyncio.start_server does
        s.bind(address)


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
    last = CHECK_SAMPLE.rsplit("\n", 1)[-1]
    print(f"completing the end of a sample Python file ({CHECK_SAMPLE.count(chr(10)) + 1} lines), "
          f"its last line {last!r} (kind, score: log-probability, item):")
    for c in cands:
        print(f"  {c.kind:10s} {c.score:8.2f}  {c.text!r}")
    from engine.kernels import local_build_state

    if local_build_state() == "building":
        print("note: a first start on this machine: the numba kernels are being built in the background "
              "(niced, about 10-20 s, it goes on after this command); until then a server answers on the "
              "NumPy backend, more slowly")
    print("ok: the server can start" if cands else "no candidate: something is wrong (exit status 1)")
    return 0 if cands else 1



def main(argv: list[str] | None = None) -> int:
    # One decision is a few dozen tiny matrix products: one BLAS thread is fastest and steadiest
    # (measured: a fresh 245-token context took 23-30 ms on one thread, 660 ms with a thread per
    # core on a busy 2-core machine). Must be set before NumPy / MLX load their BLAS.
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    args = parse_args(argv)
    try:
        logging_setup.configure(args.log_level or "info", args.log_file, stdio=not (args.tcp or args.check))
    except OSError as e:
        print(f"laya-lsp: cannot write the log file: {e}", file=sys.stderr)
        return 2
    if args.check:
        code = check(args)
        sys.stdout.flush()
        logging.shutdown()
        os._exit(code)  # as exit_cleanly: MLX may abort when the interpreter finalizes after it

    from .server import create_server

    from engine.worker import set_switch_interval

    try:
        set_switch_interval()  # requests must not queue behind the engine thread's GIL
    except ValueError as e:
        log.error("%s", e)
        return 2
    server = create_server(cli_log_level=args.log_level)
    if args.http is not None:
        from .http_service import HttpSettings

        server.http = HttpSettings(args.http, args.http_host)
    code = 0
    try:
        if args.tcp:
            _check_bind(args.host, args.port)
            from .tcp import start_tcp

            start_tcp(server, args.host, args.port,  # one session at a time (pygls's: any number)
                      on_listening=lambda: log.info("laya-lsp %s serving on %s:%d", __version__, args.host, args.port))
        else:
            rpc_in, rpc_out = _claim_stdio()
            log.debug("laya-lsp %s serving on stdio", __version__)
            from .stdio import start_io

            start_io(server, rpc_in, rpc_out)
    except SystemExit as e:  # pygls exits from the `exit` notification's handler
        code = e.code if isinstance(e.code, int) else 0
    except OSError as e:  # e.g. the TCP port is in use, or the host does not resolve
        where = f" on {args.host}:{args.port}" if args.tcp else ""
        log.error("cannot serve%s: %s", where, e.strerror or e)
        if args.log_file:  # the log went to the file: the person at the terminal needs it too
            print(f"laya-lsp: cannot serve{where}: {e.strerror or e}", file=sys.stderr)
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
