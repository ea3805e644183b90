-- A daemon that is restarting (its socket there but not listening yet: ECONNREFUSED) is
-- waited for a moment, not reported down; the pytest side starts listening after ~0.4 s.
local T = dofile(os.getenv('MEMORYD_NVIM_PLUGIN') .. '/tests/helpers.lua')
local memoryd = require('memoryd')

memoryd.setup({ status_interval_ms = 0, notifications = { enabled = false } })

T.run({
  {
    'the connection is retried while the socket refuses, then the command runs',
    function()
      vim.cmd('MemorydStatus')
      T.wait_view('status', 'memoryd misbehaving (pid 0)', 30000)
      T.eq(nil, T.message_matching('not running'), 'a down message')
      T.eq(0, #T.prompts, 'offers to start it')
    end,
  },
})
