;;; common.el --- what the batch drivers share: results, waiting, typing  -*- lexical-binding: t -*-
;;
;; Loaded first by tests/emacs/adversarial.el (eglot) and tests/emacs/lsp_mode_driver.el
;; (lsp-mode); each driver adds its client's own helpers (`laya-open', `laya-candidates',
;; `laya-choose', `laya-edit-range', `laya-harvest') and runs one scenario.
;;   LAYA_EMACS_BUDGET    seconds the scenario may take (default 60); past it, the scenario stops
;;                        with an error instead of hanging the test.

(require 'package)
(package-initialize)
(require 'json)
(require 'cl-lib)
(require 'subr-x)

(defvar laya-out nil "Results, newest first: (KEY . VALUE).")
(defvar laya-shown nil "window/showMessage texts, newest first.")
(defvar laya-logs nil "window/logMessage texts, newest first.")
(defvar laya-errors nil "Error answers and stderr output of the servers, as harvested.")
(defvar laya-deadline (+ (float-time) (string-to-number (or (getenv "LAYA_EMACS_BUDGET") "60"))))

(defun laya-result (key value) (push (cons key value) laya-out) value)

(defun laya-check-budget ()
  (when (> (float-time) laya-deadline) (error "scenario ran past its budget (a hang?)")))

;; Batch Emacs never reads events, so a file-notify event (lsp-mode's file watchers, once the
;; server registered didChangeWatchedFiles: an edit creates the lock file `.#name') stays
;; queued and lsp-mode never sees it; with one queued the process sentinel did not run either:
;; after `lsp-workspace-restart' the old server was gone but lsp-mode never learned it and never
;; started the new one (2026-12-03, every run of a repro; a `read-event' in the loop, or
;; `create-lockfiles' nil, and it restarts; an interactive `emacs -nw' under a pty restarts).
;; A scenario that edits and then restarts and never sees the new server stalls so.
(defun laya-wait (pred &optional secs)
  "Run timers and process output until PRED is non-nil or SECS (default 30) pass; PRED's value."
  (let ((deadline (+ (float-time) (or secs 30))) v)
    (while (and (not (setq v (funcall pred))) (< (float-time) deadline))
      (laya-check-budget)
      (accept-process-output nil 0.05))
    v))

(defun laya-idle (secs)
  "Let SECS pass with timers (the clients' idle didChange and completion timers too) running."
  (laya-idle-until #'ignore secs))

(defun laya-idle-until (pred &optional secs)
  "As `laya-idle', until PRED is non-nil or SECS (default 10) pass; PRED's value. For what an
idle client does in its own time (company's popup): a fixed wait was too short on a loaded machine."
  (let ((deadline (+ (float-time) (or secs 10))) v)
    (while (and (not (setq v (funcall pred))) (< (float-time) deadline))
      (laya-check-budget)
      (accept-process-output nil 0.05)
      ;; batch Emacs is never idle: run the idle timers that are due, as an idle Emacs would
      (dolist (timer (copy-sequence timer-idle-list))
        (when (and (timerp timer) (not (timer--triggered timer)))
          (timer-event-handler timer))))
    v))

(defun laya-line () (buffer-substring-no-properties (line-beginning-position) (line-end-position)))
(defun laya-text () (buffer-substring-no-properties (point-min) (point-max)))

(defun laya-in-sync (label)
  "Record under LABEL whether the client's edit range for the first item at point is exactly
the symbol at point (a server whose copy of the text differs computes another range, or offers
nothing): \"in-sync\" or a description of the disagreement (`laya-edit-range' is the driver's)."
  (let ((r (laya-edit-range)))
    (laya-result label (if (and r (= (nth 0 r) (nth 2 r)) (= (nth 1 r) (nth 3 r))) "in-sync"
                         (format "OUT OF SYNC: range and symbol %S, line %S" r (laya-line))))))

(defun laya-type (string)
  "Type STRING key by key, as `self-insert-command' does (with the command hooks)."
  (dolist (c (string-to-list string))
    (let ((last-command-event c) (this-command 'self-insert-command))
      (run-hooks 'pre-command-hook)
      (self-insert-command 1 c)
      (run-hooks 'post-command-hook))))

(defun laya-run-scenario ()
  "Evaluate the scenario file (LAYA_EMACS_SCENARIO); an error it signals becomes the `error' result."
  (condition-case err
      (load (getenv "LAYA_EMACS_SCENARIO") nil t)
    (error (laya-result 'error (error-message-string err)))))

(defun laya-record-messages ()
  "Record *Messages* as it is now (the `messages' result)."
  (laya-result 'messages (with-current-buffer (messages-buffer)
                           (buffer-substring-no-properties (point-min) (point-max)))))

(defun laya-write-results ()
  "Write the results as JSON to LAYA_EMACS_OUT (with *Messages*, unless recorded already) and exit."
  (unless (assq 'messages laya-out) (laya-record-messages))
  (with-temp-file (getenv "LAYA_EMACS_OUT") (insert (json-encode laya-out)))
  (kill-emacs 0))
