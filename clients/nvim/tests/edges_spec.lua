-- Against the real daemon ($MEMORYD_SOCKET, team sync configured), in a repo with no team
-- repository whose memory folder holds hostile names (tests/editors/test_nvim.py
-- hostile_repo): daemon strings that must stay text, selections that must be sent as selected,
-- buffers named by URLs, requests the daemon would refuse, the subscription, setup()'s checks.
local T = dofile(os.getenv('MEMORYD_NVIM_PLUGIN') .. '/tests/helpers.lua')
local memoryd = require('memoryd')
local Client = require('memoryd.rpc')
local uv = vim.uv or vim.loop

local BASE = { memctl = T.env('MEMORYD_TEST_MEMCTL'), status_interval_ms = 0, timeout_ms = T.TIMEOUT_MS }
memoryd.setup(BASE)

local repo = T.env('MEMORYD_TEST_REPO')
local memory_dir = T.env('MEMORYD_TEST_MEMORY_DIR')
local marker = T.env('MEMORYD_TEST_MARKER')
local socket = T.env('MEMORYD_SOCKET')

local function edit(path)
  vim.cmd('edit ' .. vim.fn.fnameescape(path))
end

local function no_failure_messages()
  for _, m in ipairs(T.messages) do
    if m.text:find('could not use the reply', 1, true) or m.text:find('failed', 1, true) then
      error('unexpected message: ' .. m.text, 2)
    end
  end
end

local function wait_saved()
  T.wait('the saved message', function()
    return T.message_matching('saved ') or T.message_matching('failed')
  end)
  T.truthy(T.message_matching('saved '), 'saved: ' .. vim.inspect(T.messages))
end

-- Select with real visual mode, then leave it so '< and '> are set.
local function select(keys)
  vim.cmd('execute "normal! ' .. keys .. '\\<Esc>"')
end

