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
local answered = {} -- method -> how many were answered
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
T.serve(path, function(request, conn)
  local cwd = type(request.params) == 'table' and request.params.cwd or ''
  asked[request.method] = (asked[request.method] or 0) + 1
  local reply = vim.json.encode({ jsonrpc = '2.0', id = request.id, result = result(request.method, cwd) }) .. '\n'
  local function send()
    answered[request.method] = (answered[request.method] or 0) + 1
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

-- Run `command` in the slow folder's buffer, then at once in the fast one's; wait until the
-- slow answer came too.
local function slow_then_fast(command, method)
  local before = answered[method] or 0
  vim.cmd('edit ' .. vim.fn.fnameescape(folder .. '/slow/a.md'))
  vim.cmd(command)
  vim.cmd('wincmd p')
  vim.cmd('edit ' .. vim.fn.fnameescape(folder .. '/fast/b.md'))
  vim.cmd(command)
  T.wait('both answers', function()
    return (answered[method] or 0) >= before + 2
  end, 5000)
  vim.wait(200) -- the late answer's callback
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
      T.call('status') -- connected, the status poll on connecting answered
      vim.wait(200)
      delay_status = true
      local before = answered.status or 0
      vim.cmd('MemorydStatus') -- its status is answered 800 ms late
      vim.cmd('MemorydStatus')
      T.wait('both answers', function()
        return (answered.status or 0) >= before + 2
      end, 5000)
      vim.wait(200) -- the late answer's callback
      local newer = 'served ' .. asked.status -- the second command's
      T.has(T.text('status'), 'memoryd ' .. newer .. ' (pid 0)', 'the status view')
      T.eq(newer, memoryd.state.status and memoryd.state.status.version, 'the state the status line shows')
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
