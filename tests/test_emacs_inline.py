"""Ghost text (``textDocument/inlineCompletion``) in Emacs 28, through eglot 1.9 and lsp-mode 8,
with ``editors/emacs/laya-inline.el`` set up as ``editors/README.md`` says.

Neither client has inline completion of its own; ``laya-inline-mode`` asks for it after each
command that edits the buffer or moves point and shows what the server's item adds after point as
an overlay's ``after-string``; TAB, while it is shown, puts it in the buffer. Each test runs Emacs
in batch mode with the client's README snippet followed by the README's ``laya-inline`` snippet
(taken from the README, its path pointed at this checkout), ``laya-lsp`` on ``PATH``, and a
scenario that ``tests/emacs/adversarial.el`` (eglot) or ``tests/emacs/lsp_mode_driver.el``
(lsp-mode) evaluates after the helpers of ``tests/emacs/inline.el``: batch Emacs has no command
loop, so a key is the command it is bound to at point, run between ``pre-command-hook`` and
``post-command-hook``, and the scenario waits (``accept-process-output``) until every request the
mode sent is answered. It records what is shown (every ``after-string`` in the buffer) and the
buffer's line after each step; the tests check them exactly.

The lines of ``reader.py`` below (``self.records = ...``, ``print(self.records[0], scale)``,
``label = '中文😀' + ...``, ``show('中文😀', ...)``) are the ones the server offers again: typing 3+
characters of a line that starts as an earlier line does gets the rest of that line. Each Emacs
session takes 3-6 s. Skipped, saying why, without Emacs, eglot or lsp-mode.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import test_emacs_lsp_mode as lsp_mode
from emacs_session import run_emacs
from test_emacs_eglot import EMACS, README, REASON as EGLOT_REASON, readme_snippet as eglot_snippet

ROOT = Path(__file__).resolve().parents[1]
HELPERS = Path(__file__).parent / "emacs" / "inline.el"
EGLOT_DRIVER = Path(__file__).parent / "emacs" / "adversarial.el"

PROJECT_FILE = '''import json


class Reader:
    def __init__(self, scale):
        self.scale = scale
        self.records = json.loads(open(scale).read())
        print(self.records[0], scale)
        label = '中文😀' + self.records[0]
        show('中文😀', self.records[0])

    def check(self, other):
        return other
'''
FULL = "        self.records = json.loads(open(scale).read())"
START = "        self.rec"
CJK_FULL = "        label = '中文😀' + self.records[0]"
CJK_START = "        label = '中文😀' + self.rec"
SHOW_FULL = "        show('中文😀', self.records[0])"
SHOW_START, SHOW_AFTER = "        show('中文😀', self.rec", ")"
PRINT_START, PRINT_AFTER = "        print(self.rec", ")"
PRINT_FULL = "        print(self.records[0], scale)"

needs_eglot = pytest.mark.skipif(EGLOT_REASON is not None, reason=EGLOT_REASON or "")
needs_lsp_mode = pytest.mark.skipif(lsp_mode.REASON is not None, reason=lsp_mode.REASON or "")


def inline_snippet() -> str:
    """The ```elisp block of the README's ``## Emacs ghost text`` section, its placeholder path
    pointed at this checkout's ``editors/emacs``."""
    section = re.search(r"^## Emacs ghost text\b.*?$(.*?)(?=^## )", README.read_text(encoding="utf-8"),
                        re.M | re.S)
    assert section, f"{README} has no '## Emacs ghost text' section"
    blocks = re.findall(r"^```elisp\n(.*?)^```", section.group(1), re.M | re.S)
    assert blocks, "no ```elisp block in the README's ghost text section"
    assert "/path/to/laya/editors/emacs" in blocks[0], blocks[0]
    return blocks[0].replace("/path/to/laya/editors/emacs", str(ROOT / "editors" / "emacs"))


