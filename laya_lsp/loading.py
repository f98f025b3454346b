"""Loading the model on the engine thread, with work-done progress and user-visible errors.

The load starts while ``initialize`` is handled (so it overlaps the client's start-up) and runs
as two engine jobs, load then warm-up. The engine (numpy, MLX) is imported inside the first job,
so the server answers ``initialize`` after importing only pygls and lsprotocol. Progress and
error messages wait for ``initialized``: before its ``initialize`` result a server may not send
``window/workDoneProgress/create``.

A bad ``variant``, ``modelPath`` or ``backend`` costs only that option, as the README promises:
the load is tried again with it at its default (an unknown variant becomes ``code``, a model
folder that cannot be loaded becomes the shipped model), and the reason is shown as a warning.
Completions are off only when the shipped model itself cannot be loaded.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from typing import TYPE_CHECKING, Any

from lsprotocol import types

from .config import InitializationOptions
from .scheduling import await_job

if TYPE_CHECKING:
    from .server import LayaServer

log = logging.getLogger(__name__)


class ModelHandle:
    """The predictor and its load state.

    ``predictor`` is set on the engine thread by the load job; engine jobs queued after it (the
    queue is first-in first-out) can read it directly. Loop-side code awaits :meth:`wait`.
    """

    def __init__(self) -> None:
        self.predictor: Any | None = None
        self.error: str | None = None
        """Why the model is unavailable (names the file at fault), once loading failed."""
        self.load_ms: float | None = None
        self.loaded: asyncio.Future | None = None
        """Resolves when the model files are read (before the warm-up)."""
        self.task: asyncio.Task | None = None
        """Resolves to the predictor, or None when loading failed; never raises."""
        self.fallbacks: list[str] = []
        """One message per option that could not be used and fell back to its default."""

    def start(self, ls: LayaServer, options: InitializationOptions) -> None:
        """Queue the load and warm-up jobs. Call on the event loop, once."""
        loop = asyncio.get_running_loop()
        self.loaded = loop.create_future()
        self.task = loop.create_task(self._load(ls, options))

    async def _load(self, ls: LayaServer, options: InitializationOptions) -> Any | None:
        t0 = time.perf_counter()
        model_path, variant, backend = options.model_path, options.variant, options.backend
        from .inline_model import is_other_mlx_lm_folder

        if is_other_mlx_lm_folder(model_path):  # an mlx-lm model for inline completion; the
            ls.inline_model.start(ls, model_path)  # identifier engine keeps the shipped model
            model_path = None
        while True:
            try:
                if variant != DEFAULT.variant:
                    await await_job(ls.bridge.submit(_variant_job, variant))
                predictor = await await_job(ls.bridge.submit(
                    _load_job, self, model_path, variant, backend))
                if not self.loaded.done():
                    self.loaded.set_result(True)
                    for uri in list(ls.opened):  # opened while loading: count their words now
                        ls.observe(uri)
                await await_job(ls.bridge.submit(_warmup_job, predictor))
                break
            except Exception as e:  # noqa: BLE001 - reported to the user, the server stays up
                self.predictor = None
                reason = _describe(e)
                # the option at fault falls back to its default and the load is tried again
                if variant != DEFAULT.variant and isinstance(e, _VariantError):
                    self._fall_back(f"variant {variant!r}: {reason}; using {DEFAULT.variant!r}")
                    variant = DEFAULT.variant
                elif model_path is not None:
                    self._fall_back(f"modelPath: {reason}; using the model shipped inside the package")
                    model_path = None
                elif backend is not None:
                    self._fall_back(f"backend {backend!r}: {reason}; using the variant's backend")
                    backend = None
                elif variant != DEFAULT.variant:  # e.g. a variant that ships no model
                    self._fall_back(f"variant {variant!r}: {reason}; using {DEFAULT.variant!r}")
                    variant = DEFAULT.variant
                else:
                    self.error = reason
                    if not self.loaded.done():
                        self.loaded.set_result(False)
                    log.error("model not loaded: %s", self.error)
                    return None
        self.load_ms = (time.perf_counter() - t0) * 1e3
        log.info("model ready in %.0f ms", self.load_ms)
        return predictor

    def start_variant(self, ls: LayaServer, variant: str, backend: str | None) -> None:
        """Queue loading ``variant``'s shipped model, without fall-backs and without idle work (a
        second model beside the main one: the typing variant for prose). Call on the event loop,
        once; a failure leaves ``predictor`` None and the reason in ``error``."""
        loop = asyncio.get_running_loop()
        self.loaded = loop.create_future()
        self.task = loop.create_task(self._load_variant(ls, variant, backend))

    async def _load_variant(self, ls: LayaServer, variant: str, backend: str | None) -> Any | None:
        t0 = time.perf_counter()
        try:
            predictor = await await_job(ls.bridge.submit(_load_job, self, None, variant, backend, False))
            self.loaded.set_result(True)
            for uri in list(ls.opened):  # the documents it serves, opened before it loaded
                ls.observe(uri)
            await await_job(ls.bridge.submit(_warmup_job, predictor))
        except Exception as e:  # noqa: BLE001 - reported to the user, the server stays up
            self.predictor, self.error = None, _describe(e)
            if not self.loaded.done():
                self.loaded.set_result(False)
            log.warning("the %s model was not loaded: %s", variant, self.error)
            return None
        self.load_ms = (time.perf_counter() - t0) * 1e3
        log.info("%s model ready in %.0f ms", variant, self.load_ms)
        return predictor

    def _fall_back(self, message: str) -> None:
        self.fallbacks.append(message)
        log.warning("%s", message)

    async def wait(self) -> Any | None:
        """The predictor once loaded and warm; None if loading failed or never started."""
        if self.task is None:
            return None
        # shield: a cancelled request must not cancel the load it waits for
        return await asyncio.shield(self.task)


DEFAULT = InitializationOptions()
PROGRESS_CREATE_TIMEOUT_S = 2.0
"""A client that never answers ``window/workDoneProgress/create`` gets no progress after this
long; the work goes on (the workspace index waited for the answer forever)."""


async def create_progress(ls: LayaServer, token: str) -> bool:
    """Ask the client for a work-done progress ``token`` (``window/workDoneProgress/create``);
    False when it refuses or does not answer within :data:`PROGRESS_CREATE_TIMEOUT_S` (the work
    goes on without progress). The request is forgotten after the wait, so an answer that comes
    later is dropped quietly (with pygls's ``create_async`` it raised ``InvalidStateError``, shown
    to the user as an error: "failed to handle a message")."""
    msg_id = f"laya-progress-{uuid.uuid4()}"
    future = ls.protocol.send_request(types.WINDOW_WORK_DONE_PROGRESS_CREATE,
                                      types.WorkDoneProgressCreateParams(token=token), msg_id=msg_id)
    try:
        await asyncio.wait_for(asyncio.wrap_future(future), PROGRESS_CREATE_TIMEOUT_S)
        return True
    except Exception as e:  # noqa: BLE001 - a client may refuse or never answer
        log.debug("window/workDoneProgress/create failed: %s", e or type(e).__name__)
        return False
    finally:
        ls.protocol.forget_request(msg_id)


class _VariantError(Exception):
    """The ``variant`` option names no usable variant file."""


def _variant_job(variant: str) -> None:
    """Engine thread: read the variant file, so a bad ``variant`` is told apart from a bad model."""
    from engine.config import load_variant

    try:
        load_variant(variant)
    except (OSError, ValueError) as e:
        raise _VariantError(str(e)) from e


def _describe(e: BaseException) -> str:
    if isinstance(e, ImportError):
        return f"the engine could not be imported: {e}"
    return str(e) or type(e).__name__


def _load_job(handle: ModelHandle, model_path: str | None, variant: str, backend: str | None,
              idle: bool = True):
    """Engine thread: import the engine and load the model folder. ``idle``: this model's full
    windows are finished in pauses (the main model); else on its own keystrokes. On a first start
    on a machine it serves on the NumPy backend while the numba kernels are built, and switches
    in a pause (or, without idle steps, at a keystroke)."""
    from engine.predictor import Predictor

    from engine.worker import set_idle

    predictor = Predictor.load(model_dir=model_path, variant=variant, backend=backend, defer_jit=True)
    if idle:
        predictor.advance_on_keystroke = False  # a jump's full window is finished in pauses,
        set_idle(predictor.idle_step)  # and the word being typed is prefilled in them
    handle.predictor = predictor
    return predictor


def _warmup_job(predictor) -> None:
    """Engine thread: pay first-use costs now, not on the first keystroke."""
    predictor.warmup()


async def report_loading(ls: LayaServer) -> None:
    """Show the load as work-done progress (if the client supports it); show a failure.

    Call from the ``initialized`` handler. A failure is sent as ``window/showMessage`` (Error) with
    the engine's message, which names the file at fault.
    """
    handle = ls.model
    if handle.task is None:
        return
    token = None
    if ls.client_supports_progress:
        token = f"laya-load-{uuid.uuid4()}"
        if not await create_progress(ls, token):  # loading goes on without progress
            token = None
    progress = ls.work_done_progress
    if token:
        progress.begin(token, types.WorkDoneProgressBegin(
            title="Laya", message="loading the model", percentage=0, cancellable=False))
        if await asyncio.shield(handle.loaded):
            progress.report(token, types.WorkDoneProgressReport(message="warming up", percentage=50))
    predictor = await handle.wait()
    if token:
        done = f"ready in {handle.load_ms:.0f} ms" if predictor is not None else "model not loaded"
        progress.end(token, types.WorkDoneProgressEnd(message=done))
    if handle.fallbacks:
        ls.window_show_message(types.ShowMessageParams(
            type=types.MessageType.Warning, message="Laya: " + "; ".join(handle.fallbacks)))
    if predictor is None:
        ls.window_show_message(types.ShowMessageParams(
            type=types.MessageType.Error,
            message=f"Laya: the model could not be loaded, completions are off: {handle.error}"))
