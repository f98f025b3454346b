"""Emacs + eglot, used the way an Emacs user does, against the real ``laya-lsp`` and model.

Each test runs Emacs in batch mode with the README's eglot snippet (``editors/README.md``, as
``tests/test_emacs_eglot.py`` loads it), ``laya-lsp`` on ``PATH``, and a scenario in elisp that
``tests/emacs/adversarial.el`` evaluates: it visits files in a git project, edits them, and
completes with the real ``completion-at-point`` command (``C-M-i``; a second ``C-M-i`` shows
``*Completions*``, and ``choose-completion`` picks an entry, as RET on it does). The scenario
records the buffer text after each step; the tests check it exactly, plus what the user would see
in ``*Messages*`` and what the server answered with an error or wrote to stderr.

"In sync" below: with point after an identifier, the server's first item replaces exactly the
identifier eglot sees there (a server whose copy of the document differs from the buffer computes
another range). Emacs 28.2 + elpa-eglot 1.9 (Debian bookworm) or 29+; skipped, saying why,
without Emacs and eglot. Each Emacs run is bounded (``LAYA_EMACS_BUDGET`` and a subprocess
timeout).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from emacs_session import CRLF_SCENARIO, LINES, PY, expected_line, run_emacs
from test_emacs_eglot import EMACS, REASON, readme_snippet

pytestmark = pytest.mark.skipif(REASON is not None, reason=REASON or "")


class Mangled(AssertionError):
    """The text a user sees is wrong (told apart from a broken harness: no Emacs result, a lisp
    error)."""

DRIVER = Path(__file__).parent / "emacs" / "adversarial.el"
NOISE = re.compile(r"^(Warning \[flymake |Loading |\[jsonrpc\] Server exited with status 9$)")
"""*Messages* lines that are not about Laya: flymake finding no Python checker, file loads, and
eglot 1.9 killing the server right after its ``exit`` notification (``jsonrpc-shutdown`` deletes
the process without waiting, for every server: status 9 is SIGKILL)."""
STDERR_NOISE = re.compile(r"(nil|Process .* stderr finished)?")
"""What jsonrpc itself writes about the server's stderr pipe when the server ends (a closed pipe,
its sentinel's message): no output of the server."""


def emacs(tmp_path: Path, scenario: str, files: dict[str, str | bytes], *,
          budget: int = 60) -> tuple[dict, str]:
    """Run ``scenario`` (elisp, after the helpers of ``adversarial.el``) in Emacs with the
    README's snippet, in a git project holding ``files`` (``emacs_session.run_emacs``)."""
    return run_emacs(EMACS, DRIVER, readme_snippet(), tmp_path, scenario, files, budget=budget)


def server_errors(got: dict) -> list[str]:
    """Error answers, and the server's stderr lines, minus the pipe's own noise."""
    found = []
    for entry in got["server-errors"]:
        if entry.startswith("stderr: "):  # the stderr buffer's whole text
            lines = entry[len("stderr: "):].splitlines()
        elif entry.startswith("[stderr]"):  # the events buffer's copy: its first line
            lines = [entry.splitlines()[0][len("[stderr]"):]]
        else:  # an error answer and what follows it
            lines = [entry]
        lines = [ln for ln in lines if not STDERR_NOISE.fullmatch(ln.strip())]
        if lines:
            found.append("\n".join(lines))
    return found


def assert_clean(got: dict, context: str) -> None:
    """No error answer, no stderr output from the server, no error in *Messages*."""
    assert server_errors(got) == [], "the server answered with an error or wrote to stderr" + context
    bad = [line for line in got["messages"].splitlines()
           if re.search(r"error|Error|exited|died|Traceback", line) and not NOISE.match(line)]
    assert bad == [], f"*Messages* shows errors: {bad}" + context


# --- completion-at-point on hard lines -------------------------------------------------------------



