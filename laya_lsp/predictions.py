"""One request's path to ranked candidates, shared by completion and inline completion.

ticket -> debounce -> still latest? -> model ready? -> cursor context -> engine job (latest
again? document switch? predict). Anything stale, unknown or out of range gives ``None``, which
the handlers turn into an empty answer; the server never answers with results for text the
client has since changed.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from lsprotocol import types

from engine import languages

from .documents import CursorContext, cursor_context
from .scheduling import Sequencer, Ticket, debounce

if TYPE_CHECKING:
    from engine.types import Candidate

    from .server import LayaServer

log = logging.getLogger(__name__)

arrival_ticket: contextvars.ContextVar[Ticket | None] = contextvars.ContextVar(
    "laya_arrival_ticket", default=None)
"""The ticket taken when the request was read off the wire (see ``server.LayaProtocol``); the
handler's task inherits it, so an edit read after the request but before the handler first runs
still makes the request stale."""


@dataclass(frozen=True, slots=True)
class Prediction:
    context: CursorContext
    candidates: list[Candidate]


def take_ticket(ls: LayaServer, uri: str, kind: str) -> Ticket:
    """The ticket taken on arrival for this request, or a new one (handlers called directly)."""
    ticket = arrival_ticket.get()
    if ticket is not None and ticket.uri == uri and ticket.kind == kind:
        arrival_ticket.set(None)
        return ticket
    return ls.sequencer.ticket(uri, kind)


async def predict_at(ls: LayaServer, uri: str, position: types.Position, kind: str, *,
                     max_items: int, want_line: bool, line_word: str | None = None,
                     line_needs_word: bool = False) -> Prediction | None:
    """Candidates for the cursor at ``position`` in document ``uri``.

    Args:
        ls: the server.
        uri: the document, as the client names it.
        position: the cursor, in client units.
        kind: the request method (the latest-wins group).
        max_items: most candidates.
        want_line: also ask for a rest-of-line continuation.
        line_word: the identifier that continuation starts with, where not the best item's (the
            editor's selected item: ``Predictor.predict``).
        line_needs_word: no continuation where no character of a word is typed yet
            (``laya_lsp.inline.LINE_NEEDS_WORD``).

    Returns:
        The cursor context and candidates, or None when the request went stale, the document is
        not open, the position is past its end, or the model is not available.

    Raises:
        asyncio.CancelledError: when the client cancelled the request (the engine job is stopped).
    """
    t0 = time.perf_counter()
    ticket = take_ticket(ls, uri, kind)
    cancel_prefetch(ls)  # this decision replaces the prefetch of the edit before it
    await debounce(ls.options.debounce_ms)
    doc = ls.open_document(uri)
    if doc is None:
        log.info("%s for %s, which is not open: answering empty", kind, uri)
        return None
    if not ls.sequencer.is_current(ticket):
        log.debug("%s %s: superseded during debounce", kind, uri)
        return None
    language = languages.for_document(doc.language_id, uri).name
    predictor = await ls.predictor_for(language)
    if predictor is None or not ls.sequencer.is_current(ticket):
        return None
    doc = ls.open_document(uri)  # the document may have closed while the model loaded
    if doc is None:
        return None
    ctx = cursor_context(doc, position)
    if ctx is None:
        log.info("%s at %d:%d is past the end of %s, inside one character (a surrogate pair, a "
                 "UTF-8 sequence) or in an identifier longer than the prefix: answering empty",
                 kind, position.line, position.character, uri)
        return None
    if max_items <= 0:
        return Prediction(ctx, [])
    want_line = want_line and not (line_needs_word and not ctx.word)
    t1 = time.perf_counter()
    candidates = await ls.bridge.run(_predict_job, predictor, ls.sequencer, ticket, ctx,
                                     max_items, want_line, language, line_word)
    if log.isEnabledFor(logging.DEBUG):
        t2 = time.perf_counter()
        log.debug("%s %s %d:%d: %.2f ms to the candidates, %.2f ms of them on the engine thread "
                  "(its queue included)", kind, uri, position.line, position.character,
                  (t2 - t0) * 1e3, (t2 - t1) * 1e3)
    if candidates is None or not ls.sequencer.is_current(ticket):
        return None
    return Prediction(ctx, candidates)


def _predict_job(predictor: Any, sequencer: Sequencer, ticket: Ticket, ctx: CursorContext,
                 max_items: int, want_line: bool, language: str, line_word: str | None = None
                 ) -> list[Candidate] | None:
    """Engine thread: one decision, unless the request went stale while queued."""
    from engine.worker import current_stop

    if not sequencer.is_current(ticket):
        return None
    if predictor.doc_id != ticket.uri:
        predictor.reset()  # the KV cache holds another document's context
    return predictor.predict(ctx.prefix, ctx.suffix, doc_id=ticket.uri, max_items=max_items,
                             want_line=want_line, stop=current_stop(), language=language,
                             line_word=line_word)


PREFETCH_AFTER_S = 0.02
"""Quiet time after an edit before :func:`prefetch_after_change` cuts the context at the cursor
(~60 us on the event loop for a 12 KB document, ~0.4 ms for a 2.4 MB one): a completion request
that follows the edit at once (an identifier key) gets there first and needs no prefetch."""


def prefetch_after_change(ls: LayaServer, uri: str) -> None:
    """After an edit of ``uri`` (the cursor now at ``ls.typing_at[uri]``, client units): once
    ``PREFETCH_AFTER_S`` pass with no other edit, let the engine prefill the context window at
    the cursor in its next pause (``Predictor.prefetch``), so the next completion after a paste,
    a comment or a line break prefills a token or two instead of the whole change, and answers
    from the full window. Only the latest edit's cursor counts (one timer per server), and a
    completion or inline completion request cancels it (its decision replaces it). Nothing
    is done while the document's model is loading or for a cursor past the end; the engine job
    only records the context, and the prefill runs in idle steps, which any request interrupts."""
    cancel_prefetch(ls)
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:  # called outside the server's event loop (a handler called directly)
        return
    ls.prefetch_timer = loop.call_later(PREFETCH_AFTER_S, _prefetch, ls, uri)


def cancel_prefetch(ls: LayaServer) -> None:
    """Drop the pending :func:`prefetch_after_change` (a request came, or the server shuts down)."""
    if ls.prefetch_timer is not None:
        ls.prefetch_timer.cancel()
        ls.prefetch_timer = None


def _prefetch(ls: LayaServer, uri: str) -> None:
    ls.prefetch_timer = None
    doc, cursor = ls.open_document(uri), ls.typing_at.get(uri)
    if doc is None or cursor is None:
        return
    predictor = ls.loaded_predictor_for(languages.for_document(doc.language_id, uri).name)
    if (predictor is None or not getattr(predictor, "prefetching", False)
            or getattr(predictor, "advance_on_keystroke", True)):
        return  # loading; or a model without idle steps (the prose model), which never prefetches
    ctx = cursor_context(doc, cursor)
    if ctx is not None:
        ls.bridge.submit_background(_prefetch_job, predictor, ctx.prefix, uri)


def _prefetch_job(predictor: Any, prefix: str, uri: str) -> None:
    """Engine thread: note the context to prefetch; its idle steps start at once (the edit was
    followed by ``PREFETCH_AFTER_S`` of quiet already)."""
    from engine.worker import idle_at_once

    predictor.prefetch(prefix, uri)
    idle_at_once()
