-- Where the daemon listens: the same rule as memctl and memoryd_client.default_socket_path():
-- $MEMORYD_SOCKET; else on macOS ~/Library/Caches/memoryd/memoryd.sock; else
-- $XDG_RUNTIME_DIR/memoryd/memoryd.sock, else $XDG_CACHE_HOME/memoryd/memoryd.sock (each only
-- when absolute), else <tempdir>/memoryd-<uid>/memoryd.sock.
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

-- The path and the rule that chose it (for :checkhealth). getenv defaults to os.getenv and
-- sysname to this system's (uname); tests pass their own.
function M.resolve(getenv, sysname)
  getenv = getenv or os.getenv
  sysname = sysname or uv.os_uname().sysname
  local configured = getenv('MEMORYD_SOCKET')
  if configured and configured ~= '' then
    return M.normalize(configured), '$MEMORYD_SOCKET'
  end
  if sysname == 'Darwin' then
    local home = getenv('HOME')
    if not home or home == '' then
      home = uv.os_homedir()
    end
    return M.normalize(home .. '/Library/Caches/memoryd/memoryd.sock'), "macOS's ~/Library/Caches"
  end
  -- An XDG base directory counts only when absolute (the XDG spec ignores a relative one).
  local runtime = getenv('XDG_RUNTIME_DIR')
  if runtime and runtime:sub(1, 1) == '/' then
    return M.normalize(runtime .. '/memoryd/memoryd.sock'), '$XDG_RUNTIME_DIR'
  end
  local cache = getenv('XDG_CACHE_HOME')
  if cache and cache:sub(1, 1) == '/' then
    return M.normalize(cache .. '/memoryd/memoryd.sock'), '$XDG_CACHE_HOME'
  end
  return M.normalize(('%s/memoryd-%d/memoryd.sock'):format(M.tempdir(getenv), uv.getuid())), 'the per-user fallback'
end

return M
