"""Every place where Laya departs from, or works around, pygls: the JSON-RPC and LSP rules in one layer.

A message's path: bytes -> ``json.loads`` -> :meth:`LayaProtocol.handle_message`: typed strictly by
:meth:`LayaProtocol.type_message` (a request that does not fit becomes a :class:`Malformed`), then the
lifecycle gate (-32002 before ``initialize``, -32600 after ``shutdown``) -> pygls's dispatch.
Each deviation has a regression test in ``tests/test_protocol.py``; on a pygls upgrade, review
this file and run those tests.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import time
from dataclasses import dataclass
from functools import lru_cache
from typing import Any
from urllib.parse import unquote

import attrs
from lsprotocol import types
from pygls.exceptions import (FeatureNotificationError, FeatureRequestError, JsonRpcException,
                              JsonRpcInternalError, JsonRpcInvalidParams, JsonRpcInvalidRequest,
                              JsonRpcMethodNotFound, JsonRpcParseError, JsonRpcServerNotInitialized)
from pygls.protocol import LanguageServerProtocol, lsp_method
from pygls.workspace import Workspace

from .completion import JsonResult
from .predictions import arrival_ticket
from .text_document import LSP, LspTextDocument, line_breaks_for, lsp_lines

__all__ = ["LayaProtocol", "LspTextDocument", "LspWorkspace", "lsp_lines"]

log = logging.getLogger(__name__)

GUARANTEES = """\
guarantees (JSON-RPC 2.0 and LSP 3.17):
  every request gets exactly one answer:
    -32002 ServerNotInitialized  any request before `initialize`
    -32600 InvalidRequest        a second `initialize`; any request after `shutdown`;
                                 a request whose id is not a string or an integer;
                                 (id null) a body that is JSON but no request,
                                 notification or response (a number, an array, ...)
    -32602 InvalidParams         params that do not match the method's LSP type
                                 (negative or non-integer positions, no `position`,
                                 `textDocument` without `uri`, ...)
    -32601 MethodNotFound        an unknown method; a notification's method sent as a
                                 request (with an id), which is then not acted on
                                 (but `exit` exits after its answer)
    -32800 RequestCancelled      a request cancelled by `$/cancelRequest` or by `shutdown`
    -32603 InternalError         a bug: the answer says only that; the details (traceback,
                                 paths) go to stderr or --log-file, never to the client
    -32700 ParseError (id null)  a body that is not JSON
  a stale, past-the-end or not-open request answers an empty list, not an error
  (stale: an edit of its document, or a newer request of the same method for it,
  came after it; completion and inline completion do not make each other stale;
  past the end: after the document's last line, or inside one character, a UTF-16
  surrogate pair or a UTF-8 sequence; a position past a line's end is that line's
  end, as LSP 3.17 says)
  notifications before `initialize` and after `shutdown` are ignored (except `exit`)
  a repeated `initialized`, a `didChange` to a document that is not open, and a
  `$/cancelRequest` naming a request the server sent, are ignored
  any field the client adds is only a field (one named `jsonrpc` too)
  over TCP (--tcp) one session at a time: a second connection meanwhile is closed;
  the server ends with the session's connection, but one that closes before sending
  a byte (a port probe) is no session; "serving on" is logged once it listens
  nothing is sent to the client before the `initialize` answer
exit status:
  0  `exit` after `shutdown`; stdin or the TCP session's connection closed; the
     client's processId is gone
  1  `exit` without `shutdown`; --check failed; the TCP port cannot be bound
  2  a command-line usage error (an unknown flag, a bad --port, a log file that cannot be written)
"""
"""The server's promises, shown by ``laya-lsp --help`` and copied in the README."""

_HELD_MAX = 1000
"""Most outgoing notifications held back until ``initialize`` is answered."""

