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
})
