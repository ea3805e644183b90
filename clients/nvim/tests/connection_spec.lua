-- The connection and the status line against sockets served from this Neovim (libuv pipes):
-- a socket that refuses for a moment, one that answers every call, and none at all. No
-- daemon is needed; the servers count what reaches them.
local T = dofile(os.getenv('MEMORYD_NVIM_PLUGIN') .. '/tests/helpers.lua')
local memoryd = require('memoryd')
local Client = require('memoryd.rpc')
local uv = vim.uv or vim.loop

local folder = vim.fn.tempname()
vim.fn.mkdir(folder, 'p')

-- A server on path answering every request with a status-like object; calls[] lists the
-- methods that reached it.
local function serve(path)
  local s = { calls = {} }
  local server = T.serve(path, function(request, conn)
    s.calls[#s.calls + 1] = request.method
    local reply = { jsonrpc = '2.0', id = request.id, result = { version = 'served', pid = 0, protocol_version = 1 } }
    conn:write(vim.json.encode(reply) .. '\n')
  end)
  s.close = server.close
  return s
end

local function count(list, value)
  local n = 0
  for _, item in ipairs(list) do
    if item == value then
      n = n + 1
    end
  end
  return n
end

-- A daemon killed by SIGKILL, as the kernel tears it down: its connections are closed a moment
-- before its listening socket, and a connect in between is accepted by nobody and reset. While
-- s.drop is set this server closes each connection it accepts, unread (s.dropped counts them);
-- otherwise it answers every request with a status-like object (subscribe included).
local function dying_daemon(path)
  local s = { drop = false, dropped = 0 }
  local server = T.serve(path, function(request, conn)
    local result = { version = 'served', pid = 0, protocol_version = 1, subscribed = {} }
    conn:write(vim.json.encode({ jsonrpc = '2.0', id = request.id, result = result }) .. '\n')
  end, function()
    if s.drop then
      s.dropped = s.dropped + 1
    end
    return not s.drop
  end)
  -- The daemon killed: its connections closed, new ones closed as they come.
  function s.kill()
    s.drop = true
    for _, conn in ipairs(server.conns) do
      if not conn:is_closing() then
        conn:close()
      end
    end
  end
  s.close = server.close
  return s
end

-- The status line drawn from the plugin, as a user's 'statusline' would have it.
local function show_status_line()
  vim.o.laststatus = 2
  vim.o.statusline = [[%{luaeval('require("memoryd").statusline()')}]]
  vim.cmd('redrawstatus!')
end

T.run({
  {
    'a call that timed out while the socket refused is never sent once it connects',
    function()
      local path = folder .. '/refusing.sock'
      local refusing = uv.new_pipe(false)
      assert(refusing:bind(path)) -- bound, not listening: ECONNREFUSED, retried for ~1 s
      local client = Client.new({ path = path, timeout_ms = 3000 })
      local failed = nil
      client:request('memory.write', { cwd = folder, type = 'project', name = 'n', description = 'd', body = 'b' }, function(err)
        failed = err
      end, 100)
      T.wait('the timeout', function()
        return failed ~= nil
      end, 3000)
      T.eq('timeout', failed.code, 'the write failed')
      refusing:close()
      os.remove(path)
      local server = serve(path)
      local answered = false
      client:request('status', nil, function(err)
        answered = err == nil
      end)
      T.wait('the connection and the status answer', function()
        return answered
      end, 5000)
      client:close()
      server.close()
      T.eq({ 'status' }, server.calls, 'calls that reached the server')
    end,
  },
  {
    'status_interval_ms = 0: an idle status line asks a few times, not in a loop',
    function()
      local path = folder .. '/answering.sock'
      local server = serve(path)
      memoryd.setup({ socket = path, status_interval_ms = 0, notifications = false })
      show_status_line()
      -- Connected and answered first (on a loaded machine that took more than the second
      -- counted below), then a second of an idle status line.
      T.wait('the status line up', function()
        return memoryd.status_text() == 'memoryd up · no model'
      end)
      local before = count(server.calls, 'status')
      vim.wait(1000, function()
        return false
      end, 50)
      local asked = count(server.calls, 'status') - before
      vim.o.statusline = ''
      memoryd.client():close()
      server.close()
      T.truthy(before >= 1, 'status asked at all')
      T.truthy(asked < 10, 'status calls in an idle second: ' .. asked)
    end,
  },
  {
    'status_interval_ms = 0 and no daemon: the status line does not retry in a loop',
    function()
      memoryd.setup({ socket = folder .. '/nobody.sock', status_interval_ms = 0, notifications = false })
      local client = memoryd.client()
      local attempts = 0
      local attempt = client._attempt
      client._attempt = function(...)
        attempts = attempts + 1
        return attempt(...)
      end
      show_status_line()
      T.wait('the status line down', function()
        return memoryd.status_text() == 'memoryd down'
      end)
      local before = attempts
      vim.wait(1000, function()
        return false
      end, 50)
      vim.o.statusline = ''
      T.eq('memoryd down', memoryd.statusline(), 'status line')
      T.truthy(before >= 1, 'connection attempted at all')
      T.truthy(attempts - before < 10, 'connection attempts in an idle second: ' .. attempts - before)
      T.eq(0, #T.messages, 'messages')
    end,
  },
  {
    'a daemon that refused an event (older than it) is asked for it again at the next connection',
    function()
      local path = folder .. '/upgraded.sock'
      local state = { refuse = true, accepted = {} }
      local server = T.serve(path, function(request, conn)
        local events = type(request.params) == 'table' and request.params.events or {}
        local reply = { jsonrpc = '2.0', id = request.id, result = { subscribed = events } }
        if request.method ~= 'subscribe' then
          reply.result = { version = 'served', pid = 0, protocol_version = 1 }
        elseif state.refuse and vim.tbl_contains(events, 'x/newer') then
          reply.result = nil
          reply.error = { code = -32602, message = 'events: unknown event(s) x/newer; known: memory/saved, worker/error' }
        else
          state.accepted[#state.accepted + 1] = table.concat(events, ' ')
        end
        conn:write(vim.json.encode(reply) .. '\n')
      end)
      memoryd.setup({ socket = path, notifications = false, backoff_min_ms = 50, backoff_max_ms = 100 })
      memoryd.on('memory/saved', function() end)
      memoryd.on('x/newer', function() end)
      T.wait('the known events subscribed', function()
        return vim.tbl_contains(state.accepted, 'memory/saved')
      end)
      state.refuse = false -- the daemon is restarted, upgraded: it knows x/newer now
      for _, conn in ipairs(server.conns) do
        conn:close()
      end
      -- With the events the plugin always listens to (files the daemon rewrote: reload.lua).
      T.wait('every event subscribed again', function()
        local all = 'magicdoc/updated memory/saved session/summary_updated team/conflict team/synced x/newer'
        return vim.tbl_contains(state.accepted, all)
      end)
      memoryd.client():close()
      server.close()
      T.eq(nil, T.message_matching('could not subscribe'), 'a warning')
    end,
  },
  {
    'a connect the dying daemon takes but never answers is not the daemon back: one outage message',
    function()
      local path = folder .. '/dying.sock'
      local daemon = dying_daemon(path)
      memoryd.setup({ socket = path, backoff_min_ms = 20, backoff_max_ms = 40 })
      T.wait('the daemon up', function()
        return memoryd.state.up == true
      end)
      daemon.kill()
      -- Each reconnect is accepted by nobody and reset: the daemon is still down.
      T.wait('reconnects into the dying daemon', function()
        return daemon.dropped >= 4
      end)
      daemon.drop = false -- the daemon started again
      T.wait('the daemon back', function()
        return memoryd.state.up == true and T.message_matching('connected to memoryd again') ~= nil
      end)
      memoryd.client():close()
      daemon.close()
      local said = vim.tbl_map(function(m)
        return m.text
      end, T.messages)
      T.eq(1, T.count_messages('retrying in the background'), 'outage messages in ' .. vim.inspect(said))
      T.eq(1, T.count_messages('connected to memoryd again'), 'back messages in ' .. vim.inspect(said))
    end,
  },
  {
    'with no subscription to renew, a reconnect asks status: up at its answer, not at the connect',
    function()
      local path = folder .. '/dying-bare.sock'
      local daemon = dying_daemon(path)
      local states = {}
      local client = Client.new({
        path = path,
        backoff_min_ms = 20,
        backoff_max_ms = 40,
        on_state = function(state)
          states[#states + 1] = state
        end,
      })
      local answered = false
      client:request('status', nil, function(err)
        answered = err == nil
      end)
      T.wait('the first status answer', function()
        return answered and states[1] == 'up'
      end)
      daemon.kill()
      T.wait('reconnects into the dying daemon', function()
        return daemon.dropped >= 4 and #states >= 2
      end)
      daemon.drop = false
      -- Nothing is asked of the client: its reconnect asks status itself, and that answer is up.
      T.wait('up again', function()
        return states[#states] == 'up' and #states > 2
      end)
      client:close()
      daemon.close()
      local ups = 0
      for _, state in ipairs(states) do
        ups = ups + (state == 'up' and 1 or 0)
      end
      T.eq(2, ups, "'up' in " .. table.concat(states, ' '))
    end,
  },
})
