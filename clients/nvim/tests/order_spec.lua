-- Replies out of order and refreshes asked for again and again, against a socket served from
-- this Neovim: the daemon answers a connection's requests concurrently, and this one answers a
-- folder named `slow` 800 ms late. No daemon is needed; the server counts what reaches it.
local T = dofile(os.getenv('MEMORYD_NVIM_PLUGIN') .. '/tests/helpers.lua')
local memoryd = require('memoryd')
local uv = vim.uv or vim.loop

local folder = vim.fn.resolve(vim.fn.tempname())
for _, name in ipairs({ 'slow', 'fast' }) do
  vim.fn.mkdir(folder .. '/' .. name .. '/.claude/rules', 'p')
end

local asked = {} -- method -> how many requests reached the server
local delay_status = false -- answer the next `status` 800 ms late

local function result(method, cwd)
  local name = cwd:match('([^/]*)$')
  if method == 'get_context' then
    local rule = { path = cwd .. '/.claude/rules/' .. name .. '_rule.md', type = 'Project', reason = 'session_start' }
    return { claude_md = '', current_date = '', files = { rule }, skipped = {}, memory_dir = folder .. '/memory', index_truncated = false }
  elseif method == 'memory.list' then
    local memory = { path = folder .. '/memory/' .. name .. '.md', name = name .. ' memory', description = 'listed for ' .. name, type = 'project', mtime = os.time(), team = false }
    return { instruction_files = {}, memories = { memory }, memory_dir = folder .. '/memory', team_dir = folder .. '/memory/team' }
  elseif method == 'recall' then
    local memory = { path = folder .. '/memory/' .. name .. '.md', name = name .. ' recalled', description = '', type = 'project', mtime = os.time() }
    return { memories = { memory }, selector = 'served' }
  elseif method == 'team.status' then
    return { repo = name .. '/repo', server = 'served', entries = 0, pending = {}, retrying = false }
  elseif method == 'subscribe' then
    return { subscribed = {} }
  end
  -- each status answer tells which request it was, in the order they reached the server
  return { version = 'served ' .. asked.status, pid = 0, protocol_version = 1 }
end

local path = folder .. '/order.sock'
local server = T.serve(path, function(request, conn)
  local cwd = type(request.params) == 'table' and request.params.cwd or ''
  asked[request.method] = (asked[request.method] or 0) + 1
  local reply = vim.json.encode({ jsonrpc = '2.0', id = request.id, result = result(request.method, cwd) }) .. '\n'
  local function send()
    if not conn:is_closing() then
      conn:write(reply)
    end
  end
  local late = cwd:match('/slow$') ~= nil
  if request.method == 'status' and delay_status then
    delay_status, late = false, true
  end
  if late then
    local timer = uv.new_timer()
    timer:start(800, 0, function()
      timer:close()
      send()
    end)
  else
    send()
  end
end)

memoryd.setup({ socket = path, status_interval_ms = 60000, notifications = false })

-- How many answers of each method reached the views' callbacks: waited for, where a fixed
-- pause let a late answer come after the checks (they passed without looking at it).
local handled = {}
local request = memoryd.request
memoryd.request = function(method, params, cb, opts)
  return request(method, params, function(reply)
    handled[method] = (handled[method] or 0) + 1
    return cb(reply)
  end, opts)
end

-- Until the views have been handed `count` more answers to `method` than `before`.
local function wait_handled(method, before, count)
  T.wait(('%d answers to %s'):format(count, method), function()
    return (handled[method] or 0) >= before + count
  end, 20000)
end

-- Run `command` in the slow folder's buffer, then at once in the fast one's; wait until the
-- slow answer came too.
local function slow_then_fast(command, method)
  local before = handled[method] or 0
  vim.cmd('edit ' .. vim.fn.fnameescape(folder .. '/slow/a.md'))
  vim.cmd(command)
  vim.cmd('wincmd p')
  vim.cmd('edit ' .. vim.fn.fnameescape(folder .. '/fast/b.md'))
  vim.cmd(command)
  wait_handled(method, before, 2)
end

local function newest_drawn(command, method, view, shown)
  return {
    (':%s asked in two buffers shows the last one asked for, not the later answer'):format(command),
    function()
      slow_then_fast(command, method)
      T.has(T.text(view), shown:format('fast'), 'the ' .. view .. ' view')
      T.has_not(T.text(view), shown:format('slow'), 'the ' .. view .. ' view')
    end,
  }
