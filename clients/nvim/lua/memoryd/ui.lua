-- Scratch buffers for the views: one per view name, reused, read-only, with a target (a file,
-- a memory, a version) remembered per line for the keys to act on.
local format = require('memoryd.format')

local M = {}

local buffers = {} -- view name -> bufnr
local targets = {} -- bufnr -> {line number -> target}

local function open_window(buf, how)
  -- A window of this tab page that shows the view is reused; one in another tab page is not
  -- taken (the user asked here; jumped to, <CR> opened files in that tab page's windows),
  -- unless views open in a tab page of their own (open = 'tab'): that one is the view's place.
  local wins = how == 'tab' and vim.api.nvim_list_wins() or vim.api.nvim_tabpage_list_wins(0)
  for _, win in ipairs(wins) do
    if vim.api.nvim_win_get_buf(win) == buf then
      vim.api.nvim_set_current_win(win)
      return
    end
  end
  if how == 'vsplit' then
    vim.cmd('vsplit')
  elseif how == 'tab' then
    vim.cmd('tabnew')
  elseif how ~= 'current' then
    vim.cmd('split')
  end
  if vim.api.nvim_win_get_buf(0) ~= buf then
    vim.w.memoryd_previous_buf = vim.api.nvim_win_get_buf(0) -- what q goes back to
  end
  vim.api.nvim_win_set_buf(0, buf)
  vim.wo.wrap = false
  vim.wo.number = false
  vim.wo.relativenumber = false
end

-- A buffer already named like a view: what :mksession and :source (or a session plugin)
-- bring back from an earlier Neovim. Taken over when it holds nothing of the user's (a
-- scratch buffer, or an unmodified one); nil otherwise.
local function leftover(bufname)
  for _, b in ipairs(vim.api.nvim_list_bufs()) do
    if vim.api.nvim_buf_get_name(b) == bufname then
      local scratch = vim.api.nvim_buf_get_option(b, 'buftype') == 'nofile'
      if scratch or not vim.api.nvim_buf_get_option(b, 'modified') then
        return b
      end
      return nil
    end
  end
  return nil
end

-- The buffer of a view (created on first use); shown in a window when show is true.
-- setup(buf), when given, runs once, when the buffer is made: it maps the view's keys.
function M.buffer(name, show, setup)
  local buf = buffers[name]
  if not buf or not vim.api.nvim_buf_is_valid(buf) then
    local bufname = 'memoryd://' .. name
    buf = leftover(bufname)
    if buf then
      vim.fn.bufload(buf) -- a session's :badd leaves it unloaded, and then it takes no text
      vim.api.nvim_buf_set_option(buf, 'buflisted', false)
    else
      buf = vim.api.nvim_create_buf(false, true)
      -- A name taken by a buffer with the user's edits in it stays theirs (E95 otherwise).
      pcall(vim.api.nvim_buf_set_name, buf, bufname)
    end
    buffers[name] = buf
    vim.api.nvim_buf_set_option(buf, 'buftype', 'nofile')
    vim.api.nvim_buf_set_option(buf, 'bufhidden', 'hide')
    vim.api.nvim_buf_set_option(buf, 'swapfile', false)
    vim.api.nvim_buf_set_option(buf, 'modifiable', false)
    vim.api.nvim_buf_set_option(buf, 'filetype', 'memoryd')
    vim.keymap.set('n', 'q', function()
      -- The last window cannot be closed: show the previous buffer in it instead.
      local previous = vim.w.memoryd_previous_buf
      if #vim.api.nvim_tabpage_list_wins(0) > 1 then
        vim.cmd('close')
      elseif previous and vim.api.nvim_buf_is_valid(previous) and previous ~= buf then
        vim.api.nvim_win_set_buf(0, previous)
      else
        vim.cmd('silent! bprevious')
      end
    end, { buffer = buf, silent = true, desc = 'close' })
    if setup then
      setup(buf)
    end
  end
  if show then
    open_window(buf, require('memoryd').config.open)
  end
  return buf
end

