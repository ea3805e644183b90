-- Where the daemon listens: the same rule as memctl and memoryd_client.default_socket_path():
-- $MEMORYD_SOCKET; else on macOS ~/Library/Caches/memoryd/memoryd.sock; else
-- $XDG_RUNTIME_DIR/memoryd/memoryd.sock when it is a runtime folder of the user's (absolute,
-- existing, the user's own, no group/other bits; else passed over with a warning), else
-- $XDG_CACHE_HOME/memoryd/memoryd.sock (when absolute), else <tempdir>/memoryd-<uid>/memoryd.sock.
local uv = vim.uv or vim.loop

local M = {}

-- Python's pathlib spelling of a path: repeated slashes and "." parts collapse, no trailing
-- slash; ".." stays (pathlib never resolves it) unless resolve_dotdot (os.path.normpath).
function M.normalize(path, resolve_dotdot)
  local absolute = path:sub(1, 1) == '/'
  -- POSIX keeps exactly two leading slashes; pathlib does too.
  local double = path:sub(1, 2) == '//' and path:sub(3, 3) ~= '/'
  local parts = {}
  for part in path:gmatch('[^/]+') do
    if part == '..' and resolve_dotdot and #parts > 0 and parts[#parts] ~= '..' then
      parts[#parts] = nil
    elseif part == '..' and resolve_dotdot and absolute then
      -- "/.." is "/"
    elseif part ~= '.' then
      parts[#parts + 1] = part
    end
  end
  local body = table.concat(parts, '/')
  if double then
    return '//' .. body
  elseif absolute then
    return '/' .. body
  elseif body == '' then
    return '.'
  end
  return body
end

local function is_writable_dir(dir)
  local stat = uv.fs_stat(dir)
  return stat ~= nil and stat.type == 'directory' and uv.fs_access(dir, 'W') == true
end

-- tempfile.gettempdir(): $TMPDIR, $TEMP, $TMP, then /tmp, /var/tmp, /usr/tmp, then the
-- working directory: the first that is a writable directory, made absolute.
function M.tempdir(getenv)
  local candidates = {}
  for _, name in ipairs({ 'TMPDIR', 'TEMP', 'TMP' }) do
    local value = getenv(name)
    if value and value ~= '' then
      candidates[#candidates + 1] = value
    end
  end
  vim.list_extend(candidates, { '/tmp', '/var/tmp', '/usr/tmp' })
  local cwd = uv.cwd()
  for _, dir in ipairs(candidates) do
    if dir:sub(1, 1) ~= '/' then
      dir = cwd .. '/' .. dir
    end
    if is_writable_dir(dir) then
      return M.normalize(dir, true)
    end
  end
  return M.normalize(cwd, true)
end

-- Why $XDG_RUNTIME_DIR (value) is no runtime folder of the user's, nil when it is one: the XDG
-- spec has it absolute, the user's own and open to nobody else. memoryd_client.paths has the
-- same checks, so every client passes the same folders over.
function M.runtime_dir_problem(value)
  if value:sub(1, 1) ~= '/' then
    return 'it is not an absolute path'
  end
  local stat, err, code = uv.fs_stat(value)
  if not stat then
    if code == 'ENOENT' then
      return 'it does not exist (the login session that made it ended, or `su` without a login)'
    end
    return ('it cannot be read (%s)'):format(tostring(err or code))
  end
  if stat.type ~= 'directory' then
    return 'it is not a folder'
  end
  local uid = uv.getuid()
  if stat.uid ~= uid then
    return ('it belongs to uid %d, not to you (uid %d)'):format(stat.uid, uid)
  end
  local mode = stat.mode % 4096 -- the permission bits (S_IMODE)
  if mode % 64 ~= 0 then -- any of 0077
    return ('its mode is %04o, open to others (a runtime folder is 0700)'):format(mode)
  end
  return nil
end

-- memoryd_client.paths.home(): $HOME when absolute, else the password database's home
-- (uv.os_homedir() would take a relative $HOME).
function M.home(getenv)
  local value = getenv('HOME')
  if value and value:sub(1, 1) == '/' then
    return value
  end
  local passwd = uv.os_get_passwd and uv.os_get_passwd()
  return passwd and passwd.homedir or uv.os_homedir()
end

-- A leading ~ as the home folder, as every memoryd client reads a socket path.
function M.expand_home(path, getenv)
  if path == '~' or path:sub(1, 2) == '~/' then
    return M.home(getenv or os.getenv) .. path:sub(2)
  end
  return path
end

-- setup()'s `socket`: a leading ~ as the home folder and $NAME or ${NAME} as that variable
-- (one that is unset stays as written), nothing else. vim.fn.expand() also took wildcards,
-- braces and backslashes: '/tmp/{a,b}/m.sock' became two paths on two lines, '/tmp/a\b.sock'
-- lost its backslash, and a '*' matching a file named that file.
function M.expand_option(path, getenv)
  getenv = getenv or os.getenv
  -- one pass: a variable's value is never read for more variables
  path = path:gsub('%$({?)([%a_][%w_]*)(}?)', function(open, name, close)
    local value = getenv(name)
    if value == nil or (open == '{' and close ~= '}') then
      return nil -- kept as written
    end
    return open == '{' and value or value .. close
  end)
  return M.expand_home(path, getenv)
end

-- The path, the rule that chose it (for :checkhealth), and a warning when $XDG_RUNTIME_DIR was
-- passed over (the caller shows it). getenv defaults to os.getenv and sysname to this
-- system's (uname); tests pass their own.
function M.resolve(getenv, sysname)
  getenv = getenv or os.getenv
  sysname = sysname or uv.os_uname().sysname
  local configured = getenv('MEMORYD_SOCKET')
  if configured and configured ~= '' then
    -- As the Python client: a leading ~ is the home folder (the variable is often set where no
    -- shell expands it), a relative path is taken from the working directory.
    configured = M.expand_home(configured, getenv)
    if configured:sub(1, 1) ~= '/' then
      configured = uv.cwd() .. '/' .. configured
    end
    return M.normalize(configured), '$MEMORYD_SOCKET'
  end
  if sysname == 'Darwin' then
    return M.normalize(M.home(getenv) .. '/Library/Caches/memoryd/memoryd.sock'), "macOS's ~/Library/Caches"
  end
  local runtime = getenv('XDG_RUNTIME_DIR')
  local problem = nil
  if runtime and runtime ~= '' then
    problem = M.runtime_dir_problem(runtime)
    if not problem then
      return M.normalize(runtime .. '/memoryd/memoryd.sock'), '$XDG_RUNTIME_DIR'
    end
  end
  -- An XDG base directory counts only when absolute (the XDG spec ignores a relative one).
  local path, rule
  local cache = getenv('XDG_CACHE_HOME')
  if cache and cache:sub(1, 1) == '/' then
    path, rule = M.normalize(cache .. '/memoryd/memoryd.sock'), '$XDG_CACHE_HOME'
  else
    path = M.normalize(('%s/memoryd-%d/memoryd.sock'):format(M.tempdir(getenv), uv.getuid()))
    rule = 'the per-user fallback'
  end
  local warning = nil
  if problem then
    warning = ('XDG_RUNTIME_DIR=%s is passed over: %s; the socket is %s'):format(runtime, problem, path)
  end
  return path, rule, warning
end

return M