def emacs(client: str, tmp_path: Path, scenario: str, *, budget: int = 40) -> tuple[dict, str]:
    """Run ``scenario`` (after ``inline.el``) with ``client``'s README snippet and the ghost text
    snippet, in a git project holding ``reader.py`` (``emacs_session.run_emacs``)."""
    scenario = f"(load {json.dumps(str(HELPERS))} nil t)\n" + scenario
    if client == "eglot":
        return run_emacs(EMACS, EGLOT_DRIVER, eglot_snippet() + "\n" + inline_snippet(), tmp_path,
                         scenario, {"reader.py": PROJECT_FILE}, budget=budget)
    return run_emacs(EMACS, lsp_mode.DRIVER, lsp_mode.readme_snippet() + "\n" + inline_snippet(),
                     tmp_path, scenario, {"reader.py": PROJECT_FILE}, budget=budget,
                     env={"LAYA_EMACS_SESSION": str(tmp_path / "lsp-session")})


TYPING = r"""
(laya-open "reader.py")
(laya-result 'mode laya-inline-mode)
(defun laya-fresh-line ()
  "A new empty last line, point on it (no indentation: the scenario types it)."
  (interactive)
  (goto-char (point-max))
  (unless (bolp) (insert "\n")))
(laya-command #'laya-fresh-line)
;; the start of an earlier line: the rest of it, after point
(laya-result 'ghost (laya-type-ghost "START"))
(laya-result 'ghosts (laya-ghosts))
(let ((s (overlay-get (car (laya-ghost-overlays)) 'after-string)))
  (laya-result 'ghost-face (and s (symbol-name (get-text-property 0 'face s))))
  (laya-result 'ghost-cursor (and s (get-text-property 0 'cursor s) t)))
(laya-result 'tab (symbol-name (laya-command nil "TAB")))
(laya-result 'accepted (laya-line))
(laya-result 'accepted-column (- (point) (line-beginning-position)))
(laya-result 'accepted-eol (eolp))
(laya-settle)
;; typing something else: the ghost goes; deleting it again: the ghost is back
(laya-command #'laya-fresh-line)
(laya-result 'again (laya-type-ghost "START"))
(laya-type "k")
(laya-result 'other-at-once (laya-ghosts))   ; before any answer
(laya-settle)
(laya-result 'other (laya-ghosts))            ; the answer for the new text, if any
(laya-command #'delete-backward-char)
(laya-settle)
(laya-result 'back (laya-ghost))
;; a word put right after point (point stays): no ghost, and TAB neither accepts nor doubles it
(laya-command (lambda () (interactive) (save-excursion (insert "ords"))))
(laya-settle)
(laya-result 'word-after (laya-ghosts))
(laya-result 'word-tab (symbol-name (laya-command nil "TAB")))
(laya-result 'word-line (laya-line))
;; text after point that the line ends with: the ghost goes before it, accepting keeps it once
(laya-command #'laya-fresh-line)
(laya-type "PRINT_START")
(laya-command (lambda () (interactive) (save-excursion (insert "PRINT_AFTER"))))
(laya-settle)
(laya-result 'print-ghost (laya-ghost))
(laya-command nil "TAB")
(laya-result 'print-line (laya-line))
(laya-result 'print-column (- (point) (line-beginning-position)))
;; CJK and an emoji before point (UTF-16 for eglot, code points for lsp-mode), at the end of
;; the line and with text after point (where a position counted in other units lands elsewhere)
(laya-command #'laya-fresh-line)
(laya-result 'cjk-ghost (laya-type-ghost "CJK_START"))
(laya-command nil "TAB")
(laya-result 'cjk-line (laya-line))
(laya-result 'cjk-column (- (point) (line-beginning-position)))
(laya-command #'laya-fresh-line)
(laya-type "SHOW_START")
(laya-command (lambda () (interactive) (save-excursion (insert "SHOW_AFTER"))))
(laya-settle)
(laya-result 'show-ghost (laya-ghost))
(laya-command nil "TAB")
(laya-result 'show-line (laya-line))
(laya-result 'show-column (- (point) (line-beginning-position)))
;; no ghost: TAB indents, as it did before
(laya-command #'laya-fresh-line)
(laya-result 'plain-ghost (laya-type-ghost "zzz"))
(laya-result 'plain-binding (symbol-name (key-binding (kbd "TAB") t)))
(laya-command nil "TAB")
(laya-result 'plain-line (laya-line))
(laya-settle)
(laya-result 'counts (list laya-requests laya-answers))
"""
for _name, _value in [("PRINT_START", PRINT_START), ("PRINT_AFTER", PRINT_AFTER),
                      ("SHOW_START", SHOW_START), ("SHOW_AFTER", SHOW_AFTER),
                      ("CJK_START", CJK_START), ("START", START)]:
    TYPING = TYPING.replace(f'"{_name}"', json.dumps(_value, ensure_ascii=False))