UNINITIALIZED, INITIALIZING, RUNNING, SHUT_DOWN = "uninitialized", "initializing", "running", "shut down"
_TICKETED = (types.TEXT_DOCUMENT_COMPLETION, types.TEXT_DOCUMENT_INLINE_COMPLETION)
ANSWERING_MAX_S = 1.0
"""A completion request read longer ago than this no longer holds back background work
(:meth:`LayaProtocol.answering`)."""


class LspWorkspace(Workspace):
    """pygls's workspace, holding :class:`LspTextDocument` documents that split lines the way of
    the session (``line_breaks``: ``laya_lsp.text_document.LINE_BREAKS``)."""

    def __init__(self, *args, line_breaks: str = LSP, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.line_breaks = line_breaks

    def _create_text_document(self, doc_uri, source=None, version=None, language_id=None):
        return LspTextDocument(doc_uri, source=source, version=version, language_id=language_id,
                               sync_kind=self._sync_kind, position_codec=self._position_codec,
                               line_breaks=self.line_breaks)

    def update_text_document(self, text_doc, change) -> None:
        """Apply a ``didChange`` edit; one for a document that is not open is the client's mistake
        (a change racing its ``didClose``, or sent before ``didOpen``): ignored with a warning.
        pygls raised ``KeyError`` there, which reached the editor's log as a server error."""
        if unquote(text_doc.uri) not in self._text_documents:
            log.warning("didChange for %s, which is not open: ignored", text_doc.uri)
            return
        super().update_text_document(text_doc, change)

    def update_notebook_document(self, params) -> None:
        """``notebookDocument/didChange`` for a notebook that is not open: ignored likewise."""
        if unquote(params.notebook_document.uri) not in self._notebook_documents:
            log.warning("didChange for notebook %s, which is not open: ignored",
                        params.notebook_document.uri)
            return
        super().update_notebook_document(params)


@dataclass(frozen=True, slots=True)
class Malformed:
    """A message that is not a well-typed request or notification: answered, never dispatched."""

    raw: Any
    error: type[JsonRpcException]
    reason: str

    @property
    def method(self) -> str | None:
        method = self.raw.get("method") if isinstance(self.raw, dict) else None
        return method if isinstance(method, str) else None

    @property
    def is_request(self) -> bool:
        return isinstance(self.raw, dict) and "id" in self.raw and "method" in self.raw

    @property
    def expects_answer(self) -> bool:
        """A request, or something that is none of request, notification and response (JSON-RPC
        2.0 answers that with -32600, id null); notifications and responses are never answered."""
        raw = self.raw
        if not isinstance(raw, dict):
            return True
        if "method" in raw:
            return "id" in raw
        return "result" not in raw and "error" not in raw

    @property
    def reply_id(self):
        """The id to answer: the client's when it is a JSON-RPC id, else null."""
        msg_id = self.raw.get("id") if isinstance(self.raw, dict) else None
        ok = isinstance(msg_id, (str, int, float)) and not isinstance(msg_id, bool)
        return msg_id if ok else None


@lru_cache(maxsize=None)
def _is_notification_type(message_type) -> bool:
    """True for an lsprotocol notification class (it has no ``id`` field), e.g. for
    ``textDocument/didOpen``; False for a request class and for None (an unknown method)."""
    return attrs.has(message_type) and "id" not in attrs.fields_dict(message_type)


def _valid_id(msg_id) -> bool:
    return isinstance(msg_id, (str, int)) and not isinstance(msg_id, bool)


def _faithful(typed, raw) -> bool:
    """True when every value the typed object kept is what the client sent, type included.

    cattrs coerces (``"line": 1.5`` -> 1, ``true`` -> 1, ``"uri": 5`` -> ``"5"``); LSP has no such
    leniency. Keys the client sent that the type does not know are allowed (LSP lets clients add
    fields), and so are defaults the client left out.
    """
    if isinstance(typed, dict):
        if not isinstance(raw, dict):
            return False
        return all(k not in raw or _faithful(v, raw[k]) for k, v in typed.items())
    if isinstance(typed, list):
        return isinstance(raw, list) and len(raw) == len(typed) and all(map(_faithful, typed, raw))
    if isinstance(typed, bool) or isinstance(raw, bool):
        return type(typed) is type(raw)
    if isinstance(typed, (int, float)) and isinstance(raw, (int, float)):
        return typed == raw and (isinstance(typed, float) or isinstance(raw, int))
    return typed == raw or typed is None


class LayaProtocol(LanguageServerProtocol):
    """pygls's LSP protocol with the JSON-RPC and LSP rules it leaves out (see the module doc)."""

    def __init__(self, server, converter) -> None:
        super().__init__(server, converter)
        self.state = UNINITIALIZED
        self._initialize_id = None
        self._held: list[Any] = []
        self._notification_keys: list[str] = []
        self._initialized_seen = False
        self._answering: dict[Any, float] = {}  # completion requests read and not yet answered

    def answering(self) -> bool:
        """Whether a completion (or inline completion) request has been read and not yet
        answered: from the moment it is read off the wire until its answer is written, the whole
        time the event loop works on it, not only its engine job. Background work that holds the
        GIL (counting a document) waits meanwhile (``LayaServer._yield_to_requests``). A request
        read over :data:`ANSWERING_MAX_S` ago no longer counts (a bound, should one ever go
        unanswered). Called from the counting thread."""
        if not self._answering:
            return False
        oldest = time.monotonic() - ANSWERING_MAX_S
        live = False
        for msg_id, t in list(self._answering.items()):  # one C call: safe beside the loop's changes
            if t < oldest:
                self._answering.pop(msg_id, None)
            else:
                live = True
        return live

    def set_writer(self, writer, include_headers: bool = True):
        """A new connection (TCP serves one after another) starts a new session."""
        super().set_writer(writer, include_headers)
        self.state, self._shutdown, self._held = UNINITIALIZED, False, []
        self._answering = {}
        self._initialized_seen = False

    # --- reading: strict typing ------------------------------------------------------------

    def structure_message(self, data: dict[str, Any]):
        """Keep each JSON object as read; :meth:`handle_message` types the message itself.

        ``json.loads`` calls this for every object, innermost first, and it cannot tell the
        message from an object inside it: pygls typed every object with a ``jsonrpc`` key as a
        message, so such a key anywhere in the params (``initializationOptions``, settings, an
        added field) made the whole message malformed (a request got -32602, a ``didOpen`` or
        ``didChange`` was dropped).
        """
        return data

    def type_message(self, data: dict[str, Any]):
        """Type a message strictly; a request or notification that does not fit is a
        :class:`Malformed` (pygls raises out of ``json.loads`` and never answers it)."""
        if "jsonrpc" not in data:
            return data  # answered by the gate as no JSON-RPC 2.0 message
        if "method" not in data:
            if "result" not in data and "error" not in data:
                return Malformed(data, JsonRpcInvalidRequest,
                                 "neither a request, a notification nor a response")
            try:
                return super().structure_message(data)  # a response to one of our requests
            except Exception:  # noqa: BLE001 - answering a response is impossible: drop it
                return Malformed(data, JsonRpcInvalidRequest, "unreadable response")
        if data.get("jsonrpc") != self.VERSION or not isinstance(data.get("method"), str):
            return Malformed(data, JsonRpcInvalidRequest, "not a JSON-RPC 2.0 message")
        if "id" in data and not _valid_id(data["id"]):
            return Malformed(data, JsonRpcInvalidRequest, "the id is not a string or an integer")
        message_type = self.get_message_type(data["method"])
        if "id" in data and _is_notification_type(message_type):
            return Malformed(data, JsonRpcMethodNotFound,
                             "a notification, not a request (send it without an id)")
        try:
            if message_type is None:  # unknown method: pygls answers MethodNotFound
                return super().structure_message({"params": None, **data})  # params are optional
            message = self._converter.structure(data, message_type)
            params = getattr(message, "params", None)
            if params is not None and not _faithful(self._converter.unstructure(params), data.get("params")):
                return Malformed(data, JsonRpcInvalidParams, "a value has the wrong type")
        except RecursionError:  # params nested deeper than typing them goes (json.loads went)
            return Malformed(data, JsonRpcInvalidParams, "the params are nested too deeply")
        except Exception as e:  # noqa: BLE001 - cattrs raises many kinds
            return Malformed(data, JsonRpcInvalidParams, _reason(e))
        return message

    # --- lifecycle gate --------------------------------------------------------------------

    def handle_message(self, message) -> None:
        """Type (:meth:`type_message`), then dispatch by lifecycle state; never raises (pygls
        would show the error to the user)."""
        try:
            if isinstance(message, dict):
                message = self.type_message(message)
            self._gate(message)
        except Exception:  # noqa: BLE001 - a bug of ours: log it, keep serving
            log.exception("failed to handle a message")

    def _gate(self, message) -> None:
        if isinstance(message, Malformed):
            self._reject(message)
            return
        # duck-typed as pygls's RPCRequest / RPCNotification protocols are (an isinstance check
        # against a runtime-checkable Protocol costs ~30 us a message in Python 3.11)
        is_request = hasattr(message, "id") and hasattr(message, "method")
        if not (hasattr(message, "method") and hasattr(message, "params") and hasattr(message, "jsonrpc")):
            if isinstance(message, dict) and "id" in message and "method" in message:
                self._reject(Malformed(message, JsonRpcInvalidRequest, "not a JSON-RPC 2.0 request"))
            elif getattr(message, "jsonrpc", None) == self.VERSION:
                super().handle_message(message)  # a response from the client
            else:  # a number, string, null, array (LSP has no batches) or an object of neither kind
                reason = ("batches are not supported" if isinstance(message, list)
                          else "not a JSON-RPC 2.0 message")
                self._reject(Malformed(message, JsonRpcInvalidRequest, reason))
            return
        method = message.method
        if is_request:
            error = self._request_error(method)
            if error is not None:
                self.send_error(message.id, error)
                return
            if method == types.INITIALIZE:
                self.state, self._initialize_id = INITIALIZING, message.id
        elif method != types.EXIT and self.state in (UNINITIALIZED, SHUT_DOWN):
            log.debug("ignoring %s: the server is %s", method, self.state)
            return
        elif method == types.INITIALIZED:
            if self._initialized_seen:  # its handler would show the option problems again,
                # start another load report and another parent watch
                log.warning("ignoring a second initialized notification")
                return
            self._initialized_seen = True
        self._dispatch(message, is_request)

    def _dispatch(self, message, is_request: bool) -> None:
        """pygls's ``JsonRPCProtocol.handle_message`` for a request or a notification, less its
        ``isinstance`` checks against the runtime-checkable ``RPCRequest`` / ``RPCNotification``
        protocols, which :meth:`_gate` has already answered by duck typing (two such checks per
        notification: ~7% of the server's main thread while typing, sampled with py-spy)."""
        if message.jsonrpc != self.VERSION:
            log.warning("unknown message %r", message)
            return
        if self._shutdown and message.method != types.EXIT:
            log.warning("server shutting down: no more requests")
            return
        ctx = contextvars.copy_context()  # each handler in its own context, as pygls runs them
        if is_request:
            ctx.run(self._handle_request, message.id, message.method, message.params)
        elif message.method == types.TEXT_DOCUMENT_DID_CHANGE and not asyncio.iscoroutinefunction(
                self.fm.features.get(types.TEXT_DOCUMENT_DID_CHANGE)):  # (pygls runs a coroutine as a task)
            ctx.run(self._did_change_now, message.params)
        else:
            ctx.run(self._handle_notification, message.method, message.params)

    def _did_change_now(self, params) -> None:
        """``textDocument/didChange`` as pygls runs it, its builtin part (the workspace's edit)
        then the server's handler, without pygls's generator machinery (per keystroke a Future,
        a done-callback and two ``uuid4``: most of the notification's time on the server's main
        thread, sampled with py-spy); an error is logged and reported as pygls reports it."""
        try:
            for change in params.content_changes:
                self.workspace.update_text_document(params.text_document, change)
            handler = self.fm.features.get(types.TEXT_DOCUMENT_DID_CHANGE)
            if handler is not None:
                handler(params)
        except Exception as error:  # noqa: BLE001 - reported, the server keeps serving
            log.exception("failed to handle textDocument/didChange")
            self._server._report_server_error(error, FeatureNotificationError)

    def _request_error(self, method: str) -> JsonRpcException | None:
        if self.state == UNINITIALIZED and method != types.INITIALIZE:
            return JsonRpcServerNotInitialized(f"{method} before initialize")
        if self.state == SHUT_DOWN or self._shutdown:
            return JsonRpcInvalidRequest(f"{method} after shutdown")
        if method == types.INITIALIZE and self.state != UNINITIALIZED:
            return JsonRpcInvalidRequest("initialize was already received")
        return None

    def _reject(self, bad: Malformed) -> None:
        """Answer a :class:`Malformed` request; ignore a malformed notification (``exit`` exits).

        A notification's method sent as a request (``textDocument/didOpen``, ``$/cancelRequest``,
        ... with an id) is answered -32601 MethodNotFound and not acted on (``exit`` is answered,
        then the server exits: leaving the process running would be worse): no request
        of that name exists, and acting on it as well would give one message two meanings. This is
        what vscode-jsonrpc does (its request handlers do not include notifications: "Unhandled
        method"); pygls would drop the id and run the notification, leaving the request unanswered.
        """
        if bad.method == types.EXIT:
            if bad.expects_answer and bad.error is JsonRpcMethodNotFound:  # answered, then acted on:
                # a client that sends ``exit`` wants the process gone, id or not
                self.send_error(bad.reply_id, bad.error("exit: a notification, not a request; exiting"))
            self.lsp_exit()
            return
        if not bad.expects_answer:
            log.warning("ignoring a malformed notification or response %s: %s", bad.method, bad.reason)
            return
        lifecycle_first = bad.error in (JsonRpcInvalidParams, JsonRpcMethodNotFound)
        error = self._request_error(bad.method or "") if lifecycle_first else None
        error = error or bad.error(f"{bad.method}: {bad.reason}" if bad.method else bad.reason)
        log.warning("answering %s %r with %d: %s", bad.method, bad.reply_id, error.code, bad.reason)
        self.send_error(bad.reply_id, error)

    @lsp_method(types.INITIALIZE)
    def lsp_initialize(self, params: types.InitializeParams):
        """pygls's ``initialize``, then documents split lines as the client counts them
        (:class:`LspWorkspace`): at ``\\n`` only for the clients that do (``clientInfo.name``
        ``Neovim``, ``emacs``, ``Eglot``) or when the ``lineBreaks`` option says ``lf``; at
        ``\\n``, ``\\r\\n`` and ``\\r`` as LSP says otherwise (``laya_lsp.text_document.line_breaks_for``).

        Emacs lsp-mode (``clientInfo.name`` ``"emacs"``) counts columns in code points; from 9.0
        it says so (``positionEncodings`` ``["utf-32", "utf-16"]``), but 8.0 and older (Debian
        bookworm's ``elpa-lsp-mode``) name no encoding, and UTF-16 put every position after an
        emoji on the line off by one: that client is taken at its word of 9.0, UTF-32."""
        general = params.capabilities.general
        if (params.client_info is not None and params.client_info.name == "emacs"
                and (general is None or general.position_encodings is None)):
            params.capabilities.general = attrs.evolve(
                general or types.GeneralClientCapabilities(),
                position_encodings=[types.PositionEncodingKind.Utf32])
        result = yield from super().lsp_initialize(params)
        ws = self._workspace
        option = getattr(getattr(self._server, "options", None), "line_breaks", "auto")
        name = params.client_info.name if params.client_info is not None else None
        line_breaks = line_breaks_for(name, option)
        log.debug("line breaks: %s (client %r, lineBreaks %s)", line_breaks, name, option)
        self._workspace = LspWorkspace(ws.root_uri, ws._sync_kind, list(ws.folders.values()),
                                       ws.position_encoding, line_breaks=line_breaks)
        return result

    @lsp_method(types.SHUTDOWN)
    def lsp_shutdown(self, *args):
        """pygls's ``shutdown``, iterating over a copy: cancelling a future runs callbacks that
        remove it from ``_request_futures`` ("dictionary changed size during iteration")."""
        if (user_handler := self.fm.features.get(types.SHUTDOWN)) is not None:
            yield user_handler, args, None
        current = self.msg_id
        for msg_id, future in list(self._request_futures.items()):
            if msg_id != current and not future.done():
                future.cancel()
        self._shutdown, self.state = True, SHUT_DOWN
        return None

    @lsp_method(types.EXIT)
    def lsp_exit(self, *args) -> None:
        """Exit with 0 after ``shutdown``, 1 without. pygls's ``sys.exit`` is swallowed by its
        own loop (the process always exited 0), so the server's ``exit`` hook ends it."""
        code = 0 if self._shutdown else 1
        log.info("exit %s shutdown: status %d", "after" if code == 0 else "without", code)
        self._server.exit(code)

    # --- notifications and requests --------------------------------------------------------

    def _handle_notification(self, method_name, params):
        """pygls 2.1 keeps the future of every notification run by a generator handler (its
        ``didOpen``/``didChange``/``didClose``) in ``_request_futures`` under a random id and
        never removes it (~2 KB per keystroke). Drop the finished ones here, on the loop, before
        the next notification: never from a done-callback, which would change the dict while
        pygls's ``shutdown`` walks it."""
        pending = []
        for key in self._notification_keys:
            future = self._request_futures.get(key)
            if future is not None and future.done():
                del self._request_futures[key]
            elif future is not None:
                pending.append(key)
        known = set(self._request_futures)
        super()._handle_notification(method_name, params)
        pending.extend(k for k in self._request_futures if k not in known)
        self._notification_keys = pending

    def _handle_cancel_notification(self, msg_id) -> None:
        """A ``$/cancelRequest`` names a request of the client's own. pygls keeps the futures of
        the server's requests to the client in the same table, so a cancel naming one of those
        (the id of ``window/workDoneProgress/create``, echoed back) cancelled the server's own
        wait, and the rest of ``initialized`` (the progress's end, the load's messages) never
        ran. Such ids are ignored, and so are ids that no request can have (JSON-RPC ids are
        numbers or strings; ``{}`` or ``[1]`` raised a TypeError in pygls's table lookup)."""
        if not isinstance(msg_id, (int, str)) or isinstance(msg_id, bool):
            log.debug("$/cancelRequest for %r, which is no request id: ignored", msg_id)
            return
        if msg_id in self._result_types:  # only requests the server sent have a result type
            log.warning("$/cancelRequest for %r, a request the server sent: ignored", msg_id)
            return
        super()._handle_cancel_notification(msg_id)

    def _handle_request(self, msg_id, method_name, params):
        """Take the latest-wins ticket of a completion request as it is read off the wire.

        pygls starts an async handler as a task that first runs after the current message is
        handled; over TCP the next message (an edit) can be handled before that. Taking the
        ticket here keeps the order the client sent: an edit after the request makes it stale.
        """
        if method_name in _TICKETED:
            self._answering[msg_id] = time.monotonic()
            uri = getattr(getattr(params, "text_document", None), "uri", None)
            if uri is not None:
                arrival_ticket.set(self._server.sequencer.ticket(uri, method_name))
        try:
            super()._handle_request(msg_id, method_name, params)
        finally:
            arrival_ticket.set(None)

    def forget_request(self, msg_id) -> None:
        """Stop waiting for the client's answer to our request ``msg_id`` (answered, or given up
        on after a timeout). pygls keeps a request's future until its answer comes, forever for a
        client that never answers, and an answer after the wait was given up (its future
        cancelled) raised ``InvalidStateError``; such an answer is now logged as unknown and
        dropped. pygls keeps the result type of an error answer too."""
        self._request_futures.pop(msg_id, None)
        self._result_types.pop(msg_id, None)

    # --- writing ---------------------------------------------------------------------------

    def _send_response(self, msg_id, result=None, error=None):
        """Answer; an internal error carries no traceback or path (those go to the log)."""
        if error is not None and error.code == JsonRpcInternalError.CODE:
            log.error("request %r failed: %s", msg_id, error.message)
            error = types.ResponseError(code=error.code,
                                        message="internal error in laya-lsp (details in its log)")
        try:
            if error is None and isinstance(result, JsonResult):  # already JSON: as it is
                self._result_types.pop(msg_id, None)
                self._send_data({"jsonrpc": self.VERSION, "id": msg_id, "result": result})
            else:
                super()._send_response(msg_id, result, error)
        finally:
            self._answering.pop(msg_id, None)
        if self.state == INITIALIZING and msg_id == self._initialize_id:
            self.state = RUNNING if error is None else UNINITIALIZED
            held, self._held = self._held, []
            for data in held:
                super()._send_data(data)

    def _send_data(self, data):
        """Before the ``initialize`` answer, hold every message that is not a response: LSP lets
        a server send nothing before it (pygls would send e.g. a ``showMessage``)."""
        if self.state in (UNINITIALIZED, INITIALIZING) and getattr(data, "method", None) is not None:
            if len(self._held) < _HELD_MAX:
                self._held.append(data)
            return
        super()._send_data(data)

    def send_error(self, msg_id, error: JsonRpcException) -> None:
        """Answer ``msg_id`` with ``error``; a null id is written out (lsprotocol would omit it)."""
        if msg_id is None:
            super()._send_data({"jsonrpc": self.VERSION, "id": None,
                                "error": {"code": error.code, "message": error.message}})
        else:
            self._send_response(msg_id, error=error.to_response_error())

    def send_parse_error(self) -> None:
        """Answer a body that is not JSON (JSON-RPC: error -32700 with id null)."""
        self.send_error(None, JsonRpcParseError("the message is not valid JSON"))


def report_server_error(server, error: Exception, source) -> None:
    """The server's error reporter: log (stderr or --log-file), never ``window/showMessage``.

    pygls shows every error outside a request to the user, traceback text and paths included.
    The one error the client must hear about is a body that is not JSON: pygls's read loop
    reports it here (source ``JsonRpcException``), and the client gets a -32700 answer.
    """
    if source is JsonRpcException and isinstance(error, (ValueError, RecursionError)):
        # RecursionError: nested deeper than json.loads goes (a request must still be answered)
        log.warning("a message body is not valid JSON: %s", type(error).__name__ if
                    isinstance(error, RecursionError) else error)
        server.protocol.send_parse_error()
        return
    if source is FeatureRequestError:  # the request was answered with the error already
        log.debug("request error: %s", error)
        return
    if isinstance(error, (JsonRpcInvalidParams, JsonRpcMethodNotFound)):
        # the client's mistake (an unknown workspace/executeCommand), answered with the error:
        # not a server error, and no traceback in an editor's log under [ERROR]
        log.warning("client error: %s", error)
        return
    log.error("server error (%s): %s", getattr(source, "__name__", source), error,
              exc_info=(type(error), error, error.__traceback__))


def _reason(e: Exception) -> str:
    """A short, path-free reason for a structuring failure (cattrs nests them)."""
    leaves: list[BaseException] = []

    def walk(x: BaseException) -> None:
        subs = getattr(x, "exceptions", None)
        if subs:
            for s in subs:
                walk(s)
        else:
            leaves.append(x)

    walk(e)
    notes = [n for leaf in leaves for n in getattr(leaf, "__notes__", [])]
    text = "; ".join(notes or [f"{type(leaf).__name__}: {leaf}" for leaf in leaves])
    return text[:300] or type(e).__name__
