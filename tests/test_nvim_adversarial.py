"""A demanding user in a real Neovim: the README's ``init.lua``, keys typed one at a time.

Each test plays keys into a headless Neovim 0.11 set up with ``editors/nvim/README.md``'s block
(``tests/test_nvim_typing.py``'s :func:`readme_setup`, driven by
``tests/test_editor_edge_cases.py``'s :func:`run_session`, which records what went over the wire)
and checks what a user would: the buffer holds exactly what was typed or accepted, the menu offers
only words that continue the word being typed, every request is answered, the server's copy of
each buffer is Neovim's text, and nothing is logged as an error.

The menu is looked at after a pause (before ``<C-n>``), not right after every key: Neovim 0.11's
completion shows the answer to a request it has cancelled when that answer was already on its way
(``vim/lsp/completion.lua`` checks only the row and the mode), so when an answer takes longer than
the gap to the next key, the previous key's items show until the next answer comes. Every answer
the server sent is checked instead (:func:`assert_answers_fit`).
"""

from __future__ import annotations

import re

import test_editor_edge_cases
from engine.text import word_prefix
from test_editor_edge_cases import GO, PY, assert_server_has_the_buffers, run_session, server_documents, typed
from test_editor_edge_cases import frames as strict_frames
from test_nvim_typing import pytestmark  # noqa: F401 - skipped, saying why, without Neovim

ACCEPT = [{"input": "<Ignore>", "gap_ms": 600},  # a pause for the last key's answer, then pick the first item
          {"input": "<C-n>", "gap_ms": 300}, {"input": "<C-y>", "gap_ms": 300}]


def unanswered(got: dict) -> list[dict]:
    """Requests Neovim sent that the server never answered."""
    answered = {m["id"] for m in got["received"] if "id" in m and "method" not in m}
    return [m for m in got["sent"] if "id" in m and m.get("method") not in (None, "shutdown")
            and m["id"] not in answered]  # Neovim's :qa! sends shutdown and leaves at once


def assert_clean(got: dict, *, server_copy: bool = True) -> None:
    """Every request answered, no error logged or shown, the server holding Neovim's text."""
    missing = unanswered(got)
    assert not missing, f"never answered: {missing}" + got["context"]
    errors = [m for m in got["received"] if m.get("method") in ("window/logMessage", "window/showMessage")
              and m["params"]["type"] <= 2]
    assert not errors, f"the server reported: {errors}" + got["context"]
    assert "[ERROR]" not in got["lsp_log"] and "Traceback" not in got["lsp_log"], got["context"]
    assert not re.search(r"E\d{3,4}:", got["messages"]), got["context"]
    if server_copy:
        assert_server_has_the_buffers(got)
    assert_answers_fit(got)


def assert_answers_fit(got: dict) -> None:
    """Each completion item the server sent replaces exactly the identifier prefix before the
    cursor in the text the server had then (the document replayed up to the request) and
    continues it."""
    (encoding,) = {m["result"]["capabilities"]["positionEncoding"] for m in got["received"]
                   if isinstance(m.get("result"), dict) and "capabilities" in m["result"]}
    assert encoding == "utf-8"  # what Neovim 0.11 asks for first
    answers = {m["id"]: m for m in got["received"] if "id" in m and "method" not in m}
    for n, m in enumerate(got["sent"]):
        items = ((answers.get(m.get("id")) or {}).get("result") or {}).get("items") \
            if m.get("method") == "textDocument/completion" else None
        if not items:
            continue
        pos = m["params"]["position"]
        text = server_documents(got["sent"][: n + 1], got["received"])[m["params"]["textDocument"]["uri"]]
        line = re.split(r"\r\n|\r|\n", text)[pos["line"]]
        before = line.encode()[: pos["character"]].decode()
        word = word_prefix(before)
        start = {"line": pos["line"], "character": pos["character"] - len(word.encode())}
        for item in items:
            edit = item["textEdit"]
            # prose also offers the word capitalized ("tues": "Tuesday"), after those as typed
            assert edit["range"]["start"] == start and edit["newText"].startswith(
                (word, word[:1].upper() + word[1:])), (
                f"request {m['id']} after {before[-40:]!r}: {item}" + got["context"])