def check_typing(got: dict, context: str) -> None:
    rest = FULL[len(START):]
    assert got["mode"] is True, "the README's add-hook did not turn laya-inline-mode on" + context
    assert got["ghost"] == rest, context
    assert [text for _, text in got["ghosts"]] == [rest], "more than the one ghost" + context
    assert (got["ghost-face"], got["ghost-cursor"]) == ("laya-inline-face", True), context
    assert got["tab"] == "laya-inline-accept", "TAB is not bound to accept while the ghost shows" + context
    assert got["accepted"] == FULL, context
    assert got["accepted-column"] == len(FULL) and got["accepted-eol"] is True, context
    assert got["again"] == rest, context
    assert got["other-at-once"] == [], "a stale ghost stayed after typing" + context
    assert all(text != rest for _, text in got["other"]), "a stale ghost came back" + context
    assert got["back"] == rest, context
    assert got["word-after"] == [], context
    assert got["word-tab"] == "indent-for-tab-command", context
    assert got["word-line"] == START + "ords", "a word after point was doubled or changed" + context
    assert got["print-ghost"] == PRINT_FULL[len(PRINT_START):-len(PRINT_AFTER)], context
    assert got["print-line"] == PRINT_FULL, context
    assert got["print-column"] == len(PRINT_FULL) - len(PRINT_AFTER), "point not at the item's end" + context
    assert got["cjk-ghost"] == CJK_FULL[len(CJK_START):], context
    assert got["cjk-line"] == CJK_FULL, context
    assert got["cjk-column"] == len(CJK_FULL), context
    assert got["show-ghost"] == SHOW_FULL[len(SHOW_START):-len(SHOW_AFTER)], context
    assert got["show-line"] == SHOW_FULL, context
    assert got["show-column"] == len(SHOW_FULL) - len(SHOW_AFTER), context
    assert got["plain-ghost"] is None, context
    assert got["plain-binding"] == "indent-for-tab-command", "TAB lost its meaning" + context
    assert got["plain-line"] == "        zzz", "TAB did not indent" + context
    requests, answers = got["counts"]
    assert requests > 0 and requests == answers, "a request got no answer" + context


@needs_eglot
def test_eglot_ghost_text_while_typing(tmp_path):
    """eglot: typing the start of an earlier line shows exactly the rest of it after point;
    TAB makes the line exactly that line, point at its end; typing something else removes the
    ghost; a word put right after point gets no ghost and TAB leaves it once; a closing paren after
    point stays once; CJK and an emoji before point (UTF-16 positions) accept to the exact text;
    without a ghost TAB indents as before."""
    got, context = emacs("eglot", tmp_path, TYPING)
    check_typing(got, context)


COMPANY = r"""
;; company's popup open as well (lsp-mode turns company on): TAB takes the ghost, RET is the
;; popup's
(laya-command #'laya-fresh-line)
(laya-result 'company-ghost (laya-type-ghost "START"))
(laya-idle-until (lambda () company-candidates))
(laya-result 'company-popup (and company-candidates t))
(laya-result 'company-ghost-after-popup (laya-ghost))
(laya-result 'company-ret (symbol-name (key-binding (kbd "RET") t)))
(laya-command nil "TAB")
(laya-result 'company-line (laya-line))
""".replace('"START"', json.dumps(START))


