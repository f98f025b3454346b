;;; lsp_mode_driver.el --- lsp-mode in batch mode, driven like a user: helpers + one scenario  -*- lexical-binding: t -*-
;;
;; Run by tests/test_emacs_lsp_mode.py as `emacs --batch -l lsp_mode_driver.el` (site start-up
;; files load, so Debian's elpa-lsp-mode and elpa-company are found; no user init file).
;; Environment:
;;   LAYA_EMACS_SETUP     the README's lsp-mode snippet (loaded as a user's init file would)
;;   LAYA_EMACS_SESSION   lsp-mode's session file (lsp-session-file), in the test's temp dir
;;   LAYA_EMACS_SCENARIO  an elisp file evaluated after these helpers are defined: it opens
;;                        files, completes, edits, and records results with `laya-result'
;;   LAYA_EMACS_OUT       where the JSON result goes (an object: the scenario's keys, plus
;;                        `messages' (*Messages*), `shown' (window/showMessage), `logs'
;;                        (window/logMessage), `server-errors' (error answers, but for RequestCancelled
;;                        to a request lsp-mode cancelled, and stderr text of every server), `error' if the scenario signalled)
;;   LAYA_EMACS_BUDGET    seconds the scenario may take (default 60); past it, the scenario stops
;;                        with an error instead of hanging the test.

(load (expand-file-name "common.el" (file-name-directory load-file-name)) nil t)
;; What a batch session must settle that lsp-mode otherwise asks interactively: where the
;; session (the list of imported project roots) lives, and the project root itself (a user
;; answers "i" once, or sets `lsp-auto-guess-root'; here project.el finds the git root).
(setq lsp-session-file (getenv "LAYA_EMACS_SESSION")
      lsp-auto-guess-root t
      lsp-restart 'ignore                 ; a server that exits: no y-or-n-p on stdin
      lsp-diagnostics-provider :none      ; no flymake: Laya sends no diagnostics, and Emacs 28's
                                          ; python-flymake errors out under lsp-mode (batch: fatal)
      )