def test_completion_at_point_on_non_ascii_tab_and_long_lines(tmp_path):
    """C-M-i then a pick from *Completions*, at the end of a line and inside a word, after CJK,
    astral-plane emoji (eglot counts UTF-16 units: eglot 1.9 negotiates no position encoding),
    a ZWJ sequence, combining marks, a tab; and at the end of a 270,000-character line: the line
    becomes exactly the text with the identifier replaced by the pick, and the server stays in
    sync."""
    cases = "\n".join(
        f'(laya-case "{label}" {json.dumps(before, ensure_ascii=False)} '
        f'{json.dumps(after, ensure_ascii=False)} "{pick}")'
        for label, before, after, pick in LINES)
    scenario = r'''
(defun laya-case (label before after pick)
  (goto-char (point-max))
  (insert "\n" before)
  (save-excursion (insert after))
  (laya-in-sync (intern (concat label "-sync")))
  (laya-result (intern (concat label "-picked")) (laya-choose pick))
  (laya-result (intern (concat label "-line")) (laya-line)))
(laya-open "reader.py")
''' + cases + r'''
(laya-open "long.py")
(goto-char (point-min)) (forward-line 1) (end-of-line)
(laya-in-sync 'long-sync)
(laya-result 'long-picked (laya-choose "loads"))
(laya-result 'long-tail (let ((l (laya-line))) (substring l (- (length l) 30))))
(laya-result 'long-length (length (laya-line)))
'''
    long_line = "data = [" + ", ".join(str(i) for i in range(40_000)) + "]; x = json.lo"
    got, context = emacs(tmp_path, scenario, {"reader.py": PY, "long.py": f"import json\n{long_line}\n"})
    for label, before, after, _ in LINES:
        assert got[f"{label}-sync"] == "in-sync", label + context
        picked = got[f"{label}-picked"]
        assert picked, f"{label}: nothing to pick" + context
        assert got[f"{label}-line"] == expected_line(before, after, picked), label + context
    assert got["long-sync"] == "in-sync", context
    picked = got["long-picked"]
    assert picked and picked.startswith("lo"), context
    assert got["long-tail"] == (long_line[:-2] + picked)[-30:], context
    assert got["long-length"] == len(long_line) - 2 + len(picked), context
    assert_clean(got, context)


def test_completion_at_the_start_of_a_word_does_not_duplicate_it(tmp_path):
    """``z = |os`` + C-M-i (a user completing the symbol under point; eglot offers the
    candidates that go with the symbol ``os``): whatever Emacs completes to replaces the symbol,
    as Emacs's completion UI shows it, and the word is never repeated (``z = osos``; ``z =
    |pa(1)`` gave ``z = pathpa(1)``, ``|da(1)`` ``datada(1)``)."""
    scenario = r'''
(laya-open "reader.py")
(dolist (word '("os" "pa" "da"))
  (goto-char (point-max))
  (insert "\nz = ")
  (save-excursion (insert word "(1)"))
  (laya-result (intern (concat word "-picked")) (laya-choose nil))
  (laya-result (intern (concat word "-line")) (laya-line)))
'''
    got, context = emacs(tmp_path, scenario, {"reader.py": PY})
    wrong = []
    for word in ("os", "pa", "da"):
        picked, line = got[f"{word}-picked"], got[f"{word}-line"]
        # nothing offered (a server that answers empty there) leaves the line as it was
        if line != f"z = {word if picked is None else picked}(1)":
            wrong.append(f"`z = |{word}(1)` + {picked!r} -> {line!r}")
    if wrong:
        raise Mangled("; ".join(wrong) + context)
    assert_clean(got, context)


