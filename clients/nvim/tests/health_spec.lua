-- :checkhealth memoryd against the daemon on $MEMORYD_SOCKET says whether it serves every
-- method the plugin calls ($MEMORYD_TEST_HEALTH: 'all' for the real daemon, 'older' for one
-- without memory.snapshot, 'no_list' for one without rpc.methods). It said OK for a daemon
-- older than the plugin, whose "method not found" then came from the views.
local T = dofile(os.getenv('MEMORYD_NVIM_PLUGIN') .. '/tests/helpers.lua')

local expect = T.env('MEMORYD_TEST_HEALTH')

T.run({
  {
    ':checkhealth memoryd says whether the daemon serves what the plugin calls',
    function()
      vim.cmd('checkhealth memoryd')
      local text = table.concat(vim.api.nvim_buf_get_lines(0, 0, -1, false), '\n')
      T.has(text, 'answers on ' .. T.env('MEMORYD_SOCKET'))
      if expect == 'all' then
        T.has(text, 'serves every method this plugin calls')
        T.has_not(text, 'older than this plugin')
      elseif expect == 'older' then
        T.has(text, 'WARNING')
        T.has(text, 'older than this plugin (started before an upgrade?): it does not serve memory.snapshot, which this plugin calls')
        T.has(text, 'memctl restart')
      else
        T.has(text, 'older than this plugin (started before an upgrade?): it does not list its methods (rpc.methods)')
      end
    end,
  },
  {
    "a method or field the daemon lacks is said to be its age, not the user's mistake",
    function()
      local format = require('memoryd.format')
      T.eq('', format.older_daemon_hint({ code = -32602, message = 'invalid params: cwd: must be an absolute path' }))
      T.has(format.older_daemon_hint({ code = -32602, message = 'invalid params: explain: Extra inputs are not permitted' }), 'memctl restart')
      if expect ~= 'all' then
        -- this daemon serves no recall: the view's call is answered "method not found"
        vim.cmd('MemorydRecall deploys')
        T.wait('the error', function()
          return T.message_matching('recall failed: method not found') ~= nil
        end)
        T.has(T.message_matching('recall failed').text, 'may be older than this plugin, started before an upgrade: `memctl restart`')
      end
    end,
  },
})
