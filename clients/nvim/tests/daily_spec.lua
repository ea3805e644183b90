-- What a daily user runs into, against the real daemon ($MEMORYD_SOCKET, team sync configured,
-- the repo without a team repository; its memory folder holds a memory named with a NUL and
-- a line break, and one whose file name holds a line break): a restored session's buffers,
-- the daemon's strings in questions and messages, a line range, chained commands, and the
-- daemon going away under an open view. The last test stops the daemon.
local T = dofile(os.getenv('MEMORYD_NVIM_PLUGIN') .. '/tests/helpers.lua')
local memoryd = require('memoryd')
local ui = require('memoryd.ui')

-- memctl = 'true': :MemorydStart runs and succeeds without starting anything.
memoryd.setup({ memctl = 'true', notifications = false, timeout_ms = T.TIMEOUT_MS })

local repo = T.env('MEMORYD_TEST_REPO')
local memory_dir = T.env('MEMORYD_TEST_MEMORY_DIR')

local function edit(path)
  vim.cmd('edit ' .. vim.fn.fnameescape(path))
end

-- Neovim's own vim.ui.select (an inputlist), answered from typeahead.
local function builtin_select()
  package.loaded['vim.ui'] = nil
  local select = require('vim.ui').select
  package.loaded['vim.ui'] = vim.ui
  return select
end

