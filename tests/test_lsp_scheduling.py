"""Unit tests of ``laya_lsp.scheduling``: latest-wins, debounce, cancellation, priorities."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from engine.worker import EngineThread
from laya_lsp.scheduling import EngineBridge, Sequencer, Throttle, await_job, debounce

COMPLETION, INLINE = "textDocument/completion", "textDocument/inlineCompletion"


def test_newer_request_supersedes_older_of_same_kind_only():
    seq = Sequencer()
    seq.opened("a")
    first = seq.ticket("a", COMPLETION)
    inline = seq.ticket("a", INLINE)
    assert seq.is_current(first) and seq.is_current(inline)
    second = seq.ticket("a", COMPLETION)
    assert not seq.is_current(first)
    assert seq.is_current(second)
    assert seq.is_current(inline), "an inline request must not cancel the completion of the same keystroke"


def test_edit_supersedes_every_request_of_that_document_only():
    seq = Sequencer()
    seq.opened("a")
    seq.opened("b")
    a, b = seq.ticket("a", COMPLETION), seq.ticket("b", COMPLETION)
    seq.edited("a")
    assert not seq.is_current(a)
    assert seq.is_current(b)
    assert seq.is_current(seq.ticket("a", COMPLETION))


def test_ticket_from_before_close_stays_stale_after_reopen():
    seq = Sequencer()
    seq.opened("a")
    old = seq.ticket("a", COMPLETION)
    seq.forget("a")
    assert not seq.is_current(old)
    seq.opened("a")
    assert not seq.is_current(old)


async def test_debounce_waits_and_zero_does_not():
    t0 = time.perf_counter()
    await debounce(0)
    assert time.perf_counter() - t0 < 0.01
    t0 = time.perf_counter()
    await debounce(60)
    assert time.perf_counter() - t0 >= 0.055


async def test_debounce_then_latest_wins():
    """Two requests inside the debounce window: the older one sees it is stale after its sleep."""
    seq = Sequencer()
    seq.opened("a")

    async def request() -> bool:
        ticket = seq.ticket("a", COMPLETION)
        await debounce(30)
        return seq.is_current(ticket)

    first = asyncio.ensure_future(request())
    await asyncio.sleep(0.005)
    second = asyncio.ensure_future(request())
    assert await first is False
    assert await second is True


@pytest.fixture
def engine():
    e = EngineThread(name="test-engine")
    yield e
    e.shutdown()


async def test_await_job_returns_result_and_raises_errors(engine):
    assert await await_job(engine.submit(lambda x: x * 2, 21)) == 42
    with pytest.raises(ZeroDivisionError):
        await await_job(engine.submit(lambda: 1 / 0))


async def test_cancel_sets_stop_of_running_job(engine):
    started, ready = threading.Event(), threading.Event()
    jobs = []

    def long_job() -> str:
        ready.wait(5)
        started.set()
        return "stopped" if jobs[0].stop.wait(5) else "ran out"

    job = engine.submit(long_job)
    jobs.append(job)
    ready.set()
    task = asyncio.ensure_future(await_job(job))
    assert await asyncio.to_thread(started.wait, 5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert job.stop.is_set()
    assert await asyncio.wrap_future(job.future) == "stopped"


async def test_cancel_of_queued_job_means_it_never_runs(engine):
    gate = threading.Event()
    ran = []
    blocker = engine.submit(gate.wait, 5)
    queued = engine.submit(ran.append, "ran")
    task = asyncio.ensure_future(await_job(queued))
    await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    gate.set()
    await asyncio.wrap_future(blocker.future)
    await asyncio.wrap_future(engine.submit(lambda: None).future)  # drain the queue
    assert queued.future.cancelled()
    assert ran == []


async def test_background_job_yields_to_urgent_jobs(engine):
    bridge = EngineBridge(engine)
    gate = threading.Event()
    order: list[str] = []
    bridge.submit(gate.wait, 5)  # urgent, running: keeps the bridge busy
    done = threading.Event()
    bridge.submit_background(lambda: (order.append("background"), done.set()))
    bridge.submit(order.append, "urgent")
    gate.set()
    assert await asyncio.to_thread(done.wait, 5)
    assert order == ["urgent", "background"]
    assert not bridge.busy()


async def test_background_job_errors_are_logged_not_raised(engine, caplog):
    bridge = EngineBridge(engine)
    bridge.submit_background(lambda: 1 / 0)
    ok = await bridge.run(lambda: "still works")
    assert ok == "still works"
    await asyncio.wrap_future(engine.submit(lambda: None).future)  # the deferred job ran before this
    assert any("background engine job" in r.message for r in caplog.records)


async def test_throttle_runs_first_at_once_then_one_trailing_call():
    calls: list[float] = []
    throttle = Throttle(0.05)
    for _ in range(5):
        throttle.trigger("doc", lambda: calls.append(time.monotonic()))
    assert len(calls) == 1
    await asyncio.sleep(0.12)
    assert len(calls) == 2, "the changes inside the interval get exactly one trailing call"
    assert calls[1] - calls[0] >= 0.045
    throttle.trigger("doc", lambda: calls.append(time.monotonic()))  # interval over: at once
    assert len(calls) == 3
    throttle.trigger("doc", lambda: calls.append(time.monotonic()))  # schedules a trailing call
    throttle.cancel("doc")
    await asyncio.sleep(0.08)
    assert len(calls) == 3, "cancel drops the pending trailing call"


def test_documents_not_open_get_stale_tickets_and_no_entries():
    seq = Sequencer()
    for k in range(10):
        ticket = seq.ticket(f"never-{k}", COMPLETION)
        assert not seq.is_current(ticket)
        seq.edited(f"never-{k}")  # a didChange for a document that is not open
    assert seq.entries() == 0
    seq.opened("file:///a%20b.py")
    assert seq.is_current(seq.ticket("file:///a b.py", COMPLETION)), "keyed as pygls keys documents"
    seq.forget("file:///a b.py")
    assert seq.entries() == 0
    assert not seq.is_current(seq.ticket("file:///a%20b.py", COMPLETION))
    assert seq.entries() == 0


def test_named_clients_need_no_open_document():
    """The HTTP service's sequencer (``open_only=False``): any client name takes current tickets,
    and a newer request of the same client supersedes the older one (``laya_serve.app``)."""
    seq = Sequencer(open_only=False)
    first = seq.ticket("editor-1", COMPLETION)
    assert seq.is_current(first)
    other = seq.ticket("editor-2", COMPLETION)
    second = seq.ticket("editor-1", COMPLETION)
    assert not seq.is_current(first) and seq.is_current(second) and seq.is_current(other)


def _wait_until(condition, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"{condition} stayed false"
        time.sleep(0.002)


def test_a_document_count_waits_for_a_completion_being_answered_not_only_its_engine_job():
    """From the moment a completion request is read until its answer is written, background
    counting yields (``LayaServer._yield_to_requests``), also while the request is not on the
    engine thread (here: its debounce); once answered, counting goes on at once."""
    from tests.lsp_raw import InProcessServer

    server = InProcessServer()
    try:
        server.initialize(options={"debounceMs": 400})
        uri = "file:///w/a.py"
        server.open(uri, "import os\nos.pa")
        assert "result" in server.complete(uri, 1, 5)  # the model loaded and the document counted
        _wait_until(lambda: not server.ls.bridge.busy() and not server.ls.protocol.answering())
        msg_id = server.request("textDocument/completion", {
            "textDocument": {"uri": uri}, "position": {"line": 1, "character": 5}})
        _wait_until(server.ls.protocol.answering)
        assert not server.ls.bridge.busy()  # in its debounce: nothing on the engine thread
        t = time.monotonic()
        server.ls._yield_to_requests()  # the counting thread's pause
        assert time.monotonic() - t >= 0.04  # it waited (up to MAX_COUNTING_PAUSE_S, 50 ms)
        assert "result" in server.wait_for(msg_id)
        _wait_until(lambda: not server.ls.protocol.answering())  # the answer's write has returned
        t = time.monotonic()
        server.ls._yield_to_requests()
        assert time.monotonic() - t < 0.02
    finally:
        server.close()


def test_a_document_count_waits_while_the_next_message_waits_to_be_read():
    """Bytes waiting in the server's input (``LayaServer.input_fd``, stdin as a pipe) make a
    count pause too, so the event loop reads them without sharing the GIL with the count."""
    import os

    from laya_lsp.server import LayaServer

    ls = LayaServer()
    r, w = os.pipe()
    try:
        ls.input_fd = r
        t = time.monotonic()
        ls._yield_to_requests()
        assert time.monotonic() - t < 0.02  # nothing waiting: no pause
        os.write(w, b"Content-Length: 2\r\n\r\n{}")
        t = time.monotonic()
        ls._yield_to_requests()
        assert time.monotonic() - t >= 0.04  # it waited (up to MAX_COUNTING_PAUSE_S, 50 ms)
        os.read(r, 1 << 16)  # the event loop read it
        t = time.monotonic()
        ls._yield_to_requests()
        assert time.monotonic() - t < 0.02
        os.close(r)  # a closed descriptor is no reason to wait
        r = None
        t = time.monotonic()
        ls._yield_to_requests()
        assert time.monotonic() - t < 0.02
    finally:
        os.close(w)
        if r is not None:
            os.close(r)
        ls.bridge.shutdown()


def test_a_job_can_start_the_idle_steps_at_once(monkeypatch):
    """``idle_at_once``: the idle steps after such a job (a prefetch, itself queued after a quiet
    time) start without the quiet time that follows other jobs (``IDLE_AFTER_S``)."""
    from engine import worker

    monkeypatch.setattr(worker, "IDLE_AFTER_S", 3.0)
    e = EngineThread(name="test-idle")
    steps = []
    try:
        e.submit(worker.set_idle, lambda: steps.append(time.monotonic()) and False).future.result(5)
        e.submit(lambda: None).future.result(5)
        time.sleep(0.3)
        assert steps == []  # a plain job: the idle steps wait for the quiet time
        t = time.monotonic()
        e.submit(worker.idle_at_once).future.result(5)
        _wait_until(lambda: steps)
        assert steps[0] - t < 1.0
    finally:
        e.shutdown()
