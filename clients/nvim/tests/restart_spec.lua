-- The daemon killed mid-session: one clear message, quiet retries with backoff, reconnection
-- when it is back (started from outside, or by the plugin's offer to run `memctl start`).
local T = dofile(os.getenv('MEMORYD_NVIM_PLUGIN') .. '/tests/helpers.lua')
local memoryd = require('memoryd')
local uv = vim.uv or vim.loop

memoryd.setup({
  memctl = T.env('MEMORYD_TEST_MEMCTL'),
  status_interval_ms = 0,
  timeout_ms = T.TIMEOUT_MS,
  backoff_min_ms = 100,
  backoff_max_ms = 400,
})

local repo = T.env('MEMORYD_TEST_REPO')
local socket = T.env('MEMORYD_SOCKET')

local function status_view()
  vim.cmd('edit ' .. vim.fn.fnameescape(repo .. '/src/api/users.py'))
  vim.cmd('MemorydStatus')
  T.wait_view('status', '(pid ')
end

T.run({
  {
    'killed: one clear message, then quiet retries',
    function()
      status_view()
      T.truthy(uv.kill(tonumber(T.env('MEMORYD_TEST_DAEMON_PID')), 'sigkill') == 0, 'kill')
      T.wait('the daemon-gone message', function()
        return T.message_matching('memoryd closed the connection — retrying in the background')
      end)
      vim.wait(1500) -- several reconnect attempts (100, 200, 400, 400 ms) happen meanwhile
      T.eq(1, T.count_messages('retrying in the background'), 'messages about the outage')
      T.eq('memoryd down', memoryd.statusline(), 'status line')
    end,
  },
  {
    'a command while it is down: a message, the offer once, nothing waits',
    function()
      T.answers = { 2 } -- not now
      vim.cmd('MemorydRecall deploys')
      -- Neither the message nor the offer yet: the command did not wait for the connection's
      -- outcome (a wait runs the loop, where they come); a time bound breaks on a loaded machine.
      T.eq(0, #T.prompts, 'offers when the command returned')
      T.eq(nil, T.message_matching('memoryd is not running on'), 'the message when the command returned')
      T.wait('the offer', function()
        return #T.prompts == 1
      end)
      T.eq('memoryd is not running. Start it?', T.prompts[1].prompt, 'prompt')
      T.truthy(T.message_matching('memoryd is not running on ' .. socket), 'down message')
      T.truthy(T.message_matching(':MemorydStart'), 'how to start it')
      vim.cmd('MemorydRecall deploys')
      T.wait('the second message', function()
        return T.count_messages('memoryd is not running on') == 2
      end)
      vim.wait(100)
      T.eq(1, #T.prompts, 'the offer is made once per outage')
    end,
  },
  {
    'started again from outside: reconnects in the background',
    function()
      local handle, pid = uv.spawn(T.env('MEMORYD_TEST_PYTHON'), {
        args = { '-m', 'memoryd', '--socket', socket, '--log-level', 'warning' },
        stdio = { nil, nil, nil },
      }, function() end)
      T.truthy(handle, 'spawned ' .. tostring(pid))
      T.wait('reconnected', function()
        return T.message_matching('connected to memoryd again')
      end, 20000)
      T.wait('the status line up', function()
        return memoryd.statusline():find('memoryd up', 1, true) ~= nil
      end)
      status_view()
      T.has(T.text('status'), '(pid ' .. pid .. ')')
      uv.kill(pid, 'sigterm')
      T.wait('down again', function()
        return memoryd.statusline() == 'memoryd down'
      end, 20000)
    end,
  },
  {
    'the offer runs memctl start, then the command',
    function()
      T.answers = { 1 } -- start it
      vim.cmd('edit ' .. vim.fn.fnameescape(repo .. '/src/api/users.py'))
      vim.cmd('MemorydStatus')
      T.wait('memctl start and the reconnection', function()
        return T.message_matching('connected to memoryd again')
      end, 30000)
      T.wait_view('status', '(pid ', 30000)
      T.truthy(T.message_matching('starting memoryd (memctl start)'), 'starting message')
    end,
  },
})
