"""Emacs + eglot: the settings example of ``editors/README.md`` takes effect in a running server.

Eglot encodes ``nil`` as JSON ``null``, which the server reads as "not given": an Emacs user who
writes ``:workspaceIndex nil`` (the Lisp way to say false) silently keeps the option on. The
README's example must therefore show a false option as ``:json-false``; this test takes that
example from the README, evaluates it in Emacs, runs ``eglot-signal-didChangeConfiguration`` (as
``M-x`` does) and reads the server's ``window/logMessage`` naming what it applied. It also sends
``:prose nil`` to check that the README's warning about ``nil`` still describes what happens.

Skipped, saying why, without Emacs and eglot (``tests/test_emacs_eglot.py``).
"""

from __future__ import annotations

import re

import pytest

from test_emacs_eglot import README, REASON, run_eglot

pytestmark = pytest.mark.skipif(REASON is not None, reason=REASON or "")

DRIVER = r""";;; -*- lexical-binding: t -*-
(require 'package)
(package-initialize)
(require 'json)
(load (getenv "LAYA_EMACS_SETUP"))
(require 'eglot)
(defvar laya-logs nil)
(defvar laya-out nil)
(cl-defmethod eglot-handle-notification :before
  (_server (_method (eql window/logMessage)) &key message &allow-other-keys)
  (push message laya-logs))
(defun laya-wait-log (regexp)
  "The first log message matching REGEXP that arrives within 60 s, or nil."
  (let ((deadline (+ (float-time) 60)) found)
    (while (and (not (setq found (seq-find (lambda (m) (string-match-p regexp m)) laya-logs)))
                (< (float-time) deadline))
      (accept-process-output nil 0.1))
    found))
(condition-case err
    (progn
      (find-file (getenv "LAYA_EMACS_FILE"))
      (let ((inhibit-message t)) (eglot-ensure))
      (run-hooks 'post-command-hook)
      (let ((deadline (+ (float-time) 120)))
        (while (and (not (eglot-current-server)) (< (float-time) deadline))
          (accept-process-output nil 0.1)))
      (unless (eglot-current-server) (error "eglot did not connect"))
      ;; the README's example, as the user evaluates it, then M-x eglot-signal-didChangeConfiguration
      (eval (car (read-from-string (getenv "LAYA_EMACS_CONFIG"))) t)
      (setq laya-logs nil)
      (eglot-signal-didChangeConfiguration (eglot-current-server))
      (push (cons 'example (laya-wait-log "settings asked for")) laya-out)
      ;; the pitfall the README warns about: nil is null, not false
      (setq-default eglot-workspace-configuration '(:laya (:maxItems 7 :prose nil)))
      (setq laya-logs nil)
      (eglot-signal-didChangeConfiguration (eglot-current-server))
      (push (cons 'nil-prose (laya-wait-log "settings asked for")) laya-out)
      (eglot-shutdown (eglot-current-server)))
  (error (push (cons 'error (error-message-string err)) laya-out)))
(with-temp-file (getenv "LAYA_EMACS_OUT") (insert (json-encode laya-out)))
(kill-emacs 0)
"""


def readme_settings_example() -> str:
    section = re.search(r"^## Emacs\b.*?$(.*?)(?=^## )", README.read_text(encoding="utf-8"), re.M | re.S)
    assert section, f"{README} has no '## Emacs' section"
    m = re.search(r"`(\(setq-default eglot-workspace-configuration .*?\))`", section.group(1), re.S)
    assert m, "the Emacs section has no `(setq-default eglot-workspace-configuration ...)` example"
    return m.group(1)


def test_the_readme_settings_example_takes_effect(tmp_path):
    example = readme_settings_example()
    # a false option written the way eglot sends false; `nil` would be sent as null (ignored)
    assert ":json-false" in example, (
        f"the README's example {example} shows no false option as :json-false: Emacs users write "
        "nil, which eglot sends as null, and the option silently stays on")
    driver = tmp_path / "driver.el"
    driver.write_text(DRIVER, encoding="utf-8")
    got, context = run_eglot(tmp_path, driver, LAYA_EMACS_CONFIG=example)

    # every option of the example is applied, with its value (:json-false is False)
    applied = got["example"]
    assert applied, "the server logged no applied settings for the README's example" + context
    plist = re.search(r":laya \((.*?)\)", example).group(1).split()
    for name, value in zip(plist[::2], plist[1::2]):
        expected = {":json-false": "False", "t": "True"}.get(value, value)
        assert f"{name[1:]}={expected}" in applied, f"{name} {value} was not applied" + context

    # and the README's warning holds: `:prose nil` reaches the server as null, i.e. not given
    assert got["nil-prose"] and "maxItems=7" in got["nil-prose"], context
    assert "prose" not in got["nil-prose"], context
