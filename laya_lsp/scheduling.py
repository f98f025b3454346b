"""Debounce, latest-wins and cancellation: the bridge from async handlers to the engine thread.

All model work runs on one :class:`engine.worker.EngineThread` (MLX state is not thread-safe).
Handlers run on the asyncio loop and ``await`` engine jobs through :func:`await_job`, which turns
a cancelled handler (pygls cancels async handlers on ``$/cancelRequest``) into a stopped job.

Freshness is "latest wins" (:class:`Sequencer`): a request holds a :class:`Ticket`; an edit of
its document, or a newer request of the same kind for it, makes the ticket stale, and a stale
request answers empty instead of computing (or returning) a result for text that has moved on.
The check runs after the debounce wait and again when the job starts on the engine thread.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import math
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable
from urllib.parse import unquote

if TYPE_CHECKING:
    from engine.worker import EngineThread, Job

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Ticket:
    """A request's claim on a document at the moment it arrived."""

    uri: str
    kind: str
    """The request method: completion and inline completion for one keystroke don't compete."""
    edit: int | None
    request: int


class Sequencer:
    """Latest-wins bookkeeping, per open document and per request kind.

    Counters come from one global clock, so a value never recurs: a ticket taken before a
    document was closed stays stale after it is reopened. Only open documents have entries
    (:meth:`opened` to :meth:`forget`), so requests for documents that are not open, or no longer
    open, leave nothing behind. Documents are keyed by their URI with percent-escapes decoded, as
    pygls keys its documents. Mutated on the event loop thread; the engine thread only reads (a
    dict lookup, atomic under the GIL).
    """

    def __init__(self, open_only: bool = True) -> None:
        """
        Args:
            open_only: only opened keys get tickets that can be current (the language server's
                documents). False: any key can, with no :meth:`opened` first (the HTTP service's
                named clients, ``laya_serve.app``: one entry per client name).
        """
        self.open_only = open_only
        self._clock = itertools.count(1)
        self._edits: dict[str, int] = {}
        self._requests: dict[tuple[str, str], int] = {}

    def opened(self, uri: str) -> None:
        """A document was opened (or reopened): a fresh edit counter."""
        self._edits[unquote(uri)] = next(self._clock)

    def edited(self, uri: str) -> None:
        """The document changed: every outstanding ticket for it is stale (a change to a
        document that is not open is ignored)."""
        key = unquote(uri)
        if key in self._edits:
            self._edits[key] = next(self._clock)

    def ticket(self, uri: str, kind: str) -> Ticket:
        """Take a ticket for a new request; older tickets of the same kind become stale.

        A document that is not open gets a ticket that is stale at once (such a request answers
        empty anyway) and no entry.
        """
        key = unquote(uri)
        n = next(self._clock)
        if key in self._edits or not self.open_only:
            self._requests[(key, kind)] = n
        return Ticket(uri, kind, self._edits.get(key), n)

    def is_current(self, ticket: Ticket) -> bool:
        """True while the document is open and no edit and no newer request of its kind has come
        for it."""
        key = unquote(ticket.uri)
        return ((ticket.edit is not None or not self.open_only) and self._edits.get(key) == ticket.edit
                and self._requests.get((key, ticket.kind)) == ticket.request)

    def forget(self, uri: str) -> None:
        """The document was closed: drop its counters (its tickets become stale)."""
        key = unquote(uri)
        self._edits.pop(key, None)
        for k in [k for k in self._requests if k[0] == key]:
            del self._requests[k]

    def entries(self) -> int:
        """How many entries the bookkeeping holds (open documents plus their request kinds)."""
        return len(self._edits) + len(self._requests)


async def debounce(ms: int) -> None:
    """Sleep ``ms`` milliseconds (no sleep, and no yield, at 0)."""
    if ms > 0:
        await asyncio.sleep(ms / 1000)


