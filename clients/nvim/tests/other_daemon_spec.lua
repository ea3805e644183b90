-- Two daemons of one user ($MEMORYD_TEST_OTHER_SOCKET started first, $MEMORYD_SOCKET second,
-- one HOME): the second reports the first in status.other_daemon, and :MemorydStatus and
-- :checkhealth memoryd say so, with the other socket and how to keep one (as `memctl status`).
local T = dofile(os.getenv('MEMORYD_NVIM_PLUGIN') .. '/tests/helpers.lua')
local memoryd = require('memoryd')

memoryd.setup({ memctl = T.env('MEMORYD_TEST_MEMCTL'), status_interval_ms = 0, timeout_ms = T.TIMEOUT_MS })
local other = T.env('MEMORYD_TEST_OTHER_SOCKET')
local other_pid = T.env('MEMORYD_TEST_OTHER_PID')
local warning = ('warning: another memoryd of this user (pid %s) is running on %s; keep one: memctl --socket %s stop'):format(
  other_pid,
  other,
  other
)

T.run({
  {
    ':MemorydStatus warns of the other daemon, its socket and how to keep one',
    function()
      vim.cmd('MemorydStatus')
      T.wait_view('status', '(pid ')
      local lines = T.lines('status')
      T.eq('socket: ' .. T.env('MEMORYD_SOCKET'), lines[2], 'the socket line')
      T.eq(warning, lines[3], 'the warning under it')
      T.has(lines[4], 'hooks and editors whose socket names it talk to it')
    end,
  },
  {
    ':checkhealth memoryd warns of the other daemon',
    function()
      vim.cmd('checkhealth memoryd')
      local text = table.concat(vim.api.nvim_buf_get_lines(0, 0, -1, false), '\n')
      T.has(text, 'WARNING')
      T.has(text, (warning:gsub('^warning: ', '')))
      T.has(text, "the two do not see each other's sessions")
    end,
  },
  {
    'a name a shell would split is quoted as memctl quotes it; no other daemon, no line',
    function()
      local format = require('memoryd.format')
      T.eq(
        "another memoryd of this user (pid 7) is running on /tmp/a b/it's.sock; keep one: memctl --socket '/tmp/a b/it'\"'\"'s.sock' stop",
        format.other_daemon({ other_daemon = { pid = 7, socket = "/tmp/a b/it's.sock" } })
      )
      T.eq('another memoryd of this user (pid unknown) is running', format.other_daemon({ other_daemon = { pid = vim.NIL, socket = vim.NIL } }))
      T.eq(nil, format.other_daemon({ other_daemon = vim.NIL }))
      local lines = require('memoryd.views.status').render({ version = '1', socket = '/s', other_daemon = vim.NIL }, nil, nil, '/s', {})
      T.eq(nil, table.concat(lines, '\n'):find('another memoryd', 1, true), 'no warning line')
    end,
  },
})
