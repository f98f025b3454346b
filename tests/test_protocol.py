"""One regression test per JSON-RPC / LSP rule that ``laya_lsp/protocol.py`` adds to pygls.

Each runs the real server (``python -m laya_lsp`` over stdio, through :mod:`tests.lsp_raw`)
unless the rule is about a race that only an in-process interleaving can pin down.
"""

from __future__ import annotations

import subprocess
import sys
import time

import pytest
from lsprotocol import types

import laya_lsp
from engine.continuation import fit_to_suffix
from laya_lsp.protocol import GUARANTEES, LspTextDocument, lsp_lines
from tests.lsp_raw import RawServer

URI = "file:///laya-protocol/doc.py"
COMPLETION = "textDocument/completion"


def completion_params(line=0, character=0, uri=URI):
    return {"textDocument": {"uri": uri}, "position": {"line": line, "character": character}}


@pytest.fixture(scope="module")
def server():
    """One initialized server for the tests that do not end the session."""
    with RawServer() as s:
        s.initialize()
        s.open(URI, "import os\nos.pa")
        yield s


# --- lifecycle ----------------------------------------------------------------------------------

def test_request_before_initialize_is_server_not_initialized():
    with RawServer() as s:
        s.open(URI, "import os\nos.pa")  # ignored: nothing may be sent before initialize's answer
        s.notify("textDocument/didChange", {"textDocument": {"uri": URI, "version": 2}, "contentChanges": []})
        answer = s.call(COMPLETION, completion_params(1, 5))
        assert answer["error"]["code"] == -32002, answer
        assert s.call("no/suchMethod")["error"]["code"] == -32002
        init_id = s.request("initialize", {"processId": None, "capabilities": {}})
        s.wait_for(init_id)
        first = [m for m in s.messages if m.get("id") not in (1, 2)][0]
        assert first.get("id") == init_id, f"sent before the initialize answer: {first}"
        assert not [m for m in s.messages if m.get("method") == "window/showMessage"]
        assert s.call("initialize", {"processId": None, "capabilities": {}})["error"]["code"] == -32600
        assert s.exit() == 0


def test_request_after_shutdown_is_invalid_request_and_exit_status():
    with RawServer() as s:
        s.initialize()
        assert s.call("shutdown") == {"jsonrpc": "2.0", "id": 1 + 1, "result": None}
        answer = s.call(COMPLETION, completion_params())
        assert answer["error"]["code"] == -32600, answer
        s.notify("exit")
        assert s.proc.wait(timeout=20) == 0


def test_exit_without_shutdown_exits_1():
    with RawServer() as s:
        s.initialize()
        assert s.exit(shutdown=False) == 1
    with RawServer() as s:  # before initialize too
        s.notify("exit")
        assert s.proc.wait(timeout=20) == 1


def test_shutdown_while_the_model_loads_and_progress_is_unanswered():
    """The client never answers window/workDoneProgress/create: the initialized handler is still
    pending when shutdown cancels it (pygls walked a dict that callbacks changed)."""
    with RawServer() as s:
        s.initialize(capabilities={"window": {"workDoneProgress": True}})
        s.open(URI, "import os\nos.pa")
        s.request(COMPLETION, completion_params(1, 5))  # pending on the load
        answer = s.call("shutdown")
        assert answer.get("result", "missing") is None, answer
        assert "dictionary changed size" not in s.stderr_text()
        s.notify("exit")
        assert s.proc.wait(timeout=20) == 0


# --- malformed requests -------------------------------------------------------------------------

@pytest.mark.parametrize("params", [
    completion_params(0, -1),
    {"textDocument": {"uri": URI}},
    {"textDocument": {}, "position": {"line": 0, "character": 0}},
    {"textDocument": {"uri": 5}, "position": {"line": 0, "character": 0}},
    {"textDocument": {"uri": URI}, "position": {"line": "0", "character": 0}},
    {"textDocument": {"uri": URI}, "position": {"line": 1.5, "character": 0}},
    {"textDocument": {"uri": URI}, "position": {"line": True, "character": 0}},
    [1, 2],
    "text",
], ids=["negative-character", "no-position", "no-uri", "uri-number", "line-string", "line-float",
        "line-bool", "params-list", "params-string"])
