-- The socket path rule gives what memoryd_client.default_socket_path() gives in the same
-- environment ($MEMORYD_TEST_EXPECTED, computed by the pytest side), and names the rule that
-- chose it ($MEMORYD_TEST_EXPECTED_RULE) for :checkhealth.
local T = dofile(os.getenv('MEMORYD_NVIM_PLUGIN') .. '/tests/helpers.lua')

T.run({
  {
    'resolve() matches the Python client',
    function()
      local sysname = os.getenv('MEMORYD_TEST_SYSNAME')
      if sysname then -- another system's rule
        local path, rule = require('memoryd.socket_path').resolve(nil, sysname)
        T.eq(T.env('MEMORYD_TEST_EXPECTED'), path, 'socket path')
        T.eq(T.env('MEMORYD_TEST_EXPECTED_RULE'), rule, 'rule')
        return
      end
      local path, rule = require('memoryd.socket_path').resolve()
      T.eq(T.env('MEMORYD_TEST_EXPECTED'), path, 'socket path')
      T.eq(T.env('MEMORYD_TEST_EXPECTED_RULE'), rule, 'rule')
      path, rule = require('memoryd').socket_path()
      T.eq(T.env('MEMORYD_TEST_EXPECTED'), path, 'memoryd.socket_path()')
      T.eq(T.env('MEMORYD_TEST_EXPECTED_RULE'), rule, 'memoryd.socket_path() rule')
    end,
  },
})
