"""Emacs + lsp-mode, set up as ``editors/README.md`` says, used the way an lsp-mode user does.

Each test runs Emacs in batch mode with the README's lsp-mode snippet (taken from the README
itself: ``lsp-register-client`` with ``:add-on? t``), ``laya-lsp`` on ``PATH``, and a scenario in
elisp that ``tests/emacs/lsp_mode_driver.el`` evaluates: it visits files in a git project, starts
lsp-mode (``M-x lsp``), edits them, and completes with the real ``completion-at-point`` command
(``C-M-i``; a second ``C-M-i`` shows ``*Completions*`` and ``choose-completion`` picks an entry,
as RET on it does) or with company-mode, which lsp-mode turns on by itself. The scenario records
the buffer text after each step; the tests check it exactly, plus what the server answered with
an error or wrote to stderr.

"In sync" below: with point after an identifier, the server's first item replaces exactly the
identifier before point (a server whose copy of the document differs from the buffer computes
another range). Emacs 28.2 + elpa-lsp-mode 8.0.0 (Debian bookworm); skipped, saying why, without
Emacs or lsp-mode. Each Emacs run is bounded (``LAYA_EMACS_BUDGET`` and a subprocess timeout).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from emacs_session import CRLF_SCENARIO, LINES, PY, expected_line, run_emacs

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "editors" / "README.md"
DRIVER = Path(__file__).parent / "emacs" / "lsp_mode_driver.el"
EMACS = shutil.which("emacs")


def _lsp_mode_missing() -> str | None:
    if EMACS is None:
        return "Emacs not installed (Debian: apt-get install emacs-nox elpa-lsp-mode)"
    probe = subprocess.run([EMACS, "--batch", "--eval",
                            "(progn (require 'package) (package-initialize) (require 'lsp-mode))"],
                           capture_output=True, text=True, timeout=60)
    if probe.returncode != 0:
        return f"Emacs has no lsp-mode (Debian: apt-get install elpa-lsp-mode): {probe.stderr.strip()[-200:]}"
    return None


REASON = _lsp_mode_missing()
pytestmark = pytest.mark.skipif(REASON is not None, reason=REASON or "")
HAS_COMPANY = REASON is None and subprocess.run(
    [EMACS, "--batch", "--eval", "(progn (require 'package) (package-initialize) (require 'company))"],
    capture_output=True, timeout=60).returncode == 0
needs_company = pytest.mark.skipif(not HAS_COMPANY,
                                   reason="no company-mode (Debian: apt-get install elpa-company)")


def readme_snippet() -> str:
    """The ```elisp block of the README's ``## Emacs (lsp-mode)`` section."""
    section = re.search(r"^## Emacs \(lsp-mode\).*?$(.*?)(?=^## )", README.read_text(encoding="utf-8"),
                        re.M | re.S)
    assert section, f"{README} has no '## Emacs (lsp-mode)' section"
    blocks = re.findall(r"^```elisp\n(.*?)^```", section.group(1), re.M | re.S)
    assert blocks, "no ```elisp block in the README's lsp-mode section"
    return blocks[0]


def emacs(tmp_path: Path, scenario: str, files: dict[str, str | bytes], *,
          budget: int = 40) -> tuple[dict, str]:
    """Run ``scenario`` (elisp, after the helpers of ``lsp_mode_driver.el``) in Emacs with the
    README's snippet, in a git project holding ``files`` (``emacs_session.run_emacs``; lsp-mode's
    session file goes to a temporary folder)."""
    return run_emacs(EMACS, DRIVER, readme_snippet(), tmp_path, scenario, files, budget=budget,
                     env={"LAYA_EMACS_SESSION": str(tmp_path / "lsp-session")})


NOISE = re.compile(r"^(Loading |LSP :: Yasnippet is not installed)")
"""*Messages* lines that are not about Laya: file loads, and the warning lsp-mode gives about
snippets without yasnippet."""

ENDED = re.compile(r"^LSP :: laya(<\d+>)? has exited \((killed|finished)\)$")
"""lsp-mode's line for a server that ended: fine right after ``lsp-workspace-restart``,
``lsp-workspace-shutdown`` or the end of the scenario (lsp-mode kills the server just after its
``exit`` notification, for every server), an error anywhere else."""


def assert_clean(got: dict, context: str) -> None:
    """No error answer, no stderr output from the server, no error in *Messages*, no server that
    ended unasked."""
    errors = [e for e in got["server-errors"]
              if not re.fullmatch(r"stderr: \s*(Process laya(<\d+>)? stderr finished\s*)?", e)]
    assert errors == [], "the server answered with an error or wrote to stderr" + context
    bad, asked = [], False
    for line in got["messages"].splitlines():
        if re.match(r"LSP :: (Stopping|Restarting) laya|laya-test: end of the scenario", line):
            asked = True
        elif ENDED.match(line) and asked:
            asked = False
        elif re.search(r"error|Error|exited|died|Traceback|Timeout|failed", line) and not NOISE.match(line):
            bad.append(line)
    assert bad == [], f"*Messages* shows errors: {bad}" + context


