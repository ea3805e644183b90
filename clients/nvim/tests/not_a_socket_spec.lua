-- A folder, regular file or FIFO where the socket should be (a mistyped `socket` option or
-- MEMORYD_SOCKET): connecting to one is ECONNREFUSED on Linux, which was retried for a second as
-- a daemon restarting and then said only "not running (ECONNREFUSED)", with an offer to run
-- `memctl start`, which does not replace it. It is said at the first attempt in
-- memoryd_client's words, and :checkhealth memoryd says it too. No daemon is needed.
local T = dofile(os.getenv('MEMORYD_NVIM_PLUGIN') .. '/tests/helpers.lua')
local memoryd = require('memoryd')
local Client = require('memoryd.rpc')
local uv = vim.uv or vim.loop

local folder = vim.fn.tempname()
vim.fn.mkdir(folder, 'p')
local paths = {
  folder = folder .. '/folder.sock',
  file = folder .. '/file.sock',
  fifo = folder .. '/fifo.sock',
}
vim.fn.mkdir(paths.folder)
vim.fn.writefile({ 'notes' }, paths.file)
vim.fn.system({ 'mkfifo', paths.fifo })
assert(vim.v.shell_error == 0, 'mkfifo failed')

local function expected(path, kind)
  return ('memoryd is not running on %s: it is %s, not a socket; is --socket or MEMORYD_SOCKET mistyped? (`memctl start` does not replace it)'):format(
    path,
    kind
  )
end

memoryd.setup({ socket = paths.folder, status_interval_ms = 0, notifications = { enabled = false } })

local tests = {}
for _, case in ipairs({ { 'folder', 'a folder' }, { 'file', 'a regular file' }, { 'fifo', 'a FIFO' } }) do
  local name, kind = case[1], case[2]
  tests[#tests + 1] = {
    ('a %s at the socket path is down at the first attempt, naming what is there'):format(name),
    function()
      -- Count the connection attempts: a retry (as for a daemon restarting) makes more than one.
      local new_pipe, attempts = uv.new_pipe, 0
      uv.new_pipe = function(...)
        attempts = attempts + 1
        return new_pipe(...)
      end
      local client = Client.new({ path = paths[name], backoff_min_ms = 60000 })
      local done, err = false, nil
      client:request('status', nil, function(e)
        done, err = true, e
      end)
      local ok = pcall(T.wait, 'the failure', function()
        return done
      end)
      uv.new_pipe = new_pipe
      client:close()
      T.truthy(ok, 'an answer')
      T.eq('down', err.code, 'the code')
      T.eq(expected(paths[name], kind), err.message, 'the message')
      T.eq(1, attempts, 'connection attempts')
    end,
  }
end

tests[#tests + 1] = {
  'a command says what is there, and offers no memctl start',
  function()
    vim.cmd('MemorydStatus')
    T.wait('the message', function()
      return T.message_matching('not a socket') ~= nil
    end)
    T.has(T.message_matching('not a socket').text, expected(paths.folder, 'a folder'))
    T.eq(nil, T.message_matching('Start it with :MemorydStart'), 'a start hint')
    T.eq({}, T.prompts, 'the prompts')
  end,
}

tests[#tests + 1] = {
  ':checkhealth memoryd says what is there, not to start the daemon',
  function()
    vim.cmd('checkhealth memoryd')
    local text = table.concat(vim.api.nvim_buf_get_lines(0, 0, -1, false), '\n')
    T.has(text, 'ERROR')
    T.has(text, expected(paths.folder, 'a folder'))
    T.has(text, 'or move what is at ' .. paths.folder .. ' away')
    T.has_not(text, 'memoryd is not answering')
  end,
}

-- A socket path longer than a Unix socket's may be (107 bytes on Linux): Neovim's libuv before
-- 1.46 cut it to fit and connected to whatever listened at the shorter path (here one served in
-- this Neovim); newer ones said ENOENT, "not running", and offered `memctl start`. It is said
-- at the first attempt, nothing connected, and :checkhealth memoryd says what to set.
local long_folder = folder .. '/' .. string.rep('l', 130)
vim.fn.mkdir(long_folder, 'p')
local long_path = long_folder .. '/memoryd.sock'
local function expected_long(path)
  return ('memoryd is not running on %s: its path is %d bytes, over the 107 a Unix socket\'s path may have; set --socket or MEMORYD_SOCKET (or XDG_RUNTIME_DIR) to a shorter one'):format(
    path,
    #path
  )
end

tests[#tests + 1] = {
  'a socket path too long for a socket is said at the first attempt, and nothing at a shorter path is reached',
  function()
    local cut = uv.new_pipe(false)
    assert(cut:bind(long_path:sub(1, 107)))
    local reached = 0
    cut:listen(8, function()
      reached = reached + 1
      local conn = uv.new_pipe(false)
      cut:accept(conn)
      conn:read_start(function(_, chunk)
        if chunk then
          local request = vim.json.decode(chunk:match('^[^\n]*'))
          conn:write(vim.json.encode({ jsonrpc = '2.0', id = request.id, result = { version = 'impostor' } }) .. '\n')
        end
      end)
    end)
    local client = Client.new({ path = long_path, backoff_min_ms = 60000 })
    local done, err, result = false, nil, nil
    client:request('status', nil, function(e, r)
      done, err, result = true, e, r
    end, 20000)
    local ok = pcall(T.wait, 'the failure', function()
      return done
    end)
    client:close()
    cut:close()
    T.truthy(ok, 'an answer')
    T.eq(nil, result, 'the answer from the shorter path')
    T.eq(0, reached, 'connections at the shorter path')
    T.eq('down', err.code, 'the code')
    T.eq(expected_long(long_path), err.message, 'the message')
  end,
}

tests[#tests + 1] = {
  'a socket path too long: a command says so and offers no memctl start; :checkhealth says what to set',
  function()
    memoryd.setup({ socket = long_path, status_interval_ms = 0, notifications = { enabled = false } })
    vim.cmd('MemorydStatus')
    T.wait('the message', function()
      return T.message_matching('a Unix socket') ~= nil
    end)
    T.has(T.message_matching('a Unix socket').text, expected_long(long_path))
    T.eq(nil, T.message_matching('Start it with :MemorydStart'), 'a start hint')
    T.eq({}, T.prompts, 'the prompts')
    vim.cmd('checkhealth memoryd')
    local text = table.concat(vim.api.nvim_buf_get_lines(0, 0, -1, false), '\n')
    T.has(text, expected_long(long_path))
    T.has(text, 'to a shorter path')
    T.has_not(text, 'memoryd is not answering')
  end,
}

T.run(tests)