@pytest.mark.parametrize("name, content", [
    ("literal_cr.py", b'import json\nsep = "\r"\nvalue = json.lo\nprint(value)\n'),
    # mixed line ends (Emacs decodes the file as unix): the CR of "\r\r\n" is text in Emacs
    ("mixed_eol.py", b'import json\r\r\nimport os\nvalue = json.lo\nprint(value)\n'),
], ids=["cr-in-a-string", "cr-cr-lf-in-a-unix-file"])
def test_a_lone_carriage_return_does_not_misplace_completions(tmp_path, name, content):
    """A Python file with a CR that is not part of a CRLF (a literal CR in a string; a stray
    ``\\r\\r\\n`` in a file with LF line ends, which Emacs shows as ``^M``): C-M-i at the end of
    ``value = json.lo`` changes that line, and only that line. Eglot counts lines at ``\\n`` only
    (``eglot--pos-to-lsp-position`` uses ``line-number-at-pos``); the README's snippet says so to
    the server (``:lineBreaks "lf"``), which counted a lone CR as a line break before (LSP's way),
    so every position below it named another line and the item landed inside another word."""
    scenario = r'''
(laya-open "NAME")
(goto-char (point-min))
(search-forward "json.lo\n") (backward-char 1)
(laya-in-sync 'sync)
(laya-result 'picked (laya-choose nil))
(laya-result 'line (laya-line))
(laya-result 'text (laya-text))
'''.replace("NAME", name)
    got, context = emacs(tmp_path, scenario, {name: content})
    picked = got["picked"]
    text = content.decode()
    if got["sync"] != "in-sync" or got["text"] != text.replace("json.lo\n", f"json.{picked}\n"):
        raise Mangled(f"picked {picked!r}; the line is now {got['line']!r}" + context)
    assert_clean(got, context)


def test_typing_after_a_carriage_return_at_a_line_end_keeps_the_text(tmp_path):
    """``import json^M^M`` (``\\r\\r\\n`` in a file Emacs reads as Unix): typing at the end of the
    line puts the text after both CRs in the buffer, and so in the server's copy (a ``\\r`` before
    a ``\\n`` is a character of its line for eglot: a position past it is not in the break), which
    then completes the identifier typed there over the same range eglot sees."""
    content = b'import json\r\r\nimport os\nvalue = json.lo\nprint(value)\n'
    scenario = r'''
(laya-open "mixed_eol.py")
(laya-result 'coding (symbol-name buffer-file-coding-system))
(goto-char (point-min)) (end-of-line)
(laya-type " ; y = json.lo")
(laya-idle 1)
(laya-in-sync 'sync)
(laya-result 'picked (laya-choose nil))
(laya-result 'text (laya-text))
'''
    got, context = emacs(tmp_path, scenario, {"mixed_eol.py": content})
    assert got["coding"].endswith("-unix"), context
    picked = got["picked"]
    if got["sync"] != "in-sync" or got["text"] != content.decode().replace(
            "json\r\r\n", f"json\r\r ; y = json.{picked}\n", 1):
        raise Mangled(f"{got['sync']}; picked {picked!r}" + context)
    assert_clean(got, context)


def test_crlf_file_completes_and_is_saved_with_crlf(tmp_path):
    """A DOS file (``buffer-file-coding-system`` ``...-dos``: the buffer holds LF, eglot sends
    LF): completing at the end of a line and inside a word gives the exact text, and saving
    writes it back with CRLF on every line (``didSave`` then raises no error)."""
    scenario = CRLF_SCENARIO
    source = b"import json\r\nimport os\r\n\r\ndata = json.load(f)\r\n"
    got, context = emacs(tmp_path, scenario, {"dos.py": source})
    assert got["coding"].endswith("-dos"), context
    for step in ("end-sync", "mid-sync", "after-save-sync"):
        assert got[step] == "in-sync", step + context
    end, mid = got["end-picked"], got["mid-picked"]
    assert end and mid, context
    assert got["end-line"] == f"x = json.{end}", context
    assert got["mid-line"] == f"y = os.{mid}.join('a')", context
    disk = (tmp_path / "project" / "dos.py").read_bytes()
    # python-mode's require-final-newline adds the last line's end, also as CRLF
    assert disk == source + f"x = json.{end}\r\ny = os.{mid}.join('a')\r\n".encode(), context
    assert_clean(got, context)