@needs_company
def test_the_readme_snippet_completes_with_capf_and_company(tmp_path):
    """The README's registration, ``M-x lsp``: laya serves the buffer (lsp-mode's own Python
    clients are not installed, laya is an add-on), ``:initialization-options`` reach it (at most
    20 items), C-M-i and company (which lsp-mode turns on) each leave exactly the picked word."""
    scenario = r"""
(laya-open "reader.py")
(laya-result 'servers (mapcar (lambda (w) (symbol-name (lsp--client-server-id (lsp--workspace-client w))))
                              (lsp-workspaces)))
(laya-result 'company company-mode)
(goto-char (point-max))
(insert "x = json.lo")
(laya-in-sync 'sync)
(laya-result 'cands (nth 3 (laya-candidates)))
(laya-result 'picked (laya-choose "loads"))
(laya-result 'line (laya-line))
(insert "\ny = os.pa")
(laya-result 'company-picked (laya-company "path"))
(laya-result 'company-line (laya-line))
(insert "\nz = json.du")
(laya-result 'company-first (laya-company nil))
(laya-result 'company-first-line (laya-line))
"""
    got, context = emacs(tmp_path, scenario, {"reader.py": PY})
    assert got["servers"] == ["laya"], context
    assert got["company"] is True, context
    assert any("initialize from emacs" in m and "max_items=20" in m for m in got["logs"]), context
    assert got["sync"] == "in-sync", context
    cands = got["cands"]
    assert "loads" in cands and len(cands) <= 20 and all(c.startswith("lo") for c in cands), context
    assert (got["picked"], got["line"]) == ("loads", "x = json.loads"), context
    assert (got["company-picked"], got["company-line"]) == ("path", "y = os.path"), context
    first = got["company-first"]
    assert first and first.startswith("du"), context
    assert got["company-first-line"] == f"z = json.{first}", context
    assert_clean(got, context)


def test_completion_on_non_ascii_tab_and_long_lines(tmp_path):
    """C-M-i then a pick from *Completions*, at the end of a line and inside a word, after CJK,
    astral-plane emoji (lsp-mode 8 counts columns in code points), a ZWJ sequence, combining
    marks, a tab; a line with an emoji typed key by key; and at the end of a 270,000-character
    line: the line becomes exactly the text with the identifier replaced by the pick, and the
    server stays in sync."""
    cases = "\n".join(
        f'(laya-case "{label}" {json.dumps(before, ensure_ascii=False)} '
        f'{json.dumps(after, ensure_ascii=False)} "{pick}")'
        for label, before, after, pick in LINES)
    scenario = r"""
(defun laya-case (label before after pick)
  (goto-char (point-max))
  (insert "\n" before)
  (save-excursion (insert after))
  (laya-in-sync (intern (concat label "-sync")))
  (laya-result (intern (concat label "-picked")) (laya-choose pick))
  (laya-result (intern (concat label "-line")) (laya-line)))
(laya-open "reader.py")
""" + cases + r"""
(goto-char (point-max))
(insert "\n")
(laya-type "s = '😀😀'; y = os.pa")
(laya-in-sync 'typed-sync)
(laya-result 'typed-picked (laya-choose "path"))
(laya-result 'typed-line (laya-line))
(laya-result 'text (laya-text))
(laya-open "long.py")
(goto-char (point-min)) (forward-line 1) (end-of-line)
(laya-in-sync 'long-sync)
(laya-result 'long-picked (laya-choose "loads"))
(laya-result 'long-tail (let ((l (laya-line))) (substring l (- (length l) 30))))
(laya-result 'long-length (length (laya-line)))
"""
    long_line = "data = [" + ", ".join(str(i) for i in range(40_000)) + "]; x = json.lo"
    got, context = emacs(tmp_path, scenario, {"reader.py": PY, "long.py": f"import json\n{long_line}\n"})
    lines = []
    for label, before, after, pick in LINES:
        assert got[f"{label}-sync"] == "in-sync", label + context
        assert got[f"{label}-picked"] == pick, label + context
        lines.append(expected_line(before, after, pick))
        assert got[f"{label}-line"] == lines[-1], label + context
    assert got["typed-sync"] == "in-sync", context
    assert got["typed-line"] == "s = '😀😀'; y = os.path", context
    assert got["text"] == PY + "\n" + "\n".join(lines) + "\n" + got["typed-line"], context
    assert got["long-sync"] == "in-sync", context
    assert got["long-picked"] == "loads", context
    assert got["long-tail"] == (long_line[:-2] + "loads")[-30:], context
    assert got["long-length"] == len(long_line) + 3, context
    assert_clean(got, context)


