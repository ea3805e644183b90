-- The views under a flood of notifications (1,000 in a second) from a daemon slow to answer:
-- one request at a time, and one more after it, not one per notification (each queued a
-- request and, at its timeout, an error message); the view ends up showing what the daemon
-- answers after the flood. The pytest side (test_nvim.py) is the daemon: a method's calls after
-- its first wait until ../release-<method> exists, which this spec writes once it has counted.
local T = dofile(os.getenv('MEMORYD_NVIM_PLUGIN') .. '/tests/helpers.lua')
local memoryd = require('memoryd')
local uv = vim.uv or vim.loop

-- A call the daemon holds back until release-<method> lasts the whole flood: on a loaded
-- machine the flood outlasts the default 5 s timeout, and each timeout asks once more.
memoryd.setup({ status_interval_ms = 0, notifications = { enabled = false }, timeout_ms = 120000 })

local repo = T.env('MEMORYD_TEST_REPO')

-- How many times `method` is asked for while the daemon floods the connection with `event`.
local function asked_during_flood(method, event)
  local asked = 0
  local request = memoryd.request
  memoryd.request = function(name, ...)
    if name == method then
      asked = asked + 1
    end
    return request(name, ...)
  end
  local done = vim.fn.getcwd() .. '/flooded-' .. event:gsub('/', '-')
  memoryd.request('test.flood', { event = event, project = repo, done = done }, function() end)
  T.wait('the flood', function()
    return uv.fs_stat(done) ~= nil
  end, 60000)
  vim.wait(500) -- the last notifications' handlers and timers
  memoryd.request = request
  T.write(vim.fn.getcwd() .. '/release-' .. method, '') -- the daemon answers from now on
  return asked
end

T.run({
  {
    'a flood of context/changed asks get_context again one at a time, and shows the last answer',
    function()
      vim.cmd('edit ' .. vim.fn.fnameescape(repo .. '/notes.md'))
      vim.cmd('MemorydRules')
      T.wait_view('rules', 'before.md', 10000)
      local asked = asked_during_flood('get_context', 'context/changed')
      T.truthy(asked >= 1, 'get_context asked again at all')
      T.truthy(asked <= 2, ('get_context asked once at a time, not %d times'):format(asked))
      T.wait_view('rules', 'after.md', 20000)
      T.truthy(T.count_messages('get_context failed') <= 1, 'an error message per notification')
    end,
  },
  {
    'a storm of memory/saved asks memory.list again one at a time, and shows the last answer',
    function()
      vim.cmd('MemorydMemories')
      T.wait_view('memories', 'listed before the storm', 10000)
      local asked = asked_during_flood('memory.list', 'memory/saved')
      T.truthy(asked >= 1, 'memory.list asked again at all')
      T.truthy(asked <= 2, ('memory.list asked once at a time, not %d times'):format(asked))
      T.wait_view('memories', 'listed after the storm', 20000)
      T.truthy(T.count_messages('memory.list failed') <= 1, 'an error message per notification')
    end,
  },
})