@needs_lsp_mode
def test_lsp_mode_ghost_text_while_typing(tmp_path):
    """lsp-mode (laya an add-on client): the same steps as for eglot, positions in code points as
    lsp-mode 8 counts them; and with company's popup open too, TAB takes the ghost (RET stays
    company's)."""
    got, context = emacs("lsp-mode", tmp_path, TYPING + COMPANY)
    check_typing(got, context)
    rest = FULL[len(START):]
    assert got["company-ghost"] == rest and got["company-popup"] is True, context
    assert got["company-ghost-after-popup"] == rest, context
    assert got["company-ret"] == "company-complete-selection", "RET is not the popup's" + context
    assert got["company-line"] == FULL, context
    lsp_mode.assert_clean(got, context)


TWO_SERVERS = r"""
(lsp-register-client                   ; a second add-on server that offers inline completion too
 (make-lsp-client :new-connection (lsp-stdio-connection '("laya-lsp"))
                  :activation-fn (lsp-activate-on "python") :priority -3 :add-on? t
                  :server-id 'twin))
(defvar laya-targets nil "The server ids each inline completion request went to.")
(advice-add 'lsp--send-request-async :before
            (lambda (body &rest _)
              (when (equal (plist-get body :method) "textDocument/inlineCompletion")
                (push (vconcat (mapcar (lambda (w) (symbol-name (lsp--client-server-id (lsp--workspace-client w))))
                                       (lsp--find-workspaces-for body)))
                      laya-targets))))
(laya-open "reader.py")
(laya-wait (lambda () (and (= 2 (length (lsp-workspaces)))
                           (cl-every (lambda (w) (eq (lsp--workspace-status w) 'initialized)) (lsp-workspaces))))
           30)
(laya-result 'servers (vconcat (sort (mapcar (lambda (w) (symbol-name (lsp--client-server-id (lsp--workspace-client w))))
                                             (lsp-workspaces))
                                     #'string<)))
(goto-char (point-max))
(laya-result 'ghost (laya-type-ghost "START"))
(laya-command nil "TAB")
(laya-result 'line (laya-line))
(laya-result 'targets (vconcat (delete-dups (reverse laya-targets))))
""".replace('"START"', json.dumps(START))


@needs_lsp_mode
def test_lsp_mode_asks_the_laya_workspace_only(tmp_path):
    """With a second add-on server that also offers inline completion, every request goes to the
    ``laya`` workspace only (``laya-inline-lsp-server-id``), and its answer is the one shown."""
    got, context = emacs("lsp-mode", tmp_path, TWO_SERVERS)
    assert got["servers"] == ["laya", "twin"], context
    assert got["targets"] == [["laya"]], "a request went to another server" + context
    assert got["ghost"] == FULL[len(START):], context
    assert got["line"] == FULL, context
    quiet = r"stderr: \s*(Process \S+ stderr finished\s*)?"  # the pipe closing, no server output
    assert all(re.fullmatch(quiet, e) for e in got["server-errors"]), context


