-- Buffers of files the daemon rewrote in the background (a MagicDoc's update, a memory saved by
-- the agent or extraction, a session summary, a team pull's files and conflicts) are checked with
-- :checktime when the daemon says so, so an unmodified buffer with 'autoread' (Neovim's
-- default) shows the new text instead of the old one until a write warning or a :checktime.
-- A buffer with unsaved edits is left alone: reloading it would lose them, and Neovim's own
-- check warns of the conflict when it looks (at a write, or on focus).
local format = require('memoryd.format')

local M = {}

-- The events that name a file the daemon wrote (params.path, or team/synced's params.paths:
-- the first 20 a pull wrote, the rest counted in params.more; docs/protocol.md). They are
-- listened to whatever notifications.events says, as the views' refreshes are.
M.EVENTS = { 'magicdoc/updated', 'memory/saved', 'session/summary_updated', 'team/conflict', 'team/synced' }
M.MAX_PATHS = 20 -- of params.paths read: what the daemon names at most

local uv = vim.uv or vim.loop
local pending = {} -- path -> true: checked at the next pass
local check_all = false -- files were written that no note named: every buffer is checked
local scheduled = false

local function is_path(value)
  return type(value) == 'string' and value:sub(1, 1) == '/' and not value:find('%z')
end

-- Whether :checktime may reload buf (named name) on its own: loaded, a file, no unsaved
-- changes, and 'autoread' on. Not one with 'autoread' off: :checktime would ask there (W11), a
-- prompt that stops the editor at whatever moment the daemon wrote; its user reloads by hand.
local function reloadable(buf, name)
  return vim.api.nvim_buf_is_loaded(buf)
    and vim.api.nvim_buf_get_option(buf, 'buftype') == ''
    and not vim.api.nvim_buf_get_option(buf, 'modified')
    and vim.fn.getbufvar(buf, '&autoread') == 1
    and not name:match('^%a[%w+.-]*://')
    -- A file deleted (or now a folder): :checktime says E211 and sleeps a second there.
    and (uv.fs_stat(name) or {}).type == 'file'
end

-- The reloadable buffers of files: all of them (a team pull that wrote more files than it
-- named; :checktime leaves an unchanged file's buffer as it is).
function M.all_buffers()
  local found = {}
  for _, buf in ipairs(vim.api.nvim_list_bufs()) do
    local name = vim.api.nvim_buf_get_name(buf)
    if name ~= '' and reloadable(buf, name) then
      found[#found + 1] = buf
    end
  end
  return found
end

-- The reloadable buffers that show one of paths: as named, or the same file reached through a
-- link (a buffer opened by a linked folder; the daemon names its own).
function M.buffers_of(paths)
  local by_name = {} -- basename -> {path, ...}: only a buffer with a candidate's name is looked up
  for path in pairs(paths) do
    local name = format.basename(path)
    by_name[name] = by_name[name] or {}
    table.insert(by_name[name], path)
  end
  local real = {}
  local function realpath(path)
    if real[path] == nil then
      real[path] = uv.fs_realpath(path) or false
    end
    return real[path]
  end
  local found = {}
  for _, buf in ipairs(vim.api.nvim_list_bufs()) do
    local name = vim.api.nvim_buf_get_name(buf)
    local candidates = name ~= '' and by_name[format.basename(name)] or nil
    if candidates and reloadable(buf, name) then
      local file = vim.fn.fnamemodify(name, ':p')
      for _, path in ipairs(candidates) do
        if path == file or (realpath(path) and realpath(path) == realpath(file)) then
          found[#found + 1] = buf
          break
        end
      end
    end
  end
  return found
end

local function check_pending()
  if vim.fn.getcmdwintype() ~= '' then
    -- :checktime is E11 in the command-line window (q:): the files wait for it to close.
    vim.api.nvim_create_autocmd('CmdwinLeave', {
      once = true,
      callback = function()
        vim.schedule(check_pending)
      end,
    })
    return
  end
  scheduled = false
  local paths, all = pending, check_all
  pending, check_all = {}, false
  for _, buf in ipairs(all and M.all_buffers() or M.buffers_of(paths)) do
    vim.cmd(('checktime %d'):format(buf))
  end
end

-- A notification's listener: note the files (and for a memory, the MEMORY.md beside it, whose
-- line the save rewrote); the buffers are checked once per burst, in one scheduled pass.
function M.on_note(note)
  local params = type(note.params) == 'table' and note.params or {}
  local noted = false
  if is_path(params.path) then
    pending[params.path] = true
    noted = true
    if note.method == 'memory/saved' then
      pending[params.path:gsub('[^/]+/*$', '') .. 'MEMORY.md'] = true
    end
  end
  if note.method == 'team/synced' then
    local paths = type(params.paths) == 'table' and params.paths or {}
    for i = 1, math.min(#paths, M.MAX_PATHS) do
      if is_path(paths[i]) then
        pending[paths[i]] = true
        noted = true
      end
    end
    -- Paths past what is read are files written and not looked for, as those counted in more.
    if (type(params.more) == 'number' and params.more > 0) or #paths > M.MAX_PATHS then
      check_all = true
      noted = true
    end
  end
  if noted and not scheduled then
    scheduled = true
    vim.schedule(check_pending)
  end
end

return M
