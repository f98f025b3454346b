"""``textDocument/inlineCompletion``: the engine's rest-of-line continuation as ghost text.

Registered only when the ``enableInline`` option is on. The one item replaces the identifier
prefix being typed (its range) with the continuation, which starts with that prefix, so an editor
shows only the part after the cursor; the text after the cursor stays, so the continuation is cut
to fit before it (``engine.continuation.fit_to_suffix``). While the editor's completion list has
an item selected (``context.selectedCompletionInfo``), the item is given only if it extends that one
over the same range: VS Code shows no other.
"""

from __future__ import annotations

import asyncio
import re
from typing import TYPE_CHECKING

from lsprotocol import types

from engine.continuation import fit_to_suffix, line_before, line_is_open

from .documents import CursorContext, cursor_context
from .predictions import predict_at, take_ticket
from .scheduling import debounce

if TYPE_CHECKING:
    from .server import LayaServer

OPTIONS = types.InlineCompletionOptions()
LINE_SEARCH_ITEMS = 4
"""Candidates asked for: the engine ranks its line continuation second, after the best word."""


INLINE_YIELD_S = 0.002
"""Seconds an inline completion request waits before it asks the engine, so that the completion
request an editor sends with it for the same keystroke is answered first: Neovim (the README's
block with ghost text) sends ``didChange``, ``inlineCompletion``, then ``completion``, and the
engine thread takes jobs in order, so the list waited for the ghost text's decision and line
(completion round trip 3.69 -> 5.85 ms at the median, 20.6 -> 43.6 ms at p99, two servers side
by side on a loaded machine). The completion's decision is then reused by the line's."""


LINE_NEEDS_WORD = True
"""No ghost text from the engine's line where no character of a word is typed yet (after a
blank, in the indentation, after a bracket, a dot, an operator or a quote): there it was right
10.7% of the time (tune packages) and 6.5% (eval packages), against 47.5-53.3% once one or more
characters are typed, and made 63-71% of the wrong ghost texts. Typing the held-out files key by
key through the server, an inline request after each key (3 files x 4,000 characters per
language; right: the file goes on exactly so): without ghost text at a word start the wrong ones
went 17,169 -> 5,005 on the eval packages (30.2% -> 47.8% of those shown right), and the
characters a user accepting every right one would save 12,349 -> 11,708 (-5.2%). System 2's and
another model's lines still show there."""


def empty() -> types.InlineCompletionList:
    return types.InlineCompletionList(items=[])


async def inline_completion(ls: LayaServer, params: types.InlineCompletionParams
                            ) -> types.InlineCompletionList:
    """Handle ``textDocument/inlineCompletion``: the best ``line`` candidate, or no item."""
    if not ls.options.enable_inline:
        return empty()
    if ls.inline_model.task is not None and await ls.inline_model.ready():
        return await _from_inline_model(ls, params)
    selected = params.context.selected_completion_info
    await asyncio.sleep(INLINE_YIELD_S)
    pred = await predict_at(ls, params.text_document.uri, params.position,
                            types.TEXT_DOCUMENT_INLINE_COMPLETION,
                            max_items=LINE_SEARCH_ITEMS, want_line=True,
                            line_word=selected.text if selected is not None else None,
                            line_needs_word=LINE_NEEDS_WORD)
    if pred is None:
        return empty()
    ctx = pred.context
    # the engine's line is already cut to fit before the text after the cursor
    text = next((c.text for c in pred.candidates if c.kind == "line"), None)
    if text is not None and lengthens_a_whole_word(ctx.prefix, ctx.word, text):
        text = None
    if ls.system2.enabled:  # System 2's line, when the user is still on it, refines the fast one
        s2 = system2_line(ls, params.text_document.uri, ctx.prefix)
        s2 = fit_line(ctx, s2) if s2 is not None else None
        if s2 and (selected is None or s2.startswith(selected.text)):  # else the selected item's line
            text = s2
        ls.system2.request(params.text_document.uri, ctx.prefix, ls.workspace_index.folders)
    return _answer(params, ctx, text)


async def _from_inline_model(ls: LayaServer, params: types.InlineCompletionParams
                             ) -> types.InlineCompletionList:
    """Ghost text from the mlx-lm model of ``modelPath`` (``laya_lsp.inline_model``)."""
    uri = params.text_document.uri
    ticket = take_ticket(ls, uri, types.TEXT_DOCUMENT_INLINE_COMPLETION)
    await debounce(ls.options.debounce_ms)
    doc = ls.open_document(uri)
    ctx = cursor_context(doc, params.position) if doc is not None and ls.sequencer.is_current(ticket) else None
    if ctx is None:
        return empty()
    rest = await ls.inline_model.line(ls, ctx.prefix, lambda: ls.sequencer.is_current(ticket))
    if not rest or not rest.strip() or not ls.sequencer.is_current(ticket):
        return empty()
    return _answer(params, ctx, fit_line(ctx, (ctx.word + rest).rstrip()))