STALE = r"""
(laya-open "reader.py")
(goto-char (point-max))
;; an answer to a request whose buffer changed before it came: dropped
(insert "START")
(run-hooks 'post-command-hook)
(save-excursion (insert "x"))           ; a change, point unmoved, before the answer
(laya-result 'raced-settled (laya-settle))
(laya-result 'raced-edit (laya-ghosts))
(laya-command (lambda () (interactive) (delete-char 1)))
(laya-settle)
(laya-result 'raced-back (laya-ghost))
;; an answer that comes after the buffer left the window: dropped
(laya-command #'backward-char)
(laya-command #'forward-char)
(switch-to-buffer (get-buffer-create "other"))  ; before the answer
(laya-settle)
(laya-result 'raced-switch (with-current-buffer "reader.py" (laya-ghosts)))
(switch-to-buffer "reader.py")
;; a change that no command makes (a timer's, a process's: a formatter, auto-revert): the ghost
;; goes at once, and TAB with it
(laya-command #'backward-char)
(laya-command #'forward-char)
(laya-settle)
(laya-result 'before-change (laya-ghost))
(save-excursion (goto-char (point-min)) (insert "# x\n"))
(laya-result 'changed (laya-ghosts))
(laya-result 'changed-binding (symbol-name (key-binding (kbd "TAB") t)))
(save-excursion (goto-char (point-min)) (delete-region (point) (+ (point) 4)))
;; leaving the buffer with a command clears the ghost
(laya-command #'backward-char)
(laya-command #'forward-char)
(laya-settle)
(laya-result 'before-leaving (laya-ghost))
(laya-command (lambda () (interactive) (switch-to-buffer "other")))
(laya-result 'left (with-current-buffer "reader.py" (laya-ghosts)))
(laya-command (lambda () (interactive) (switch-to-buffer "reader.py")))
;; C-g (neither edits nor moves): hidden until the next move
(laya-command #'backward-char)
(laya-command #'forward-char)
(laya-settle)
(laya-result 'before-quit (laya-ghost))
(laya-command #'ignore)
(laya-settle)
(laya-result 'after-quit (laya-ghosts))
;; turning the mode off clears the ghost and gives TAB back
(laya-command #'backward-char)
(laya-command #'forward-char)
(laya-settle)
(laya-result 'before-off (laya-ghost))
(laya-inline-mode -1)
(laya-result 'off (laya-ghosts))
(laya-result 'off-binding (symbol-name (key-binding (kbd "TAB") t)))
(let ((n laya-requests))
  (laya-type "o")
  (laya-settle)
  (laya-result 'off-requests (- laya-requests n)))
(laya-command #'delete-backward-char)
;; an idle delay: asked when Emacs is idle
(laya-inline-mode 1)
(setq-local laya-inline-delay 0.05)
(let ((n laya-requests))
  (laya-command #'backward-char)
  (laya-command #'forward-char)
  (laya-result 'delayed-at-once (- laya-requests n)))
(laya-idle 0.3)
(laya-settle)
(laya-result 'delayed (laya-ghost))
;; M-x laya-inline-accept: M-x hides the ghost (C-g too, before it); the command still takes it
(laya-command #'ignore)
(laya-result 'mx-hidden (laya-ghosts))
(laya-command (lambda () (interactive) (call-interactively #'laya-inline-accept)))
(laya-result 'mx-line (laya-line))
(laya-result 'text (laya-text))
"""
STALE = STALE.replace('"START"', json.dumps(START))


@needs_eglot
def test_eglot_stale_answers_leaving_and_turning_off(tmp_path):
    """An answer that comes after the buffer changed (point unmoved), or after the buffer left
    the window, shows nothing; a change no command made, a command that leaves the buffer, C-g
    and turning the mode off clear the ghost, and with the mode off TAB is TAB again and nothing
    is asked; with ``laya-inline-delay`` the request waits for idle time; ``M-x
    laya-inline-accept`` takes the ghost that M-x itself hid. The buffer is never changed but by
    the scenario's own edits and that accept."""
    got, context = emacs("eglot", tmp_path, STALE)
    rest = FULL[len(START):]
    assert got["raced-settled"] is True, context
    assert got["raced-edit"] == [], "an answer for an older text was shown" + context
    assert got["raced-back"] == rest, context
    assert got["raced-switch"] == [], "an answer was shown in a buffer no longer shown" + context
    assert got["before-change"] == rest and got["changed"] == [], context
    assert got["changed-binding"] == "indent-for-tab-command", context
    assert got["before-leaving"] == rest and got["left"] == [], context
    assert got["before-quit"] == rest and got["after-quit"] == [], context
    assert got["before-off"] == rest and got["off"] == [], context
    assert got["off-binding"] == "indent-for-tab-command", context
    assert got["off-requests"] == 0, context
    assert got["delayed-at-once"] == 0 and got["delayed"] == rest, context
    assert got["mx-hidden"] == [] and got["mx-line"] == FULL, context
    assert got["text"] == PROJECT_FILE + FULL, context


