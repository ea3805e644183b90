-- A daemon whose stop has begun, handed this editor's connection only then (the pytest side:
-- a real daemon on a socket it was handed, as systemd hands it; the next daemon serves that
-- socket once the first has stopped). It answers each request -32006 "memoryd is stopping":
-- nothing was done. The subscription and the command go again on a new connection, which the
-- next daemon answers; nothing is said to the user. Before, the subscription was a warning
-- ("could not subscribe to notifications: memoryd is stopping") and the command an error,
-- and the connection stayed open until the daemon closed it.
local T = dofile(os.getenv('MEMORYD_NVIM_PLUGIN') .. '/tests/helpers.lua')
local memoryd = require('memoryd')

memoryd.setup({ status_interval_ms = 600000, timeout_ms = T.TIMEOUT_MS })

T.run({
  {
    'answered "memoryd is stopping": the subscription and the command go to the next daemon, unsaid',
    function()
      vim.cmd('MemorydStatus') -- the connection, its subscription first, then the command
      T.wait_view('status', '(pid ', 60000)
      T.eq(0, #T.messages, 'messages: ' .. vim.inspect(T.messages))
      T.eq(0, #T.prompts, 'offers to start it')
      local c = memoryd.client()
      T.eq('connected', c.state, 'the connection')
      T.eq(nil, next(c.retiring), "the stopping daemon's connection left open")
      T.eq(0, c:pending_count(), 'calls waiting')
    end,
  },
  {
    'the subscription was renewed on the new connection: notifications come',
    function()
      local saved = { type = 'project', name = 'After the restart', description = 'by the next daemon', body = 'x' }
      saved.cwd = (vim.uv or vim.loop).cwd()
      T.call('memory.write', saved)
      T.wait('the memory/saved notification', function()
        return T.message_matching('memory saved: project_after_the_restart.md') ~= nil
      end)
    end,
  },
})