# --- keeping the server's copy of the document right -----------------------------------------------

def test_undo_revert_and_fast_typing_keep_the_server_in_sync(tmp_path):
    """Accept a completion then undo it (the line is back as typed); change the file on disk
    and ``revert-buffer``; type a line key by key (``self-insert-command``) and complete at
    once: after each, the server's document is the buffer's, and the accepted completion
    replaces exactly the identifier typed."""
    scenario = r'''
(laya-open "reader.py")
(goto-char (point-max))
(insert "x = json.lo")
(undo-boundary)
(laya-result 'picked (laya-choose "loads"))
(laya-result 'after-pick (laya-line))
(undo-boundary)
(let ((last-command nil)) (undo))
(laya-result 'after-undo (laya-line))
(end-of-line)
(laya-in-sync 'undo-sync)
(save-buffer)
(with-temp-file "reader.py"
  (insert "# a header added outside Emacs\n# and another line\nimport json\nimport os\nvalue = os.pa\n"))
(revert-buffer t t)
(goto-char (point-max)) (forward-line -1) (end-of-line)
(laya-in-sync 'revert-sync)
(laya-result 'revert-picked (laya-choose nil))
(laya-result 'revert-line (laya-line))
(end-of-line)
(newline)
(laya-type "result = json.du")
(laya-in-sync 'typed-sync)
(laya-result 'typed-picked (laya-choose nil))
(laya-result 'typed-line (laya-line))
(laya-result 'text (laya-text))
'''
    got, context = emacs(tmp_path, scenario, {"reader.py": PY})
    assert got["after-pick"] == f"x = json.{got['picked']}", context
    assert got["after-undo"] == "x = json.lo", context
    for step in ("undo-sync", "revert-sync", "typed-sync"):
        assert got[step] == "in-sync", step + context
    assert got["revert-picked"] and got["typed-picked"], context
    assert got["revert-line"] == f"value = os.{got['revert-picked']}", context
    assert got["typed-line"] == f"result = json.{got['typed-picked']}", context
    assert got["text"] == ("# a header added outside Emacs\n# and another line\nimport json\n"
                           f"import os\nvalue = os.{got['revert-picked']}\n"
                           f"result = json.{got['typed-picked']}\n"), context
    assert_clean(got, context)


