-- A view's background refresh after a reply of the wrong shape (get_context answered null): the
-- reply is a message, and the next context/changed asks again. The one-request-at-a-time
-- refresh (coalesce.lua) was told the request had finished only by its reply or its error, which
-- such a reply is neither, so the view was never asked for again. The pytest side
-- (test_nvim.py) answers get_context: the first call, null, then the rest.
local T = dofile(os.getenv('MEMORYD_NVIM_PLUGIN') .. '/tests/helpers.lua')
local memoryd = require('memoryd')

memoryd.setup({ status_interval_ms = 0, notifications = { enabled = false } })

local repo = T.env('MEMORYD_TEST_REPO')

local function changed()
  memoryd.request('test.changed', { project = repo }, function() end)
end

T.run({
  {
    'a get_context reply of the wrong shape does not stop the next refreshes',
    function()
      vim.cmd('edit ' .. vim.fn.fnameescape(repo .. '/notes.md'))
      vim.cmd('MemorydRules')
      T.wait_view('rules', 'first.md', 30000)
      changed() -- answered null
      T.wait('the message about the reply', function()
        return T.message_matching('could not use the reply to get_context')
      end, 30000)
      changed()
      T.wait_view('rules', 'third.md', 30000)
    end,
  },
})
