"""``textDocument/completion``: the engine's ranked candidates as a completion list.

Each item's edit starts at the identifier prefix being typed (``os.pa`` + ``path`` keeps ``os.``):
an ``InsertReplaceEdit`` (``insert``: the prefix; ``replace``: the whole identifier around the
cursor) when the client supports that, else a ``TextEdit`` over the whole identifier once part of
it is typed, so accepting an item inside a word never repeats the word's end (``os.pa|th`` +
``path`` is ``os.path``), and an insertion at a word's start, so untouched text is never deleted.
The list is always ``isIncomplete``: the client asks again as the user types, and the engine
re-ranks in ~1 ms.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lsprotocol import types

from .predictions import predict_at

if TYPE_CHECKING:
    from engine.types import Candidate

    from .documents import CursorContext
    from .server import LayaServer

TRIGGER_CHARACTERS = ["."]
OPTIONS = types.CompletionOptions(trigger_characters=TRIGGER_CHARACTERS, resolve_provider=False)

_KINDS = {
    "identifier": types.CompletionItemKind.Variable,
    "keyword": types.CompletionItemKind.Keyword,
    "word": types.CompletionItemKind.Text,
    "line": types.CompletionItemKind.Text,
}


LINE_DETAIL = "Laya: rest of line"
"""``CompletionItem.detail`` of a rest-of-line continuation."""


def empty() -> types.CompletionList:
    return types.CompletionList(is_incomplete=True, items=[])


def build_items(ctx: CursorContext, candidates: list[Candidate], *, insert_replace: bool,
                max_items: int) -> list[types.CompletionItem]:
    """Completion items, in the engine's order (``sortText`` ``0000``, ``0001``, ...).

    Args:
        ctx: where the cursor is and what is being typed.
        candidates: the engine's candidates, best first; duplicates keep the first.
        insert_replace: use ``InsertReplaceEdit`` (client declared ``insertReplaceSupport``);
            else a ``TextEdit`` over the whole identifier around the cursor (``replace_range``)
            when part of it is typed, so accepting an item inside a word never repeats the word's
            end (``os.pa|th``), and an insertion where nothing is typed. At a word's start with
            nothing typed (``|os``) such a client gets no item: an insertion glues onto the word
            (``importos``; Emacs's eglot, which takes the word at point as the text completed,
            made ``z = |pa(1)`` ``z = pathpa(1)``) and a replacement deletes a word the user has
            not touched (a fresh helper's ``|os.pa`` + ``import`` gave ``import.pa``).
        max_items: most items.
    """
    items: list[types.CompletionItem] = []
    if not insert_replace and not ctx.word and ctx.replace_range != ctx.insert_range:
        return items
    seen: set[str] = set()
    for cand in candidates:
        if cand.text in seen or not cand.text:
            continue
        seen.add(cand.text)
        if insert_replace:
            edit = types.InsertReplaceEdit(new_text=cand.text, insert=ctx.insert_range,
                                           replace=ctx.replace_range)
        else:  # the whole identifier the user is typing in: "os.pa|th" + "path" is "os.path"
            edit = types.TextEdit(range=ctx.replace_range, new_text=cand.text)
        items.append(types.CompletionItem(
            label=cand.text,
            kind=_KINDS.get(cand.kind, types.CompletionItemKind.Text),
            detail=LINE_DETAIL if cand.kind == "line" else None,
            sort_text=f"{len(items):04d}",
            filter_text=cand.text,
            insert_text_format=types.InsertTextFormat.PlainText,
            # the text goes in as it is: lsp-mode 8 re-indents the line otherwise (its
            # lsp--indent-lines runs the mode's indent-line-function on the buffer's last line,
            # so a tab-indented top-level "\tx = json.lo" + loads lost its tab in python-mode)
            insert_text_mode=types.InsertTextMode.AsIs,
            text_edit=edit,
        ))
        if len(items) >= max_items:
            break
    return items


class JsonResult(dict):
    """A request's result already in its JSON shape: ``LayaProtocol._send_response`` writes it as
    it is, without pygls's typed response object and cattrs."""


def _range_json(r: types.Range) -> dict:
    return {"start": {"line": r.start.line, "character": r.start.character},
            "end": {"line": r.end.line, "character": r.end.character}}


def items_json(ctx: CursorContext, candidates: list[Candidate], *, insert_replace: bool,
               max_items: int) -> list[dict]:
    """:func:`build_items`' items in their JSON shape, built directly: what lsprotocol's cattrs
    converter writes for them (``tests/test_lsp_documents.py`` checks that they are equal), in
    ~1/10 of the time (20 items: ~25 us against ~220 us to build the objects, ~130 us, and
    unstructure them, on the 2-core dev machine beside a test run)."""
    if not insert_replace and not ctx.word and ctx.replace_range != ctx.insert_range:
        return []
    replace = _range_json(ctx.replace_range)
    insert = _range_json(ctx.insert_range) if insert_replace else None
    kinds = _KIND_VALUES
    text_kind = types.CompletionItemKind.Text.value
    items: list[dict] = []
    seen: set[str] = set()
    for cand in candidates:
        text = cand.text
        if text in seen or not text:
            continue
        seen.add(text)
        item = {"label": text, "kind": kinds.get(cand.kind, text_kind)}
        if cand.kind == "line":
            item["detail"] = LINE_DETAIL
        item["sortText"] = f"{len(items):04d}"
        item["filterText"] = text
        item["insertTextFormat"] = _PLAIN_TEXT
        item["insertTextMode"] = _AS_IS
        item["textEdit"] = ({"newText": text, "insert": insert, "replace": replace} if insert_replace
                            else {"range": replace, "newText": text})
        items.append(item)
        if len(items) >= max_items:
            break
    return items


_KIND_VALUES = {k: v.value for k, v in _KINDS.items()}
_PLAIN_TEXT = types.InsertTextFormat.PlainText.value
_AS_IS = types.InsertTextMode.AsIs.value


async def completion(ls: LayaServer, params: types.CompletionParams) -> types.CompletionList | JsonResult:
    """Handle ``textDocument/completion`` (see :func:`~laya_lsp.predictions.predict_at`)."""
    max_items = ls.options.max_items
    pred = await predict_at(ls, params.text_document.uri, params.position,
                            types.TEXT_DOCUMENT_COMPLETION, max_items=max_items, want_line=False)
    if pred is None:
        return empty()
    candidates = pred.candidates
    if ls.system2.enabled:
        uri = params.text_document.uri
        candidates = ls.system2.merge(uri, pred.context.prefix, candidates)
        ls.system2.request(uri, pred.context.prefix, ls.workspace_index.folders)  # for the next keystroke
    return JsonResult(isIncomplete=True, items=items_json(
        pred.context, candidates, insert_replace=ls.client_supports_insert_replace,
        max_items=max_items))