def word_at_end(line: str) -> str:
    return re.search(r"\w*$", line).group(0)


def first_offer(got: dict, line: str) -> str:
    """The first word of the menu seen with ``line`` as the current line."""
    snap = next((s for s in reversed(got["snaps"]) if s["line"] == line and s["pum"] and s["words"]), None)
    assert snap is not None, f"no menu with the line {line!r}" + got["context"]
    assert all(w.startswith(word_at_end(line)) for w in snap["words"]), f"{snap}" + got["context"]
    return snap["words"][0]


def accepted(got: dict, n: int = -1) -> str:
    """The line the ``n``-th ``<C-n><C-y>`` should leave: its first offer replacing the word."""
    at = [i for i, s in enumerate(got["snaps"]) if s["input"] == "<C-n>"][n] - 1
    snap = got["snaps"][at]
    assert snap["pum"] and snap["words"], f"no menu before <C-n> #{n}" + got["context"]
    word = word_at_end(snap["line"])  # after a pause, the menu continues the word being typed
    assert all(w.startswith(word) for w in snap["words"]), f"{snap}" + got["context"]
    return snap["line"][: len(snap["line"]) - len(word_at_end(snap["line"]))] + snap["words"][0]


def test_multibyte_text_before_the_cursor(tmp_path):
    """CJK, an emoji ZWJ sequence and a combining accent before the cursor, then accepting."""
    head = "        s = '中文 👨\u200d👩\u200d👧 e\u0301' + self.sc"
    head2 = "        t = '한글 🎉' + json.lo"
    keys = [{"input": "A"}, *typed(head), *ACCEPT, {"input": "<Esc>"},
            {"input": "o"}, *typed(head2), *ACCEPT, {"input": "<Esc>"}]
    got = run_session(tmp_path, {"reader.py": PY}, keys)
    assert got["lines"][-2] == head[:-2] + first_offer(got, head), got["context"]
    assert got["lines"][-1] == head2[:-2] + first_offer(got, head2), got["context"]
    assert_clean(got)


def test_undo_redo_after_accepting_then_typing(tmp_path):
    line = "        y = self.sc"
    keys = [{"input": "o"}, *typed(line), *ACCEPT, {"input": "<Esc>", "gap_ms": 200},
            {"input": "u", "gap_ms": 300}, {"input": "<C-r>", "gap_ms": 300},
            {"input": "u", "gap_ms": 300}, {"input": "<C-r>", "gap_ms": 300},
            {"input": "GA"}, *typed(" + json.lo"), {"input": "<Esc>"}]
    got = run_session(tmp_path, {"reader.py": PY}, keys)
    done = line[:-2] + first_offer(got, line)
    assert got["lines"][-1] == done + " + json.lo", got["context"]
    assert_clean(got)


def test_dot_repeats_an_insert_that_accepted_an_item(tmp_path):
    line = "        y = self.sc"
    keys = [{"input": "o"}, *typed(line), *ACCEPT, {"input": "<Esc>", "gap_ms": 200},
            {"input": ".", "gap_ms": 800}, {"input": ".", "gap_ms": 800}]
    got = run_session(tmp_path, {"reader.py": PY}, keys)
    done = line[:-2] + first_offer(got, line)
    assert got["lines"][-3:] == [done] * 3, got["context"]
    assert_clean(got)