-- Run fn with Neovim's own vim.notify and vim.ui.select, then put the test's back.
local function with_builtins(fn)
  while vim.fn.getchar(0) ~= 0 do -- typeahead an earlier test left (an answer never read)
  end
  local notify, select = vim.notify, vim.ui.select
  vim.notify = T.builtin_notify
  local asked = {}
  local own = builtin_select()
  vim.ui.select = function(items, opts, cb)
    asked[#asked + 1] = opts.prompt
    vim.api.nvim_feedkeys('1\r', 't', false) -- "1: Yes"
    own(items, opts, cb)
  end
  local ok, err = pcall(fn, asked)
  vim.notify, vim.ui.select = notify, select
  assert(ok, err)
end

local function on_line(view, text)
  T.wait_view(view, text)
  local buf = ui.existing(view)
  local win = vim.fn.bufwinid(buf)
  vim.api.nvim_set_current_win(win)
  vim.api.nvim_win_set_cursor(win, { T.find(view, text), 0 })
end

local function last_messages(n)
  local lines = vim.split(vim.fn.execute('messages'), '\n')
  return table.concat(lines, '\n', math.max(1, #lines - n + 1))
end

T.run({
  {
    "views open in the buffers a restored session left with their names (it was E95)",
    function()
      -- What :mksession + :source brings back: a hidden view buffer (:badd, unloaded) and a
      -- scratch buffer shown in a window, both named like the views.
      vim.cmd('badd memoryd://status')
      vim.cmd('enew')
      vim.cmd('setlocal buftype=nofile')
      vim.cmd('file memoryd://memories')
      local restored = vim.api.nvim_get_current_buf()
      vim.v.errmsg = ''
      edit(repo .. '/CLAUDE.md')
      vim.cmd('MemorydStatus')
      T.wait_view('status', '(pid ')
      vim.cmd('MemorydMemories')
      T.wait_view('memories', 'Memories (')
      T.eq(restored, ui.existing('memories'), 'the restored buffer became the view')
      T.eq('', vim.v.errmsg, 'errors')
      T.eq(1, #vim.tbl_filter(function(b)
        return vim.api.nvim_buf_get_name(b) == 'memoryd://status'
      end, vim.api.nvim_list_bufs()), 'buffers named memoryd://status')
      T.truthy(vim.fn.maparg('q', 'n', false, true).buffer == 1, 'q is mapped in the view')
    end,
  },
  {
    'a memory named with a NUL and a line break: the delete question is one line and works',
    function()
      local file = memory_dir .. '/project_core.md'
      vim.cmd('MemorydMemories')
      with_builtins(function(asked)
        on_line('memories', 'Core dump notes')
        vim.api.nvim_feedkeys('d', 'x', false)
        T.wait('the delete', function()
          return T.file(file) == nil
        end)
        T.eq({ 'Delete the memory "Core dump notes"? (its content is kept in history)' }, asked, 'question')
      end)
    end,
  },
  {
    "a line break in a message from the daemon's strings: one line on the command line",
    function()
      vim.o.columns = 200
      vim.cmd('MemorydMemories')
      with_builtins(function()
        on_line('memories', 'Release notes')
        vim.api.nvim_feedkeys('d', 'x', false)
        T.wait('the delete', function()
          return T.file(memory_dir .. '/project_release\nnotes.md') == nil
        end)
        -- The reply's message comes after the file is gone: waited for (a fixed 200 ms was
        -- too short on a loaded machine), then checked, whatever came last.
        local wanted = 'memoryd: deleted project_release notes.md'
        vim.wait(10000, function()
          return last_messages(1) == wanted
        end, 10)
        T.eq(wanted, last_messages(1), 'the last message')
      end)
    end,
  },
  {
    ':2,3MemorydRecall recalls the lines of the range, not the word under the cursor',
    function()
      local path = repo .. '/notes/range.txt'
      T.write(path, 'alpha line one\nbeta line two\ngamma three\n')
      edit(path)
      vim.api.nvim_win_set_cursor(0, { 1, 0 })
      vim.cmd('2,3MemorydRecall')
      T.wait_view('recall', 'Recall: "')
      T.has(T.lines('recall')[1], 'Recall: "beta line two gamma three"', 'the query')
    end,
  },
  {
    ':%MemorydRecall over a long file recalls its first 500 characters, as VS Code does',
    function()
      -- Before, the whole range was the query: over 100,000 characters the daemon refused it
      -- ("query: String should have at most 100000 characters") and nothing was recalled.
      local recall = require('memoryd.views.recall')
      local path = repo .. '/notes/long.txt'
      local head = 'zeta  deploys\n\tThursdays ' .. ('w'):rep(476) .. '😀tail' -- the emoji is character 500
      T.write(path, head .. ('\nfiller words on a long line of notes'):rep(3000) .. '\n')
      edit(path)
      local query = recall.query_from({ args = '', range = 2, line1 = 1, line2 = vim.fn.line('$') })
      T.eq('zeta deploys Thursdays ' .. ('w'):rep(476) .. '😀', query, 'the query (white space runs one space, cut whole)')
      T.eq(500, vim.fn.strchars(query), 'its characters')
      vim.cmd('%MemorydRecall')
      T.wait_view('recall', 'Recall: "zeta deploys Thursdays')
      T.eq(0, T.count_messages('at most 100000'), 'refusals')
    end,
  },
  {
    'status view: a project without a team repository says sync is off and why',
    function()
      edit(repo .. '/CLAUDE.md')
      vim.cmd('MemorydStatus')
      T.wait_view('status', 'Team sync for this project')
      local text = T.text('status')
      -- the daemon's words (team.status's `why`), not a copy of them kept here
      T.has(text, 'off — team sync is off for this folder (no_repo): the project has no git remote naming its owner/repo', 'team sync')
      T.has_not(text, 'repo nil', 'team sync')
    end,
  },
  {
    "status view: a feature's reason is shown whole, what to do at its end too",
    function()
      local reason = 'team sync is not configured: set MEMORYD_TEAM_URL (the memoryd-team server) and '
        .. 'MEMORYD_TEAM_TOKEN (from `memoryd-team token create --repo owner/repo`), then restart memoryd'
      local base = { version = '1', socket = '/s', features = { team_sync = { enabled = false, reason = reason } } }
      local text = table.concat(require('memoryd.views.status').render(base, nil, nil, '/s', {}), '\n')
      T.has(text, 'team_sync          off — ' .. reason, 'the feature line')
    end,
  },
  {
    "status view: a daemon older than team.status's why is worded by the plugin, a newer one's why shown as sent",
    function()
      local status = require('memoryd.views.status')
      local base = { version = '1', socket = '/s' }
      local older = table.concat(status.render(base, { repo = vim.NIL, suppressed = 'no_repo' }, nil, '/s', {}), '\n')
      T.has(older, 'off — the project has no git remote naming its owner/repo, which team memory is keyed by (no_repo)', 'older: no repo')
      local stopped = { repo = 'acme/widgets', server = 'http://t', suppressed = 'http_401', entries = 0, pending = {} }
      older = table.concat(status.render(base, stopped, nil, '/s', {}), '\n')
      T.has(older, 'stopped — the team server answered HTTP 401, so sync stopped (http_401)', 'older: stopped')
      stopped.why = 'team sync is stopped (http_401): the server refused a pull: MEMORYD_TEAM_TOKEN was not accepted\n(revoked)'
      local newer = table.concat(status.render(base, stopped, nil, '/s', {}), '\n')
      T.has(newer, 'stopped — team sync is stopped (http_401): the server refused a pull: MEMORYD_TEAM_TOKEN was not accepted (revoked)', 'newer: stopped, one line')
      T.has_not(newer, 'answered HTTP 401', 'newer: no copy of its own')
      local refused = table.concat(status.render(base, nil, { code = -32601, message = 'method not found: team.status' }, '/s', {}), '\n')
      T.has(refused, '  unknown — method not found: team.status (the running memoryd may be older than this plugin', 'a daemon older than team.status')
      local off = table.concat(status.render(base, nil, { code = -32003, message = 'team sync is not configured: set MEMORYD_TEAM_URL' }, '/s', {}), '\n')
      T.has(off, '  off — team sync is not configured: set MEMORYD_TEAM_URL', 'not configured')
    end,
  },
  {
    "setup's socket takes a leading ~ and $NAME, and nothing else of vim.fn.expand()",
    function()
      -- expand() made '/tmp/{a,b}/m.sock' two paths on two lines and dropped a backslash.
      local home = vim.env.HOME
      local cases = {
        ['/tmp/{a,b}/m.sock'] = '/tmp/{a,b}/m.sock',
        ['/tmp/a\\b.sock'] = '/tmp/a\\b.sock',
        ['/tmp/*/m.sock'] = '/tmp/*/m.sock',
        ['~/m.sock'] = home .. '/m.sock',
        ['$HOME/m.sock'] = home .. '/m.sock',
        ['${HOME}/x/m.sock'] = home .. '/x/m.sock',
        ['/x/$MEMORYD_TEST_UNSET_VARIABLE/m.sock'] = '/x/$MEMORYD_TEST_UNSET_VARIABLE/m.sock',
      }
      local configured = memoryd.config.socket
      for option, expected in pairs(cases) do
        memoryd.config.socket = option -- read, not connected to: setup() would reconnect
        local ok, path = pcall(memoryd.socket_path)
        memoryd.config.socket = configured
        T.eq(true, ok, option)
        T.eq(expected, path, option)
      end
    end,
  },
  {
    'a restore chosen in the history view goes to its project, whatever the memories view shows by then',
    function()
      -- Restore took the project of the memories view at <CR>: once :MemorydMemories had been
      -- run in another project's buffer the daemon refused it ("outside the memory directory").
      local params = { cwd = repo, type = 'project', name = 'Restore me', description = 'first', body = 'first text' }
      T.call('memory.write', params)
      params.description, params.body = 'second', 'second text'
      local file = T.call('memory.write', params).path
      edit(repo .. '/src/api/users.py')
      vim.cmd('MemorydMemories')
      T.wait_view('memories', 'Restore me')
      T.press_on('memories', 'Restore me', 'h')
      T.wait_view('history', ' ago ')
      local other = vim.fn.tempname()
      vim.fn.mkdir(other, 'p')
      vim.cmd('wincmd p')
      edit(other .. '/notes.txt')
      vim.cmd('MemorydMemories')
      T.wait('the memories view on the other project', function()
        local text = T.text('memories')
        return text:find('Memories (0)', 1, true) ~= nil and text:find('Restore me', 1, true) == nil
      end)
      T.answers = { 1 } -- Yes
      T.press_on('history', ' ago ', '<CR>')
      T.wait('the restore', function()
        return T.message_matching('restored ') ~= nil or T.message_matching('restore failed') ~= nil
      end)
      T.eq(nil, T.message_matching('restore failed'), 'a refused restore')
      T.has(T.file(file), 'first text', 'the file restored')
      T.wait_view('history', 'History of Restore me') -- drawn again, in the memory's project
    end,
  },
  {
    'the commands without arguments take | and a next command',
    function()
      for _, name in ipairs({ 'MemorydRules', 'MemorydMemories', 'MemorydStatus', 'MemorydStart' }) do
        vim.g.chained = nil
        vim.cmd(name .. ' | let g:chained = 1')
        T.eq(1, vim.g.chained, name .. ' | …')
      end
      T.wait('memctl (true) to finish', function()
        return T.message_matching('memoryd started') ~= nil
      end)
      vim.wait(300) -- the views' replies arrive
    end,
  },
  {
    'the daemon gone: saving a rule file neither reports it again nor offers to start it',
    function()
      edit(repo .. '/CLAUDE.md')
      vim.cmd('MemorydRules')
      T.wait_view('rules', 'Rules in effect for CLAUDE.md')
      vim.loop.kill(tonumber(T.env('MEMORYD_TEST_DAEMON_PID')), 'sigterm')
      T.wait('the outage', function()
        return memoryd.state.up == false
      end)
      vim.wait(200)
      T.messages, T.prompts = {}, {}
      vim.cmd('wincmd p')
      vim.cmd('write')
      vim.wait(1400) -- both background refreshes (150 ms and 1 s) have failed meanwhile
      vim.cmd('write')
      vim.wait(1400)
      T.eq({}, T.prompts, 'questions')
      T.eq({}, T.messages, 'messages')
      vim.cmd('MemorydRules') -- asked for: said, and offered
      T.answers = { 2 }
      T.wait('the message', function()
        return T.message_matching('memoryd is not running on') ~= nil
      end)
      T.wait('the offer', function()
        return #T.prompts == 1
      end)
    end,
  },
})
