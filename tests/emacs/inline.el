;;; inline.el --- ghost-text helpers for tests/test_emacs_inline.py  -*- lexical-binding: t -*-
;;
;; Loaded first by the scenarios of tests/test_emacs_inline.py, after the helpers of the
;; client's driver (tests/emacs/adversarial.el for eglot, tests/emacs/lsp_mode_driver.el for
;; lsp-mode), whose set-up file holds the client's README snippet and then the README's
;; laya-inline snippet (editors/emacs/laya-inline.el, turned on from the client's mode hook).
;; Drives the mode as Emacs's command loop would: `pre-command-hook', the command,
;; `post-command-hook', the command being what the key is bound to at point (batch Emacs reads
;; no keys), and counts the requests sent and the answers that reached the mode.

(defvar laya-requests 0 "textDocument/inlineCompletion requests sent, through either client.")
(defvar laya-answers 0 "Answers to them that reached the mode.")
(defun laya-count-request (first second &rest _)
  "Count FIRST or SECOND (the method of `lsp-request-async' or `jsonrpc-async-request')."
  (let ((methods '(:textDocument/inlineCompletion "textDocument/inlineCompletion")))
    (when (or (member first methods) (member second methods))
      (cl-incf laya-requests))))
(when (fboundp 'jsonrpc-async-request) (advice-add 'jsonrpc-async-request :before #'laya-count-request))
(when (fboundp 'lsp-request-async) (advice-add 'lsp-request-async :before #'laya-count-request))
(advice-add 'laya-inline--answer :before (lambda (&rest _) (cl-incf laya-answers)))

(defun laya-ghost-overlays ()
  "The overlays of the current buffer that show an after-string, in buffer order."
  (sort (cl-remove-if-not (lambda (ov) (overlay-get ov 'after-string))
                          (overlays-in (point-min) (point-max)))
        (lambda (a b) (< (overlay-start a) (overlay-start b)))))

(defun laya-ghosts ()
  "Every after-string shown in the current buffer: a vector of [POSITION TEXT]."
  (vconcat (mapcar (lambda (ov) (vector (overlay-start ov)
                                        (substring-no-properties (overlay-get ov 'after-string))))
                   (laya-ghost-overlays))))

(defun laya-ghost ()
  "The ghost text shown at point (nil if none, an error marker if it is elsewhere or several)."
  (let ((g (laya-ghosts)))
    (cond ((= (length g) 0) nil)
          ((and (= (length g) 1) (= (aref (aref g 0) 0) (point))) (aref (aref g 0) 1))
          (t (format "GHOSTS NOT AT POINT %d: %S" (point) g)))))

(defun laya-command (command &optional key)
  "Run COMMAND (a symbol, or nil: what KEY is bound to at point) as the command loop does.
Returns the command run."
  (let* ((cmd (or command (key-binding (kbd key) t)))
         (this-command cmd)
         (last-command-event (if key (aref (kbd key) 0) last-command-event)))
    (run-hooks 'pre-command-hook)
    (call-interactively cmd)
    (setq last-command this-command)
    (run-hooks 'post-command-hook)
    cmd))

(defun laya-settle (&optional secs)
  "Wait until every request sent has been answered (SECS, default 10, at most).  Timers run,
idle timers do not (eglot's didChange waits for 0.5 s of idle time: the answers, in a few ms,
come first, as they do for a user); `laya-idle' runs them.  Non-nil if all were answered."
  (let ((deadline (+ (float-time) (or secs 10))))
    (while (and (< laya-answers laya-requests) (< (float-time) deadline))
      (laya-check-budget)
      (accept-process-output nil 0.02))
    (>= laya-answers laya-requests)))

(defun laya-type-ghost (string)
  "Type STRING key by key (with the command hooks), then wait for the answer: the ghost."
  (laya-type string)
  (laya-settle)
  (laya-ghost))
