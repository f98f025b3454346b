;;; laya-inline.el --- Laya's ghost text in eglot and lsp-mode  -*- lexical-binding: t -*-

;; Author: The Laya authors
;; Version: 0.1.0
;; Package-Requires: ((emacs "28.1"))
;; Keywords: convenience, languages, tools
;; SPDX-License-Identifier: Apache-2.0

;; This file is not part of GNU Emacs.

;;; Commentary:

;; `laya-inline-mode' shows the rest of the line that the Laya language
;; server (`laya-lsp') offers through `textDocument/inlineCompletion'
;; (LSP 3.18) as ghost text after point, as VS Code does.  Eglot 1.9 and
;; lsp-mode 8 have no inline completion of their own: after each command
;; that edits the buffer or moves point, this mode asks for it through the
;; client that manages the buffer (eglot, else lsp-mode, where it asks the
;; `laya' workspace only, not the language's own server).
;;
;; TAB, while the ghost text is shown (and only then: it is the keymap of
;; the ghost's overlay), puts it in the buffer (`laya-inline-accept', also
;; an M-x command); any other command hides it.  A command that neither
;; edits nor moves point (C-g) hides it until the next edit or move.  The
;; buffer is never changed but by `laya-inline-accept'.
;;
;;   (add-to-list 'load-path "/path/to/laya/editors/emacs")
;;   (require 'laya-inline)
;;   (add-hook 'eglot-managed-mode-hook #'laya-inline-mode)  ; eglot
;;   (add-hook 'lsp-mode-hook #'laya-inline-mode)            ; lsp-mode
;;
;; In a buffer whose server is not running or offers no inline completion,
;; the mode does nothing, silently.

;;; Code:

(require 'cl-lib)

(declare-function eglot-current-server "eglot" ())
(declare-function eglot--capabilities "eglot" (server))
(declare-function eglot--pos-to-lsp-position "eglot" (&optional pos))
(declare-function eglot--range-region "eglot" (range &optional markers))
(declare-function eglot--signal-textDocument/didChange "eglot" ())
(declare-function eglot--TextDocumentIdentifier "eglot" ())
(declare-function jsonrpc-async-request "jsonrpc"
                  (connection method params &rest args))
(declare-function jsonrpc-running-p "jsonrpc" (connection))
(declare-function lsp-request-async "lsp-mode"
                  (method params callback &rest args))
(declare-function lsp-workspaces "lsp-mode" ())
(declare-function lsp--cur-position "lsp-mode" ())
(declare-function lsp--position-to-point "lsp-mode" (position))
(declare-function lsp--text-document-identifier "lsp-mode" ())
(declare-function lsp--workspace-client "lsp-mode" (workspace))
(declare-function lsp--client-server-id "lsp-mode" (client))
(declare-function lsp--workspace-server-capabilities "lsp-mode" (workspace))
(declare-function lsp--workspace-status "lsp-mode" (workspace))
(declare-function lsp--flush-delayed-changes "lsp-mode" ())
(defvar eglot--managed-mode)
(defvar lsp-mode)
(defvar lsp--cur-workspace)

(defgroup laya-inline nil
  "Ghost text from a language server's inline completion."
  :group 'completion
  :prefix "laya-inline-")

(defface laya-inline-face '((t :inherit shadow))
  "Face of the ghost text.")

(defcustom laya-inline-delay 0
  "Seconds of idle time before asking for ghost text.
0 asks right after the command: the server debounces and drops
superseded requests itself, so that costs little."
  :type 'number)

(defcustom laya-inline-lsp-server-id 'laya
  "The lsp-mode client (its `:server-id') to ask for ghost text.
Laya runs next to the language's own server under lsp-mode (`:add-on?
t'): only this one is asked.  nil: the first that offers it."
  :type '(choice symbol (const :tag "Any server that offers it" nil)))