def fit_line(ctx: CursorContext, line: str) -> str | None:
    """``line`` (the identifier at the cursor and what follows it) cut to fit before the text after
    the cursor (``engine.continuation.fit_to_suffix``), as the engine cuts its own lines; None
    where the rest of the cursor's line is more than closers and quotes, as the engine offers no
    line there (``engine.continuation.line_is_open``): the item's range ends at the cursor, so
    ``os.pa|th`` with the line ``parent.name`` would leave ``os.parenth``."""
    if not line_is_open(ctx.suffix):
        return None
    return fit_to_suffix(line, ctx.suffix, line_before(ctx.prefix[: len(ctx.prefix) - len(ctx.word)]))


GLUE_WINDOW = 20_000
"""Characters before the cursor in which :func:`glued` counts how the document spaces a sign."""


GLUE_NAMED = 8
""":func:`glued`: a sign the document follows with a name fewer than once in this many times
(line ends aside) takes no line glued to it."""


def glued(prefix: str) -> bool:
    """Whether a line starting right at the cursor would be glued to a sign that the document
    does not glue a name to: at a word boundary after a sign other than an opening bracket, a
    quote, a member access (``.``, ``->``, ``::``), a blank or a sign that also stands glued before
    a name (``<`` of ``Vec<T>``, ``&self``, ``!x``, ``*p``, ``-x``, ``@x``, ``#x``, ``$x``, ``~x``),
    when in the last :data:`GLUE_WINDOW` characters that sign (line ends aside) is followed by a
    blank at least half the time, or by a name less than once in :data:`GLUE_NAMED` times.
    ``x =|`` gave the ghost text ``json.``, accepted as ``x =json.``, where the document writes
    ``x = json...`` (the ghost text comes once the blank is typed); ``print(x)|`` at a line's
    end gave ``self.``, which no Python file writes after ``)`` (a C file full of casts,
    ``(int)x``, keeps it)."""
    c = prefix[-1:]
    if not c or c.isspace() or c.isalnum() or c in "_([{.'\"`<&!*-@#$~\\" or prefix.endswith(("->", "::")):
        return False
    window = prefix[-GLUE_WINDOW:-1]
    others = window.count(c) - window.count(c + "\n") - window.count(c + "\r")
    if others <= 0:
        return False
    if 2 * (window.count(c + " ") + window.count(c + "\t")) >= others:
        return True
    named = sum(1 for _ in re.finditer(re.escape(c) + r"[^\W\d]", window))
    return GLUE_NAMED * named < others


WHOLE_WORD_WINDOW = 16_384
"""Characters before the cursor in which :func:`lengthens_a_whole_word` looks for the word."""


def lengthens_a_whole_word(prefix: str, word: str, line: str) -> bool:
    """Whether ``line`` (starting with the typed ``word``) makes ``word`` longer although the last
    :data:`WHOLE_WORD_WINDOW` characters before it have ``word`` as a whole word: ``return args|``
    showed ``pec(self``, making ``argspec(self``, where ``args`` was a name of its own. The engine's
    ghost text does not show there (the list still offers the longer names). Held-out files
    typed key by key through the server (``python -m laya_tools.ghost_eval``, 3 files x 4,000
    characters per language): tune packages, wrong ghost texts 5,150 -> 4,117, characters
    accepting the right ones saves 13,160 -> 12,885 (-2.1%); eval packages 4,990 -> 4,000 and
    11,736 -> 11,490 (-2.1%), right among those shown 47.9% -> 50.3%."""
    if not word or not line[len(word):len(word) + 1].isalnum():
        return False
    end = len(prefix) - len(word)
    at = prefix.rfind(word, max(0, end - WHOLE_WORD_WINDOW), end)
    while at >= 0:  # str.rfind and two checks: a regex over the window took ~0.6 ms a request
        after = prefix[at + len(word):at + len(word) + 1]
        if not (prefix[at - 1:at].isalnum() or prefix[at - 1:at] == "_") and not (after.isalnum() or after == "_"):
            return True
        at = prefix.rfind(word, max(0, end - WHOLE_WORD_WINDOW), at + len(word) - 1)
    return False


def _answer(params: types.InlineCompletionParams, ctx: CursorContext, text: str | None
            ) -> types.InlineCompletionList:
    """The one item ``text`` over ``ctx.insert_range``; none where it adds nothing to the word, or
    where the editor's completion list has an item selected that it does not extend over the same
    range (``context.selectedCompletionInfo``: VS Code then shows only an item that does, "must
    extend the text of the selected item and use the same range")."""
    selected = params.context.selected_completion_info
    if text is None or len(text) <= len(ctx.word) or not ctx.word and glued(ctx.prefix):
        return empty()  # (``glued``: no line stuck to a sign the document spaces)
    if selected is not None and not (selected.range == ctx.insert_range and text.startswith(selected.text)):
        return empty()
    return types.InlineCompletionList(items=[types.InlineCompletionItem(
        insert_text=text, range=ctx.insert_range, filter_text=text)])


def system2_line(ls: LayaServer, uri: str, prefix: str) -> str | None:
    """The rest of System 2's line at the cursor, from the start of the identifier being typed
    (``engine.system2.Continuation.rest_at``), or None when it has none for this place."""
    cont = ls.system2.continuation_for(uri)
    return cont.rest_at(prefix) if cont is not None else None