def test_dot_repeats_an_accept_inside_a_word(tmp_path):
    """``self.|le``, ``i``, ``s``, then ``<C-n><C-y>``: the item replaces the whole word (``laya.complete``
    deletes ``le`` after it). The deletion is part of the insert, so ``.`` on the next line's
    ``self.|le`` gives the same line; it was an API call after the insert, and ``.`` replayed only
    the item's text: ``self.scalele``."""
    text = PY + "        a = self.le\n        b = self.le\n"
    keys = [{"input": "G", "gap_ms": 200}, {"input": "k$h", "gap_ms": 200}, {"input": "i", "gap_ms": 200},
            *typed("s", 1500), {"input": "<C-n>", "gap_ms": 300}, {"input": "<C-y>", "gap_ms": 300},
            {"input": "<Esc>", "gap_ms": 300}, {"input": "j$h", "gap_ms": 300}, {"input": ".", "gap_ms": 1000}]
    got = run_session(tmp_path, {"reader.py": text}, keys)
    menu = next(s for s in got["snaps"] if s["input"] == "s")
    assert menu["line"] == "        a = self.sle" and menu["words"], got["context"]
    item = menu["words"][0]  # what <C-n> selected
    assert got["lines"][-2:] == ["        a = self." + item, "        b = self." + item], got["context"]
    assert_clean(got)


def test_accepting_inside_a_word_from_the_list_shown_while_the_next_is_asked_for(tmp_path, monkeypatch):
    """``self.s|le``: the list comes, each item replacing ``sle``. Typing ``c`` asks again (the list
    is incomplete); until that answer comes (``debounceMs`` 400 here; on a loaded machine any slow
    answer), Neovim filters the list it has by ``sc``, and ``<C-n><C-y>`` accepts from it. The
    rest to delete is the accepted item's, measured from its request's cursor (``le``): the
    cursor of the newest request, ``sc|le``, with the old item's range end left ``l`` to delete,
    giving ``self.scalee``."""
    setup = test_editor_edge_cases.readme_setup
    monkeypatch.setattr(test_editor_edge_cases, "readme_setup", lambda text: setup(text) + (
        "\nvim.lsp.config('laya', { init_options = { debounceMs = 400 } })\n"))
    keys = [{"input": "Go"}, *typed("        y = self.le"), {"input": "<Left><Left>", "gap_ms": 300},
            *typed("s", 1500),                       # asked at self.s|le; its list shows
            {"input": "c", "gap_ms": 60},            # asked again at self.sc|le, answered 400 ms later
            {"input": "<C-n>", "gap_ms": 60},        # the first list, filtered by `sc`
            {"input": "<C-y>", "gap_ms": 1500}, {"input": "<Esc>", "gap_ms": 300}]
    got = run_session(tmp_path, {"reader.py": PY}, keys)
    sel = next(s for s in got["snaps"] if s["input"] == "<C-n>")
    assert sel["pum"] and sel["words"] and sel["words"][0].startswith("sc"), got["context"]
    # both requests went out on the line (at s|le, then at sc|le)
    asked = [m for m in got["sent"] if m.get("method") == "textDocument/completion"
             and m["params"]["position"]["line"] == len(PY.splitlines())]
    assert len(asked) >= 2, got["context"]
    assert got["lines"][-1] == "        y = self." + sel["words"][0], got["context"]
    assert_clean(got)


def test_accepting_inside_a_word_after_cjk_and_emoji_in_utf16(tmp_path, monkeypatch):
    """The client offering only UTF-16: the range's end is in UTF-16 units to the server and in
    bytes to Neovim, and the rest after the cursor is deleted with one ``<Del>`` per character.
    Accepting inside ``sle`` after CJK and an emoji, with and without text after the word."""
    setup = test_editor_edge_cases.readme_setup
    monkeypatch.setattr(test_editor_edge_cases, "readme_setup", lambda text: setup(text) + (
        "\nvim.lsp.config('laya', { capabilities = { general = { positionEncodings = { 'utf-16' } } } })\n"))
    cases = [  # (typed, characters back, the text around the identifier)
        ("        s = 'é中😀' + self.sle", 2, ("        s = 'é中😀' + self.", "")),
        ("        t = '한😀' + self.sle + 'é'", 8, ("        t = '한😀' + self.", " + 'é'")),
    ]
    keys = [{"input": "G"}]
    for line, back, _ in cases:
        keys += [{"input": "o"}, *typed(line), {"input": "<Left>" * back, "gap_ms": 400},
                 {"input": "c", "gap_ms": 800}, {"input": "<C-n>", "gap_ms": 300},
                 {"input": "<C-y>", "gap_ms": 300}, {"input": "<Esc>"}]
    got = run_session(tmp_path, {"reader.py": PY}, keys)
    assert {m["result"]["capabilities"]["positionEncoding"] for m in got["received"]
            if isinstance(m.get("result"), dict) and "capabilities" in m["result"]} == {"utf-16"}
    menus = [got["snaps"][i - 1] for i, s in enumerate(got["snaps"]) if s["input"] == "<C-n>"]
    assert len(menus) == len(cases), got["context"]
    for (_, _, (head, tail)), menu, line in zip(cases, menus, got["lines"][-len(cases):]):
        assert menu["pum"] and menu["words"] and menu["line"] == head + "scle" + tail, got["context"]
        assert line == head + menu["words"][0] + tail, got["context"]
    assert_server_has_the_buffers(got)
    assert "[ERROR]" not in got["lsp_log"] and not re.search(r"E\d{3,4}:", got["messages"]), got["context"]


