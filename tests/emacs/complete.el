;;; complete.el --- eglot in batch mode: complete through laya-lsp  -*- lexical-binding: t -*-
;;
;; Run by tests/test_emacs_eglot.py as `emacs --batch -l complete.el` (site start-up files load,
;; so Debian's elpa-eglot is found; no user init file). $LAYA_EMACS_SETUP is the README's eglot
;; snippet, $LAYA_EMACS_FILE the Python file to open (its last line ends in an identifier
;; prefix), $LAYA_EMACS_OUT where the JSON result goes: what completion-at-point offers at the end
;; of the file, and the line after the first candidate is chosen the way completion UIs do
;; (replace the prefix, then the capf's :exit-function, which applies the item's textEdit).

(require 'package)
(package-initialize)
(require 'json)
(load (getenv "LAYA_EMACS_SETUP"))
(require 'eglot)
(defvar laya-out nil)
(defun laya-result (key value) (push (cons key value) laya-out))
(condition-case err
    (progn
      (laya-result 'emacs emacs-version)
      (laya-result 'eglot (if (boundp 'eglot--version) eglot--version
                            (let ((d (cadr (assq 'eglot package-alist)))) (and d (package-version-join (package-desc-version d))))))
      (find-file (getenv "LAYA_EMACS_FILE"))
      (laya-result 'mode (symbol-name major-mode))
      (let ((inhibit-message t)) (eglot-ensure))
      ;; eglot-ensure connects from post-command-hook / a timer: run it now
      (run-hooks 'post-command-hook)
      (let ((deadline (+ (float-time) 120)))
        (while (and (not (eglot-current-server)) (< (float-time) deadline))
          (accept-process-output nil 0.1)))
      (unless (eglot-current-server) (error "eglot did not connect"))
      (goto-char (point-max))
      (let* ((capf (eglot-completion-at-point))
             (start (nth 0 capf)) (end (nth 1 capf)) (table (nth 2 capf))
             (props (nthcdr 3 capf))
             (prefix (buffer-substring-no-properties start end))
             (cands (all-completions prefix table)))
        (laya-result 'prefix prefix)
        (laya-result 'candidates (vconcat cands))
        (laya-result 'line-before (buffer-substring-no-properties (line-beginning-position) (line-end-position)))
        (when cands
          (let ((choice (car cands)) (exit (plist-get props :exit-function)))
            (delete-region start end)
            (goto-char start)
            (insert choice)
            (when exit (funcall exit choice 'finished))
            (laya-result 'choice choice)
            (laya-result 'line-after (buffer-substring-no-properties (line-beginning-position) (line-end-position))))))
      (eglot-shutdown (eglot-current-server)))
  (error (laya-result 'error (error-message-string err))))
(with-temp-file (getenv "LAYA_EMACS_OUT") (insert (json-encode laya-out)))
(kill-emacs 0)
