-- :checkhealth memoryd — Neovim version, socket path, daemon reachable and whether it serves
-- every method the plugin calls.
-- Neovim 0.7/0.8 have require('health').report_*; 0.9+ have vim.health.ok/warn/…
local M = {}

local function reporter()
  local h = vim.health
  if h == nil or (h.ok == nil and h.report_ok == nil) then
    h = require('health')
  end
  return {
    start = h.start or h.report_start,
    ok = h.ok or h.report_ok,
    info = h.info or h.report_info,
    warn = h.warn or h.report_warn,
    error = h.error or h.report_error,
  }
end

-- Every method the plugin calls: a daemon started before one of them was added (running since
-- before an upgrade) answers it "method not found", which the check says up front.
M.METHODS = {
  'get_context',
  'memory.delete',
  'memory.history',
  'memory.list',
  'memory.reconcile',
  'memory.restore',
  'memory.snapshot',
  'memory.write',
  'recall',
  'status',
  'subscribe',
  'team.status',
}

-- Ask the daemon for `method` on a connection of our own, waiting at most timeout_ms.
local function query(client, method, timeout_ms)
  local done, err, result = false, nil, nil
  client:request(method, nil, function(e, r)
    done, err, result = true, e, r
  end)
  vim.wait(timeout_ms + 500, function()
    return done
  end, 20)
  if not done then
    return nil, { message = 'no answer within ' .. timeout_ms .. ' ms' }
  end
  return result, err
end

-- The methods of M.METHODS the daemon does not serve (rpc.methods), or nil and why not known.
function M.missing_methods(served)
  if type(served) ~= 'table' or type(served.methods) ~= 'table' then
    return nil
  end
  local missing = {}
  for _, name in ipairs(M.METHODS) do
    if served.methods[name] == nil then
      missing[#missing + 1] = name
    end
  end
  return missing
end

-- Whether `text` is one of status.problems (a daemon older than the list has none).
local function listed(status, text)
  return type(status.problems) == 'table' and type(text) == 'string' and vim.tbl_contains(status.problems, text)
end

local OLDER = 'the running memoryd is older than this plugin (started before an upgrade?)'
local RESTART = '`memctl restart` (or :MemorydStart after `memctl stop`) runs the installed one'

function M.check()
  local report = reporter()
  local memoryd = require('memoryd')
  report.start('memoryd')

  if vim.fn.has('nvim-0.7') == 1 then
    local v = vim.version()
    report.ok(('Neovim %d.%d.%d'):format(v.major, v.minor, v.patch))
  else
    report.error('Neovim 0.7 or newer is needed (nvim_create_user_command, vim.keymap)')
  end
  report.info('event loop: ' .. (vim.uv and 'vim.uv' or 'vim.loop'))

  local path, source, passed_over = memoryd.socket_path()
  report.info(('socket: %s (from %s)'):format(path, source))
  if passed_over then
    report.warn(passed_over, { 'set XDG_RUNTIME_DIR to a folder of your own, mode 0700, or MEMORYD_SOCKET' })
  end

  local memctl = memoryd.config.memctl
  local exe = type(memctl) == 'table' and memctl[1] or memctl
  if vim.fn.executable(exe) == 1 then
    report.ok('memctl found: ' .. vim.fn.exepath(exe))
  else
    report.warn(('memctl (%s) is not on PATH: :MemorydStart cannot start the daemon'):format(tostring(exe)), {
      'pip install memoryd, or set memctl = "/path/to/memctl" in setup()',
    })
  end

  local Client = require('memoryd.rpc')
  local timeout = memoryd.config.timeout_ms
  local client = Client.new({ path = path, timeout_ms = timeout, backoff_min_ms = 60000 })
  local status, err = query(client, 'status', timeout)
  local served, served_err = nil, nil
  if status then
    served, served_err = query(client, 'rpc.methods', timeout)
  end
  client:close()
  if not status and err and type(err.data) == 'table' and err.data.too_long then
    report.error(err.message, {
      'set the socket option of setup() or $MEMORYD_SOCKET (or $XDG_RUNTIME_DIR) to a shorter path',
    })
    return
  end
  if not status and err and type(err.data) == 'table' and err.data.not_a_socket then
    -- a folder or file where the socket should be: starting the daemon would not help
    report.error(err.message, {
      'set the socket option of setup() or $MEMORYD_SOCKET to the daemon\'s socket',
      ('or move what is at %s away, then :MemorydStart'):format(path),
    })
    return
  end
  if not status then
    report.error(('memoryd is not answering: %s'):format(err and err.message or '?'), {
      'start it with :MemorydStart or `memctl start`',
      'or run it as a login service (docs/operations.md)',
    })
    return
  end
  report.ok(('memoryd %s (pid %s) answers on %s'):format(tostring(status.version), tostring(status.pid), path))
  local missing = M.missing_methods(served)
  if served_err and served_err.code == -32601 then
    report.warn(OLDER .. ': it does not list its methods (rpc.methods)', { RESTART })
  elseif missing == nil then
    report.warn('could not ask which methods memoryd serves: ' .. tostring(served_err and served_err.message or '?'))
  elseif #missing > 0 then
    report.warn(('%s: it does not serve %s, which this plugin calls'):format(OLDER, table.concat(missing, ', ')), { RESTART })
  else
    report.ok('serves every method this plugin calls')
  end
  if status.protocol_version == 1 then
    report.ok('protocol version 1')
  else
    report.warn(('protocol version %s: this plugin speaks version 1'):format(tostring(status.protocol_version)))
  end
  local other = require('memoryd.format').other_daemon(status)
  if other then
    report.warn(other, {
      "hooks and editors talk to the daemon their socket names, so the two do not see each other's sessions (docs/daemon.md)",
    })
  end
  local format = require('memoryd.format')
  local model = type(status.model) == 'table' and status.model or {}
  local model_problem = format.model_problem(status)
  if model.configured and model_problem then
    report.warn(('model %s is configured, but its calls fail: %s'):format(tostring(model.model), model_problem))
  elseif model.configured then
    report.ok('model configured: ' .. tostring(model.model))
  else
    -- a key or endpoint that cannot work is a problem (status.problems); no key is a choice
    local say = listed(status, model.reason) and report.warn or report.info
    say('no model: ' .. tostring(model.reason or '?') .. ' (recall uses the local ranker)')
  end
  local team = type(status.features) == 'table' and status.features.team_sync or nil
  if type(team) == 'table' and team.enabled then
    report.ok('team sync available')
  elseif type(team) == 'table' then
    -- a URL without a token is a problem: warned of here, once, not again below
    local say = listed(status, team.reason) and report.warn or report.info
    say('team sync off: ' .. tostring(team.reason or '?'))
  end
  -- Each says what to change; memoryd checks again at every status, so a fix shows at once.
  local problems = format.problems(status, { type(team) == 'table' and team.reason or nil })
  for _, problem in ipairs(problems) do
    report.warn(problem)
  end
  if type(status.problems) == 'table' and #status.problems == 0 then
    report.ok('memoryd finds nothing wrong with the setup')
  end
end

return M
