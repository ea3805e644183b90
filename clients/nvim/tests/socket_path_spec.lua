-- The socket path rule gives what memoryd_client.default_socket_path() gives in the same
-- environment ($MEMORYD_TEST_EXPECTED, computed by the pytest side).
local T = dofile(os.getenv('MEMORYD_NVIM_PLUGIN') .. '/tests/helpers.lua')

T.run({
  {
    'resolve() matches the Python client',
    function()
      local sysname = os.getenv('MEMORYD_TEST_SYSNAME')
      if sysname then -- another system's rule
        T.eq(T.env('MEMORYD_TEST_EXPECTED'), require('memoryd.socket_path').resolve(nil, sysname), 'socket path')
        return
      end
      T.eq(T.env('MEMORYD_TEST_EXPECTED'), require('memoryd.socket_path').resolve(), 'socket path')
      T.eq(T.env('MEMORYD_TEST_EXPECTED'), require('memoryd').socket_path(), 'memoryd.socket_path()')
    end,
  },
})