end

T.run({
  newest_drawn('MemorydRules', 'get_context', 'rules', '%s_rule.md'),
  newest_drawn('MemorydMemories', 'memory.list', 'memories', 'listed for %s'),
  newest_drawn('MemorydRecall release', 'recall', 'recall', '%s recalled'),
  newest_drawn('MemorydStatus', 'team.status', 'status', 'repo %s/repo'),
  {
    "an older :MemorydStatus's status answered last leaves the newer one as the plugin's state",
    function()
      T.call('status') -- connected
      T.wait('the status poll on connecting answered', function()
        return not memoryd.state.status_inflight
      end)
      delay_status = true
      local before = handled['team.status'] or 0
      vim.cmd('MemorydStatus') -- its status is answered 800 ms late
      vim.cmd('MemorydStatus')
      wait_handled('team.status', before, 2) -- each view draws once team.status answers
      local newer = 'served ' .. asked.status -- the second command's
      T.has(T.text('status'), 'memoryd ' .. newer .. ' (pid 0)', 'the status view')
      T.eq(newer, memoryd.state.status and memoryd.state.status.version, 'the state the status line shows')
    end,
  },
  {
    "a status poll answered after a newer :MemorydStatus leaves the newer one as the plugin's state",
    function()
      -- The status line's poll asked just before :MemorydStatus and answered after it put
      -- the older status back as the state the status line shows, until the next poll.
      T.wait('no status poll in flight', function()
        return not memoryd.state.status_inflight
      end)
      delay_status = true
      local before = handled['team.status'] or 0
      local polled = false
      memoryd.refresh_status(true, function()
        polled = true
      end) -- its status is answered 800 ms late
      vim.cmd('MemorydStatus')
      T.wait('the poll answered', function()
        return polled
      end, 20000)
      wait_handled('team.status', before, 1)
      local newer = 'served ' .. asked.status -- the command's
      T.has(T.text('status'), 'memoryd ' .. newer .. ' (pid 0)', 'the status view')
      T.eq(newer, memoryd.state.status and memoryd.state.status.version, 'the state the status line shows')
    end,
  },
  {
    'a context/changed while :MemorydRules waits for its answer asks for the buffer asked for, not the one on screen',
    function()
      -- The refresh asked for the view's last drawn buffer with a newer ticket: answered first,
      -- it was drawn and the command's own answer, older, dropped (the previous buffer's rules
      -- stayed on screen; CI under load).
      vim.cmd('edit ' .. vim.fn.fnameescape(folder .. '/fast/b.md'))
      vim.cmd('MemorydRules')
      T.wait_view('rules', 'fast_rule.md')
      local before = handled.get_context or 0
      vim.cmd('wincmd p')
      vim.cmd('edit ' .. vim.fn.fnameescape(folder .. '/slow/a.md'))
      vim.cmd('MemorydRules') -- answered 800 ms late
      local note = { jsonrpc = '2.0', method = 'context/changed', params = { project = folder, paths = {} } }
      for _, conn in ipairs(server.conns) do
        if not conn:is_closing() then
          conn:write(vim.json.encode(note) .. '\n')
        end
      end
      wait_handled('get_context', before, 2)
      T.wait_view('rules', 'slow_rule.md')
      T.has_not(T.text('rules'), 'fast_rule.md', 'the rules view')
    end,
  },
  {
    'saves of a rule file that keep coming still refresh the rules view while they last',
    function()
      vim.cmd('edit ' .. vim.fn.fnameescape(folder .. '/fast/b.md'))
      vim.cmd('MemorydRules')
      T.wait_view('rules', 'fast_rule.md')
      vim.cmd('wincmd p')
      vim.cmd('edit ' .. vim.fn.fnameescape(folder .. '/fast/CLAUDE.md'))
      vim.wait(300)
      local before = asked.get_context or 0
      local during = 0
      for i = 1, 20 do -- an autosave: a write every 100 ms for 2 s
        vim.api.nvim_buf_set_lines(0, 0, -1, false, { 'rule ' .. i })
        vim.cmd('silent write')
        vim.wait(100)
        during = (asked.get_context or 0) - before
      end
      T.truthy(during >= 1, 'get_context asked while the saves kept coming: ' .. during)
    end,
  },
})