def test_crlf_set_by_the_user(tmp_path):
    line = "        y = self.sc"
    keys = [{"input": ":set ff=dos<CR>", "gap_ms": 300}, {"input": ":w<CR>", "gap_ms": 500},
            {"input": "o"}, *typed(line), *ACCEPT, {"input": "<Esc>"},
            {"input": "o"}, *typed("        x = json.lo"), {"input": "<Esc>"}]
    got = run_session(tmp_path, {"reader.py": PY}, keys)
    assert got["lines"][-2] == line[:-2] + first_offer(got, line), got["context"]
    assert got["lines"][-1] == "        x = json.lo", got["context"]
    assert_clean(got, server_copy=False)
    # Neovim does not tell the server about the new line ends: only lines typed afterwards end in
    # "\r\n" there. Line ends aside, the server holds Neovim's text.
    docs = server_documents(got["sent"], got["received"])
    (text,) = docs.values()
    assert text.replace("\r\n", "\n") == "\n".join(got["lines"]) + "\n", got["context"]


def test_reload_and_reopen_with_a_request_in_flight(tmp_path):
    keys = [{"input": "A"}, *typed("        x = json.l"), {"input": "o", "gap_ms": 0},
            {"input": "<Esc>:e!<CR>", "gap_ms": 400},
            {"input": "A"}, *typed("        x = json.l"), {"input": "o", "gap_ms": 0},
            {"input": "<Esc>:w<CR>", "gap_ms": 0}, {"input": ":bd<CR>", "gap_ms": 0},
            {"input": ":e reader.py<CR>", "gap_ms": 1500},
            {"input": "GA"}, *typed("\n        z = self.sc"), *ACCEPT, {"input": "<Esc>"}]
    got = run_session(tmp_path, {"reader.py": PY}, keys)
    lines = [line.strip() for line in got["lines"]]  # :e! brings Python's indent rules back
    assert lines[-2] == "x = json.lo", got["context"]
    assert got["lines"][-1] == accepted(got), got["context"]
    assert_clean(got)


def test_switching_between_python_and_go_while_typing(tmp_path):
    keys = [{"input": ":e main.go<CR>", "gap_ms": 1500}, {"input": ":b reader.py<CR>", "gap_ms": 300}]
    for n in range(3):
        keys += [{"input": "Go"}, *typed(f"        v{n} = json.lo", 40), {"input": "<Esc>:b main.go<CR>", "gap_ms": 10},
                 {"input": "Go"}, *typed("fmt.Pri", 40), {"input": "<Esc>:b reader.py<CR>", "gap_ms": 10}]
    got = run_session(tmp_path, {"reader.py": PY, "main.go": GO}, keys)
    project = tmp_path / "project"
    assert got["bufs"][str(project / "reader.py")][-3:] == [f"        v{n} = json.lo" for n in range(3)], got["context"]
    assert [s.strip() for s in got["bufs"][str(project / "main.go")][-3:]] == ["fmt.Pri"] * 3, got["context"]
    assert_clean(got)


