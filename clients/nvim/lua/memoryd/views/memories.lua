-- :MemorydMemories — the grouped list of the memory UI (memory.list): instruction files by
-- type with their @includes, then memories newest first, then team memories. Keys: <CR>/e
-- edit, d delete, h history (then <CR> restores a version), r refresh.
local memoryd = require('memoryd')
local format = require('memoryd.format')
local ui = require('memoryd.ui')
local text = require('memoryd.views.text')

local M = {}

M.last_ctx = nil
-- The daemon's answer to the last delete it refused ({title, text}), shown whole at the top of
-- the view until the user's next d, r or :MemorydMemories. The same message on the command
-- line is cut to fit (an echo that does not fit stops at a hit-enter prompt), and a refusal's
-- reason ("deletions do not reach the team server…") comes after the memory's full path.
M.notice = nil

-- text in lines of at most width characters, broken at spaces (a longer word stands alone).
function M.wrap(text, width)
  local lines, line = {}, ''
  for word in format.clean(text):gmatch('%S+') do
    if line == '' then
      line = word
    elseif vim.fn.strchars(line) + 1 + vim.fn.strchars(word) <= width then
      line = line .. ' ' .. word
    else
      lines[#lines + 1] = line
      line = word
    end
  end
  if line ~= '' then
    lines[#lines + 1] = line
  end
  return lines
end

local function by_newest(a, b)
  return (a.mtime or 0) > (b.mtime or 0)
end

-- Pure: the lines of the view and what each line stands for. notice: M.notice; width: the
-- window's, for the notice's lines.
function M.render(reply, ctx, now, home, notice, width)
  local b = text.builder()
  local add = b.add
  local root = format.display_root(ctx.cwd)
  add('Memories for ' .. format.short_path(root, nil, home))
  if reply.memory_dir then
    add('memory folder: ' .. format.short_path(reply.memory_dir, nil, home))
  end
  add('')
  if notice then
    add(format.one_line(notice.title, 200))
    for _, line in ipairs(M.wrap(notice.text, math.max(40, (width or 100) - 3))) do
      add('  ' .. line)
    end
    add('')
  end

  add('Instruction files')
  local files = reply.instruction_files or {}
  if #files == 0 then
    add('  (none)')
  end
  text.file_tree(b, files, '  ', function(path)
    return format.short_path(path, root, home)
  end, function(file)
    if file.globs then
      return text.globs_note(file.globs)
    end
    return ''
  end)

  local personal, team = {}, {}
  for _, memory in ipairs(reply.memories or {}) do
    table.insert(memory.team and team or personal, memory)
  end
  table.sort(personal, by_newest)
  table.sort(team, by_newest)
  for _, group in ipairs({ { 'Memories', personal }, { 'Team memories', team } }) do
    local title, list = group[1], group[2]
    if title == 'Memories' or #list > 0 then
      add('')
      add(('%s (%d)'):format(title, #list))
      if #list == 0 then
        add('  (none yet: :MemorydRemember saves one)')
      end
      for _, memory in ipairs(list) do
        local kind = (memory.team and 'team/' or '') .. tostring(memory.type or '?')
        local line = ('  %-16s %4s  %s'):format(kind, format.age(memory.mtime, now), format.one_line(memory.name or memory.file, 80))
        if memory.description and memory.description ~= '' then
          line = line .. ' — ' .. format.one_line(memory.description, 120)
        end
        if memory.problem then
          line = line .. '  ! ' .. format.one_line(memory.problem, 80)
        end
        add(line, { kind = 'memory', path = memory.path, name = memory.name or memory.file })
      end
    end
  end

  text.warnings(b, reply.warnings)
  add('')
  add('<CR>/e edit   d delete   h history/restore   r refresh   q close')
  return b.lines, b.targets
end

-- Pure: the history view of one memory.
-- cwd: the project the history was asked in, kept with each version: a restore goes there,
-- whichever project the memories view shows by then.
function M.render_history(reply, name, now, cwd)
  local b = text.builder()
  local add = b.add
  add(('History of %s%s'):format(name, reply.exists == false and '  (deleted)' or ''))
  add('')
  local versions = reply.versions or {}
  if #versions == 0 then
    add('No earlier versions.')
  end
  for _, v in ipairs(versions) do
    add(
      ('  %-25s %4s ago  %6d bytes  %s'):format(
        tostring(v.time or v.version),
        format.age(v.timestamp, now),
        tonumber(v.size) or 0,
        tostring(v.reason or '')
      ),
      { kind = 'version', path = reply.path, version = v.version, name = name, cwd = cwd }
    )
  end
  add('')
  add('<CR> restore this version   q close')
  return b.lines, b.targets
end

-- The view draws the newest answer only (its requests are answered concurrently).
local latest = require('memoryd.latest').new()

-- background: nobody asked (a notification refreshes the view): a daemon gone meanwhile is
-- not reported again nor offered to be started; the outage was reported once.
-- done (optional): called once the request has finished, answered or not.
function M.refresh(ctx, show, background, done)
  local ticket = latest.ask()
  memoryd.request('memory.list', { cwd = ctx.cwd }, function(reply)
    if not latest.take(ticket) then
      return -- a newer list is drawn already
    end
    local buf = ui.buffer('memories', show, M.setup_keys)
    local win = vim.fn.bufwinid(buf)
    local width = win ~= -1 and vim.api.nvim_win_get_width(win) or vim.o.columns
    local lines, targets = M.render(reply, ctx, os.time(), vim.env.HOME, M.notice, width)
    ui.render(buf, lines, targets)
    M.last_ctx = ctx
    -- A memory opened from here and saved is snapshotted and reconciled in this project.
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

local function reload()
  if M.last_ctx and ui.existing('memories') then
    M.refresh(M.last_ctx, false, false)
  end
end

-- The view on screen listed again in the background, one memory.list at a time (a storm of
-- saves from a daemon slow to answer queued one every 200 ms).
local background = require('memoryd.coalesce').new(function(done)
  if M.last_ctx and ui.existing('memories') then
    M.refresh(M.last_ctx, false, true, done)
  else
    done()
  end
end)

-- After a memory file was saved in the editor (memory_files): the view shows it, if it is open.
function M.reload_in_background()
  background.ask()
end

function M.delete(target)
  ui.confirm(('Delete the memory "%s"? (its content is kept in history)'):format(target.name), function()
    M.notice = nil
    memoryd.request('memory.delete', { cwd = M.last_ctx.cwd, path = target.path }, function()
      memoryd.message('deleted ' .. format.basename(target.path))
      reload()
    end, {
      on_error = function(err)
        if type(err.code) ~= 'number' then
          return false -- down, timed out: reported as for any request
        end
        -- The daemon refused and says why (a synced team memory: deletions do not reach the
        -- team server), in its own words: that is the message, not "memory.delete failed".
        local why = format.clean(err.message)
        memoryd.message('not deleted: ' .. why, vim.log.levels.WARN)
        M.notice = { title = ('Not deleted: %s'):format(target.name), text = why }
        reload()
        return true
      end,
    })
  end)
end

-- cwd: the project the memory was listed in (default: the one the memories view shows now).
function M.history(target, cwd)
  cwd = cwd or M.last_ctx.cwd
  memoryd.request('memory.history', { cwd = cwd, path = target.path }, function(reply)
    local buf = ui.buffer('history', true, function(b)
      ui.map(b, '<CR>', ui.on_target('version', M.restore), 'restore this version')
    end)
    local lines, targets = M.render_history(reply, target.name, os.time(), cwd)
    ui.render(buf, lines, targets)
  end)
end

-- The memories view may show another project by now (:MemorydMemories in another buffer):
-- the restore goes to the project of the history it was chosen in, as its file lives there
-- (the view's project was refused as "outside the memory directory").
function M.restore(version)
  local cwd = version.cwd or M.last_ctx.cwd
  ui.confirm(('Restore %s to the version of %s? (the current text goes to history)'):format(version.name, version.version), function()
    memoryd.request('memory.restore', { cwd = cwd, path = version.path, version = version.version }, function(reply)
      memoryd.message(('restored %s (%s)'):format(format.basename(version.path), version.version))
      -- As memory.write's: e.g. MEMORY.md could not be rewritten yet.
      for _, warning in ipairs(type(reply.warnings) == 'table' and reply.warnings or {}) do
        memoryd.message(format.one_line(warning, format.WARNING_MAX), vim.log.levels.WARN)
      end
      reload()
      M.history({ path = version.path, name = version.name }, cwd)
    end)
  end)
end

function M.setup_keys(buf)
  ui.map(buf, '<CR>', ui.open_target, 'edit')
  ui.map(buf, 'e', ui.open_target, 'edit')
  ui.map(buf, 'd', ui.on_target('memory', M.delete), 'delete the memory')
  ui.map(buf, 'h', ui.on_target('memory', M.history), 'history and restore')
  ui.map(buf, 'r', function()
    M.notice = nil
    reload()
  end, 'refresh')
end

local watching = false
function M.open()
  if not watching then
    watching = true
    M.watch()
  end
  M.notice = nil
  M.refresh(memoryd.buffer_context(), true)
end

-- A saved memory (from any client) shows up without a manual refresh; a burst of saves
-- costs one memory.list.
local reload_timer = nil
function M.watch()
  memoryd.on('memory/saved', function()
    if reload_timer or not ui.existing('memories') then
      return
    end
    reload_timer = (vim.uv or vim.loop).new_timer()
    reload_timer:start(200, 0, function()
      reload_timer:close()
      reload_timer = nil
      vim.schedule(background.ask)
    end)
  end)
end

return M