def test_two_buffers_a_killed_buffer_reconnect_shutdown_and_save(tmp_path):
    """Two buffers on one server with interleaved edits; a buffer killed while its completion
    request is in flight (the answer still comes, an empty list, and the other buffer is
    unaffected); the file reopened; ``eglot-reconnect``; ``eglot-shutdown`` then
    ``eglot-ensure`` again; ``save-buffer`` (didSave): the server stays in sync throughout and
    never answers with an error."""
    scenario = r'''
(defvar ba (laya-open "a.py"))
(defvar bb (laya-open "b.py"))
(laya-result 'same-server (eq (with-current-buffer ba (eglot-current-server))
                              (with-current-buffer bb (eglot-current-server))))
(with-current-buffer ba (goto-char (point-max)) (insert "alpha_value = 1\nx = json.lo"))
(with-current-buffer bb (goto-char (point-max)) (insert "y = os.pa"))
(with-current-buffer ba
  (laya-in-sync 'a-sync)
  (laya-result 'a-picked (laya-choose "loads"))
  (laya-result 'a-line (laya-line)))
(with-current-buffer bb
  (laya-in-sync 'b-sync)
  (laya-result 'b-picked (laya-choose "path"))
  (laya-result 'b-line (laya-line)))
(with-current-buffer bb
  (insert "\nz = json.du")
  (eglot--signal-textDocument/didChange)
  (let ((server (eglot-current-server)) (got nil))
    (jsonrpc-async-request server :textDocument/completion (eglot--CompletionParams)
                           :success-fn (lambda (r) (setq got (list "answer" (length (plist-get r :items)))))
                           :error-fn (lambda (e) (setq got (list "error" (format "%S" e)))))
    (set-buffer-modified-p nil)
    (kill-buffer bb)
    (laya-wait (lambda () got) 20)
    (laya-result 'killed-answer got)))
(with-current-buffer ba (end-of-line) (insert "\nw = json.du") (laya-in-sync 'a-after-kill-sync))
(laya-open "b.py")
(goto-char (point-max)) (insert "\nq = os.pa")
(laya-in-sync 'reopened-sync)
(let ((s (eglot-current-server)))
  (let ((inhibit-message t)) (eglot-reconnect s))
  (laya-result 'reconnected (and (laya-wait (lambda () (and (eglot-current-server)
                                                           (not (eq s (eglot-current-server))))) 60)
                                 t)))
(laya-in-sync 'reconnected-sync)
(with-current-buffer ba (laya-in-sync 'a-reconnected-sync))
(let ((inhibit-message t)) (eglot-shutdown (eglot-current-server)))
(laya-result 'managed-after-shutdown (and eglot--managed-mode t))
(laya-open "b.py")
(laya-in-sync 'restarted-sync)
(save-buffer)
(laya-idle 1)
(insert "x")
(laya-in-sync 'saved-sync)
(laya-result 'alive (and (jsonrpc-running-p (eglot-current-server)) t))
'''
    got, context = emacs(tmp_path, scenario, {"a.py": PY, "b.py": PY}, budget=90)
    assert got["same-server"] is True, context
    assert got["a-line"] == f"x = json.{got['a-picked']}", context
    assert got["b-line"] == f"y = os.{got['b-picked']}", context
    answer = got["killed-answer"]
    assert answer and answer[0] == "answer", f"the killed buffer's request: {answer}" + context
    assert got["reconnected"] is True and got["managed-after-shutdown"] is None, context
    for step in ("a-sync", "b-sync", "a-after-kill-sync", "reopened-sync", "reconnected-sync",
                 "a-reconnected-sync", "restarted-sync", "saved-sync"):
        assert got[step] == "in-sync", step + context
    assert got["alive"] is True, context
    assert_clean(got, context)


# --- settings and other major modes ------------------------------------------------------------------

def test_workspace_configuration_with_wrong_types(tmp_path):
    """``eglot-workspace-configuration`` as users get it wrong (strings for numbers, a string or
    a vector for the section, an alist, a float, a huge number, an unknown option), each sent
    with ``eglot-signal-didChangeConfiguration``: the server names each problem once in
    ``window/showMessage`` (eglot echoes it), keeps the values it had, and completes on with the
    number of items the last valid ``maxItems`` asks for."""
    scenario = r'''
(defun laya-count () (length (nth 3 (laya-candidates))))
(defun laya-signal (label conf &optional secs)
  (setq-default eglot-workspace-configuration conf)
  (setq laya-shown nil laya-logs nil)
  (eglot-signal-didChangeConfiguration (eglot-current-server))
  (laya-wait (lambda () (seq-find (lambda (m) (string-match-p "settings asked for\\|problems in" m))
                                  (append laya-logs laya-shown))) (or secs 10))
  (laya-result label (list (vconcat laya-shown) (laya-count))))
(laya-open "reader.py")
(goto-char (point-max)) (insert "x = json.lo")
(laya-result 'start (list [] (laya-count)))
(laya-signal 'wrong-types '(:laya (:maxItems "ten" :debounceMs -5 :enableInline "yes" :logLevel 3)))
(laya-signal 'three '(:laya (:maxItems 3)))
(laya-signal 'string-section '(:laya "nonsense"))
(laya-signal 'vector-section '(:laya [1 2 3]))
(laya-signal 'alist '((laya . ((maxItems . 5)))))
(laya-signal 'float '(:laya (:maxItems 4.5)))
(laya-signal 'huge '(:laya (:maxItems 1e9)))
(laya-signal 'unknown '(:laya (:bogusOption t :maxItems 6)))
(laya-signal 'nothing nil 2)  ; nothing to log: wait 2 s for a stray warning
(laya-in-sync 'sync)
'''
    got, context = emacs(tmp_path, scenario, {"reader.py": PY})
    expect = {  # step: (words each warning must contain, items afterwards)
        "start": ([], 20),
        "wrong-types": (["maxItems", "'ten'", "debounceMs", "-5", "enableInline", "'yes'",
                         "logLevel"], 20),
        "three": ([], 3),
        "string-section": (["must be an object"], 3),
        "vector-section": (["must be an object"], 3),
        "alist": ([], 5),
        "float": (["4.5"], 5),
        "huge": (["1000000000"], 5),
        "unknown": (["bogusOption"], 6),
        "nothing": ([], 6),  # settings {}: the server asks with workspace/configuration, gets null
    }
    for step, (words, items) in expect.items():
        shown, count = got[step]
        assert count == items, f"{step}: {count} items, expected {items}" + context
        if words:
            assert len(shown) == 1, f"{step}: expected one warning, got {shown}" + context
            assert all(w in shown[0] for w in words), f"{step}: {shown}" + context
        else:
            assert shown == [], f"{step}: {shown}" + context
    assert got["sync"] == "in-sync", context
    assert server_errors(got) == [], context