def test_malformed_completion_is_invalid_params(server, params):
    msg_id = server.request(COMPLETION, params)
    answer = server.wait_for(msg_id)
    assert answer["error"]["code"] == -32602, answer
    assert len(server.answers(msg_id)) == 1
    assert "result" in server.complete(URI, 1, 5)  # and the server goes on


@pytest.mark.parametrize("msg_id", [1.5, None, [1], {"a": 1}, True])
def test_request_with_a_bad_id_is_invalid_request(server, msg_id):
    server.send({"jsonrpc": "2.0", "id": msg_id, "method": COMPLETION, "params": completion_params()})
    token = server.request("shutdown-probe/unknown")  # answered after the bad one
    server.wait_for(token)
    expected = msg_id if isinstance(msg_id, float) else None
    bad = [m for m in server.messages if "error" in m and m.get("id", "absent") == expected
           and m["error"]["code"] == -32600]
    assert bad, server.messages[-3:]


@pytest.mark.parametrize("body", [b"42", b"null", b"[]", b"[1, 2]", b'"str"', b'{"jsonrpc": "2.0"}', b'{"a": 1}',
                                  b'[{"jsonrpc": "2.0", "id": 7, "method": "textDocument/completion"}]'],
                         ids=["number", "null", "empty-array", "array", "string", "bare", "object", "batch"])
def test_json_that_is_no_message_is_invalid_request(server, body):
    """JSON-RPC 2.0: a body that is valid JSON but no request, notification or response gets
    -32600 with id null (LSP has no batches: one error for the whole array)."""
    before = len(server.messages)
    server.send(body)
    token = server.request("shutdown-probe/unknown")  # answered after the bad one
    server.wait_for(token)
    new = server.messages[before:]
    bad = [m for m in new if "error" in m and m.get("id", "absent") is None]
    assert len(bad) == 1 and bad[0]["error"]["code"] == -32600, new
    assert "None" not in bad[0]["error"]["message"]
    assert "result" in server.complete(URI, 1, 5)  # and the server goes on


def test_body_that_is_not_json_is_a_parse_error(server):
    before = len(server.messages)
    server.send(b'{"jsonrpc": "2.0", "id": 7777, "method": ')
    server.send(b"\xff\xfe not utf-8")
    assert "result" in server.complete(URI, 1, 5)
    errors = [m for m in server.messages[before:] if m.get("error", {}).get("code") == -32700]
    assert len(errors) == 2 and all(m["id"] is None for m in errors), server.messages[before:]
    assert not [m for m in server.messages[before:] if m.get("method") == "window/showMessage"]


# --- ill-formed text, internal errors -----------------------------------------------------------

def test_lone_surrogates_never_fail_a_request(server):
    uri = "file:///laya-protocol/surrogate.py"
    text = "bad = '\ud800'\nother = '\udfff' + bad\nprint(ba"
    server.open(uri, text)
    for line, character in [(0, 7), (0, 8), (1, 10), (2, 8)]:
        answer = server.complete(uri, line, character)
        assert "result" in answer, answer
    labels = [i["label"] for i in server.complete(uri, 2, 8)["result"]["items"]]
    assert "bad" in labels, labels


def test_internal_error_answer_carries_no_traceback_or_path():
    from pygls.exceptions import JsonRpcInternalError

    from laya_lsp.server import create_server

    ls = create_server()
    sent = []
    ls.protocol.set_writer(type("W", (), {"write": lambda self, b: sent.append(b), "close": lambda self: None})())
    try:
        raise OSError(f"cannot open {laya_lsp.__file__}")
    except OSError:
        error = JsonRpcInternalError.of(sys.exc_info()).to_response_error()
    ls.protocol._send_response(3, error=error)
    (body,) = sent
    assert b"-32603" in body
    assert b"Traceback" not in body and b"traceback" not in body
    assert laya_lsp.__file__.encode() not in body and b"laya_lsp" not in body


# --- line splitting -----------------------------------------------------------------------------

