-- Pure text helpers shared by the views: ages, short paths, one line per notification.
-- The wording follows memctl (clients/memctl/memory_menu.py, notifications.py).
local M = {}

-- 'now', '5m', '3h', '2d', '6w': how long ago a memory was written.
function M.age(mtime, now)
  if type(mtime) ~= 'number' then
    return '?'
  end
  local seconds = math.max(0, now - mtime)
  for _, unit in ipairs({ { 'w', 7 * 86400 }, { 'd', 86400 }, { 'h', 3600 }, { 'm', 60 } }) do
    if seconds >= unit[2] then
      return ('%d%s'):format(math.floor(seconds / unit[2]), unit[1])
    end
  end
  return 'now'
end

local function under(path, dir)
  if not dir or dir == '' then
    return nil
  end
  dir = dir:gsub('/+$', '')
  if path:sub(1, #dir + 1) == dir .. '/' then
    return path:sub(#dir + 2)
  end
  return nil
end

-- A path as a person reads it: relative to base when below it, ~ for home, else absolute.
function M.short_path(path, base, home)
  if type(path) ~= 'string' then
    return '?'
  end
  local rel = under(path, base)
  if rel then
    return rel
  end
  rel = under(path, home)
  if rel then
    return '~/' .. rel
  end
  return path
end

-- The working tree's root above dir (for shorter paths on screen only), else dir itself.
function M.display_root(dir)
  local uv = vim.uv or vim.loop
  local probe = dir
  while probe and probe ~= '' do
    if uv.fs_stat(probe .. '/.git') then
      return probe
    end
    local parent = vim.fn.fnamemodify(probe, ':h')
    if parent == probe then
      break
    end
    probe = parent
  end
  return dir
end

function M.basename(path)
  if type(path) ~= 'string' or path == '' then
    return '?'
  end
  return path:match('([^/]+)/*$') or path
end

-- Text as one line of a buffer: every run of control characters (line breaks, tabs, NUL,
-- escape sequences' ESC, DEL) becomes one space. Done in Lua before any vim.fn call: a Lua
-- string holding a NUL reaches Vimscript as a Blob (E976), and nvim_buf_set_lines refuses a
-- line break. Text without control characters is returned as it is.
function M.clean(text)
  text = tostring(text or '')
  if text:find('[%c\127]') then
    text = text:gsub('[%c\127]+', ' ')
  end
  return text
end

-- What to add to the daemon's error when it may be older than the plugin (running since
-- before an upgrade): the plugin only calls methods and sends fields the protocol has, so "method
-- not found" or an unknown field means the daemon lacks them; alone, either reads as a bug.
function M.older_daemon_hint(err)
  local code, message = type(err) == 'table' and err.code, type(err) == 'table' and tostring(err.message) or ''
  if code == -32601 or (code == -32602 and message:find('Extra inputs are not permitted', 1, true)) then
    return ' (the running memoryd may be older than this plugin, started before an upgrade: `memctl restart` runs the installed one)'
  end
  return ''
end

-- Text as memoryd takes a name or description it derives itself (memfile.as_field, Python's
-- " ".join(text.split())): the bidirectional controls (U+202A-U+202E, U+2066-U+2069) dropped;
-- control characters (C0, DEL, C1), U+2028/U+2029 and every other space Python splits on (a
-- no-break space, U+2000-U+200A, U+3000, ...) a space, a run of them one, none at either end.
-- memory.write refuses a control or bidi character in a field, and a field of such spaces
-- alone as empty (a first line of no-break spaces was offered, then refused), so the fields
-- derived from a text (the name offered, the description) are made by the daemon's rule.
-- Bytes, not %c or %s: those follow the locale, and a UTF-8 sequence's bytes are no spaces.
function M.as_field(text)
  text = tostring(text or ''):gsub('\226\128[\170-\174]', ''):gsub('\226\129[\166-\169]', '')
  text = text
    :gsub('\194[\128-\160]', ' ') -- C1 (NEL among them), U+00A0
    :gsub('\225\154\128', ' ') -- U+1680
    :gsub('\226\128[\128-\138\168\169\175]', ' ') -- U+2000-U+200A, U+2028, U+2029, U+202F
    :gsub('\226\129\159', ' ') -- U+205F
    :gsub('\227\128\128', ' ') -- U+3000
  return (text:gsub('[%z\1-\31\127 ]+', ' '):gsub('^ ', ''):gsub(' $', ''))
end

-- The longest a daemon's warning is shown (memory.write's, memory.restore's, memory.reconcile's):
-- one about a protected MEMORY.md names the index two or three times, what is wrong and then
-- the remedy (`chmod u+w <index>`); cut at 300 characters, a long memory folder path hid it.
M.WARNING_MAX = 2000

-- Text that fits on one line (notifications and list entries never break the layout).
function M.one_line(text, max)
  text = M.clean(text)
  max = max or 200
  if vim.fn.strchars(text) > max then
    text = vim.fn.strcharpart(text, 0, max - 1) .. '…'
  end
  return text
end

-- A word for a POSIX shell, as memctl quotes it (Python's shlex.quote): as it is when it holds
-- only safe characters, else in single quotes.
function M.shell_quote(word)
  word = tostring(word)
  if word == '' then
    return "''"
  end
  if not word:find("[^%w@%%+=:,./_-]") then
    return word
  end
  return "'" .. word:gsub("'", [['"'"']]) .. "'"
end

-- status.other_daemon in words, as `memctl status` says it: another daemon of this user
-- (same state dir, started first) runs, and clients whose socket names it talk to it. nil
-- when there is none. Its pid and socket are each null when its note could not be read.
function M.other_daemon(status)
  local other = type(status) == 'table' and status.other_daemon or nil
  if type(other) ~= 'table' then
    return nil
  end
  local pid = type(other.pid) == 'number' and ('pid %d'):format(other.pid) or 'pid unknown'
  local line = ('another memoryd of this user (%s) is running'):format(pid)
  if type(other.socket) == 'string' then
    line = line
      .. (' on %s; keep one: memctl --socket %s stop'):format(other.socket, M.shell_quote(other.socket))
  end
  return M.one_line(line, 600)
end

-- How long a problem may be on screen: each ends with its fix, which a cut would lose.
local PROBLEM_CHARS = 1000

local function text_or_nil(value)
  if type(value) == 'string' and value ~= '' then
    return value
  end
  return nil
end

-- Why a configured model's calls fail and what mends it (status.model.problem, or
-- features.model's), one line; nil when they do not, or from a daemon older than the field.
function M.model_problem(status)
  if type(status) ~= 'table' then
    return nil
  end
  local model = type(status.model) == 'table' and status.model or {}
  local feature = type(status.features) == 'table' and type(status.features.model) == 'table' and status.features.model or {}
  local problem = text_or_nil(model.problem) or text_or_nil(feature.problem)
  return problem and M.one_line(problem, PROBLEM_CHARS)
end

-- The most problems shown, then how many more (as `memctl status` prints them).
M.MAX_PROBLEMS_SHOWN = 20

-- status.problems (what is wrong with the setup, each with what to change), one line each,
-- without the model's problem or reason, which the model line says already, nor the texts of
-- `also` (said elsewhere in full); {} from a daemon older than the field.
function M.problems(status, also)
  local list = type(status) == 'table' and status.problems or nil
  if type(list) ~= 'table' then
    return {}
  end
  local model = type(status.model) == 'table' and status.model or {}
  local said = {}
  for _, key in ipairs({ 'problem', 'reason' }) do
    if type(model[key]) == 'string' then
      said[model[key]] = true
    end
  end
  for _, text in pairs(also or {}) do
    said[text] = true
  end
  local out, more = {}, 0
  for _, problem in ipairs(list) do
    if text_or_nil(problem) and not said[problem] then
      if #out < M.MAX_PROBLEMS_SHOWN then
        out[#out + 1] = M.one_line(problem, PROBLEM_CHARS)
      else
        more = more + 1
      end
    end
  end
  if more > 0 then
    -- An env file of pasted shell lines is one problem a line: 30,000 of them were 30,000
    -- warnings in :checkhealth and lines in :MemorydStatus.
    out[#out + 1] = ('… and %d more (`memctl status --json` lists them all)'):format(more)
  end
  return out
end

local function count(value)
  if type(value) == 'table' then
    return #value
  end
  return value or 0
end

-- One line of text per daemon notification, and its vim.log level.
function M.describe(note)
  local event = tostring(note.method or '?')
  local p = type(note.params) == 'table' and note.params or {}
  local levels = vim.log.levels
  if event == 'memory/saved' then
    return 'memory saved: ' .. M.basename(p.path), levels.INFO
  elseif event == 'session/summary_updated' then
    return 'session summary updated: ' .. tostring(p.session_id or '?'), levels.INFO
  elseif event == 'team/synced' then
    return ('team synced: %s (pushed %s, pulled %s)'):format(
      tostring(p.repo or '?'),
      tostring(count(p.pushed)),
      tostring(count(p.pulled))
    ),
      levels.INFO
  elseif event == 'team/secret_blocked' then
    return ('team: %s not uploaded — secret matched rule %s'):format(M.basename(p.path), tostring(p.rule or '?')),
      levels.WARN
  elseif event == 'team/conflict' then
    return ('team conflict: %s kept as %s'):format(M.basename(p.path), M.basename(p.saved_as)), levels.WARN
  elseif event == 'magicdoc/updated' then
    return 'magic doc updated: ' .. M.basename(p.path), levels.INFO
  elseif event == 'worker/error' then
    return ('worker error (%s): %s'):format(tostring(p.worker or '?'), tostring(p.message or '')), levels.ERROR
  elseif event == 'context/changed' then
    -- Worded as `memctl watch` words it (a user may name it in notifications.events).
    local project = tostring(p.project or '?')
    local shown = {}
    for _, path in ipairs(type(p.paths) == 'table' and p.paths or {}) do
      path = tostring(path)
      shown[#shown + 1] = under(path, project) or path
    end
    if #shown == 0 then
      return ('context changed: %s (events were lost: which files is not known)'):format(project), levels.INFO
    end
    local more = type(p.more) == 'number' and p.more > 0 and (' and %d more'):format(p.more) or ''
    return ('context changed: %s (%s%s)'):format(project, table.concat(shown, ', '), more), levels.INFO
  end
  return event .. ': ' .. vim.inspect(p, { newline = ' ', indent = '' }), levels.INFO
end

return M
