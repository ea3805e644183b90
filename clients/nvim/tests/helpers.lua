-- A small harness for the headless tests (driven by tests/editors/test_nvim.py): scripted
-- answers for vim.ui.select/input, captured vim.notify messages, waits with a deadline, and a
-- JSON result file the pytest side reads. Every test runs even when an earlier one failed.
-- Loaded with dofile($MEMORYD_NVIM_PLUGIN/tests/helpers.lua): puts the plugin on the
-- runtimepath and loads plugin/memoryd.lua, as a plugin manager would.
vim.opt.rtp:prepend(os.getenv('MEMORYD_NVIM_PLUGIN'))
vim.cmd('runtime plugin/memoryd.lua')

local T = {}

-- The per-call timeout of the specs against the real daemon: on two busy cores (CI) a call
-- took longer than the plugin's 5 s and the spec failed on "did not answer".
T.TIMEOUT_MS = 30000

T.messages = {} -- {text, level}
T.prompts = {} -- every vim.ui prompt seen
T.answers = {} -- queue: for select a 1-based index (or false to cancel), for input a string
T.env = function(name)
  local value = os.getenv(name)
  assert(value and value ~= '', 'the test needs $' .. name)
  return value
end

T.builtin_notify = vim.notify
vim.notify = function(msg, level)
  T.messages[#T.messages + 1] = { text = tostring(msg), level = level }
end

vim.ui.select = function(items, opts, on_choice)
  T.prompts[#T.prompts + 1] = { kind = 'select', prompt = opts and opts.prompt, items = items }
  local answer = table.remove(T.answers, 1)
  assert(answer ~= nil, 'unexpected vim.ui.select: ' .. tostring(opts and opts.prompt))
  vim.schedule(function()
    if answer == false then
      on_choice(nil, nil)
    else
      on_choice(items[answer], answer)
    end
  end)
end

vim.ui.input = function(opts, on_confirm)
  T.prompts[#T.prompts + 1] = { kind = 'input', prompt = opts and opts.prompt, default = opts and opts.default }
  local answer = table.remove(T.answers, 1)
  assert(answer ~= nil, 'unexpected vim.ui.input: ' .. tostring(opts and opts.prompt))
  vim.schedule(function()
    if answer == true then
      on_confirm(opts.default)
    elseif answer == false then
      on_confirm(nil)
    else
      on_confirm(answer)
    end
  end)
end

-- Until cond() is true, at most ms (a deadline for a loaded machine: CI runs the suite on two
-- busy cores; a condition met returns at once, so a long one costs nothing).
function T.wait(what, cond, ms)
  local ok = vim.wait(ms or 30000, cond, 10)
  if not ok then
    error('timed out waiting for ' .. what, 2)
  end
end

function T.eq(expected, actual, what)
  if not vim.deep_equal(expected, actual) then
    error(('%s: expected %s, got %s'):format(what or 'value', vim.inspect(expected), vim.inspect(actual)), 2)
  end
end

function T.truthy(value, what)
  if not value then
    error((what or 'value') .. ' was ' .. tostring(value), 2)
  end
  return value
end

function T.lines(name)
  local buf = require('memoryd.ui').existing(name)
  if not buf then
    return {}
  end
  return vim.api.nvim_buf_get_lines(buf, 0, -1, false)
end

function T.text(name)
  return table.concat(T.lines(name), '\n')
end

-- The line number of the first line of a view containing text (plain).
function T.find(name, text)
  for i, line in ipairs(T.lines(name)) do
    if line:find(text, 1, true) then
      return i
    end
  end
  return nil
end

function T.has(haystack, needle, what)
  if not haystack:find(needle, 1, true) then
    error(('%s: %q not found in:\n%s'):format(what or 'text', needle, haystack), 2)
  end
end

function T.has_not(haystack, needle, what)
  if haystack:find(needle, 1, true) then
    error(('%s: %q unexpectedly found in:\n%s'):format(what or 'text', needle, haystack), 2)
  end
end

-- How many messages contain text (plain).
function T.count_messages(text)
  local n = 0
  for _, m in ipairs(T.messages) do
    if m.text:find(text, 1, true) then
      n = n + 1
    end
  end
  return n
end

-- A request through the plugin's connection, waited for (test set-up and checks only).
function T.call(method, params, ms)
  local done, result = false, nil
  require('memoryd').request(method, params, function(r)
    done, result = true, r
  end)
  T.wait(method, function()
    return done
  end, ms)
  return result
end

function T.message_matching(text)
  for _, m in ipairs(T.messages) do
    if m.text:find(text, 1, true) then
      return m
    end
  end
  return nil
end

-- Wait until a view has text in it (views render asynchronously).
function T.wait_view(name, text, ms)
  T.wait(('view %s to show %q (has: %s)'):format(name, text, T.text(name)), function()
    return T.text(name):find(text, 1, true) ~= nil
  end, ms)
end

-- Put the cursor of the view's window on the first line containing text and press keys.
function T.press_on(name, text, keys)
  local buf = require('memoryd.ui').existing(name)
  T.truthy(buf, 'view ' .. name)
  local row = T.truthy(T.find(name, text), ('line %q in %s'):format(text, name))
  T.wait('a window on ' .. name, function()
    return vim.fn.bufwinid(buf) ~= -1
  end)
  local win = vim.fn.bufwinid(buf)
  vim.api.nvim_set_current_win(win)
  vim.api.nvim_win_set_cursor(win, { row, 0 })
  vim.api.nvim_feedkeys(vim.api.nvim_replace_termcodes(keys, true, false, true), 'mx', false)
end

function T.file(path)
  local f = io.open(path, 'rb')
  if not f then
    return nil
  end
  local data = f:read('*a')
  f:close()
  return data
end

function T.write(path, text)
  local f = assert(io.open(path, 'wb'))
  f:write(text)
  f:close()
end

-- The plugin set up against $MEMORYD_SOCKET with only worker/error shown, for the reload
-- specs: the reloads they check must not depend on the events named there. The module.
function T.setup_showing_worker_errors_only()
  local memoryd = require('memoryd')
  memoryd.setup({
    memctl = T.env('MEMORYD_TEST_MEMCTL'),
    timeout_ms = T.TIMEOUT_MS,
    notifications = { events = { 'worker/error' } },
  })
  return memoryd
end

-- A file edited in the current window: its buffer.
function T.edit(path)
  vim.cmd('edit ' .. vim.fn.fnameescape(path))
  return vim.api.nvim_get_current_buf()
end

function T.buf_text(buf)
  return table.concat(vim.api.nvim_buf_get_lines(buf, 0, -1, false), '\n')
end

-- Until buf shows wanted (a file the daemon rewrote, reloaded; a MagicDoc's update is a model
-- call by a background worker: slow on busy cores).
function T.wait_buf_text(buf, wanted, what)
  T.wait(('%s to show %q (has: %s)'):format(what, wanted, T.buf_text(buf)), function()
    return T.buf_text(buf):find(wanted, 1, true) ~= nil
  end, 60000)
end

-- Close every window but one, empty the views, forget the messages and prompts, between tests.
function T.reset()
  vim.cmd('silent! only')
  -- Empty every view, so a test waits for its own text, never an earlier one's.
  local ui = require('memoryd.ui')
  for _, name in ipairs({ 'rules', 'recall', 'memories', 'history', 'status' }) do
    local buf = ui.existing(name)
    if buf then
      ui.render(buf, {})
    end
  end
  T.messages, T.prompts, T.answers = {}, {}, {}
end

-- A socket served from this Neovim (a libuv pipe, no daemon): on_request(request, conn) for
-- each JSON-RPC line a client sends (in a libuv callback: no Vim functions there). Returns
-- {conns = every connection, close = stop serving}. When take(), if given, says false for a
-- connection, it is closed as accepted, unread (and not in conns).
function T.serve(path, on_request, take)
  local uv = vim.uv or vim.loop
  local s = { conns = {} }
  local pipe = uv.new_pipe(false)
  assert(pipe:bind(path))
  pipe:listen(16, function()
    local conn = uv.new_pipe(false)
    pipe:accept(conn)
    if take and not take() then
      conn:close()
      return
    end
    s.conns[#s.conns + 1] = conn
    local pending = ''
    conn:read_start(function(_, chunk)
      if chunk == nil then
        return conn:is_closing() or conn:close()
      end
      pending = pending .. chunk
      for line in pending:gmatch('([^\n]*)\n') do
        on_request(vim.json.decode(line), conn)
      end
      pending = pending:match('[^\n]*$')
    end)
  end)
  function s.close()
    for _, conn in ipairs(s.conns) do
      if not conn:is_closing() then
        conn:close()
      end
    end
    pipe:close()
    os.remove(path)
  end
  return s
end

-- Run the tests in order, write {name, ok, error} records to $MEMORYD_TEST_RESULT, quit.
function T.run(tests)
  local results = {}
  for _, test in ipairs(tests) do
    T.reset()
    local ok, err = xpcall(test[2], debug.traceback)
    if not ok and #T.messages > 0 then
      -- What the plugin said (a call that failed or timed out) tells why a wait ran out.
      local said = vim.tbl_map(function(m)
        return '  ' .. m.text
      end, T.messages)
      err = tostring(err) .. '\nmessages:\n' .. table.concat(said, '\n')
    end
    results[#results + 1] = { name = test[1], ok = ok, error = ok and vim.NIL or tostring(err) }
    if #T.answers > 0 then
      results[#results].ok = false
      results[#results].error = 'unused scripted answers: ' .. vim.inspect(T.answers)
    end
  end
  T.write(T.env('MEMORYD_TEST_RESULT'), vim.json.encode(results))
  vim.cmd('qa!')
end

return T