def test_typing_after_pasting_2000_lines(tmp_path):
    keys = [{"input": ":$put =map(range(2000), {i, v -> 'v' .. v .. ' = json.dumps(' .. v .. ')'})<CR>",
             "gap_ms": 500},
            {"input": "Go"}, *typed("x = json.lo"), *ACCEPT, {"input": "<Esc>"}]
    got = run_session(tmp_path, {"reader.py": PY}, keys)
    assert len(got["lines"]) > 2000
    assert got["lines"][-1] == "x = json." + first_offer(got, "x = json.lo"), got["context"]
    assert_clean(got)


def test_typing_at_the_end_of_a_50k_character_line(tmp_path):
    blob = "s = '" + "中文 ab, 😀 " * 4000 + "ab, " * 2500 + "'"  # ASCII where the snapshots cut it
    keys = [{"input": "A"}, *typed(" + self.sc"), {"input": "<C-x><C-o>", "gap_ms": 800}, *ACCEPT,
            {"input": "<Esc>"}]
    got = run_session(tmp_path, {"reader.py": PY + blob + "\n"}, keys)
    assert got["lines"][-1].startswith(blob + " + self.sc") and got["lines"][-1] != blob + " + self.sc", got["context"]
    assert_clean(got)


def test_fileencoding_and_writing_a_new_file(tmp_path):
    keys = [{"input": ":e new.py<CR>", "gap_ms": 1500}, {"input": "i"}, *typed("import json\ns = 'é'\nx = json.lo"),
            {"input": "<Esc>:set fenc=latin1<CR>", "gap_ms": 200}, {"input": ":w<CR>", "gap_ms": 800},
            {"input": "o"}, *typed("y = json.du"), {"input": "<Esc>:w<CR>", "gap_ms": 800},
            {"input": ":e!<CR>", "gap_ms": 800}, {"input": "Go"}, *typed("z = json.lo"), {"input": "<Esc>"}]
    got = run_session(tmp_path, {"reader.py": PY}, keys)
    assert got["lines"] == ["import json", "s = 'é'", "x = json.lo", "y = json.du", "z = json.lo"], got["context"]
    assert (tmp_path / "project" / "new.py").read_bytes().startswith(b"import json\ns = '\xe9'")
    assert_clean(got)


def test_prose_and_python_in_turn_and_a_utf16_file(tmp_path):
    """A Markdown buffer (the typing variant's model, loaded on first use) and a Python one in
    turn, the Markdown file written as UTF-16 with a BOM and typed on."""
    keys = [{"input": ":e notes.md<CR>", "gap_ms": 200}, {"input": "Go"}, *typed("The reader loads the sc", 100),
            *ACCEPT, {"input": "<Esc>:set fenc=utf-16 bomb<CR>:w<CR>", "gap_ms": 1000},
            {"input": ":b reader.py<CR>Go", "gap_ms": 100}, *typed("        x = json.lo", 100),
            {"input": "<Esc>:b notes.md<CR>Go", "gap_ms": 100}, *typed("Then it writes the", 100),
            {"input": "<Esc>:w<CR>", "gap_ms": 1000}]
    got = run_session(tmp_path, {"reader.py": PY, "notes.md": "# Notes\n\nSome text about the reader.\n"}, keys)
    notes = got["bufs"][str(tmp_path / "project" / "notes.md")]
    assert notes[-2:] == [accepted(got), "Then it writes the"], got["context"]
    assert got["bufs"][str(tmp_path / "project" / "reader.py")][-1].strip() == "x = json.lo", got["context"]
    written = (tmp_path / "project" / "notes.md").read_bytes()
    assert written.startswith(b"\xfe\xff") and written.decode("utf-16").splitlines()[-1] == "Then it writes the"
    assert_clean(got)