SEPARATORS = "\f\v\x1c\x1d\x1e\x85\u2028\u2029"


def test_only_lsp_line_breaks_split_lines():
    assert lsp_lines("a\fb\r\nc\rd\ne" + SEPARATORS) == ["a\fb\r\n", "c\r", "d\n", "e" + SEPARATORS]
    assert lsp_lines("") == [] and lsp_lines("a\n") == ["a\n"]
    doc = LspTextDocument("file:///x.py", "x = 1\f\ny = 2\u2028 + 3\nprint(y")
    doc.apply_change(types.TextDocumentContentChangePartial(
        range=types.Range(start=types.Position(line=2, character=6),
                          end=types.Position(line=2, character=7)), text="zz"))
    assert doc.source == "x = 1\f\ny = 2\u2028 + 3\nprint(zz"


def test_edit_below_a_form_feed_keeps_the_client_text(server):
    uri = "file:///laya-protocol/formfeed.py"
    server.open(uri, "import os\n\f\nzeta_value = 1 \u2028 # x\nprint(zeta_v)\n")
    server.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": 2}, "contentChanges": [
        {"range": {"start": {"line": 3, "character": 12}, "end": {"line": 3, "character": 12}}, "text": "a"}]})
    items = server.complete(uri, 3, 13)["result"]["items"]
    assert items and all(i["textEdit"]["range"] == {"start": {"line": 3, "character": 6},
                                                   "end": {"line": 3, "character": 13}} for i in items)
    assert "zeta_value" in [i["label"] for i in items]


LONE_CR = 'import os\nsep = "\r"\nos.pa\n'
"""Line 2 is ``os.pa`` for a client that counts lines at ``\\n`` only (``sep = "^M"`` is one line)."""


@pytest.mark.parametrize("client, options, lf", [
    ({"name": "Neovim", "version": "0.11.4"}, {}, True),
    ({"name": "emacs", "version": "GNU Emacs 28.2"}, {}, True),
    ({"name": "Eglot"}, {}, True),
    (None, {"lineBreaks": "lf"}, True),  # eglot 1.9: no clientInfo; the README's snippet says lf
    ({"name": "Visual Studio Code"}, {}, False),
    (None, {}, False),
    ({"name": "Neovim"}, {"lineBreaks": "lsp"}, False),
], ids=["neovim", "lsp-mode", "eglot", "option-lf", "vscode", "unnamed", "option-lsp"])
def test_lines_are_counted_as_the_client_counts_them(client, options, lf):
    """``lineBreaks`` ``auto`` counts lines at ``\\n`` only for Neovim, lsp-mode and eglot, as they
    do; the option overrides the name. Counted LSP's way, ``sep = "\\r"`` is two lines, so the
    cursor at the end of ``os.pa`` is on line 3, and line 2 is ``"``."""
    with RawServer() as s:
        params = {"processId": None, "rootUri": None, "capabilities": {}, "initializationOptions": options}
        if client is not None:
            params["clientInfo"] = client
        assert "result" in s.call("initialize", params)
        s.notify("initialized", {})
        s.open(URI, LONE_CR)
        line = 2 if lf else 3
        labels = s.complete_until(URI, line, 5, "path")
        items = s.complete(URI, line, 5)["result"]["items"]
        assert "path" in labels and all(i["textEdit"]["range"] == {
            "start": {"line": line, "character": 3}, "end": {"line": line, "character": 5}} for i in items)
        # an edit on that line lands there
        s.notify("textDocument/didChange", {"textDocument": {"uri": URI, "version": 2}, "contentChanges": [
            {"range": {"start": {"line": line, "character": 3}, "end": {"line": line, "character": 5}},
             "text": "path.jo"}]})
        items = s.complete(URI, line, 10)["result"]["items"]
        assert items and items[0]["textEdit"]["range"]["start"] == {"line": line, "character": 8}, items[:1]
        assert s.exit() == 0


# --- inline completion never repeats the rest of the line ---------------------------------------