T.run({
  {
    'a memory file name holding a line break and an Ex command: <CR> and e run nothing',
    function()
      local injected = memory_dir .. '/' .. T.env('MEMORYD_TEST_INJECTED')
      for _, key in ipairs({ '<CR>', 'e' }) do
        T.reset() -- empties the view: the wait below is for this refresh, which takes the focus
        edit(repo .. '/src/main.py')
        vim.cmd('MemorydMemories')
        T.wait_view('memories', 'Injected notes')
        T.press_on('memories', 'Injected notes', key)
        vim.wait(300)
        T.eq(nil, uv.fs_stat(marker), 'the file the command would touch')
        if vim.fn.has('nvim-0.8') == 1 then
          T.eq(injected, vim.api.nvim_buf_get_name(0), 'opened as a file name (' .. key .. ')')
        else
          T.truthy(T.message_matching('not opened: the file name holds a line break'), vim.inspect(T.messages))
        end
      end
      -- % and # are no command-line specials in a file name from the daemon.
      T.reset()
      edit(repo .. '/src/main.py')
      vim.cmd('MemorydMemories')
      T.wait_view('memories', 'Percent plan')
      T.press_on('memories', 'Percent plan', '<CR>')
      T.wait('the % # file to open', function()
        return vim.api.nvim_buf_get_name(0) == memory_dir .. '/project_50%_#1 plan.md'
      end)
      T.eq('name: Percent plan', vim.api.nvim_buf_get_lines(0, 1, 2, false)[1], 'its text')
    end,
  },
  {
    'a line break in any daemon string: the rules, memories, recall and history views open',
    function()
      edit(repo .. '/src/api/users.py')
      vim.cmd('MemorydRules')
      T.wait_view('rules', '.claude/rules/odd name.md')
      T.has(T.text('rules'), '.claude/rules/api.md — paths_not_matched')
      vim.cmd('MemorydMemories')
      T.wait_view('memories', 'Deploys Thursdays')
      T.has(T.text('memories'), 'Release notes — release notes on deploy day')
      vim.cmd('MemorydRecall deploy release notes')
      T.wait_view('recall', 'project_release notes.md')
      T.press_on('memories', 'Deploys Thursdays', 'h')
      T.wait_view('history', 'History of Deploys Thursdays')
      no_failure_messages()
      -- A conditional rule's glob, as memory.list may list it: the view draws it on one line.
      local ui = require('memoryd.ui')
      local lines, targets = require('memoryd.views.memories').render({
        instruction_files = { { path = repo .. '/.claude/rules/api.md', type = 'Project', globs = { 'src/**\nlegacy/**' } } },
        memories = { { name = 'Two\nlines', file = 'x.md', type = 'project', description = 'a\r\nb', mtime = 0 } },
      }, { cwd = repo }, 0, vim.env.HOME)
      local scratch = ui.buffer('memories', false)
      ui.render(scratch, lines, targets)
      T.has(T.text('memories'), '.claude/rules/api.md  [paths: src/** legacy/**]')
      T.has(T.text('memories'), 'Two lines — a b')
    end,
  },
  {
    'a NUL in a memory description: the views open, the sanitiser replaces it',
    function()
      T.eq('dump header starts with  ELF', require('memoryd.format').one_line('dump header starts with \0ELF'), 'one_line')
      T.eq('a b', require('memoryd.format').clean('a\0\27\r\nb'), 'clean')
      edit(repo .. '/src/main.py')
      vim.cmd('MemorydMemories')
      T.wait_view('memories', 'Core dump notes — deploy dump header starts with  ELF')
      vim.cmd('MemorydRecall crash dump')
      T.wait_view('recall', 'deploy dump header starts with  ELF')
      no_failure_messages()
    end,
  },
  {
    'a charwise selection ending in a multibyte character is sent whole',
    function()
      edit(repo .. '/notes/café.md')
      vim.api.nvim_buf_set_lines(0, 0, -1, false, { 'Use the café API', '日本語テキスト' })
      vim.api.nvim_win_set_cursor(0, { 1, 8 })
      select('ve')
      T.eq('café', require('memoryd.views.recall').visual_text(), 'the selection')
      vim.api.nvim_win_set_cursor(0, { 2, 3 })
      select('vl')
      T.eq('本語', require('memoryd.views.recall').visual_text(), 'two wide characters')
      vim.api.nvim_win_set_cursor(0, { 1, 8 })
      select('ve')
      T.answers = { 3, true } -- project; the default name
      vim.cmd("'<,'>MemorydRemember")
      wait_saved()
      T.eq('café', T.prompts[2].default, 'the name offered')
      local names = {}
      for _, memory in ipairs(T.call('memory.list', { cwd = repo }).memories) do
        names[memory.name] = true
      end
      T.truthy(names['café'], 'the memory café: ' .. vim.inspect(vim.tbl_keys(names)))
      vim.cmd('bwipeout!')
    end,
  },
  {
    'a blockwise selection is cut to the block on every line',
    function()
      vim.cmd('enew')
      vim.api.nvim_buf_set_lines(0, 0, -1, false, {
        'id    name   owner',
        '17    alpha  ada',
        '18    beta   bob',
        'Use the café API',
        '日本語テキスト',
      })
      local recall = require('memoryd.views.recall')
      vim.api.nvim_win_set_cursor(0, { 1, 6 })
      select('\\<C-v>2j4l')
      T.eq('\22', vim.fn.visualmode(), 'blockwise')
      T.eq('name \nalpha\nbeta ', recall.visual_text(), 'the name column')
      -- Screen columns, not bytes: the block from "the " down into wide characters.
      vim.api.nvim_win_set_cursor(0, { 4, 4 })
      select('\\<C-v>jl')
      T.eq('the \n語テ', recall.visual_text(), 'a block over wide characters')
      vim.cmd('bwipeout!')
    end,
  },
  {
    'a blockwise selection extended with $ takes each line to its own end',
    function()
      vim.cmd('enew')
      vim.api.nvim_buf_set_lines(0, 0, -1, false, {
        'id    name   owner',
        '17    alpha  ada, who wrote it',
        '18    beta',
        '19',
        '20    日本語テキスト',
      })
      local recall = require('memoryd.views.recall')
      vim.api.nvim_win_set_cursor(0, { 1, 6 })
      select('\\<C-v>4j$')
      local marks = { vim.fn.getpos("'<"), vim.fn.getpos("'>") }
      vim.api.nvim_win_set_cursor(0, { 2, 3 })
      T.eq('name   owner\nalpha  ada, who wrote it\nbeta\n\n日本語テキスト', recall.visual_text(), 'each line to its end')
      T.eq({ 2, 3 }, vim.api.nvim_win_get_cursor(0), 'the cursor stays')
      T.eq(marks, { vim.fn.getpos("'<"), vim.fn.getpos("'>") }, 'the marks stay')
      T.eq('\22', vim.fn.visualmode(), 'still blockwise')
      -- Upwards, with $ on the short line: the left edge is still the leftmost corner.
      vim.api.nvim_win_set_cursor(0, { 3, 6 })
      select('\\<C-v>kk$')
      T.eq('name   owner\nalpha  ada, who wrote it\nbeta', recall.visual_text(), 'selected upwards')
      -- A block that only reaches the end of its last line is still cut at its columns.
      vim.api.nvim_win_set_cursor(0, { 1, 6 })
      select('\\<C-v>2j3l')
      T.eq('name\nalph\nbeta', recall.visual_text(), 'no $: cut at the columns')
      vim.api.nvim_win_set_cursor(0, { 1, 6 })
      select('\\<C-v>2j$')
      vim.cmd('normal! gg0')
      T.answers = { 3, true } -- project; the default name
      vim.cmd("'<,'>MemorydRemember")
      wait_saved()
      T.eq('name owner', T.prompts[#T.prompts].default, 'the name offered: the first line, whole (its runs of spaces one, as memoryd makes a field)')
      vim.cmd('bwipeout!')
    end,
  },
  {
    'a buffer named by a URL stands for the working directory',
    function()
      vim.cmd('cd ' .. vim.fn.fnameescape(repo))
      for _, name in ipairs({
        'scp://build-host//srv/app/main.py',
        'fugitive://' .. repo .. '/.git//0/src/main.py',
        'zipfile:///tmp/a.zip::b.txt',
      }) do
        vim.cmd('enew')
        vim.api.nvim_buf_set_name(0, name)
        T.eq({ cwd = repo }, memoryd.buffer_context(), 'context of ' .. name)
        T.messages = {}
        vim.cmd('MemorydRules')
        T.wait_view('rules', 'this buffer has no file')
        no_failure_messages()
        vim.cmd('bwipeout!')
        T.reset()
      end
    end,
  },
  {
    'text that is not UTF-8 is refused at once, before sending; the connection stays',
    function()
      local path = repo .. '/latin1.txt'
      T.write(path, 'Caf\233 opens at nine\n')
      vim.o.fileencodings = 'utf-8'
      vim.cmd('edit ++bad=keep ' .. vim.fn.fnameescape(path))
      T.answers = { 3, true }
      vim.cmd('1MemorydRemember')
      T.wait('the message', function()
        return T.message_matching('memory.write failed')
      end)
      -- Refused here ('invalid'), not timed out: no timeout message (a time bound breaks under load).
      -- It names the text, with the bytes outside UTF-8 escaped (it said "byte 112 of the request").
      T.has(T.message_matching('memory.write failed').text, '(Caf\\xe9 opens at nine) is not UTF-8; nothing was sent')
      T.eq(nil, T.message_matching('did not answer'), 'no timeout')
      T.eq('connected', memoryd.client().state, 'connection state')
      T.truthy(T.call('status').version, 'status answers')
      vim.cmd('bwipeout!')
      -- A file in a folder whose name is not UTF-8: the path, and what to do.
      local dir = repo .. '/caf\233'
      vim.fn.mkdir(dir, 'p')
      T.write(dir .. '/menu.md', 'x\n')
      vim.cmd('edit ' .. vim.fn.fnameescape(dir .. '/menu.md'))
      vim.cmd('MemorydRules')
      T.wait('the message', function()
        return T.message_matching('get_context failed')
      end)
      T.has(T.message_matching('get_context failed').text, 'the path ' .. repo .. '/caf\\xe9')
      T.has(T.message_matching('get_context failed').text, 'is not UTF-8: memoryd takes UTF-8 paths only (open it through a symbolic link with a UTF-8 name)')
      vim.cmd('bwipeout!')
    end,
  },
  {
    "a request over the daemon's 64 MiB cap is refused as too large; the connection stays",
    function()
      vim.cmd('enew')
      local lines = { 'Deploy log' }
      local line = string.rep('x', 99)
      for i = 2, 680000 do -- 68 MB: over 64 MiB
        lines[i] = line
      end
      vim.api.nvim_buf_set_lines(0, 0, -1, false, lines)
      local inflight = nil
      memoryd.request('status', nil, function(r)
        inflight = r
      end)
      T.answers = { 3, true }
      vim.cmd('%MemorydRemember')
      T.wait('the message', function()
        return T.message_matching('memory.write failed')
      end, 60000)
      T.has(T.message_matching('memory.write failed').text, "the request is too large: ")
      T.has(T.message_matching('memory.write failed').text, "over the daemon's 67108864-byte cap; nothing was sent")
      T.eq(nil, T.message_matching('went away'), 'not reported as the daemon going away')
      T.eq(nil, T.message_matching('closed the connection'), 'the connection was not lost')
      T.wait('the call in flight', function()
        return inflight ~= nil
      end)
      T.eq('connected', memoryd.client().state, 'connection state')
      vim.cmd('bwipeout!')
    end,
  },
  {
    'no team repository: personal or team is not asked, the memory is personal',
    function()
      T.eq(vim.NIL, T.call('team.status', { cwd = repo }).repo or vim.NIL, 'team.status repo')
      edit(repo .. '/src/main.py')
      T.answers = { 3, 'Deploy freeze' }
      vim.cmd('MemorydRemember No deploys in the last week of December')
      wait_saved()
      for _, prompt in ipairs(T.prompts) do
        T.truthy(prompt.prompt ~= 'Save for', 'asked: ' .. vim.inspect(T.prompts))
      end
      T.truthy(T.message_matching('saved memory project_deploy_freeze.md'), vim.inspect(T.messages))
    end,
  },
  {
    'a first line holding a bidi override or a C1 control: the fields derived from it are saved',
    function()
      -- memory.write refuses them in a name or description (6d215bf): the description, never
      -- asked, and the name offered were the line as it was, and the save failed.
      edit(repo .. '/src/main.py')
      T.answers = { 3, true } -- project; the name offered
      vim.cmd('MemorydRemember \226\128\174evil\194\133gnp.exe\226\128\168ships \226\129\166Friday')
      wait_saved()
      T.eq('evil gnp.exe ships Friday', T.prompts[2].default, 'the name offered')
      local saved
      for _, memory in ipairs(T.call('memory.list', { cwd = repo }).memories) do
        if memory.name == 'evil gnp.exe ships Friday' then
          saved = memory
        end
      end
      T.truthy(saved, 'the memory saved')
      T.eq('evil gnp.exe ships Friday', saved.description, 'its description')
      T.eq('tabs and [1m bold kept', require('memoryd.format').as_field(' tabs\tand\27[1m bold  kept '), 'as a field: runs of spaces one, as memoryd makes it')
    end,
  },
  {
    'notifications narrowed to worker/error: the memories view still refreshes on memory/saved',
    function()
      memoryd.setup(vim.tbl_extend('force', BASE, { notifications = { events = { 'worker/error' } } }))
      edit(repo .. '/src/main.py')
      vim.cmd('MemorydMemories')
      T.wait_view('memories', 'Percent plan')
      T.wait('the subscription to widen', function()
        return vim.tbl_contains(memoryd.client().events or {}, 'memory/saved')
      end)
      T.truthy(vim.tbl_contains(memoryd.client().events, 'worker/error'), 'configured event kept')
      -- Another client (an agent, memctl) saves a memory while the view is open.
      local other = Client.new({ path = socket, timeout_ms = T.TIMEOUT_MS })
      local done = false
      other:request('memory.write', {
        cwd = repo,
        type = 'feedback',
        name = 'Tabs in Go',
        description = 'the user wants tabs in Go files',
        body = 'Use tabs in Go.',
      }, function()
        done = true
      end)
      T.wait('the write', function()
        return done
      end)
      other:close()
      T.wait_view('memories', 'Tabs in Go', 30000)
      T.eq(nil, T.message_matching('memory saved:'), 'memory/saved is not configured: no message')
      memoryd.setup(BASE)
    end,
  },
  {
    'context/changed, when a user names it in notifications.events, is worded as memctl watch words it',
    function()
      local format = require('memoryd.format')
      local text = format.describe({
        method = 'context/changed',
        params = { project = '/src/app', paths = { '/src/app/CLAUDE.md', '/home/u/.claude/CLAUDE.md' }, more = 3 },
      })
      T.eq('context changed: /src/app (CLAUDE.md, /home/u/.claude/CLAUDE.md and 3 more)', text)
      -- a project named with a trailing slash, as memctl reads it
      T.eq(
        'context changed: /src/app/ (CLAUDE.md)',
        (format.describe({ method = 'context/changed', params = { project = '/src/app/', paths = { '/src/app/CLAUDE.md' } } }))
      )
      T.eq(
        'context changed: /src/app (events were lost: which files is not known)',
        (format.describe({ method = 'context/changed', params = { project = '/src/app', paths = {} } }))
      )
    end,
  },
  {
    'setup() checks its options: false turns notifications off, a wrong type names the option',
    function()
      memoryd.setup(vim.tbl_extend('force', BASE, { notifications = false }))
      T.eq(false, memoryd.config.notifications.enabled, 'notifications = false')
      vim.cmd('MemorydStatus')
      T.wait_view('status', 'Team sync for this project')
      for option, value in pairs({
        timeout_ms = '5000',
        open = 'float',
        notifications = 3,
        recall_limit = 9,
        memctl = 5,
      }) do
        local ok, err = pcall(memoryd.setup, { [option] = value })
        T.eq(false, ok, option .. ' accepted')
        T.truthy(vim.startswith(tostring(err), 'memoryd.setup: ' .. option .. ': expected'), tostring(err))
      end
      local ok, err = pcall(memoryd.setup, { notifications = { burst = 'x' } })
      T.eq(false, ok, 'burst accepted')
      T.has(tostring(err), 'memoryd.setup: notifications.burst: expected')
      T.eq(false, memoryd.config.notifications.enabled, 'a refused setup keeps the options in force')
      memoryd.setup(BASE)
    end,
  },
})
