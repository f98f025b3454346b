;;; adversarial.el --- eglot in batch mode, driven like a user: helpers + one scenario  -*- lexical-binding: t -*-
;;
;; Run by tests/test_emacs_adversarial.py as `emacs --batch -l adversarial.el`.  Environment:
;;   LAYA_EMACS_SETUP     the README's eglot snippet (loaded as a user's init file would)
;;   LAYA_EMACS_SCENARIO  an elisp file evaluated after these helpers are defined: it opens
;;                        files, completes, edits, and records results with `laya-result'
;;   LAYA_EMACS_OUT       where the JSON result goes (an object: the scenario's keys, plus
;;                        `messages' (*Messages*), `shown' (window/showMessage), `server-errors'
;;                        (error answers and stderr lines of every server), `error' if the
;;                        scenario signalled)
;;   LAYA_EMACS_BUDGET    seconds the scenario may take (default 60); past it, the scenario stops
;;                        with an error instead of hanging the test.

(load (expand-file-name "common.el" (file-name-directory load-file-name)) nil t)
(load (getenv "LAYA_EMACS_SETUP"))
(require 'eglot)

(defvar laya-servers nil "Every eglot server started in this run.")

(cl-defmethod eglot-handle-notification :before
  (_server (_method (eql window/showMessage)) &key type message &allow-other-keys)
  (push (format "%s: %s" type message) laya-shown))
(cl-defmethod eglot-handle-notification :before
  (_server (_method (eql window/logMessage)) &key message &allow-other-keys)
  (push message laya-logs))
(add-hook 'eglot-server-initialized-hook (lambda (s) (push s laya-servers)))

(defun laya-open (file &optional mode)
  "Visit FILE (in MODE, if given) and connect eglot (the README's snippet, `eglot-ensure')."
  (find-file file)
  (when mode (funcall mode))
  (let ((inhibit-message t)) (eglot-ensure))
  (run-hooks 'post-command-hook)
  (unless (laya-wait (lambda () (eglot-current-server)) 60)
    (error "eglot did not connect in %s (%s)" (buffer-name) major-mode))
  (current-buffer))

(defun laya-candidates ()
  "What eglot's capf offers at point: (START END PREFIX CANDIDATES PROPS)."
  (let* ((capf (eglot-completion-at-point))
         (start (nth 0 capf)) (end (nth 1 capf)) (table (nth 2 capf))
         (probe (buffer-substring-no-properties start (point))))
    (list start end (buffer-substring-no-properties start end)
          (all-completions probe table) (nthcdr 3 capf))))

(defvar laya-done nil)
(advice-add 'completion--done :before (lambda (&rest a) (push (car a) laya-done)))
(defun laya-choose (choice)
  "C-M-i as a user does: if that finishes the completion, done; else C-M-i again for the
*Completions* list and RET on CHOICE (nil: the first).  Returns what was chosen."
  (when (get-buffer "*Completions*") (kill-buffer "*Completions*"))
  (setq laya-done nil)
  (call-interactively #'completion-at-point)
  (when (and (not laya-done) (not (get-buffer "*Completions*")) completion-in-region-mode)
    (call-interactively #'completion-at-point))
  (let ((cb (get-buffer "*Completions*")) (buf (current-buffer)) picked)
    (when (and cb (not laya-done))
      (with-selected-window (or (get-buffer-window cb) (display-buffer cb))
        (goto-char (point-min))
        (let (pos)
          (while (and (not picked) (setq pos (text-property-any (point) (point-max) 'mouse-face 'highlight)))
            (goto-char pos)
            (let* ((end (or (next-single-property-change pos 'mouse-face) (point-max)))
                   (c (buffer-substring-no-properties pos end)))
              (if (or (null choice) (string= c choice))
                  (progn (setq picked c) (choose-completion))
                (goto-char end)))))))
    (set-buffer buf)
    (completion-in-region-mode -1)
    (or picked (car laya-done))))

(defun laya-edit-range ()
  "The first completion item's textEdit range at point, as buffer positions (START . END), and
the symbol bounds eglot uses; nil when no items."
  (let* ((capf (eglot-completion-at-point))
         (cands (all-completions "" (nth 2 capf)))
         (item (and cands (get-text-property 0 'eglot--lsp-item (car cands)))))
    (when item
      (let ((r (eglot--range-region (plist-get (plist-get item :textEdit) :range))))
        (list (car r) (cdr r) (nth 0 capf) (nth 1 capf))))))
(defun laya-harvest (s)
  "Collect error answers and stderr lines from server S's events and stderr buffers (before
`jsonrpc-shutdown' kills them)."
  (let ((ev (ignore-errors (jsonrpc-events-buffer s))))
    (when (buffer-live-p ev)
      (with-current-buffer ev
        (save-excursion
          (goto-char (point-min))
          ;; no regexp over whole lines: a didOpen of a long line would overflow the matcher
          (while (re-search-forward ":error\\|\\[stderr\\]\\|Traceback\\|[Ii]nternal error" nil t)
            (push (buffer-substring-no-properties
                   (max (line-beginning-position) (- (point) 200))
                   (min (line-end-position 2) (+ (point) 300)))
                  laya-errors))))))
    (let ((err (ignore-errors (jsonrpc-stderr-buffer s))))
      (when (buffer-live-p err)
        (with-current-buffer err
          (unless (string-empty-p (string-trim (buffer-string)))
            (push (concat "stderr: " (buffer-string)) laya-errors))))))
(advice-add 'jsonrpc-shutdown :before (lambda (s &rest _) (laya-harvest s)))

(laya-run-scenario)
(laya-result 'shown (vconcat (reverse laya-shown)))
(mapc #'laya-harvest laya-servers)
(laya-result 'server-errors (vconcat (delete-dups (reverse laya-errors))))
(laya-record-messages)  ; before the shutdown below, as a user's session would have them
(dolist (s laya-servers)
  (when (jsonrpc-running-p s)
    (ignore-errors (let ((inhibit-message t)) (eglot-shutdown s nil 5)))))
(laya-write-results)