def repeats(inserted: str, after: str) -> str:
    """The part of ``after`` that ``inserted`` also ends with (what accepting would duplicate)."""
    rest = after.split("\n", 1)[0]
    for k in range(min(len(inserted), len(rest)), 0, -1):
        if inserted.endswith(rest[:k]) and rest[:k].strip():
            return rest[:k]
    return ""


def test_fit_to_suffix():
    # the editor's closer closes an opener before the identifier: the line stops where it takes over
    assert fit_to_suffix("cur_lineno)", "))", "    print(sum(map(len, ") == "cur_lineno"
    assert fit_to_suffix("f(a, b)", ")", "print(") == "f(a, b)"  # its own bracket, then print's
    assert fit_to_suffix("make_item(name))", ")\n", "items.append(") == "make_item(name)"
    assert fit_to_suffix("zq_path_name) as fh:", ")", "with open(") == "zq_path_name"
    assert fit_to_suffix("zq_first_value(a)][0].name", "]", "row = [") == "zq_first_value(a)"
    assert fit_to_suffix("zq_key_one' + suffix", "'", "key = '") == "zq_key_one"
    assert fit_to_suffix("name", "))", "f(g(") == "name"
    assert fit_to_suffix("name]", ")", "f(") is None  # closes something else: does not fit
    assert fit_to_suffix("is_valid(x)):", "):", "if check(self.") == "is_valid(x)"
    assert fit_to_suffix("name(a, b) + 1", "", "x = ") == "name(a, b) + 1"
    # nothing open before: only an identical end is dropped
    assert fit_to_suffix("assertEqual(a, 'q')", "')", "    self.") == "assertEqual(a, 'q"
    assert fit_to_suffix("name", ")", "x = ") == "name"


CODE = ("def count(lines, cur_lineno):\n" + "    total = sum(map(len, cur_lineno))\n" * 3
        + "    x = f(cur_lineno)\n" * 3 + "    y = {'a': 'name'}\n" * 3)
"""Repeated lines make the model continue ``cur`` with ``cur_lineno)``: the overlap case."""
PROBES = ["    print(sum(map(len, cur|)))", "    z = [f(cur|)]", "    total = sum(map(len, cur|))",
          "    q = (f(cur|))", "    print(f(cur|))", "    w = {'a': 'na|'}", "    w = {'a': na|}",
          "    r = count(lin|, cur)", "    print(sum(map(len, |)))"]


def test_accepting_any_item_never_repeats_the_text_after_the_cursor(server):
    """Every completion and inline item applied as VS Code applies it (the edit's range replaced
    by its text; the rest of the line stays)."""
    checked = 0
    for n, marked in enumerate(PROBES):
        cut = marked.index("|")
        probe = marked.replace("|", "")
        uri = f"file:///laya-protocol/inline{n}.py"
        text = CODE + probe + "\n"
        server.open(uri, text)
        line = CODE.count("\n")
        after = probe[cut:]
        params = {**completion_params(line, cut, uri), "context": {"triggerKind": 2}}
        inline = server.call("textDocument/inlineCompletion", params)["result"]
        listed = server.complete(uri, line, cut)["result"]["items"]
        edits = [(i["insertText"], i["range"]) for i in inline["items"]]
        edits += [(i["textEdit"]["newText"], i["textEdit"]["range"]) for i in listed]
        for new_text, rng in edits:
            assert rng["start"]["line"] == rng["end"]["line"] == line
            start, end = rng["start"]["character"], rng["end"]["character"]
            applied = probe[:start] + new_text + probe[end:]
            assert applied.endswith(after)
            assert not repeats(new_text, probe[end:]), f"{probe!r} + {new_text!r} -> {applied!r}"
            checked += 1
    assert checked > len(PROBES)