(load (getenv "LAYA_EMACS_SETUP"))
(require 'lsp-mode)
(require 'lsp-completion)

(defvar laya-workspaces nil "Every laya workspace (server) started in this run.")

(advice-add 'lsp--window-show-message :before
            (lambda (_ws params) (push (lsp-get params :message) laya-shown)))
(advice-add 'lsp--window-log-message :before
            (lambda (_ws params) (push (lsp-get params :message) laya-logs)))
(defvar laya-cancelled nil "Ids of the requests this Emacs cancelled with `$/cancelRequest'.")
(advice-add 'lsp--cancel-request :before (lambda (id) (push id laya-cancelled)))
(advice-add 'lsp--parser-on-message :before
            (lambda (json-data _ws)
              (when (eq (lsp--get-message-type json-data) 'response-error)
                (let* ((err (lsp:json-response-error-error json-data))
                       (id (lsp:json-response-id json-data))
                       (id (if (stringp id) (string-to-number id) id)))
                  ;; RequestCancelled for a request lsp-mode cancelled is the answer the
                  ;; protocol asks for, not an error (lsp-mode dropped its handler already)
                  (unless (and (eql (lsp-get err :code) -32800) (memql id laya-cancelled))
                    (push (format "error answer: %S" err) laya-errors))))))
(add-hook 'lsp-after-initialize-hook
          (lambda () (dolist (w (lsp-workspaces)) (cl-pushnew w laya-workspaces))))

(defun laya-workspace ()
  "The current buffer's laya workspace, initialized, or nil."
  (seq-find (lambda (w) (and (eq (lsp--client-server-id (lsp--workspace-client w)) 'laya)
                             (eq (lsp--workspace-status w) 'initialized)))
            (lsp-workspaces)))

(defun laya-open (file &optional mode)
  "Visit FILE (in MODE, if given) and start lsp-mode as a user does (`lsp-deferred' from the
mode hook or `M-x lsp'): wait until laya serves the buffer."
  (find-file file)
  (when mode (funcall mode))
  (let ((inhibit-message t)) (lsp))
  (unless (laya-wait #'laya-workspace 60)
    (error "lsp-mode did not connect laya in %s (%s): %S" (buffer-name) major-mode (lsp-workspaces)))
  (current-buffer))

(defun laya-candidates ()
  "What lsp-mode's capf offers at point: (START END PREFIX CANDIDATES)."
  (let* ((capf (lsp-completion-at-point))
         (start (nth 0 capf)) (end (nth 1 capf)) (table (nth 2 capf))
         (probe (buffer-substring-no-properties start (point))))
    (prog1 (list start end (buffer-substring-no-properties start end)
                 (all-completions probe table))
      (lsp-completion--clear-cache))))

(defvar laya-done nil)
(advice-add 'completion--done :before (lambda (&rest a) (push (car a) laya-done)))
(defun laya-choose (choice)
  "C-M-i as a user does: if that finishes the completion, done; else C-M-i again for the
*Completions* list and RET on CHOICE (nil: the first).  Returns what was chosen."
  (when (get-buffer "*Completions*") (kill-buffer "*Completions*"))
  (setq laya-done nil)
  (let ((this-command 'completion-at-point)) (call-interactively #'completion-at-point))
  (when (and (not laya-done) (not (get-buffer "*Completions*")) completion-in-region-mode)
    (let ((last-command 'completion-at-point) (this-command 'completion-at-point))
      (call-interactively #'completion-at-point)))
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

(defun laya-company (choice)
  "company-mode as lsp-mode sets it up (`company-capf'): `company-manual-begin' (what
`company-complete' starts with), then select CHOICE (nil: the first) and RET
(`company-complete-selection').  Returns what was chosen, or nil when company showed nothing."
  (let ((this-command 'company-complete)) (company-manual-begin))
  (when company-candidates
    (let ((i (if choice (cl-position choice company-candidates :test #'string=) 0)))
      (when i
        (company-set-selection i)
        (let ((picked (substring-no-properties (nth i company-candidates))))
          (let ((this-command 'company-complete-selection)) (company-complete-selection))
          picked)))))

(defun laya-edit-range ()
  "The first completion item's replace range at point, as buffer positions the way lsp-mode
converts them, and the bounds of the symbol at point: (START END SYMBOL-START SYMBOL-END); nil
when no items."
  (let* ((resp (lsp-request "textDocument/completion"
                            (plist-put (lsp--text-document-position-params)
                                       :context (lsp-make-completion-context :trigger-kind 1))))
         (items (if (lsp-completion-list? resp) (lsp:completion-list-items resp) resp))
         (item (and items (seq-first items)))
         (edit (and item (lsp:completion-item-text-edit? item)))
         (range (and edit (if (lsp-insert-replace-edit? edit) (lsp:insert-replace-edit-replace edit)
                            (lsp:text-edit-range edit))))
         (bounds (or (bounds-of-thing-at-point 'symbol) (cons (point) (point)))))
    (when range
      (let ((r (lsp--range-to-region range)))
        (list (car r) (cdr r) (car bounds) (cdr bounds))))))
(defun laya-harvest (w)
  "Collect workspace W's stderr text (before lsp-mode kills its buffer)."
  (let* ((proc (lsp--workspace-cmd-proc w))
         (name (and proc (process-name proc)))
         (err (and name (get-buffer (format "*%s::stderr*" name)))))
    (when (buffer-live-p err)
      (with-current-buffer err
        (unless (string-empty-p (string-trim (buffer-string)))
          (push (concat "stderr: " (buffer-string)) laya-errors))))))
(advice-add 'lsp--shutdown-workspace :before (lambda (&rest _) (mapc #'laya-harvest (lsp-workspaces))))
;; lsp-mode kills the stderr buffer of a server that exits with status 0: read it first
(advice-add 'lsp--process-sentinel :before (lambda (w &rest _) (laya-harvest w)))

(laya-run-scenario)
;; the end of the session, as `lsp-workspace-shutdown' does it (shutdown, exit, kill): its
;; messages (a shutdown answer slower than lsp-mode's 0.5 s) are part of the result
(message "laya-test: end of the scenario")
(mapc #'laya-harvest laya-workspaces)
(dolist (w laya-workspaces)
  (when (process-live-p (lsp--workspace-proc w))
    (ignore-errors (with-lsp-workspace w (lsp--shutdown-workspace)))))
(laya-wait (lambda () (not (seq-some (lambda (w) (process-live-p (lsp--workspace-proc w))) laya-workspaces))) 5)
(laya-result 'shown (vconcat (reverse laya-shown)))
(laya-result 'logs (vconcat (reverse laya-logs)))
(laya-result 'server-errors (vconcat (delete-dups (reverse laya-errors))))
(laya-write-results)
