-- Memory files edited in place (opened from :MemorydMemories or a recall): before a save the
-- file's current text is kept in history (memory.snapshot), so `h` can restore it as after
-- any other change; after the save the project's MEMORY.md is brought in step
-- (memory.reconcile). Without the snapshot the text a save replaced was kept nowhere.
local memoryd = require('memoryd')
local format = require('memoryd.format')

local M = {}

-- Memory folder -> the project (cwd) it was listed for: a memory file's own folder is no
-- project of its own (as a cwd it names another, empty one).
M.dirs = {}

function M.add_dir(dir, cwd)
  if type(dir) == 'string' and dir:sub(1, 1) == '/' and type(cwd) == 'string' then
    M.dirs[(dir:gsub('/+$', ''))] = cwd
  end
end

-- The project whose listed memory folder holds file (a .md below it), or nil.
function M.project_of(file)
  if type(file) ~= 'string' or not file:match('%.md$') then
    return nil
  end
  local best, cwd = nil, nil
  for dir, project in pairs(M.dirs) do
    if file:sub(1, #dir + 1) == dir .. '/' and (best == nil or #dir > #best) then
      best, cwd = dir, project
    end
  end
  return cwd
end

local function warn(file, why)
  memoryd.message(
    ('%s: the text this save replaced was not kept in history: %s'):format(format.basename(file), why),
    vim.log.levels.WARN
  )
end

-- Why a snapshot failed, in words; nil when there was nothing to keep.
function M.snapshot_problem(err)
  if err.code == -32001 then
    return nil -- no such file yet: a new memory, nothing to keep
  elseif err.code == -32601 then
    return 'the running memoryd is older than this plugin (no memory.snapshot); `memctl restart` runs the installed one'
  end
  return format.one_line(err.message, 300)
end

-- The file's stamp as memory.snapshot's `expect` takes it: the nanoseconds as digits, which a
-- Lua number (a double, which vim.json writes with 14 digits) cannot carry.
function M.stamp(found)
  return { size = found.size, mtime_ns = ('%d%09d'):format(found.mtime.sec, found.mtime.nsec or 0) }
end

-- A daemon before session 23 refuses the unknown field: the snapshot is asked again without it.
function M.refuses_expect(err)
  return err.code == -32602 and type(err.message) == 'string' and err.message:find('expect: Extra inputs', 1, true) ~= nil
end

-- BufWritePre: wait for the snapshot, at most SNAPSHOT_WAIT_MS (or the call timeout if it is
-- shorter): the wait blocks the editor, and a daemon that is stopped or stuck held every :w of
-- a memory for the whole timeout (5 s). The write goes on whatever the answer, and a snapshot
-- that was not taken is said. The request names the file's stamp (`expect`): a daemon that
-- reads it only after the write refuses it ("changed since") instead of keeping the new text
-- as the version the user was told was not kept. lstat, as the daemon stamps it: a symlinked
-- memory's followed stamp never matched, and "changed since" hid the daemon's own reason.
M.SNAPSHOT_WAIT_MS = 1200
function M.before_write(file, modified)
  local uv = vim.uv or vim.loop
  local cwd = M.project_of(file)
  local found = cwd ~= nil and modified and uv.fs_lstat(file) or nil
  if found == nil then
    return
  end
  local done, failure = false, nil
  local timeout = math.min(memoryd.config.timeout_ms, M.SNAPSHOT_WAIT_MS)
  local deadline = uv.hrtime() / 1e6 + timeout
  local params = { cwd = cwd, path = file, expect = M.stamp(found) }
  local function ask(ms)
    memoryd.client():request('memory.snapshot', params, function(err)
      local left = math.floor(deadline - uv.hrtime() / 1e6)
      if err and params.expect ~= nil and M.refuses_expect(err) and left > 0 then
        params.expect = nil
        ask(left)
        return
      end
      done = true
      failure = err
    end, ms)
  end
  ask(timeout)
  if not vim.wait(timeout + 100, function()
    return done
  end, 5) then
    warn(file, ('memoryd did not answer memory.snapshot within %d ms'):format(timeout))
    return
  end
  local why = failure and M.snapshot_problem(failure)
  if why then
    warn(file, why)
  end
end

-- BufWritePost: MEMORY.md in step, and the memories view showing the saved file.
function M.after_write(file)
  local cwd = M.project_of(file)
  if cwd == nil then
    return
  end
  memoryd.client():request('memory.reconcile', { cwd = cwd }, function(err, result)
    if err == nil then
      -- a protected index (team/MEMORY.md chmod 444) is left and the other rewritten: since
      -- session 24 the reply names it in `warnings` (any shape: a daemon may send anything)
      local warnings = type(result) == 'table' and result.warnings or nil
      for _, w in ipairs(type(warnings) == 'table' and warnings or {}) do
        if type(w) == 'string' and w ~= '' then
          memoryd.message('MEMORY.md not brought in step: ' .. format.one_line(w, format.WARNING_MAX), vim.log.levels.WARN)
        end
      end
      if package.loaded['memoryd.views.memories'] then
        require('memoryd.views.memories').reload_in_background()
      end
    elseif err.code ~= 'down' and err.code ~= 'closed' then
      -- a daemon that went away was reported once; the next save reconciles everything
      memoryd.message('MEMORY.md not brought in step: ' .. format.one_line(err.message, format.WARNING_MAX), vim.log.levels.WARN)
    end
  end)
end

return M