FIT = r"""
(laya-open "reader.py")
;; the answers below replace the server's (through eglot's own request): a server's item that does
;; not fit the buffer as it is must not be shown, one whose range covers text after point is
(defvar laya-fake nil "A function of the request's line (0-based) giving the answer, or nil.")
(advice-add 'jsonrpc-async-request :filter-args
            (lambda (args)
              (if (not (and laya-fake (eq (nth 1 args) :textDocument/inlineCompletion))) args
                (let* ((line (plist-get (plist-get (nth 2 args) :position) :line))
                       (answer (funcall laya-fake line))
                       (keys (copy-sequence (nthcdr 3 args)))
                       (ok (plist-get keys :success-fn)))
                  (append (seq-take args 3)
                          (plist-put keys :success-fn (lambda (_r) (funcall ok answer))))))))
(defun laya-item (text l1 c1 l2 c2)
  (list :insertText text :range (list :start (list :line l1 :character c1)
                                      :end (list :line l2 :character c2))))
(defvar laya-all-settled t)
(defun laya-case (label make)
  "Ask again at point with the answer MAKE gives for the line; record the ghost."
  (setq laya-fake make)
  (laya-command #'backward-char)
  (laya-command #'forward-char)
  (setq laya-all-settled (and (laya-settle) laya-all-settled))
  (laya-result (intern label) (laya-ghosts)))
(goto-char (point-max))
(insert "        self.rec")
(save-excursion (insert ")"))
(laya-case "not-its-start" (lambda (l) (list :items (vector (laya-item "zzz = 1" l 13 l 16)))))
(laya-case "after-not-its-end" (lambda (l) (list :items (vector (laya-item "records[0]" l 13 l 17)))))
(laya-case "two-lines" (lambda (l) (list :items (vector (laya-item "records = 1" (1- l) 0 l 16)))))
(laya-case "starts-after-point" (lambda (l) (list :items (vector (laya-item "x" l 17 l 17)))))
(laya-case "no-items" (lambda (_) (list :items [])))
(laya-case "null" (lambda (_) nil))
(laya-case "snippet" (lambda (l) (list :items (vector (list :insertText '(:kind "snippet" :value "records$0")
                                                            :range (list :start (list :line l :character 13)
                                                                         :end (list :line l :character 16)))))))
(laya-case "bad-range" (lambda (l) (list :items (vector (laya-item "records" "one" 13 l 16)))))
(laya-case "no-range" (lambda (_) (vector (list :insertText "ords"))))
(laya-case "bare-list" (lambda (l) (vector (laya-item "records.keys()" l 13 l 16))))
;; the range covers the ")" after point, which the item's text ends with: the ghost goes between
(laya-case "covers-paren" (lambda (l) (list :items (vector (laya-item "records = json.loads(open(scale).read())" l 13 l 17)))))
(laya-command nil "TAB")
(laya-result 'line (laya-line))
(laya-result 'column (- (point) (line-beginning-position)))
(setq laya-fake nil)
(laya-result 'settled laya-all-settled)
(laya-result 'text (laya-text))
"""