def test_buffers_with_no_name_get_no_completions(tmp_path):
    """Neovim names every buffer without a name ``file://`` to the server: a second one was opened
    as the same document as the first (no close between), and the edits of both went to one text
    there. The README's block keeps Laya off such buffers."""
    keys = [{"input": ":enew<CR>", "gap_ms": 300}, {"input": "i"}, *typed("import json\nx = json.lo"),
            {"input": "<Esc>:set ft=python<CR>", "gap_ms": 1500}, {"input": "o"}, *typed("y = json.du"),
            {"input": "<Esc>:enew<CR>", "gap_ms": 300}, {"input": ":set ft=python<CR>", "gap_ms": 1500},
            {"input": "i"}, *typed("import os\nz = os.pa"), {"input": "<Esc>:b 2<CR>", "gap_ms": 500},
            {"input": "Go"}, *typed("w = json.du"), {"input": "<Esc>:b 3<CR>", "gap_ms": 500},
            {"input": "Go"}, *typed("v = os.pa"), {"input": "<Esc>"}]
    got = run_session(tmp_path, {"reader.py": PY}, keys)
    assert got["lines"] == ["import os", "z = os.pa", "v = os.pa"], got["context"]
    assert_clean(got)  # the server's copy of every document it holds open is Neovim's text


def test_a_burst_of_keys_and_a_register_inserted_in_insert_mode(tmp_path):
    """Keys with no gap between them, then ``<C-r>"`` of 300 yanked lines in insert mode (each
    character goes through ``InsertCharPre``, so the README's block asks once per character)."""
    keys = [{"input": "Go", "gap_ms": 0}, *typed("        x = json.loads(self.scale)", 0),
            {"input": "<Esc>", "gap_ms": 300}, {"input": "yy299p", "gap_ms": 500},
            {"input": "Go", "gap_ms": 0}, {"input": '<C-r><C-o>"', "gap_ms": 1500},
            *typed("        y = self.sc", 150), *ACCEPT, {"input": "<Esc>"}]
    got = run_session(tmp_path, {"reader.py": PY}, keys)
    line = "        x = json.loads(self.scale)"
    assert got["lines"][-301:-1] == [line] * 300 and got["lines"][-302] == line, got["context"]
    assert got["lines"][-1] == accepted(got), got["context"]
    assert_clean(got)


def test_no_final_line_break_and_saveas(tmp_path):
    keys = [{"input": "A"}, *typed(" + json.lo"), *ACCEPT, {"input": "<Esc>:saveas other.py<CR>", "gap_ms": 0},
            {"input": "A", "gap_ms": 1000}, *typed(" + self.sc"), *ACCEPT, {"input": "<Esc>"}]
    got = run_session(tmp_path, {"reader.py": PY.rstrip("\n") + "\n        y = 1"}, keys)
    assert got["lines"][-1] == accepted(got), got["context"]
    assert accepted(got, 0).startswith("        y = 1 + json.lo")
    assert_clean(got, server_copy=False)
    # Neovim sends a buffer with no final line break without one; that aside, the server has its text
    (text,) = server_documents(got["sent"], got["received"]).values()
    assert text.rstrip("\n") == "\n".join(got["lines"]), got["context"]


def test_substitute_across_a_pasted_file_then_typing(tmp_path):
    keys = [{"input": ":$put =map(range(2000), {i, v -> 'é' .. v .. ' = json.dumps(' .. v .. ')'})<CR>",
             "gap_ms": 300}, {"input": ":%s/json/JSON/g<CR>", "gap_ms": 300}, {"input": "u", "gap_ms": 300},
            {"input": ":g/^é1/d<CR>", "gap_ms": 300}, {"input": "ggJ", "gap_ms": 300},
            {"input": "Go"}, *typed("x = json.lo"), *ACCEPT, {"input": "<Esc>"}]
    got = run_session(tmp_path, {"reader.py": PY}, keys)
    assert got["lines"][-1] == accepted(got), got["context"]
    assert_clean(got)