def test_completion_at_the_start_of_a_word_replaces_it(tmp_path):
    """``z = |os(1)`` + C-M-i: lsp-mode sends ``insertReplaceSupport`` and replaces by default
    (``lsp-completion-default-behaviour`` ``:replace``), so the picked item takes the word's
    place; the word is never repeated (``z = pathos(1)``)."""
    scenario = r"""
(laya-open "reader.py")
(dolist (word '("os" "pa" "da"))
  (goto-char (point-max))
  (insert "\nz = ")
  (save-excursion (insert word "(1)"))
  (laya-result (intern (concat word "-picked")) (laya-choose nil))
  (laya-result (intern (concat word "-line")) (laya-line)))
"""
    got, context = emacs(tmp_path, scenario, {"reader.py": PY})
    for word in ("os", "pa", "da"):
        picked, line = got[f"{word}-picked"], got[f"{word}-line"]
        assert line == f"z = {word if picked is None else picked}(1)", word + context
    assert_clean(got, context)


def test_crlf_file_completes_and_is_saved_with_crlf(tmp_path):
    """A DOS file (``buffer-file-coding-system`` ``...-dos``: the buffer holds LF, lsp-mode
    sends LF): completing at the end of a line and inside a word gives the exact text, and
    saving writes it back with CRLF on every line (``willSave``/``didSave`` raise no error)."""
    scenario = CRLF_SCENARIO
    source = b"import json\r\nimport os\r\n\r\ndata = json.load(f)\r\n"
    got, context = emacs(tmp_path, scenario, {"dos.py": source})
    assert got["coding"].endswith("-dos"), context
    for step in ("end-sync", "mid-sync", "after-save-sync"):
        assert got[step] == "in-sync", step + context
    assert (got["end-picked"], got["end-line"]) == ("loads", "x = json.loads"), context
    assert (got["mid-picked"], got["mid-line"]) == ("path", "y = os.path.join('a')"), context
    disk = (tmp_path / "project" / "dos.py").read_bytes()
    assert disk == source + b"x = json.loads\r\ny = os.path.join('a')\r\n", context
    assert_clean(got, context)


@pytest.mark.parametrize("name, content", [
    ("literal_cr.py", b'import json\nsep = "\r"\nvalue = json.lo\nprint(value)\n'),
    ("mixed_eol.py", b'import json\r\r\nimport os\nvalue = json.lo\nprint(value)\n'),
], ids=["cr-in-a-string", "cr-cr-lf-in-a-unix-file"])
def test_a_lone_carriage_return(tmp_path, name, content):
    """A CR that is not part of a CRLF: C-M-i at the end of ``value = json.lo`` changes that
    line, and only that line. lsp-mode 8 counts lines at ``\\n`` only (``lsp--cur-line`` is
    ``line-number-at-pos``) and names itself ``emacs``, so the server counts them so too
    (``lineBreaks`` ``auto``); counted LSP's way, every position below the CR named another line,
    and nothing, or the wrong text, was completed."""
    scenario = r"""
(laya-open "NAME")
(goto-char (point-min))
(search-forward "json.lo\n") (backward-char 1)
(laya-in-sync 'sync)
(laya-result 'picked (laya-choose "loads"))
(laya-result 'text (laya-text))
""".replace("NAME", name)
    got, context = emacs(tmp_path, scenario, {name: content})
    assert got["sync"] == "in-sync" and got["text"] == content.decode().replace("json.lo\n", "json.loads\n"), (
        f"picked {got['picked']!r}; {got['sync']}" + context)
    assert_clean(got, context)