async def await_job(job: Job) -> Any:
    """Await an engine job from the event loop.

    Raises:
        asyncio.CancelledError: when the awaiting task is cancelled; the job is cancelled too
            (if still queued) and its ``stop`` event is set (if running), then the error is
            re-raised so pygls answers ``RequestCancelled``.
    """
    try:
        return await asyncio.wrap_future(job.future)
    except asyncio.CancelledError:
        job.stop.set()
        job.future.cancel()
        raise


class EngineBridge:
    """Submits work to the engine thread: urgent (requests) or background (document refreshes).

    The engine thread's queue is first-in first-out, so background jobs yield by re-queueing
    themselves behind urgent ones while any urgent job is pending (at most
    ``max_deferrals`` times, so they cannot starve).
    """

    def __init__(self, engine: EngineThread | None = None, max_deferrals: int = 50) -> None:
        self._engine = engine
        self._urgent = 0
        self._lock = threading.Lock()
        self.max_deferrals = max_deferrals

    @property
    def engine(self) -> EngineThread:
        """The engine thread, started on first use."""
        if self._engine is None:
            from engine.worker import EngineThread  # stdlib only: cheap

            self._engine = EngineThread()
        return self._engine

    def busy(self) -> bool:
        """True while an urgent job is queued or running."""
        return self._urgent > 0

    def submit(self, fn: Callable[..., Any], *args, **kwargs) -> Job:
        """Queue an urgent job; returns the :class:`~engine.worker.Job`."""
        with self._lock:
            self._urgent += 1
        job = self.engine.submit(fn, *args, **kwargs)
        job.future.add_done_callback(self._urgent_done)
        return job

    def _urgent_done(self, _future) -> None:
        with self._lock:
            self._urgent -= 1

    async def run(self, fn: Callable[..., Any], *args, **kwargs) -> Any:
        """Run ``fn`` on the engine thread and await its result (see :func:`await_job`)."""
        return await await_job(self.submit(fn, *args, **kwargs))

    def submit_background(self, fn: Callable[..., Any], *args, **kwargs) -> Job:
        """Queue a low-priority job; its errors are logged, not raised."""

        def step(deferrals: int) -> None:
            if self.busy() and deferrals < self.max_deferrals:
                self.engine.submit(step, deferrals + 1)  # back of the queue
                return
            try:
                fn(*args, **kwargs)
            except Exception:
                log.exception("background engine job %s failed", getattr(fn, "__name__", fn))

        return self.engine.submit(step, 0)

    def shutdown(self, wait: float = 0.0) -> None:
        """Stop the engine thread after its queued jobs, waiting up to ``wait`` seconds for it."""
        if self._engine is not None:
            self._engine.shutdown(timeout=wait)


class Throttle:
    """Call a function for a key at most once per ``interval_s``, trailing call included.

    The first trigger runs at once; triggers inside the interval schedule one trailing call at
    the interval's end (the callback should read the newest state when it runs). Loop thread only.
    """

    def __init__(self, interval_s: float) -> None:
        self.interval_s = interval_s
        self._last: dict[str, float] = {}
        self._timers: dict[str, asyncio.TimerHandle] = {}

    def trigger(self, key: str, fn: Callable[[], Any], interval_s: float | None = None) -> None:
        """Call ``fn`` now or at the end of the key's interval (``interval_s`` overrides the
        default for this call, e.g. longer for a larger document)."""
        if key in self._timers:
            return  # the pending trailing call will see this change
        interval = self.interval_s if interval_s is None else interval_s
        wait = self._last.get(key, -math.inf) + interval - time.monotonic()
        if wait <= 0:
            self._fire(key, fn)
        else:
            loop = asyncio.get_running_loop()
            self._timers[key] = loop.call_later(wait, self._fire, key, fn)

    def _fire(self, key: str, fn: Callable[[], Any]) -> None:
        self._timers.pop(key, None)
        self._last[key] = time.monotonic()
        try:
            fn()
        except Exception:
            log.exception("throttled call for %s failed", key)

    def cancel(self, key: str) -> None:
        """Drop the key's pending call and history."""
        timer = self._timers.pop(key, None)
        if timer is not None:
            timer.cancel()
        self._last.pop(key, None)
