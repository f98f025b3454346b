-- Laya ghost text for Neovim 0.11: the server's textDocument/inlineCompletion shown after the
-- cursor as virtual text while you type in insert mode, and put in the buffer when you press a key.
--
--   require('laya.inline').attach(client, bufnr, opts) -- in LspAttach, for the laya client
--
-- opts (all optional):
--   accept      = '<Tab>'      -- insert-mode key that accepts the ghost text; false: no mapping
--   accept_word = '<C-Right>'  -- insert-mode key that accepts its next word; false: no mapping
-- Without a ghost shown, both keys do what they did before (an earlier mapping of the key, or
-- the key itself). For a mapping of your own: require('laya.inline').accept() (and
-- accept_word()) accept and return true when a ghost is shown, else return false; they work
-- from any mapping, expr or not.
--
-- The ghost is only ever virtual text: the buffer changes only when you accept it. It is
-- cleared as soon as the text or the cursor changes, and on leaving insert mode or the buffer;
-- an answer that arrives after the text or the cursor moved on is dropped, and a request still
-- out when a newer one is sent is cancelled.
--
-- Neovim 0.12 and later have vim.lsp.inline_completion: there attach() enables that instead and
-- maps the accept key to vim.lsp.inline_completion.get().

local api = vim.api

local M = {}

local ns = api.nvim_create_namespace('laya.inline')
local DESC = 'Laya: accept ghost text'
local DESC_WORD = 'Laya: accept the next word of the ghost text'

---@class laya.inline.Ghost
---@field row integer 1-based cursor row when shown
---@field col integer 0-based cursor byte column when shown
---@field tick integer b:changedtick when shown
---@field line string the cursor's line when shown
---@field s integer item range start, byte column (0-based)
---@field e integer item range end, byte column (0-based, exclusive)
---@field text string the item's insertText
---@field rest string what the item adds at the cursor

---@class laya.inline.State
---@field client_id integer
---@field req_id? integer the request still out
---@field asked? string changedtick:row:col of the latest request
---@field ghost? laya.inline.Ghost
---@field mark? integer
---@field group integer

---@type table<integer, laya.inline.State>
local states = {}
---@type { bufnr: integer, ghost: laya.inline.Ghost, word: boolean }?
local pending

local function inserting()
  local mode = api.nvim_get_mode().mode
  return mode == 'i' or mode == 'ic' or mode == 'ix'
end

local function where(bufnr)
  local row, col = unpack(api.nvim_win_get_cursor(0))
  return row, col, api.nvim_buf_get_changedtick(bufnr)
end

local function clear(st, bufnr)
  st.ghost = nil
  if st.mark then
    pcall(api.nvim_buf_del_extmark, bufnr, ns, st.mark)
    st.mark = nil
  end
end

local function cancel(st)
  local id = st.req_id
  st.req_id = nil
  local client = vim.lsp.get_client_by_id(st.client_id)
  local r = id and client and client.requests[id]
  if r and r.type == 'pending' then -- not yet answered (cancelling an answered one logs an error)
    client:cancel_request(id)
  end
end

local function stop(bufnr)
  local st = states[bufnr]
  if st then
    cancel(st)
    clear(st, bufnr)
    st.asked = nil
  end
end

--- Byte column of an LSP character offset in `line`, or nil where it is off the line or not on
--- a character boundary.
local function byte_col(line, character, encoding)
  if type(character) ~= 'number' or character < 0 then
    return nil
  end
  local ok, col = pcall(vim.str_byteindex, line, encoding, character, true)
  if not ok or vim.str_utfindex(line, encoding, col, false) ~= character then
    return nil
  end
  return col
end

