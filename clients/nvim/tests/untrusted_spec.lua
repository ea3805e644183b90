-- A socket that is not the user's own daemon is refused before connecting: the socket file
-- $MEMORYD_SOCKET belongs to another user (the pytest side chowned it; it listens there and
-- records whatever reaches it), $MEMORYD_TEST_OPEN_SOCKET is in a folder anyone may write in,
-- $MEMORYD_TEST_OWN_SOCKET is the user's own.
local T = dofile(os.getenv('MEMORYD_NVIM_PLUGIN') .. '/tests/helpers.lua')
local memoryd = require('memoryd')
local rpc = require('memoryd.rpc')

memoryd.setup({ status_interval_ms = 0, notifications = { enabled = false } })

T.run({
  {
    "another user's socket is refused, naming its owner and the path",
    function()
      local sock = T.env('MEMORYD_SOCKET')
      vim.cmd('MemorydStatus')
      T.wait('the refusal', function()
        return T.message_matching('refusing to connect') ~= nil
      end)
      local text = T.message_matching('refusing to connect').text
      T.truthy(text:find(sock, 1, true), 'the path in ' .. text)
      T.truthy(text:find('belongs to uid ' .. T.env('MEMORYD_TEST_OTHER_UID'), 1, true), 'the owner in ' .. text)
    end,
  },
  {
    'a socket in a folder others may write in is refused',
    function()
      local why = rpc.untrusted(T.env('MEMORYD_TEST_OPEN_SOCKET'))
      T.truthy(why and why:find('is writable by other users', 1, true), 'the reason: ' .. tostring(why))
    end,
  },
  {
    "the user's own socket is trusted",
    function()
      T.eq(nil, rpc.untrusted(T.env('MEMORYD_TEST_OWN_SOCKET')), 'the reason')
    end,
  },
})