(defcustom laya-inline-timeout 5
  "Seconds to wait for an answer (eglot) before giving up, silently."
  :type 'number)

(defvar laya-inline-active-map
  (let ((map (make-sparse-keymap)))
    (define-key map (kbd "TAB") #'laya-inline-accept)
    (define-key map [tab] #'laya-inline-accept)
    map)
  "Keys active only while ghost text is shown (its overlay's keymap).")

(defvar laya-inline-mode)               ; defined below; its hooks read it
(defvar-local laya-inline--overlay nil
  "The overlay showing the ghost text, or nil.")
(defvar-local laya-inline--item nil
  "The ghost text last shown: (TICK POINT BEG TEXT GHOST), or nil.
Kept, hidden or not, until the next edit or move.  Accepting
replaces BEG..POINT, and the text after point that TEXT ends
with, by TEXT: it inserts GHOST at POINT; point goes to BEG plus
the length of TEXT.")
(defvar-local laya-inline--seen nil
  "(CHARS-TICK . POINT) last asked about.")
(defvar-local laya-inline--generation 0
  "Counts requests; an answer to an older one is dropped.")
(defvar-local laya-inline--timer nil
  "The idle timer of `laya-inline-delay', or nil.")

(defmacro laya-inline--quietly (&rest body)
  "Run BODY; drop an error in it.
A hook must never fail into the user's face, and a failing
`post-command-hook' function would be removed from the hook."
  (declare (indent 0) (debug t))
  `(condition-case nil (progn ,@body) (error nil)))

;;; Showing and clearing

(defun laya-inline--hide ()
  "Take the ghost text (and its TAB) off the screen.
`laya-inline-accept' can still take it."
  (when laya-inline--overlay
    (delete-overlay laya-inline--overlay)
    (setq laya-inline--overlay nil)))

(defun laya-inline--clear ()
  "Remove the ghost text."
  (laya-inline--hide)
  (setq laya-inline--item nil))

(defun laya-inline--show (beg end text)
  "Show TEXT, the new text of BEG..END, as ghost text at point.
Only if it fits the buffer: TEXT starts with BEG..point and ends
with point..END (END is usually point)."
  (let* ((pt (point))
         (typed (and (<= beg pt end) (buffer-substring-no-properties beg pt)))
         (after (and typed (buffer-substring-no-properties pt end)))
         (rest (and typed (string-prefix-p typed text)
                    (substring text (length typed))))
         (ghost (and rest (string-suffix-p after rest)
                     (substring rest 0 (- (length rest) (length after))))))
    (when (and ghost (> (length ghost) 0)
               (not (string-match-p
                     "\n" (buffer-substring-no-properties beg end))))
      (let ((ov (make-overlay pt pt nil nil t)) ; rear-advance: covers point
            (shown (propertize ghost 'face 'laya-inline-face)))
        (put-text-property 0 1 'cursor t shown) ; the cursor stays before it
        (overlay-put ov 'after-string shown)
        (overlay-put ov 'keymap laya-inline-active-map)
        (overlay-put ov 'window (selected-window))
        (overlay-put ov 'priority 1000)
        (overlay-put ov 'laya-inline t)
        (setq laya-inline--overlay ov
              laya-inline--item
              (list (buffer-chars-modified-tick) pt beg text ghost))))))

(defun laya-inline--get (object key)
  "KEY (a keyword) of the JSON OBJECT, a plist or a hash table."
  (cond ((hash-table-p object)
         (gethash (substring (symbol-name key) 1) object))
        ((and (consp object) (keywordp (car object)))
         (plist-get object key))))

(defun laya-inline--has (object key)
  "Return non-nil if the JSON OBJECT has KEY, even if its value is `{}'."
  (cond ((hash-table-p object)
         (not (eq (gethash (substring (symbol-name key) 1) object 'none)
                  'none)))
        ((listp object) (and (plist-member object key) t))))

(defun laya-inline--answer (buf generation tick pt result range-region)
  "Show the first item of RESULT in BUF, if BUF is as it was when asked.
RESULT is an InlineCompletionList or a vector of items.  As it
was: the same request GENERATION, chars-modified TICK and point
PT, BUF shown in the selected window.  RANGE-REGION converts an
LSP range to (BEG . END)."
  (when (buffer-live-p buf)
    (with-current-buffer buf
      (when (and laya-inline-mode
                 (eql generation laya-inline--generation)
                 (eql tick (buffer-chars-modified-tick))
                 (eql pt (point))
                 (eq buf (window-buffer (selected-window))))
        (laya-inline--clear)
        (let* ((items (if (vectorp result) result
                        (laya-inline--get result :items)))
               (item (and (> (length items) 0) (elt items 0)))
               (text (laya-inline--get item :insertText))
               (range (laya-inline--get item :range))
               (region (if range (funcall range-region range) (cons pt pt))))
          (when (and (stringp text)
                     (integerp (car region)) (integerp (cdr region)))
            (laya-inline--show (car region) (cdr region) text)))))))

;;; Asking

(defun laya-inline--eglot-server ()
  "Return the buffer's running eglot server if it does inline completion."
  (when (and (bound-and-true-p eglot--managed-mode)
             (fboundp 'eglot-current-server))
    (let ((server (eglot-current-server)))
      (and server (jsonrpc-running-p server)
           (laya-inline--has (eglot--capabilities server)
                             :inlineCompletionProvider)
           server))))

(defun laya-inline--lsp-workspace ()
  "Return the buffer's lsp-mode workspace to ask, or nil.
The one of `laya-inline-lsp-server-id', if it is initialized and
offers inline completion."
  (when (and (bound-and-true-p lsp-mode) (fboundp 'lsp-workspaces))
    (cl-find-if
     (lambda (w)
       (and (eq (lsp--workspace-status w) 'initialized)
            (or (null laya-inline-lsp-server-id)
                (eq (lsp--client-server-id (lsp--workspace-client w))
                    laya-inline-lsp-server-id))
            (laya-inline--has (lsp--workspace-server-capabilities w)
                              :inlineCompletionProvider)))
     (lsp-workspaces))))

(defun laya-inline--request ()
  "Ask the buffer's server for inline completion at point.
The answer shows the ghost text (`laya-inline--answer')."
  (let* ((buf (current-buffer))
         (tick (buffer-chars-modified-tick))
         (pt (point))
         (generation (cl-incf laya-inline--generation))
         (params (lambda (position)
                   (list :position position :context '(:triggerKind 2))))
         server workspace)
    (cond
     ((setq server (laya-inline--eglot-server))
      ;; eglot sends changes on an idle timer: send them first
      (eglot--signal-textDocument/didChange)
      (jsonrpc-async-request
       server :textDocument/inlineCompletion
       (append (list :textDocument (eglot--TextDocumentIdentifier))
               (funcall params (eglot--pos-to-lsp-position)))
       :success-fn
       (lambda (result)
         (laya-inline--quietly
           (laya-inline--answer buf generation tick pt result
                                #'eglot--range-region)))
       :error-fn #'ignore :timeout-fn #'ignore :timeout laya-inline-timeout))
     ((setq workspace (laya-inline--lsp-workspace))
      (when (fboundp 'lsp--flush-delayed-changes)
        (lsp--flush-delayed-changes))
      ;; bound, `lsp-workspaces' is this one: the request goes to it only
      (let ((lsp--cur-workspace workspace))
        (lsp-request-async
         "textDocument/inlineCompletion"
         (append (list :textDocument (lsp--text-document-identifier))
                 (funcall params (lsp--cur-position)))
         (lambda (results)
           (laya-inline--quietly
             (laya-inline--answer
              buf generation tick pt (cdr (assq workspace results))
              (lambda (range)
                (cons (lsp--position-to-point
                       (laya-inline--get range :start))
                      (lsp--position-to-point
                       (laya-inline--get range :end)))))))
         :mode 'detached :no-merge t :error-handler #'ignore))))))

(defun laya-inline--fire (buf)
  "Ask in BUF, from the idle timer, if nothing changed since it was set."
  (laya-inline--quietly
    (when (buffer-live-p buf)
      (with-current-buffer buf
        (setq laya-inline--timer nil)
        (when (and laya-inline-mode
                   (equal laya-inline--seen
                          (cons (buffer-chars-modified-tick) (point))))
          (laya-inline--request))))))

;;; Hooks

(defun laya-inline--pre-command ()
  "Hide the ghost text before any command but `laya-inline-accept'."
  (laya-inline--quietly
    (unless (eq this-command 'laya-inline-accept)
      (laya-inline--hide))))

(defun laya-inline--post-command ()
  "Ask for ghost text after a command that edited or moved point."
  (laya-inline--quietly
    (let ((state (cons (buffer-chars-modified-tick) (point))))
      (unless (equal state laya-inline--seen)
        (setq laya-inline--seen state)
        (laya-inline--clear)
        (when laya-inline--timer (cancel-timer laya-inline--timer))
        (setq laya-inline--timer nil)
        (if (and (numberp laya-inline-delay) (> laya-inline-delay 0))
            (setq laya-inline--timer
                  (run-with-idle-timer laya-inline-delay nil
                                       #'laya-inline--fire (current-buffer)))
          (laya-inline--request))))))

(defun laya-inline--after-change (&rest _)
  "Remove the ghost text on any change: a command's, a timer's, a process's."
  (when (or laya-inline--overlay laya-inline--item)
    (laya-inline--clear)))

;;; Commands

(defun laya-inline-accept ()
  "Put the ghost text shown at point in the buffer.
The item's range becomes its text, exactly, and point goes to its
end.  Takes the ghost last shown even if a command that neither
edited nor moved point (such as `execute-extended-command' or
`keyboard-quit') hid it since.  Return non-nil if there was ghost
text to accept."
  (interactive)
  (let ((item laya-inline--item))
    (laya-inline--clear)
    (when item
      (cl-destructuring-bind (tick pt beg text ghost) item
        (when (and (eql tick (buffer-chars-modified-tick)) (eql pt (point)))
          (insert ghost)
          (goto-char (+ beg (length text)))
          t)))))

;;;###autoload
(define-minor-mode laya-inline-mode
  "Show the language server's inline completion as ghost text.
After each command that edits the buffer or moves point, ask the
buffer's server (eglot's, else the lsp-mode workspace of
`laya-inline-lsp-server-id') for `textDocument/inlineCompletion'
and show what its first item adds after point.
\\<laya-inline-active-map>
While it is shown, \\[laya-inline-accept] puts it in the buffer; any
other command hides it."
  :lighter nil
  (laya-inline--clear)
  (when laya-inline--timer (cancel-timer laya-inline--timer))
  (setq laya-inline--timer nil laya-inline--seen nil)
  (cl-incf laya-inline--generation)     ; answers in flight are dropped
  (if laya-inline-mode
      (progn
        (add-hook 'pre-command-hook #'laya-inline--pre-command nil t)
        (add-hook 'post-command-hook #'laya-inline--post-command nil t)
        (add-hook 'after-change-functions #'laya-inline--after-change nil t)
        (add-hook 'change-major-mode-hook #'laya-inline--clear nil t))
    (remove-hook 'pre-command-hook #'laya-inline--pre-command t)
    (remove-hook 'post-command-hook #'laya-inline--post-command t)
    (remove-hook 'after-change-functions #'laya-inline--after-change t)
    (remove-hook 'change-major-mode-hook #'laya-inline--clear t)))

(provide 'laya-inline)
;;; laya-inline.el ends here
