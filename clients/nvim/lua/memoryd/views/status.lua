-- :MemorydStatus — what the daemon serves (status) and this project's team sync (team.status).
local memoryd = require('memoryd')
local format = require('memoryd.format')
local ui = require('memoryd.ui')
local text = require('memoryd.views.text')

local M = {}

local function state_of(feature)
  if type(feature) ~= 'table' then
    return tostring(feature)
  end
  local on = feature.enabled
  if on == nil then
    on = feature.available
  end
  if on then
    return 'on'
  end
  -- 400, as the other lines: the team_sync reason (190) lost its 'then restart memoryd' at 160
  return 'off — ' .. format.one_line(feature.reason or '?', 400)
end

-- team.status's `suppressed` in words, for a daemon older than team.status's `why` (session 20),
-- which says it itself (memoryd.team.service.why_off); http_<status> and permanent: the server
-- refused for good, so sync stopped.
local SUPPRESSED = {
  no_repo = 'the project has no git remote naming its owner/repo, which team memory is keyed by',
  no_oauth = 'MEMORYD_TEAM_TOKEN is not set',
  bad_url = 'MEMORYD_TEAM_URL is not an http(s) URL',
  bad_token = 'MEMORYD_TEAM_TOKEN is not a usable token',
  permanent = 'the team server refused for good',
}

-- Why the folder's team sync is off or stopped: the daemon's `why`, else our words for the code.
function M.why_off(team, code)
  if type(team.why) == 'string' and team.why ~= '' then
    return format.one_line(team.why, 400)
  end
  return M.why_suppressed(code)
end

function M.why_suppressed(code)
  local status = code:match('^http_(%d+)$')
  if status then
    return ('the team server answered HTTP %s, so sync stopped (%s)'):format(status, code)
  end
  return ('%s (%s)'):format(SUPPRESSED[code] or 'sync is off', format.one_line(code, 60))
end

-- Pure: status (the reply), team (team.status's reply or nil), team_error (its error or nil),
-- recent: the plugin's last messages in full.
function M.render(status, team, team_error, socket, recent)
  local b = text.builder()
  local add = b.add
  add(('memoryd %s (pid %s), protocol %s'):format(tostring(status.version), tostring(status.pid), tostring(status.protocol_version)))
  add('socket: ' .. tostring(status.socket or socket))
  local other = format.other_daemon(status)
  if other then
    add('warning: ' .. other)
    add('  hooks and editors whose socket names it talk to it, not to this one')
  end
  add(('uptime %ss, %s project(s), %s session(s), %s connection(s), %s in flight'):format(
    tostring(status.uptime_s),
    tostring(status.projects),
    tostring(status.sessions),
    tostring(status.connections),
    tostring(status.inflight)
  ))
  local model = type(status.model) == 'table' and status.model or {}
  local model_problem = format.model_problem(status)
  if model.configured and model_problem then
    add(('model: %s (small: %s) — but %s'):format(tostring(model.model), tostring(model.small_model), model_problem))
  elseif model.configured then
    add(('model: %s (small: %s)'):format(tostring(model.model), tostring(model.small_model)))
  else
    add('model: not configured — ' .. format.one_line(model.reason or '?', 200))
  end
  local problems = format.problems(status)
  if #problems > 0 then
    add('')
    add('Problems (what is wrong with the setup, and what to change)')
    for _, problem in ipairs(problems) do
      add('  ! ' .. problem)
    end
  end
  add('')
  add('Features')
  local names = vim.tbl_keys(type(status.features) == 'table' and status.features or {})
  table.sort(names)
  for _, name in ipairs(names) do
    add(('  %-18s %s'):format(name, state_of(status.features[name])))
  end
  local errors = type(status.worker_errors) == 'table' and status.worker_errors or {}
  local workers = vim.tbl_keys(errors)
  if #workers > 0 then
    table.sort(workers)
    add('')
    add('Worker errors')
    for _, worker in ipairs(workers) do
      add(('  %s: %s'):format(worker, format.one_line(vim.inspect(errors[worker], { newline = ' ', indent = '' }), 200)))
    end
  end
  add('')
  add('Team sync for this project')
  local suppressed = team and type(team.suppressed) == 'string' and team.suppressed or nil
  if team and (type(team.repo) ~= 'string' or team.repo == '') then
    -- Team sync is configured, but this project has nothing to sync with (repo null).
    add('  off — ' .. M.why_off(team, suppressed or 'no_repo'))
  elseif team then
    add(('  repo %s on %s'):format(tostring(team.repo), tostring(team.server)))
    if suppressed then
      add('  stopped — ' .. M.why_off(team, suppressed))
    end
    add(('  %s entries, %d pending, retrying: %s'):format(
      tostring(team.entries),
      type(team.pending) == 'table' and #team.pending or 0,
      tostring(team.retrying)
    ))
    local last = type(team.last_result) == 'table' and team.last_result or nil
    if last then
      local line = ('  last %s %s at %s'):format(tostring(last.op), last.ok and 'ok' or 'failed', tostring(last.at))
      if not last.ok and last.error ~= nil then
        line = line .. ': ' .. format.one_line(tostring(last.error), 200)
      end
      add(line)
    end
  elseif team_error and team_error.code ~= -32003 then
    -- A daemon older than team.status, or one failing it: not "off" (it read so).
    add('  unknown — ' .. format.one_line(tostring(team_error.message) .. format.older_daemon_hint(team_error), 400))
  else
    -- -32003: team sync is not configured, and the daemon says how to enable it
    add('  off — ' .. format.one_line(team_error and team_error.message or '?', 200))
  end
  if recent and #recent > 0 then
    add('')
    add('Recent messages (newest last)')
    for i = math.max(1, #recent - 9), #recent do
      add('  ' .. format.one_line(recent[i], 400))
    end
  end
  add('')
  add('q close')
  return b.lines
end

-- The view draws the newest :MemorydStatus's answer only (its requests run concurrently).
local latest = require('memoryd.latest').new()

function M.open()
  local ctx = memoryd.buffer_context()
  local ticket = latest.ask()
  local state_ticket = memoryd.status_ticket()
  memoryd.request('status', nil, function(status)
    -- unless a newer status was kept (a poll's too): an older one answered last put back the
    -- state it replaced
    memoryd.keep_status(state_ticket, status)
    local function draw(team, team_error)
      if latest.take(ticket) then
        ui.render(ui.buffer('status', true), M.render(status, team, team_error, memoryd.socket_path(), memoryd.recent))
      end
    end
    memoryd.request('team.status', { cwd = ctx.cwd }, draw, {
      on_error = function(err)
        draw(nil, err)
        return true
      end,
    })
  end, {
    retry = function()
      M.open()
    end,
  })
end

return M
