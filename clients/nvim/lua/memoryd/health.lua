-- :checkhealth memoryd — Neovim version, socket path, daemon reachable and what it serves.
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

-- Ask the daemon for `status` on a connection of our own, waiting at most timeout_ms.
local function query_status(path, timeout_ms)
  local Client = require('memoryd.rpc')
  local client = Client.new({ path = path, timeout_ms = timeout_ms, backoff_min_ms = 60000 })
  local done, err, result = false, nil, nil
  client:request('status', nil, function(e, r)
    done, err, result = true, e, r
  end)
  vim.wait(timeout_ms + 500, function()
    return done
  end, 20)
  client:close()
  if not done then
    return nil, { message = 'no answer within ' .. timeout_ms .. ' ms' }
  end
  return result, err
end

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

  local path, source = memoryd.socket_path()
  report.info(('socket: %s (from %s)'):format(path, source))

  local memctl = memoryd.config.memctl
  local exe = type(memctl) == 'table' and memctl[1] or memctl
  if vim.fn.executable(exe) == 1 then
    report.ok('memctl found: ' .. vim.fn.exepath(exe))
  else
    report.warn(('memctl (%s) is not on PATH: :MemorydStart cannot start the daemon'):format(tostring(exe)), {
      'pip install memoryd, or set memctl = "/path/to/memctl" in setup()',
    })
  end

  local status, err = query_status(path, memoryd.config.timeout_ms)
  if not status then
    report.error(('memoryd is not answering: %s'):format(err and err.message or '?'), {
      'start it with :MemorydStart or `memctl start`',
      'or run it as a login service (docs/operations.md)',
    })
    return
  end
  report.ok(('memoryd %s (pid %s) answers on %s'):format(tostring(status.version), tostring(status.pid), path))
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
  local model = type(status.model) == 'table' and status.model or {}
  if model.configured then
    report.ok('model configured: ' .. tostring(model.model))
  else
    report.info('no model: ' .. tostring(model.reason or '?') .. ' (recall uses the local ranker)')
  end
  local team = type(status.features) == 'table' and status.features.team_sync or nil
  if type(team) == 'table' and team.enabled then
    report.ok('team sync available')
  elseif type(team) == 'table' then
    report.info('team sync off: ' .. tostring(team.reason or '?'))
  end
end

return M
