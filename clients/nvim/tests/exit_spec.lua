-- :qa with a daemon that reads nothing more (hung, stopped) while more requests wait to be sent
-- than the socket holds: Neovim exits (it waited for them to be sent, for as long as the daemon
-- hung). The pytest side checks that the process ends.
local T = dofile(os.getenv('MEMORYD_NVIM_PLUGIN') .. '/tests/helpers.lua')
local memoryd = require('memoryd')

memoryd.setup({ status_interval_ms = 0, notifications = { enabled = false } })

T.run({
  {
    'requests a hung daemon does not read are queued, and the editor goes on',
    function()
      local stopped = false
      memoryd.request('test.stop_reading', nil, function()
        stopped = true
      end)
      T.wait('the daemon to stop reading', function()
        return stopped
      end)
      local query = string.rep('what did we decide about the deploy freeze? ', 250) -- 11 KB
      for _ = 1, 100 do -- over 1 MB: more than a Unix socket's buffers hold
        memoryd.request('recall', { cwd = vim.fn.getcwd(), query = query }, function() end, { quiet = true })
      end
      vim.wait(300)
      T.eq(2, vim.fn.eval('1 + 1'), 'the editor answers')
    end,
  },
})