@needs_eglot
def test_eglot_items_that_do_not_fit_the_buffer(tmp_path):
    """Answers put in place of the server's, through eglot's own request: an item whose text
    does not start with the range's text before point, whose range covers text after point that
    the item does not end with, spans two lines, starts after point, has a snippet for its text
    or a line that is not a number shows nothing, and says nothing (nor does an empty or null
    answer); a bare list of items and an item
    without a range (inserted at point) show; an item whose range covers the ``)`` after point
    and ends with it shows what goes between, and accepting leaves the line exactly its text,
    point after it."""
    got, context = emacs("eglot", tmp_path, FIT)
    assert got["settled"] is True, context
    for label in ("not-its-start", "after-not-its-end", "two-lines", "starts-after-point",
                  "no-items", "null", "snippet", "bad-range"):
        assert got[label] == [], label + context
    at = len(PROJECT_FILE) + len(START) + 1  # point, after the typed start
    assert got["no-range"] == [[at, "ords"]], context
    assert got["bare-list"] == [[at, "ords.keys()"]], context
    assert got["covers-paren"] == [[at, FULL[len(START):-1]]], context
    assert (got["line"], got["column"]) == (FULL, len(FULL)), context
    assert got["text"] == PROJECT_FILE + FULL, context
    bad = [line for line in got["messages"].splitlines()
           if re.search(r"error|Error|wrong-type|jsonrpc", line) and not line.startswith("Warning [flymake ")]
    assert bad == [], "a message in the user's face" + context


NO_SERVER = r"""
;; the README's server with enableInline off: it offers no inline completion
(dolist (e eglot-server-programs)
  (when (equal (car-safe (cdr e)) "laya-lsp")
    (setcdr e (list "laya-lsp" :initializationOptions
                    (append '(:enableInline :json-false) (plist-get (cddr e) :initializationOptions))))))
(laya-open "reader.py")
(laya-result 'offered (if (plist-member (eglot--capabilities (eglot-current-server)) :inlineCompletionProvider)
                          "offered" "not offered"))
(laya-result 'mode laya-inline-mode)
(goto-char (point-max))
(laya-result 'ghost (laya-type-ghost "START"))
(laya-result 'requests laya-requests)
;; the server shut down
(let ((inhibit-message t)) (eglot-shutdown (eglot-current-server) nil 5))
(laya-result 'managed (if (eglot-managed-p) "managed" "not managed"))
(laya-result 'ghost-after (laya-type-ghost "o"))
(laya-command #'backward-char)
(laya-result 'tab (symbol-name (laya-command nil "TAB")))
(laya-result 'requests-after laya-requests)
(laya-result 'hooked (and (memq #'laya-inline--post-command post-command-hook) t))
(laya-result 'line (laya-line))
;; a buffer no server manages
(find-file "notes.txt")
(laya-inline-mode 1)
(laya-type "self.rec")
(laya-command nil "TAB")
(laya-result 'notes (list (laya-text) (laya-ghosts) (and (memq #'laya-inline--post-command post-command-hook) t)))
""".replace('"START"', json.dumps(START))


@needs_eglot
def test_eglot_without_a_server(tmp_path):
    """With a server that offers no inline completion (``enableInline`` off), after
    ``eglot-shutdown``, and in a buffer no server manages, the mode asks nothing, shows nothing,
    says nothing (its hooks stay in place: a failing one would be removed) and TAB is TAB."""
    got, context = emacs("eglot", tmp_path, NO_SERVER)
    assert got["offered"] == "not offered" and got["mode"] is True, context
    assert got["ghost"] is None and got["requests"] == 0, context
    assert got["managed"] == "not managed", context
    assert got["ghost-after"] is None and got["requests-after"] == 0, context
    assert got["tab"] == "indent-for-tab-command", context
    assert got["hooked"] is True, context
    assert got["line"].strip() == START.strip() + "o", "the buffer changed but by TAB's indenting" + context
    text, ghosts, hooked = got["notes"]
    assert ghosts == [] and hooked is True, context
    assert text.rstrip("\t ") == "self.rec", "the buffer changed but by TAB's indenting" + context
    bad = [line for line in got["messages"].splitlines()
           if re.search(r"error|Error|laya-inline|wrong-type|args-out", line)
           and not re.match(r"^(Warning \[flymake |Loading )", line)]
    assert bad == [], context