def test_text_js_c_and_fundamental_modes_through_one_entry(tmp_path):
    """A user extends the README's snippet to the other major modes Emacs 28 has built in
    (``text-mode``, ``js-mode``, ``c-mode``, ``fundamental-mode`` for a file with no extension):
    one server manages them all (eglot 1.9 sends one ``languageId`` for every buffer of a
    server), and C-M-i completes in each, leaving exactly the picked word in place."""
    scenario = r'''
(with-eval-after-load 'eglot
  (add-to-list 'eglot-server-programs
               '((text-mode js-mode c-mode fundamental-mode) . ("laya-lsp"))))
(defun laya-mode-case (label file where typed)
  (laya-open file)
  (laya-result (intern (concat label "-mode")) (symbol-name major-mode))
  (goto-char (point-min))
  (if where (progn (forward-line where) (insert typed "\n") (backward-char 1))
    (goto-char (point-max)) (insert typed))
  (laya-in-sync (intern (concat label "-sync")))
  (laya-result (intern (concat label "-picked")) (laya-choose nil))
  (laya-result (intern (concat label "-line")) (laya-line)))
(laya-mode-case "text" "notes.txt" nil "The quick brown fox ju")
(laya-mode-case "js" "app.js" nil "const data = fs.readF")
(laya-mode-case "c" "main.c" 3 "  pri")
(laya-mode-case "fundamental" "NOTES" nil "some wor")
(laya-result 'servers (length laya-servers))
'''
    files = {
        "notes.txt": "The quick brown fox jumps over the lazy dog. A quick brown fox again.\n",
        "app.js": ('const fs = require("fs");\nfunction readAll(path) {\n'
                   '  return fs.readFileSync(path, "utf8");\n}\n'),
        "main.c": '#include <stdio.h>\nint main(void) {\n  printf("hi");\n  return 0;\n}\n',
        "NOTES": "some words here, some words there\n",
    }
    got, context = emacs(tmp_path, scenario, files)
    cases = {"text": ("text-mode", "The quick brown fox ju"), "js": ("js-mode", "const data = fs.readF"),
             "c": ("c-mode", "  pri"), "fundamental": ("fundamental-mode", "some wor")}
    for label, (mode, typed) in cases.items():
        assert got[f"{label}-mode"] == mode, label + context
        assert got[f"{label}-sync"] == "in-sync", label + context
        picked = got[f"{label}-picked"]
        assert picked, f"{label}: nothing completed" + context
        assert got[f"{label}-line"] == expected_line(typed, "", picked), label + context
    assert got["servers"] == 1, context
    assert_clean(got, context)