def test_no_ghost_text_from_the_engine_at_a_word_start(server):
    """Where no character of a word is typed yet (after a blank, a dot, a bracket, in the
    indentation) the engine's ghost text was right 6.5-10.7% of the time on held-out code
    (``laya_lsp.inline.LINE_NEEDS_WORD``): none there; one character in, it comes."""
    doc = "import json\nx = json.loads(data)\nprint(x)\n\n\ndef f(a):\n    return json.dumps(a)\n\n\ndef g(b):\n"
    for n, (text, want) in enumerate([("    ", []), ("    return ", []), ("    return json.", []),
                                      ("    return json.d", ["dumps(a)"]), ("    r", ["return json.dumps(a)"]),
                                      ("    return json.dumps(", [])]):
        uri = f"file:///laya-protocol/wordstart{n}.py"
        server.open(uri, doc + text)
        params = {**completion_params(doc.count("\n"), len(text), uri), "context": {"triggerKind": 2}}
        items = server.call("textDocument/inlineCompletion", params)["result"]["items"]
        assert [i["insertText"] for i in items] == want, (text, items)


def test_ghost_text_mid_line_before_the_text_an_earlier_line_ends_with(server):
    """``print(self.rec|, 'x done')`` after an earlier ``print(self.records[0], 'x done')``: the
    item fills in ``records[0]`` over the word, and the text after the cursor stays as it is."""
    uri = "file:///laya-protocol/midline.py"
    doc = "class R:\n    def f(self):\n        print(self.records[0], 'x done')\n        print(self.rec, 'x done')\n"
    server.open(uri, doc)
    params = {**completion_params(3, 22, uri), "context": {"triggerKind": 2}}
    (item,) = server.call("textDocument/inlineCompletion", params)["result"]["items"]
    assert item["insertText"] == "records[0]"
    assert item["range"] == {"start": {"line": 3, "character": 19}, "end": {"line": 3, "character": 22}}


def test_no_ghost_text_lengthening_a_word_the_document_has_whole(server):
    """``return args|`` showed ``pec(self`` (``argspec(self``) where ``args`` was a name of its own
    in the file: no ghost text there; where the typed word is not a whole word of the document
    (``argsp``), or the line goes on with a sign (``json|`` + ``.loads``), it shows."""
    from laya_lsp.inline import lengthens_a_whole_word

    doc = ("import json\n\n\ndef argspec(self, args):\n    return argspec(self, args)\n\n\n"
           "def f(args):\n    x = json.loads(args)\n    return ")

    def ghost(n, typed):
        uri = f"file:///laya-protocol/whole{n}.py"
        server.open(uri, doc + typed)
        params = {**completion_params(doc.count("\n"), len("    return " + typed), uri), "context": {"triggerKind": 2}}
        return [i["insertText"] for i in server.call("textDocument/inlineCompletion", params)["result"]["items"]]

    assert ghost(0, "args") == [] and ghost(1, "argsp") == ["argspec(self, args)"]
    assert lengthens_a_whole_word("f(args)\nreturn args", "args", "argspec(self")
    assert not lengthens_a_whole_word("x = json\ny = json", "json", "json.loads(x)")
    assert not lengthens_a_whole_word("ab = 1\nc = a", "a", "ab") and not lengthens_a_whole_word("x", "", "xy")


def test_no_ghost_text_glued_to_a_sign_the_document_spaces(server):
    """``x =|`` gave the ghost text ``json.`` (accepted: ``x =json.``) where the document writes
    ``x = json...``; after the blank and a letter it comes. Where the document glues the sign (``f(a,b)``), or
    after a member access, it comes at once. Nor after a sign the document never glues a name to
    (``print(x)|``, at a line's end, took ``self.``)."""
    from laya_lsp.inline import glued

    def ghost(n, text):
        uri = f"file:///laya-protocol/glued{n}.py"
        server.open(uri, text)
        line = text.count("\n")
        col = len(text) - text.rfind("\n") - 1
        params = {**completion_params(line, col, uri), "context": {"triggerKind": 2}}
        return [i["insertText"] for i in server.call("textDocument/inlineCompletion", params)["result"]["items"]]

    doc = "import json\nx = json.loads(data)\nprint(x)\n"
    assert ghost(0, doc + "x =") == []
    assert ghost(1, doc + "x = ") == []  # nor at a word start (test below)
    assert ghost(3, doc + "x = j") == ["json.loads(data)"]
    assert glued("a = 1\nb =") and glued("f(a, b)\nf(a,") and not glued("f(a,b)\nf(a,b)\nf(a,")
    assert not glued("a = 1\nb = x.") and not glued("a = 1\np->") and not glued("a = 1\nb = (")
    assert not glued("a = 1\nb = ") and not glued("b =")  # a blank typed; no evidence yet
    assert not glued("a && b\nf(&") and not glued("a < b\nx: Vec<") and not glued("a - b\ny = -")
    # a sign the document never glues a name to: print(x)| at a line's end took `self.`
    assert glued("f(x)\ng(y).z\nh(x)") and glued("a[1].x\nb = a[0]")  # tests/test_nvim_inline.py too
    assert not glued("x = (int)y;\nz = (char)c;\nw = (long)") and not glued("a[1]b\nc = a[0]")