@needs_company
def test_typing_with_company_as_you_type(tmp_path):
    """company-mode as lsp-mode sets it up, idle popup on: type ``x = json.l`` key by key, let
    company's timer run (the popup shows the server's items), type ``o`` (the list is
    ``isIncomplete``: company asks again), RET on ``loads``. Then undo, and type on."""
    scenario = r"""
(laya-open "reader.py")
(setq-local company-idle-delay 0.2)
(setq-local company-minimum-prefix-length 1)
(goto-char (point-max))
(laya-type "x = json.l")
(laya-idle-until (lambda () company-candidates))
(laya-result 'popup (and company-candidates (vconcat (mapcar #'substring-no-properties company-candidates))))
(laya-type "o")
(laya-idle-until (lambda () (and company-candidates
                                 (cl-every (lambda (c) (string-prefix-p "lo" c)) company-candidates))))
(laya-result 'popup-o (and company-candidates (vconcat (mapcar #'substring-no-properties company-candidates))))
(let ((i (cl-position "loads" company-candidates :test #'string=)))
  (laya-result 'index i)
  (when i (company-set-selection i)
    (let ((this-command 'company-complete-selection))
      (run-hooks 'pre-command-hook) (company-complete-selection) (run-hooks 'post-command-hook))))
(laya-result 'line (laya-line))
(laya-in-sync 'sync)
(undo-boundary)
(let ((last-command nil)) (undo))
(laya-result 'undone (laya-line))
(end-of-line)
(laya-in-sync 'undo-sync)
(company-abort)
(end-of-line)
(laya-type "\ny = os.pa")
(laya-in-sync 'typed-sync)
"""
    got, context = emacs(tmp_path, scenario, {"reader.py": PY})
    assert got["popup"] and all(c.startswith("l") for c in got["popup"]), context
    assert got["popup-o"] and "loads" in got["popup-o"], context
    assert all(c.startswith("lo") for c in got["popup-o"]), context
    assert got["line"] == "x = json.loads", context
    for step in ("sync", "undo-sync", "typed-sync"):
        assert got[step] == "in-sync", step + context
    assert_clean(got, context)


def test_buffers_restart_a_killed_buffer_and_shutdown(tmp_path):
    """Two buffers on one server with interleaved edits; ``lsp-workspace-restart`` (both
    buffers move to the new server); a buffer killed while its completion request is in flight
    (the answer still comes, and the other buffer is unaffected); the file reopened;
    ``save-buffer``; the end of the session as ``lsp-workspace-shutdown`` does it: the server
    stays in sync, never answers with an error, and answers ``shutdown`` within lsp-mode's 0.5 s
    (else *Messages* says "Timeout")."""
    scenario = r"""
(defvar ba (laya-open "a.py"))
(defvar bb (laya-open "b.py"))
(laya-result 'same-server (eq (with-current-buffer ba (laya-workspace))
                              (with-current-buffer bb (laya-workspace))))
(with-current-buffer ba (goto-char (point-max)) (insert "alpha_value = 1\nx = json.lo"))
(with-current-buffer bb (goto-char (point-max)) (insert "y = os.pa"))
(with-current-buffer ba
  (let ((w (laya-workspace)))
    (lsp-workspace-restart w)
    (laya-result 'restarted (and (laya-wait (lambda () (let ((n (laya-workspace))) (and n (not (eq n w))))) 30) t))))
(with-current-buffer ba
  (laya-in-sync 'a-sync)
  (laya-result 'a-picked (laya-choose "loads"))
  (laya-result 'a-line (laya-line)))
(with-current-buffer bb
  (laya-wait #'laya-workspace 30)
  (laya-in-sync 'b-sync)
  (laya-result 'b-picked (laya-choose "path"))
  (laya-result 'b-line (laya-line)))
(defvar laya-killed-answer nil)
(with-current-buffer bb
  (insert "\nz = json.du")
  (lsp-request-async "textDocument/completion"
                     (plist-put (lsp--text-document-position-params)
                                :context (lsp-make-completion-context :trigger-kind 1))
                     (lambda (r) (setq laya-killed-answer
                                       (list "answer" (length (if (lsp-completion-list? r) (lsp:completion-list-items r) r)))))
                     :error-handler (lambda (e) (setq laya-killed-answer (list "error" (format "%S" e))))
                     :mode 'detached)
  (set-buffer-modified-p nil)
  (kill-buffer bb))
(laya-result 'killed-answer (laya-wait (lambda () laya-killed-answer) 20))
(with-current-buffer ba (end-of-line) (insert "\nw = json.du") (laya-in-sync 'a-after-kill-sync))
(laya-open "b.py")
(goto-char (point-max)) (insert "\nq = os.pa")
(laya-in-sync 'reopened-sync)
(save-buffer)
(laya-idle 1)
(insert "x")
(laya-in-sync 'saved-sync)
(laya-result 'text (laya-text))
"""
    got, context = emacs(tmp_path, scenario, {"a.py": PY, "b.py": PY}, budget=60)
    assert got["same-server"] is True and got["restarted"] is True, context
    assert (got["a-picked"], got["a-line"]) == ("loads", "x = json.loads"), context
    assert (got["b-picked"], got["b-line"]) == ("path", "y = os.path"), context
    answer = got["killed-answer"]
    assert answer and answer[0] == "answer", f"the killed buffer's request: {answer}" + context
    for step in ("a-sync", "b-sync", "a-after-kill-sync", "reopened-sync", "saved-sync"):
        assert got[step] == "in-sync", step + context
    assert got["text"] == PY + "\nq = os.pax\n", context  # require-final-newline on save
    assert_clean(got, context)
