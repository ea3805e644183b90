-- :MemorydRules — the instruction files in effect for the current buffer (get_context with the
-- buffer's folder as cwd and its file as touched_paths): type, path, the @include tree, which
-- conditional rules matched and why, and what was skipped and why. <CR> opens a file; an
-- instruction file changed (saved here, or edited elsewhere: the daemon's context/changed)
-- refreshes the view.
local memoryd = require('memoryd')
local format = require('memoryd.format')
local ui = require('memoryd.ui')
local text = require('memoryd.views.text')
local debounce = require('memoryd.debounce')

local M = {}

M.shown_paths = nil -- {path = true} of the files the view on screen lists
-- The buffer context asked for last: what a refresh asks for again. The one on screen was
-- asked for with a newer ticket while a command's answer was on its way, drawn first, and the
-- command's answer then dropped as older: the previous buffer's rules stayed on screen.
M.wanted = nil

local uv = vim.uv or vim.loop

local function why(file, touched)
  local reason = file.reason
  if reason == 'session_start' then
    return ''
  elseif reason == 'include' then
    return '  (@include)'
  elseif reason == 'nested' then
    return '  (nested: a touched path is below its folder)'
  elseif reason == 'path_glob' then
    return text.globs_note(file.globs, touched)
  end
  return '  (' .. tostring(reason) .. ')'
end

-- Pure: the lines of the view and the file each line stands for.
-- reply: get_context's result; ctx: {cwd, file}; home: $HOME.
function M.render(reply, ctx, home)
  local root = format.display_root(ctx.cwd)
  local short = function(path)
    return format.short_path(path, root, home)
  end
  local touched = ctx.file and short(ctx.file) or nil
  local b = text.builder()
  local add = b.add
  if ctx.file then
    add('Rules in effect for ' .. touched)
  elseif ctx.memory then
    add(('Rules in effect for %s  (the project of the memory %s)'):format(format.short_path(ctx.cwd, nil, home), format.one_line(format.basename(ctx.memory), 80)))
  else
    add('Rules in effect for ' .. format.short_path(ctx.cwd, nil, home) .. '  (this buffer has no file: folder only)')
  end
  add('project: ' .. format.short_path(root, nil, home))
  add('')

  local files = reply.files or {}
  if #files == 0 then
    add('No instruction files apply here.')
  end
  text.file_tree(b, files, '', short, function(file)
    return why(file, touched)
  end)

  local skipped = reply.skipped or {}
  if #skipped > 0 then
    add('')
    add('Skipped')
    for _, item in ipairs(skipped) do
      local line = '  ' .. short(item.path) .. ' — ' .. tostring(item.reason)
      if item.detail and item.detail ~= '' then
        line = line .. ': ' .. format.one_line(item.detail, 100)
      end
      if item.parent then
        line = line .. '  (from ' .. short(item.parent) .. ')'
      end
      add(line, { path = item.path })
    end
  end
  text.warnings(b, reply.warnings)
  add('')
  add('<CR> open file   r refresh   q close')
  return b.lines, b.targets
end

local function paths_of(reply)
  local paths = {}
  for _, list in ipairs({ reply.files or {}, reply.skipped or {} }) do
    for _, item in ipairs(list) do
      if item.path then
        paths[item.path] = true
      end
    end
  end
  return paths
end

local function setup_keys(buf)
  ui.map(buf, '<CR>', ui.open_target, 'open the file')
  ui.map(buf, 'r', function()
    if M.wanted then
      M.refresh(M.wanted, false)
    end
  end, 'refresh')
end

-- The view draws the newest answer only (its requests are answered concurrently).
local latest = require('memoryd.latest').new()

-- Fetch and draw; show: bring the view to a window. background: nobody asked (a save
-- refreshes the view), so a daemon that is down is not reported again, nor offered to be
-- started, on every :w; the outage was reported once and the status line says so.
-- done (optional): called once the request has finished, answered or not.
function M.refresh(ctx, show, background, done)
  M.wanted = ctx
  local params = { cwd = ctx.cwd }
  if ctx.file then
    params.touched_paths = { ctx.file }
  end
  local ticket = latest.ask()
  memoryd.request('get_context', params, function(reply)
    if not latest.take(ticket) then
      return -- a newer answer is drawn already
    end
    local buf = ui.buffer('rules', show, setup_keys)
    local lines, targets = M.render(reply, ctx, vim.env.HOME)
    ui.render(buf, lines, targets)
    M.shown_paths = paths_of(reply)
    -- MEMORY.md opened from here is about this project, as a memory opened from the list is.
    require('memoryd.memory_files').add_dir(reply.memory_dir, ctx.cwd)
  end, {
    on_error = background and function(err)
      return err.code == 'down' or err.code == 'closed'
    end or nil,
    retry = function()
      M.refresh(ctx, show)
    end,
    finished = done,
  })
end

-- The view on screen asked for again in the background, one request at a time.
local again = require('memoryd.coalesce').new(function(done)
  if M.wanted and ui.existing('rules') then
    M.refresh(M.wanted, false, true, done)
  else
    done()
  end
end)

-- Is dir the project root or a folder below it?
local function within(dir, root)
  return dir == root or root == '/' or dir:sub(1, #root + 1) == root .. '/'
end

-- The daemon's context/changed: the instruction files of a project a client loaded changed
-- (edited in another program, a git checkout). The view on screen is asked for again when
-- its folder is in that project; the daemon sends at most one per project per 250 ms, and
-- changes that come while the view is being asked for make one request more after it.
function M.on_context_changed(note)
  local project = type(note.params) == 'table' and note.params.project or nil
  if type(project) ~= 'string' or not M.wanted then
    return
  end
  local cwd = M.wanted.cwd
  -- The daemon names the real path; the buffer's folder may be reached through a link.
  if not within(cwd, project) and not within(uv.fs_realpath(cwd) or cwd, project) then
    return
  end
  vim.schedule(again.ask)
end

local listening = false
function M.open(bufnr)
  if not listening then
    listening = true
    memoryd.on('context/changed', M.on_context_changed)
  end
  M.refresh(memoryd.buffer_context(bufnr), true)
end

-- Is this path an instruction file (one in the view, or one that could become one)?
local function is_instruction_file(path)
  if M.shown_paths and M.shown_paths[path] then
    return true
  end
  local name = vim.fn.fnamemodify(path, ':t')
  if name == 'CLAUDE.md' or name == 'CLAUDE.local.md' or name == 'AGENTS.md' then
    return true
  end
  return path:match('/rules/.+%.md$') ~= nil
end

local function refresh_after_write()
  if M.wanted and ui.existing('rules') then
    M.refresh(M.wanted, false, true)
  end
end

local once_more = debounce.new(refresh_after_write)
local after_writes = debounce.new(function()
  refresh_after_write()
  once_more.ask(850)
end)

-- Called on every BufWritePost: refresh the view when an instruction file was saved. The
-- daemon's watcher needs a moment to see the change, so ask shortly after the saves (at the
-- latest a second after the first of a run of them), then once more.
function M.on_write(path)
  if not M.shown_paths or not ui.existing('rules') or not is_instruction_file(path) then
    return
  end
  once_more.cancel()
  after_writes.ask(150)
end

return M
