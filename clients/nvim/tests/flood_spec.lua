-- :MemorydRules under a flood of context/changed (1,000 in a second) from a daemon slow to
-- answer get_context: one request at a time, and one more after it, not one per notification
-- (each queued a request and, at its timeout, an error message); the view ends up showing what
-- the daemon answers after the flood. The pytest side (test_nvim.py) is the daemon: its
-- get_context waits until $MEMORYD_TEST_RELEASE exists, once the view is open.
local T = dofile(os.getenv('MEMORYD_NVIM_PLUGIN') .. '/tests/helpers.lua')
local memoryd = require('memoryd')
local uv = vim.uv or vim.loop

memoryd.setup({ status_interval_ms = 0, notifications = { enabled = false } })

local function exists(path)
  return uv.fs_stat(path) ~= nil
end

T.run({
  {
    'a flood of context/changed asks get_context again one at a time, and shows the last answer',
    function()
      local repo = T.env('MEMORYD_TEST_REPO')
      vim.cmd('edit ' .. vim.fn.fnameescape(repo .. '/notes.md'))
      vim.cmd('MemorydRules')
      T.wait_view('rules', 'before.md', 10000)
      local asked = 0
      local request = memoryd.request
      memoryd.request = function(method, ...)
        if method == 'get_context' then
          asked = asked + 1
        end
        return request(method, ...)
      end
      memoryd.request('test.flood', { project = repo }, function() end)
      T.wait('the flood', function()
        return exists(T.env('MEMORYD_TEST_FLOODED'))
      end, 20000)
      vim.wait(500) -- the last notifications' handlers
      memoryd.request = request
      T.write(T.env('MEMORYD_TEST_RELEASE'), '') -- the daemon answers from now on
      T.truthy(asked >= 1, 'get_context asked again at all')
      T.truthy(asked <= 2, ('get_context asked once at a time, not %d times'):format(asked))
      T.wait_view('rules', 'after.md', 20000)
      T.truthy(T.count_messages('get_context failed') <= 1, 'an error message per notification')
    end,
  },
})