--- The ghost for `item` at the cursor (row, col) on `line`, or nil: only what the item adds at
--- the cursor, and only where applying it leaves the text before and after the cursor as it is.
local function ghost_for(item, line, row, col, encoding)
  local text = item.insertText
  if type(text) ~= 'string' then -- a snippet (StringValue): not from Laya
    return nil
  end
  local s, e = col, col
  if item.range then
    local from, to = item.range.start, item.range['end']
    if from.line ~= row - 1 or to.line ~= row - 1 then
      return nil
    end
    s, e = byte_col(line, from.character, encoding), byte_col(line, to.character, encoding)
    if not s or not e or s > col or e < col then
      return nil
    end
  end
  local typed, after = line:sub(s + 1, col), line:sub(col + 1, e)
  if text:sub(1, #typed) ~= typed then
    return nil -- the item does not start with the text before the cursor in its range
  end
  local rest = text:sub(#typed + 1)
  if #after > 0 then
    if #rest < #after or rest:sub(-#after) ~= after then
      return nil -- it would change the text after the cursor
    end
    rest = rest:sub(1, #rest - #after)
  end
  if rest == '' or rest:find('\n', 1, true) and line:sub(e + 1) ~= '' then
    return nil
  end
  return { row = row, col = col, line = line, s = s, e = e, text = text, rest = rest }
end

local function show(bufnr, st, ghost)
  local lines = vim.split(ghost.rest, '\n', { plain = true })
  local virt_lines = {}
  for i = 2, #lines do
    virt_lines[#virt_lines + 1] = { { lines[i], 'LayaGhost' } }
  end
  st.ghost = ghost
  st.mark = api.nvim_buf_set_extmark(bufnr, ns, ghost.row - 1, ghost.col, {
    virt_text = { { lines[1], 'LayaGhost' } },
    virt_text_pos = 'inline',
    virt_lines = #virt_lines > 0 and virt_lines or nil,
    hl_mode = 'combine',
    priority = 200,
  })
end

local function request(bufnr)
  local st = states[bufnr]
  if not st or api.nvim_get_current_buf() ~= bufnr or not inserting() then
    return
  end
  local client = vim.lsp.get_client_by_id(st.client_id)
  if not client or client:is_stopped() then
    return
  end
  local row, col, tick = where(bufnr)
  local key = tick .. ':' .. row .. ':' .. col
  if st.asked == key then
    return
  end
  cancel(st)
  st.asked = key
  if not api.nvim_get_current_line():sub(1, col):find('%S') then
    return -- only blanks before the cursor: no ghost, so that <Tab> indents
  end
  if vim.o.paste then
    return -- 'paste' turns insert-mode mappings off: <Tab> could not accept a ghost
  end
  local params = vim.lsp.util.make_position_params(0, client.offset_encoding)
  params.context = { triggerKind = 2 } -- Automatic
  local id
  local ok, rid = client:request('textDocument/inlineCompletion', params, function(err, result)
    if st.req_id ~= id or states[bufnr] ~= st then
      return -- a newer request was sent, or the buffer was detached
    end
    st.req_id = nil
    if err or type(result) ~= 'table' or api.nvim_get_current_buf() ~= bufnr or not inserting() then
      return
    end
    local r, c, t = where(bufnr)
    if t .. ':' .. r .. ':' .. c ~= key then
      return -- the text or the cursor moved on since the request
    end
    local item = (result.items or result)[1]
    if type(item) ~= 'table' then
      return
    end
    clear(st, bufnr)
    local line = api.nvim_buf_get_lines(bufnr, r - 1, r, true)[1]
    local ghost = ghost_for(item, line, r, c, client.offset_encoding)
    if ghost then
      ghost.tick = t
      show(bufnr, st, ghost)
    end
  end, bufnr)
  id = ok and rid or nil
  st.req_id = id
end

--- The text or the cursor changed: the ghost goes, and a new request is sent.
local function changed(bufnr)
  local st = states[bufnr]
  if not st then
    return
  end
  local g = st.ghost
  if g then
    local row, col, tick = where(bufnr)
    if g.tick ~= tick or g.row ~= row or g.col ~= col then
      clear(st, bufnr)
    end
  end
  request(bufnr)
end

--- The ghost shown in the current buffer at the cursor, or nil.
local function visible()
  local bufnr = api.nvim_get_current_buf()
  local st = states[bufnr]
  local g = st and st.ghost
  if not g or not st.mark then
    return nil
  end
  local row, col, tick = where(bufnr)
  if g.tick ~= tick or g.row ~= row or g.col ~= col then
    return nil
  end
  return g, bufnr
end

--- The next word of `rest`: leading blanks, then a run of keyword characters or one other.
local function next_word(rest)
  local first = rest:match('^[^\n]*')
  local word = vim.fn.matchstr(first, [[\v^\s*(\k+|\S)]])
  return word ~= '' and word or rest -- blanks only, or nothing before a line break: all of it
end

local function apply(p)
  local bufnr, g = p.bufnr, p.ghost
  local st = states[bufnr]
  if not st or api.nvim_get_current_buf() ~= bufnr then
    return false
  end
  local row, col = unpack(api.nvim_win_get_cursor(0))
  local line = api.nvim_buf_get_lines(bufnr, row - 1, row, true)[1]
  if row ~= g.row or col ~= g.col or line ~= g.line then
    return false -- closing the menu changed the text: the item no longer fits
  end
  cancel(st)
  clear(st, bufnr)
  if p.word and next_word(g.rest) ~= g.rest then
    local word = next_word(g.rest)
    api.nvim_buf_set_text(bufnr, row - 1, col, row - 1, col, { word })
    api.nvim_win_set_cursor(0, { row, col + #word })
  else
    local lines = vim.split(g.text, '\n', { plain = true })
    api.nvim_buf_set_text(bufnr, row - 1, g.s, row - 1, g.e, lines)
    local last = #lines == 1 and g.s + #lines[1] or #lines[#lines]
    api.nvim_win_set_cursor(0, { row + #lines - 1, last })
  end
  return true
end

M._ghost_for = ghost_for -- for tests

--- Called by the keys accept() queues, once the completion menu is closed.
function M._accept_pending()
  local p = pending
  pending = nil
  if p then
    apply(p)
  end
end

local function queue(word)
  local g, bufnr = visible()
  if not g then
    return false
  end
  pending = { bufnr = bufnr, ghost = g, word = word }
  local keys = ''
  if vim.fn.pumvisible() == 1 then
    -- close the menu first, keeping the text: <C-e> with nothing selected, <C-y> with an item
    -- selected (it is in the buffer, and the ghost continues it)
    keys = vim.fn.complete_info({ 'selected' }).selected == -1 and '<C-e>' or '<C-y>'
  end
  keys = keys .. [[<Cmd>lua require('laya.inline')._accept_pending()<CR>]]
  -- 'i': right after the mapping that called us, before any key typed after it; no textlock
  -- (an expr mapping may not change the buffer), and the menu is closed by then
  api.nvim_feedkeys(api.nvim_replace_termcodes(keys, true, false, true), 'ni', false)
  return true
end

--- Accept the ghost text shown at the cursor: its item replaces its range, and the cursor goes to
--- the end of the inserted text (just after the mapping that calls this returns). Returns false,
--- doing nothing, when no ghost is shown.
---@return boolean
function M.accept()
  if vim.lsp.inline_completion then
    return vim.lsp.inline_completion.get() and true or false
  end
  return queue(false)
end

--- Accept the ghost text's next word (blanks before it included). Returns false when no ghost is
--- shown.
---@return boolean
function M.accept_word()
  return queue(true)
end

--- Keys that do what `lhs` did in insert mode before Laya mapped it: a copy of an earlier mapping
--- under a <Plug> name (remap), or the key itself (noremap).
---@return string keys, boolean remap
local function fallback(lhs, bufnr, st_fallbacks)
  local old = api.nvim_buf_call(bufnr, function() -- its buffer-local mappings, else the global ones
    return vim.fn.maparg(lhs, 'i', false, true)
  end)
  if vim.tbl_isempty(old) then
    return lhs, false
  end
  if old.desc == DESC or old.desc == DESC_WORD then -- ours, from an earlier attach
    return unpack(st_fallbacks[lhs] or { lhs, false })
  end
  local plug = ('<Plug>(laya-inline-fallback-%d-%s)'):format(old.buffer == 1 and bufnr or 0,
    (lhs:gsub('[<>]', '')))
  vim.keymap.set('i', plug, old.callback or old.rhs, {
    buffer = old.buffer == 1 and bufnr or nil,
    expr = old.expr == 1,
    remap = old.noremap == 0,
    silent = old.silent == 1,
    nowait = old.nowait == 1,
    replace_keycodes = old.expr == 1 and old.replace_keycodes ~= 0 or nil,
    desc = 'Laya: what ' .. lhs .. ' did before',
  })
  return plug, true
end

local saved_fallbacks = {} ---@type table<integer, table<string, { [1]: string, [2]: boolean }>>

local function map(bufnr, lhs, desc, do_accept)
  saved_fallbacks[bufnr] = saved_fallbacks[bufnr] or {}
  local keys, remap = fallback(lhs, bufnr, saved_fallbacks[bufnr])
  saved_fallbacks[bufnr][lhs] = { keys, remap }
  vim.keymap.set('i', lhs, function()
    return do_accept() and '' or keys
  end, { buffer = bufnr, expr = true, remap = remap, desc = desc })
end

local function set_hl()
  api.nvim_set_hl(0, 'LayaGhost', { link = 'Comment', default = true })
end

--- Show the laya client's inline completions in `bufnr` as ghost text.
---@param client vim.lsp.Client the laya client
---@param bufnr integer
---@param opts? { accept?: string|false, accept_word?: string|false }
function M.attach(client, bufnr, opts)
  opts = opts or {}
  bufnr = bufnr == 0 and api.nvim_get_current_buf() or bufnr
  local accept = opts.accept == nil and '<Tab>' or opts.accept
  local accept_word = opts.accept_word == nil and '<C-Right>' or opts.accept_word
  if not client.server_capabilities.inlineCompletionProvider then
    return -- enableInline = false: the server does not offer it
  end
  if vim.lsp.inline_completion then -- Neovim 0.12+: the built-in one
    vim.lsp.inline_completion.enable(true, { bufnr = bufnr, client_id = client.id })
    if accept then
      map(bufnr, accept, DESC, vim.lsp.inline_completion.get)
    end
    return
  end
  if states[bufnr] then
    stop(bufnr)
  end
  set_hl()
  local group = api.nvim_create_augroup('laya_inline_' .. bufnr, { clear = true })
  states[bufnr] = { client_id = client.id, group = group }
  api.nvim_create_autocmd({ 'TextChangedI', 'TextChangedP', 'CursorMovedI' }, {
    buffer = bufnr,
    group = group,
    callback = function()
      changed(bufnr)
    end,
  })
  api.nvim_create_autocmd('InsertEnter', {
    buffer = bufnr,
    group = group,
    callback = function()
      vim.schedule(function()
        changed(bufnr)
      end)
    end,
  })
  api.nvim_create_autocmd({ 'InsertLeave', 'BufLeave', 'WinLeave' }, {
    buffer = bufnr,
    group = group,
    callback = function()
      stop(bufnr)
    end,
  })
  api.nvim_create_autocmd('ModeChanged', {
    buffer = bufnr,
    group = group,
    callback = function()
      if not inserting() then
        stop(bufnr)
      end
    end,
  })
  api.nvim_create_autocmd('ColorScheme', { group = group, callback = set_hl })
  api.nvim_create_autocmd({ 'BufUnload', 'LspDetach' }, {
    buffer = bufnr,
    group = group,
    callback = function(ev)
      if ev.event == 'LspDetach' and ev.data.client_id ~= client.id then
        return
      end
      stop(bufnr)
      states[bufnr] = nil
      pcall(api.nvim_del_augroup_by_id, group)
    end,
  })
  if accept then
    map(bufnr, accept, DESC, M.accept)
  end
  if accept_word then
    map(bufnr, accept_word, DESC_WORD, M.accept_word)
  end
end

return M
