-- Laya for Neovim 0.11: a completion item accepted with the cursor inside an identifier replaces
-- the whole identifier, as the server's item says, not only its part before the cursor.
--
--   require('laya.complete').attach(client, bufnr) -- in LspAttach, for the laya client
--
-- Laya's item replaces the identifier (`self.c|le`, then `close`: its textEdit range ends where
-- `cle` does), but Neovim 0.11's completion uses only the range's start: it inserts the item from
-- there to the cursor and keeps the rest (`self.closele`). On accepting (<C-y>), this deletes that
-- rest: the text from where the cursor was when the list on screen was asked for to the range's
-- end, and only while that text still follows the cursor.
--
-- The list on screen may be older than the last request: typing on while the menu is open asks
-- again, and until the answer comes Neovim filters the list it has. So the cursor and the line are
-- noted per request when it is sent, and taken as the list's when that request's answer arrives
-- (a cancelled request's note is dropped: Neovim shows no answer to it, except one already on
-- its way; that item's range then mostly does not end at an identifier's end in the note's line,
-- and nothing is deleted).
--
-- The rest is deleted with <Del> keys typed into the same insert (not with an API call after it),
-- so that the deletion is part of the insert: `.` repeats it (`self.|le`, `.` gives `self.close`,
-- not `self.closele`) and one `u` undoes the whole completion.

local api = vim.api

local M = {}

local DEL = api.nvim_replace_termcodes('<Del>', true, false, true)

---@class laya.complete.Note
---@field row integer 1-based cursor row when the request was sent
---@field col integer 0-based cursor byte column when the request was sent
---@field line string the cursor's line when the request was sent

--- The text of `asked`'s line from its cursor to the end of `range` (on the same line), or nil.
---@param asked laya.complete.Note
---@param range { ['end']: { line: integer, character: integer } }
---@param encoding string the client's offset encoding
---@return string?
local function rest_of_word(asked, range, encoding)
  local stop = range['end']
  if type(stop) ~= 'table' or stop.line ~= asked.row - 1 or type(stop.character) ~= 'number' then
    return nil
  end
  local ok, stop_col = pcall(vim.str_byteindex, asked.line, encoding, stop.character, false)
  if not ok then
    return nil
  end
  local rest = asked.line:sub(asked.col + 1, stop_col)
  -- the range must end where an identifier of that line ends: if it does not, the note is not the
  -- list's (an answer Neovim showed although it had cancelled the request), and nothing is deleted
  if rest ~= '' and (vim.fn.match(asked.line:sub(1, stop_col), [[\k$]]) < 0
      or vim.fn.match(asked.line:sub(stop_col + 1), [[^\k]]) == 0) then
    return nil
  end
  return rest
end

--- Make an item accepted inside an identifier in `bufnr` replace the identifier's rest too.
---@param client vim.lsp.Client the laya client
---@param bufnr integer
function M.attach(client, bufnr)
  bufnr = bufnr == 0 and api.nvim_get_current_buf() or bufnr
  -- one group per buffer: the client attaches again after :bdelete/:edit or a server restart
  local group = api.nvim_create_augroup('laya_complete_accept_' .. bufnr, { clear = true })
  local notes = {} ---@type table<integer, laya.complete.Note> by request id, while it is out
  local asked ---@type laya.complete.Note? the request whose answer came last: the list on screen

  api.nvim_create_autocmd('LspRequest', {
    buffer = bufnr,
    group = group,
    callback = function(ev)
      local r, id = ev.data.request, ev.data.request_id
      if ev.data.client_id ~= client.id or r.method ~= 'textDocument/completion' then
        return
      end
      if r.type == 'pending' then
        if api.nvim_get_current_buf() == bufnr then -- Neovim asks at the cursor, synchronously
          local row, col = unpack(api.nvim_win_get_cursor(0))
          notes[id] = { row = row, col = col, line = api.nvim_get_current_line() }
        end
      elseif r.type == 'cancel' then
        notes[id] = nil -- Neovim shows no answer to it (the server acknowledges it with an error)
      elseif r.type == 'complete' then
        -- the answer is here: Neovim's handler, which shows it, runs right after this autocommand
        asked = notes[id] or asked
        for k in pairs(notes) do
          if k <= id then
            notes[k] = nil
          end
        end
      end
    end,
  })

  api.nvim_create_autocmd('CompleteDone', {
    buffer = bufnr,
    group = group,
    callback = function()
      local lsp = vim.tbl_get(vim.v.completed_item, 'user_data', 'nvim', 'lsp') or {}
      local range = vim.tbl_get(lsp, 'completion_item', 'textEdit', 'range')
      local row, col = unpack(api.nvim_win_get_cursor(0))
      if vim.v.event.reason ~= 'accept' or lsp.client_id ~= client.id or not range or not asked
          or asked.row ~= row then
        return
      end
      local rest = rest_of_word(asked, range, client.offset_encoding)
      local after = rest and api.nvim_get_current_line():sub(col + 1, col + #rest)
      if not rest or rest == '' or after ~= rest then
        return
      end
      -- one <Del> per character (a base character with its composing ones), not per byte; 'n':
      -- no mapping of <Del> applies; 'i': before any key typed after the accepting one
      api.nvim_feedkeys(DEL:rep(vim.fn.strchars(rest, true)), 'ni', false)
    end,
  })
end

return M
