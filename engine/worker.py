"""The engine thread: one thread owns all MLX / model state; other threads queue jobs to it.

MLX arrays and streams are not safe to share across threads (mlx-lm's server follows the same
rule), so every call that touches the model - loading included - runs on this one thread. Callers
get a :class:`concurrent.futures.Future`; asyncio code awaits it with ``asyncio.wrap_future``.
A job can be cancelled before it starts (``future.cancel()``) or told to stop by its ``stop``
event, which long jobs check between steps.
"""

from __future__ import annotations

import logging
import queue
import threading
from concurrent.futures import Future
from typing import Any, Callable

log = logging.getLogger(__name__)
_local = threading.local()

IDLE_AFTER_S = 0.03
"""Quiet time before idle work starts: shorter than the gap between a person's keystrokes
(~80-250 ms), longer than the gap between requests of one burst."""


SWITCH_INTERVAL_S = 0.0005
"""CPython's thread switch interval for a process that serves requests through an engine thread
(CPython's default is 5 ms). The engine thread's idle prefill runs Python between its kernel
calls in a tight loop; with 5 ms each GIL hand-off of a request waited up to 5 ms (keystrokes
30 ms apart: 6.8 ms median round trip, against 3.5 ms with 0.5 ms; ``bench_jumps`` side by side,
when the ahead-of-time kernels still held the GIL during the calls; they release it since
2026-12-03). ``LAYA_SWITCH_INTERVAL_MS`` overrides it (for such comparisons)."""


def set_switch_interval() -> None:
    """Apply :data:`SWITCH_INTERVAL_S` (or ``$LAYA_SWITCH_INTERVAL_MS``) to this process.

    Raises:
        ValueError: ``LAYA_SWITCH_INTERVAL_MS`` is not a positive number.
    """
    import os
    import sys

    raw = os.environ.get("LAYA_SWITCH_INTERVAL_MS")
    try:
        ms = float(raw) if raw else SWITCH_INTERVAL_S * 1e3
    except ValueError:
        ms = float("nan")
    if not ms > 0:
        raise ValueError(f"LAYA_SWITCH_INTERVAL_MS must be a positive number of milliseconds, got {raw!r}")
    sys.setswitchinterval(ms / 1e3)


def set_idle(fn: Callable[[], bool] | None) -> None:
    """From a job: give this engine thread its idle step (see :attr:`EngineThread.idle`)."""
    engine = getattr(_local, "engine", None)
    if engine is not None:
        engine.idle = fn


def idle_at_once() -> None:
    """From a job: start the idle steps right after it, without waiting :data:`IDLE_AFTER_S`
    first (a job queued after a quiet time of its own, such as a prefetch after an edit: its
    prefill should use the pause that is left, not lose another 30 ms of it)."""
    engine = getattr(_local, "engine", None)
    if engine is not None:
        engine.skip_quiet = True


def current_stop() -> threading.Event | None:
    """The ``stop`` event of the job running on this thread (None outside a job)."""
    job = getattr(_local, "job", None)
    return job.stop if job is not None else None


class Job:
    __slots__ = ("fn", "args", "kwargs", "future", "stop")

    def __init__(self, fn, args, kwargs):
        self.fn, self.args, self.kwargs = fn, args, kwargs
        self.future: Future = Future()
        self.stop = threading.Event()


class EngineThread:
    """A single daemon thread that runs submitted callables in order."""

    def __init__(self, name: str = "laya-engine"):
        self._q: queue.SimpleQueue[Job | None] = queue.SimpleQueue()
        self.idle: Callable[[], bool] | None = None
        """Run once no job has come for ``IDLE_AFTER_S``, one short step a call, until it returns
        False (the predictor's ``advance``: the full window behind a short one). A job that comes
        meanwhile waits for at most one step; a burst of requests (a fast typist, a benchmark)
        is never slowed by it."""
        self.skip_quiet = False
        """Set by :func:`idle_at_once`: the next wait for a job before the idle steps is 0."""
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def submit(self, fn: Callable[..., Any], *args, **kwargs) -> Job:
        """Queue ``fn(*args, **kwargs)``; returns the :class:`Job` (``job.future`` holds the result)."""
        job = Job(fn, args, kwargs)
        self._q.put(job)
        return job

    def call(self, fn: Callable[..., Any], *args, timeout: float | None = None, **kwargs) -> Any:
        """Run ``fn`` on the engine thread and wait for its result (re-raising its exception)."""
        if threading.current_thread() is self._thread:
            return fn(*args, **kwargs)
        return self.submit(fn, *args, **kwargs).future.result(timeout)

    def _next_job(self) -> Job | None:
        """The next job; while none comes, the idle steps (the first after ``IDLE_AFTER_S`` of quiet)."""
        if self.idle is None:
            return self._q.get()
        wait = 0 if self.skip_quiet else IDLE_AFTER_S
        self.skip_quiet = False
        while True:
            try:
                return self._q.get(timeout=wait) if wait else self._q.get_nowait()
            except queue.Empty:
                pass
            try:
                more = self.idle()
            except Exception:  # noqa: BLE001 - background work must not stop the thread
                log.exception("idle step failed")
                more = False
            if not more:
                return self._q.get()
            wait = 0

    def _run(self) -> None:
        _local.engine = self
        while True:
            job = self._next_job()
            if job is None:
                return
            if not job.future.set_running_or_notify_cancel():
                continue  # cancelled while queued
            if job.stop.is_set():
                job.future.set_result(None)  # told to stop before it started
                continue
            _local.job = job
            try:
                job.future.set_result(job.fn(*job.args, **job.kwargs))
            except BaseException as e:  # noqa: BLE001 - handed to the caller
                job.future.set_exception(e)
            finally:
                _local.job = None

    def shutdown(self, timeout: float = 2.0) -> None:
        self._q.put(None)
        self._thread.join(timeout)