def test_editing_keys_while_the_menu_is_open(tmp_path):
    """``<C-e>`` (the typed text back), ``<BS>``, ``<C-w>`` and ``<C-u>`` with the menu open, and a
    key typed right after ``<C-y>``: the buffer holds what the keys say."""
    keys = [{"input": "Go"}, *typed("        a = json.lo"), {"input": "<C-n>", "gap_ms": 200},
            {"input": "<C-e>", "gap_ms": 200}, {"input": "<BS>", "gap_ms": 300}, *typed("ad"),
            {"input": "<C-w>", "gap_ms": 300}, *typed("du"), {"input": "<C-n>", "gap_ms": 200},
            {"input": "<C-y>", "gap_ms": 0}, *typed("(self.sc", 0), {"input": "<C-u>", "gap_ms": 300},
            *typed("b = self.sc"), {"input": "<Ignore>", "gap_ms": 600}, {"input": "<C-p>", "gap_ms": 200},
            {"input": "<C-y>", "gap_ms": 0}, *typed(")", 300), {"input": "<Esc>"}]
    got = run_session(tmp_path, {"reader.py": PY}, keys)
    menu = next(s for s in got["snaps"] if s["input"] == "<Ignore>")
    assert menu["line"] == "b = self.sc" and menu["words"], got["context"]  # <C-u> took the rest
    assert got["lines"][-1] == "b = self." + menu["words"][-1] + ")", got["context"]  # <C-p>: the last
    assert_clean(got)


def test_a_file_with_bytes_that_are_not_utf8(tmp_path, monkeypatch):
    """``:e ++enc=utf-8 ++bad=keep`` keeps a file's invalid bytes in the buffer, and Neovim puts them
    in its ``didOpen`` unchanged: the server answered -32700 (``[ERROR]`` in Neovim's log), never
    opened the document, warned at every keystroke and answered every completion empty (now each
    such byte is one lone surrogate: ``laya_lsp.stdio.utf8_body``). The bad line is deleted before
    the end, so that the harness can read the buffers back as UTF-8."""
    def frames(path):  # what Neovim sent is not all UTF-8 here
        lenient = path.with_suffix(".utf8")
        text = path.read_bytes().decode("utf-8", "surrogateescape")  # each bad byte to one "?"
        lenient.write_bytes(re.sub("[\udc80-\udcff]", "?", text).encode("utf-8"))
        return strict_frames(lenient)

    monkeypatch.setattr(test_editor_edge_cases, "frames", frames)
    keys = [{"input": ":e! ++enc=utf-8 ++bad=keep<CR>G", "gap_ms": 1500}, {"input": "o"},
            *typed("        x = json.lo"), *ACCEPT, {"input": "<Esc>ggdd", "gap_ms": 300}]
    got = run_session(tmp_path, {"reader.py": b"# caf\xe9 \xff\xfe\n" + PY.encode()}, keys)
    assert got["lines"][-1] == accepted(got), got["context"]
    assert_clean(got)


def test_multiline_edits_of_a_crlf_file_with_multibyte_text(tmp_path):
    """A ``fileformat=dos`` file holding CJK and emoji: a visual-block insert, ``J``, a
    substitute that joins lines, undo and redo, then typing and accepting on a joined line."""
    crlf = (PY + "        t = '中文😀'\n        u = 'é'\n").replace("\n", "\r\n")
    keys = [{"input": "G2k0<C-v>jI", "gap_ms": 300}, *typed("# "), {"input": "<Esc>", "gap_ms": 300},
            {"input": "ggJ", "gap_ms": 300}, {"input": ":%s/😀'\\n/😀' + /<CR>", "gap_ms": 300},
            {"input": "u", "gap_ms": 300}, {"input": "<C-r>", "gap_ms": 300},
            {"input": "A"}, *typed(" + self.sc"), *ACCEPT, {"input": "<Esc>"}]
    got = run_session(tmp_path, {"reader.py": crlf}, keys)
    assert got["lines"][0] == "import json" and got["lines"][-2] == "# ", got["context"]
    assert got["lines"][-1].startswith("#         t = '中文😀' +         u = 'é' + self."), got["context"]
    assert got["lines"][-1] == accepted(got), got["context"]
    assert_clean(got)
