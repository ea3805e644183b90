-- The socket path rule gives what memoryd_client.default_socket_path() gives in the same
-- environment ($MEMORYD_TEST_EXPECTED, computed by the pytest side), names the rule that
-- chose it ($MEMORYD_TEST_EXPECTED_RULE) for :checkhealth, and warns, once, exactly when the
-- Python client warns that $XDG_RUNTIME_DIR was passed over ($MEMORYD_TEST_EXPECTED_WARNED).
local T = dofile(os.getenv('MEMORYD_NVIM_PLUGIN') .. '/tests/helpers.lua')

local function warnings_shown(memoryd)
  local count = 0
  for _, line in ipairs(memoryd.recent) do
    if line:find('is passed over', 1, true) then
      count = count + 1
    end
  end
  return count
end

T.run({
  {
    'resolve() matches the Python client',
    function()
      local sysname = os.getenv('MEMORYD_TEST_SYSNAME')
      if sysname then -- another system's rule
        local path, rule, warning = require('memoryd.socket_path').resolve(nil, sysname)
        T.eq(T.env('MEMORYD_TEST_EXPECTED'), path, 'socket path')
        T.eq(T.env('MEMORYD_TEST_EXPECTED_RULE'), rule, 'rule')
        T.eq(nil, warning, 'macOS never reads XDG_RUNTIME_DIR')
        return
      end
      local warned = T.env('MEMORYD_TEST_EXPECTED_WARNED') == '1'
      local path, rule, warning = require('memoryd.socket_path').resolve()
      T.eq(T.env('MEMORYD_TEST_EXPECTED'), path, 'socket path')
      T.eq(T.env('MEMORYD_TEST_EXPECTED_RULE'), rule, 'rule')
      T.eq(warned, warning ~= nil, 'warned: ' .. tostring(warning))
      if warned then
        T.eq(true, warning:find('XDG_RUNTIME_DIR=' .. os.getenv('XDG_RUNTIME_DIR'), 1, true) == 1, warning)
        T.eq(true, warning:find('the socket is ' .. path, 1, true) ~= nil, warning)
      end
      local memoryd = require('memoryd')
      path, rule = memoryd.socket_path()
      T.eq(T.env('MEMORYD_TEST_EXPECTED'), path, 'memoryd.socket_path()')
      T.eq(T.env('MEMORYD_TEST_EXPECTED_RULE'), rule, 'memoryd.socket_path() rule')
      memoryd.socket_path()
      T.eq(warned and 1 or 0, warnings_shown(memoryd), 'the warning is shown once')
    end,
  },
})
