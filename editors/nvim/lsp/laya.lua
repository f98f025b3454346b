-- Laya: local code completion over LSP (laya-lsp). Neovim 0.11+:
--   vim.opt.runtimepath:append('/path/to/laya/editors/nvim')  -- or copy this file to ~/.config/nvim/lsp/
--   vim.lsp.enable('laya')
-- Override any field with vim.lsp.config('laya', { ... }) before enabling, e.g.
--   vim.lsp.config('laya', { cmd = { '/path/to/laya/.venv/bin/laya-lsp' } })
-- init_options are the server's initializationOptions (laya_lsp/config.py), all at their defaults.
return {
  cmd = { 'laya-lsp' },
  filetypes = {
    'python', 'lua', 'javascript', 'javascriptreact', 'typescript', 'typescriptreact',
    'go', 'rust', 'c', 'cpp', 'java', 'sh', 'ruby', 'toml', 'yaml', 'json', 'markdown', 'text', 'rst', 'gitcommit',
  },
  root_markers = { '.git' },
  init_options = {
    modelPath = nil, -- model folder (mlx-lm format); nil: the shipped model; another mlx-lm model writes inline ghost text
    variant = 'code', -- 'code' or 'typing' (engine variant from configs/)
    debounceMs = 0, -- wait this long (ms) before computing a completion; 0: no wait
    maxItems = 20, -- most items in one completion list
    enableInline = true, -- answer textDocument/inlineCompletion with the rest-of-line continuation
    logLevel = 'info', -- 'debug', 'info', 'warning' or 'error'
    backend = nil, -- override the variant's backend: 'numpy', 'numba', 'mlx' or 'auto'; nil: the variant's
    workspaceIndex = true, -- index the workspace's source files (honours .gitignore) for suggestions
    watchProcessId = true, -- exit when the editor's processId is gone; false in a container or remote set-up
    lineBreaks = 'auto', -- where lines end: 'auto' (Neovim: at \n only, as it counts), 'lf' or 'lsp'
    prose = true, -- Markdown, text, reST and commit messages: the typing variant's model completes words
    system2 = false, -- a larger local model continues the line after each answer (`laya system2 install` first)
    system2Path = nil, -- System 2's GGUF file; nil: the one `laya system2 install` wrote
  },
}