# --- state races --------------------------------------------------------------------------------

def test_document_opened_while_loading_gets_its_vocabulary_without_an_edit():
    with RawServer() as s:
        s.initialize()
        s.open(URI, "print(zebra_u)\nzebra_unique_field = 1\n")  # the model is still loading
        s.complete_until(URI, 0, 13, "zebra_unique_field", timeout=15, why="never in the vocabulary")
        assert s.exit() == 0


def test_close_racing_the_counting_thread_leaves_no_words():
    """A didClose that lands between the counting thread's check and its submit."""
    from laya_lsp import server as srv
    from tests.doc_recorder import server_with_recorder

    ls, recorder = server_with_recorder()
    item = types.TextDocumentItem(uri=URI, language_id="python", version=1, text="secret_word = 1\n")
    ls.workspace.put_text_document(item)
    srv.did_open(ls, types.DidOpenTextDocumentParams(text_document=item))
    ls.bridge.engine.call(lambda: None)
    ls.counting.submit(lambda: None).result()
    ls.bridge.engine.call(lambda: None)
    assert URI in recorder.docs  # the open document was counted and installed

    submit = ls.bridge.submit_background

    def close_first(fn, *args):
        if fn.__name__ == "_install_job":  # the close lands right before the install is queued
            ls.workspace.remove_text_document(URI)
            srv.did_close(ls, types.DidCloseTextDocumentParams(
                text_document=types.TextDocumentIdentifier(uri=URI)))
        return submit(fn, *args)

    ls.workspace.put_text_document(item)
    ls.bridge.submit_background = close_first
    ls.observe(URI)
    ls.counting.submit(lambda: None).result()
    time.sleep(0.05)
    ls.bridge.engine.call(lambda: None)
    ls.bridge.engine.call(lambda: None)
    assert URI not in recorder.docs, "the closed document's words stayed in the engine"
    ls.bridge.shutdown(wait=2)


def _unused_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def test_process_id_from_another_pid_namespace_does_not_end_the_server():
    with RawServer() as s:
        s.initialize(process_id=_unused_pid())  # not visible here: another namespace
        time.sleep(4)  # the watch checks every 3 s
        assert s.proc.poll() is None, s.stderr_text()[-2000:]
        s.open(URI, "import os\nos.pa")
        assert "result" in s.complete(URI, 1, 5)
        assert s.exit() == 0


def test_watch_process_id_off():
    editor = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    with RawServer() as s:
        s.initialize({"watchProcessId": False}, process_id=editor.pid)
        editor.kill()
        editor.wait()
        time.sleep(4)
        assert s.proc.poll() is None
        assert s.exit() == 0


# --- the guarantees are documented ----------------------------------------------------------------

def test_help_and_readme_list_the_guarantees():
    out = subprocess.run([sys.executable, "-m", "laya_lsp", "--help"], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    for code in ("-32002", "-32600", "-32602", "-32700", "-32603"):
        assert code in out.stdout and code in GUARANTEES and code in readme, code
    assert "exit status" in out.stdout
    assert GUARANTEES.strip() in readme


def test_unknown_command_is_a_client_error_not_a_server_error():
    with RawServer() as s:
        s.initialize()
        answer = s.call("workspace/executeCommand", {"command": "no.such.command", "arguments": []})
        assert answer["error"]["code"] == -32602, answer
        assert s.exit() == 0
        err = s.stderr_text()
        assert "Traceback" not in err and " ERROR " not in err, err[-2000:]