-- The buffer of a view if it exists (nil when it was never opened or was wiped).
function M.existing(name)
  local buf = buffers[name]
  if buf and vim.api.nvim_buf_is_valid(buf) then
    return buf
  end
  return nil
end

-- Replace a view's text; line_targets maps line numbers (1-based) to what the line stands for.
-- Every view's text passes here, so this is where the daemon's strings are made safe: a line
-- break, NUL or other control character inside a line (a file name, a glob, a memory's name)
-- becomes a space, instead of making nvim_buf_set_lines refuse the whole view.
function M.render(buf, lines, line_targets)
  if not vim.api.nvim_buf_is_valid(buf) then
    return
  end
  local clean = {}
  for i, line in ipairs(lines) do
    clean[i] = format.clean(line)
  end
  lines = clean
  vim.api.nvim_buf_set_option(buf, 'modifiable', true)
  vim.api.nvim_buf_set_lines(buf, 0, -1, false, lines)
  vim.api.nvim_buf_set_option(buf, 'modifiable', false)
  vim.api.nvim_buf_set_option(buf, 'modified', false)
  targets[buf] = line_targets or {}
  -- Keep the cursor inside the new text.
  for _, win in ipairs(vim.api.nvim_list_wins()) do
    if vim.api.nvim_win_get_buf(win) == buf then
      local row = vim.api.nvim_win_get_cursor(win)[1]
      if row > #lines then
        vim.api.nvim_win_set_cursor(win, { math.max(1, #lines), 0 })
      end
    end
  end
end

function M.target(buf, line)
  buf = buf or vim.api.nvim_get_current_buf()
  line = line or vim.api.nvim_win_get_cursor(0)[1]
  return (targets[buf] or {})[line]
end

-- Open a file for editing in the window the view was opened from when there is one.
-- The path comes from the daemon (a memory's or a rule's file name, which anyone who can put
-- a file in those folders chooses): it is passed to :edit as one argument, never spliced into
-- an Ex command line, with no wildcard, %, # or | meaning (nvim_cmd, Neovim 0.8+). Neovim 0.7
-- has only the command-line form, where a line break would end the command and start another
-- (fnameescape does not escape it): such a name is refused there with a message.
function M.edit(path)
  if type(path) ~= 'string' or path == '' then
    return
  end
  local structured = vim.fn.has('nvim-0.8') == 1
  if not structured and path:find('[\r\n]') then
    require('memoryd').message(
      ('not opened: the file name holds a line break (%s); open it from a shell or Neovim 0.8+'):format(
        format.one_line(path, 200)
      ),
      vim.log.levels.WARN
    )
    return
  end
  local view = vim.api.nvim_get_current_win()
  local prev = vim.fn.win_getid(vim.fn.winnr('#'))
  if prev ~= 0 and prev ~= view then
    vim.api.nvim_set_current_win(prev)
  end
  if structured then
    vim.cmd.edit({ args = { path }, magic = { file = false, bar = false } })
  else
    vim.cmd('edit ' .. vim.fn.fnameescape(path))
  end
end

-- A key's action: fn(target) when the line under the cursor stands for a target of this kind
-- (of any kind when kind is nil).
function M.on_target(kind, fn)
  return function()
    local target = M.target()
    if target and (kind == nil or target.kind == kind) then
      fn(target)
    end
  end
end

-- A key's action: open the file the line under the cursor stands for.
M.open_target = M.on_target(nil, function(target)
  if target.path then
    M.edit(target.path)
  end
end)

function M.map(buf, lhs, fn, desc)
  vim.keymap.set('n', lhs, fn, { buffer = buf, silent = true, nowait = true, desc = desc })
end

-- Yes/no through vim.ui.select (non-modal with any UI plugin); cb runs only on yes.
-- The question holds the daemon's strings (a memory's name): made one line here, as a NUL
-- makes Neovim's own select fail (E976) and a line break splits or breaks a picker's prompt.
function M.confirm(prompt, cb)
  vim.ui.select({ 'Yes', 'No' }, { prompt = format.one_line(prompt, 300) }, function(_, index)
    if index == 1 then
      cb()
    end
  end)
end

return M
