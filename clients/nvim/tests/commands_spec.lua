-- Every command against the real daemon ($MEMORYD_SOCKET), in the temp repo $MEMORYD_TEST_REPO
-- (made by tests/editors/test_nvim.py: CLAUDE.md with an @include and a missing include,
-- conditional rules for src/api, src/web and "my docs", a file with spaces and unicode).
local T = dofile(os.getenv('MEMORYD_NVIM_PLUGIN') .. '/tests/helpers.lua')
local memoryd = require('memoryd')

memoryd.setup({ memctl = T.env('MEMORYD_TEST_MEMCTL'), status_interval_ms = 0, timeout_ms = T.TIMEOUT_MS })

local repo = T.env('MEMORYD_TEST_REPO')
local plain = T.env('MEMORYD_TEST_PLAIN')
local socket = T.env('MEMORYD_SOCKET')
local uv = vim.uv or vim.loop

local function edit(path)
  vim.cmd('edit ' .. vim.fn.fnameescape(path))
end

local function memory_path(file)
  for _, memory in ipairs(T.call('memory.list', { cwd = repo }).memories) do
    if memory.file == file then
      return memory.path
    end
  end
  error('no memory ' .. file)
end

T.run({
  {
    'rules: type, @include tree, matched and skipped conditional rules',
    function()
      edit(repo .. '/src/api/users.py')
      vim.cmd('MemorydRules')
      T.wait_view('rules', 'Rules in effect for src/api/users.py')
      local text = T.text('rules')
      T.has(text, 'Project\n  CLAUDE.md\n    ↳ docs/style.md  (@include)')
      T.has(text, '  .claude/rules/api.md  [paths: src/api/**, matched by src/api/users.py]')
      T.has(text, 'Skipped\n')
      T.has(text, '  .claude/rules/web.md — paths_not_matched')
      T.has(text, '  docs/gone.md — missing')
      T.has(text, '(from CLAUDE.md)')
      T.has_not(text, 'docs.md  [paths')
    end,
  },
  {
    '<CR> in the rules view opens the file under the cursor',
    function()
      edit(repo .. '/src/api/users.py')
      vim.cmd('MemorydRules')
      T.wait_view('rules', 'docs/style.md')
      T.press_on('rules', 'docs/style.md', '<CR>')
      T.wait('docs/style.md to open', function()
        return vim.api.nvim_buf_get_name(0) == repo .. '/docs/style.md'
      end)
      T.eq('Indent with tabs.', vim.api.nvim_buf_get_lines(0, 0, 1, false)[1], 'opened text')
    end,
  },
  {
    'saving a rule file refreshes the rules view',
    function()
      edit(repo .. '/src/api/users.py')
      vim.cmd('MemorydRules')
      T.wait_view('rules', 'web.md — paths_not_matched')
      vim.cmd('split ' .. vim.fn.fnameescape(repo .. '/.claude/rules/web.md'))
      vim.api.nvim_buf_set_lines(0, 0, -1, false, { '---', 'paths:', '  - "src/**"', '---', 'Web code uses components.' })
      vim.cmd('write')
      T.wait_view('rules', '  .claude/rules/web.md  [paths: src/**, matched by src/api/users.py]', 30000)
      T.has_not(T.text('rules'), 'web.md — paths_not_matched')
      -- A new rule file shows up too.
      edit(repo .. '/.claude/rules/new.md')
      vim.api.nvim_buf_set_lines(0, 0, -1, false, { 'Always write tests.' })
      vim.cmd('write')
      T.wait_view('rules', '  .claude/rules/new.md', 30000)
    end,
  },
  {
    'a rule written by another program refreshes the rules view (context/changed)',
    function()
      edit(repo .. '/src/api/users.py')
      vim.cmd('MemorydRules')
      T.wait_view('rules', '  .claude/rules/new.md')
      for _ = 1, 200 do -- until the daemon's file watcher covers what the view loaded
        if T.call('status').features.instruction_files.trusted > 0 then
          break
        end
        vim.wait(50)
      end
      -- Not through a buffer: no BufWritePost, only the daemon can tell.
      local file = assert(io.open(repo .. '/.claude/rules/from_outside.md', 'w'))
      file:write('Written by another program.\n')
      file:close()
      T.wait_view('rules', '  .claude/rules/from_outside.md', 30000)
      os.remove(repo .. '/.claude/rules/from_outside.md')
      T.wait('the removed rule to leave the view', function()
        return not T.text('rules'):find('from_outside.md', 1, true)
      end, 30000)
    end,
  },
  {
    'a file path with spaces and unicode',
    function()
      edit(repo .. '/notes/my ünïcödé notes.md')
      vim.cmd('MemorydRules')
      T.wait_view('rules', 'Rules in effect for notes/my ünïcödé notes.md')
      T.has(T.text('rules'), '  .claude/rules/docs.md  [paths: notes/**, matched by notes/my ünïcödé notes.md]')
    end,
  },
  {
    'a buffer with no file shows the rules of the working directory',
    function()
      vim.cmd('enew')
      vim.cmd('cd ' .. vim.fn.fnameescape(repo))
      vim.cmd('MemorydRules')
      T.wait_view('rules', 'this buffer has no file')
      local text = T.text('rules')
      T.has(text, 'Project\n  CLAUDE.md')
      T.has(text, 'api.md — paths_not_matched')
    end,
  },
  {
    'a new file in folders that do not exist yet: the nearest existing folder',
    function()
      edit(repo .. '/src/api/v2/new handler.py')
      vim.cmd('MemorydRules')
      T.wait_view('rules', 'Rules in effect for src/api/v2/new handler.py')
      T.has(T.text('rules'), '.claude/rules/api.md  [paths: src/api/**, matched by src/api/v2/new handler.py]')
    end,
  },
  {
    'a folder outside any git repository',
    function()
      edit(plain .. '/todo.txt')
      vim.cmd('MemorydRules')
      T.wait_view('rules', 'Rules in effect for todo.txt')
      local text = T.text('rules')
      T.has(text, 'project: ' .. plain)
      -- q closes the view's window; in the last window it shows the previous buffer instead.
      T.press_on('rules', 'project: ', 'q')
      T.eq(-1, vim.fn.bufwinid(require('memoryd.ui').existing('rules')), 'rules window after q')
      vim.cmd('MemorydRules')
      T.wait('the view again', function()
        return vim.fn.bufwinid(require('memoryd.ui').existing('rules')) ~= -1
      end)
      vim.cmd('only')
      T.press_on('rules', 'project: ', 'q')
      T.eq(plain .. '/todo.txt', vim.api.nvim_buf_get_name(0), 'buffer after q in the last window')
      T.has(text, 'Project\n  CLAUDE.md')
      T.has_not(text, 'docs/style.md')
    end,
  },
  {
    'remember a typed line and a selection; the saved notification is shown',
    function()
      edit(repo .. '/src/api/users.py')
      T.answers = { 3, 'Deploys happen on Thursdays' } -- type: project; the name
      vim.cmd('MemorydRemember Deploys happen on Thursdays after QA')
      T.wait('the saved message', function()
        return T.message_matching('saved memory project_deploys_happen_on_thursdays.md')
      end)
      T.eq({ 'user', 'feedback', 'project', 'reference' }, T.prompts[1].items, 'type picker')
      T.eq('Deploys happen on Thursdays after QA', T.prompts[2].default, 'default name')
      T.eq(2, #T.prompts, 'prompts (no team question: the project has no team sync)')
      T.wait('the memory/saved notification', function()
        return T.message_matching('memoryd: memory saved: project_deploys_happen_on_thursdays.md')
      end)

      vim.cmd('enew')
      vim.api.nvim_buf_set_lines(0, 0, -1, false, { 'first selected line', 'second selected line', 'third' })
      vim.cmd('normal! ggVj\27')
      T.answers = { 2, 'Selected lines' }
      vim.cmd("'<,'>MemorydRemember")
      T.wait('the second saved message', function()
        return T.message_matching('saved memory feedback_selected_lines.md')
      end)
    end,
  },
  {
    'recall: a query, the word under the cursor, staleness, open one',
    function()
      local path = memory_path('project_deploys_happen_on_thursdays.md')
      -- A memory written 30 days ago (made elsewhere, then moved in) gets a staleness note.
      local old_path = vim.fn.fnamemodify(path, ':h') .. '/project_release_freeze.md'
      local staging = vim.fn.fnamemodify(path, ':h:h') .. '/freeze.tmp'
      T.write(staging, '---\nname: Release freeze\ndescription: no Thursdays deploys in freeze week\ntype: project\n---\n\nFreeze.\n')
      local old = os.time() - 30 * 86400
      T.truthy(uv.fs_utime(staging, old, old), 'utime')
      T.truthy(os.rename(staging, old_path), 'rename')
      edit(repo .. '/src/api/users.py')
      vim.cmd('MemorydRecall Thursdays deploys')
      T.wait_view('recall', 'Recall: "Thursdays deploys"')
      local text = T.text('recall')
      T.has(text, 'Deploys happen on Thursdays  [project, now]\n   Deploys happen on Thursdays after QA')
      T.has(text, 'Release freeze  [project, 4w]\n   no Thursdays deploys in freeze week\n   ! This memory is 30 days old; verify')
      -- What the local ranker saw in each: the query's words it holds, its share of the best.
      -- (the shorter one ranks first: its share is 1)
      -- (they name no date: each is dated by its file's last write, 30 days ago and today)
      local function dated(time)
        return ' · date ' .. os.date('%Y-%m-%d', time) .. ' (file time)'
      end
      T.has(text, 'project_release_freeze.md\n   why: words thursdays, deploys' .. dated(old) .. ' · lexical 1.00')
      T.has(text, 'project_deploys_happen_on_thursdays.md\n   why: words thursdays, deploys' .. dated(nil) .. ' · lexical 0.')
      -- The feedback terms and the date signals, when the daemon sends them.
      local why_line = require('memoryd.views.recall').why_line
      T.eq(
        'words hiking · feedback trail · date 2023-08-20 (dated as asked) · lexical 0.50',
        why_line({
          words = { 'hiking' },
          feedback_terms = { 'trail' },
          date = '2023-08-20',
          date_signals = { 'dated as asked' },
          lexical = 0.5,
        })
      )
      T.eq('words none · date 2022-01-09', why_line({ words = {}, date = '2022-01-09' }))
      T.eq(
        'words none · date 2026-12-02 (file time, dated as asked)',
        why_line({ words = {}, date = '2026-12-02', date_from = 'file', date_signals = { 'dated as asked' } })
      )
      T.press_on('recall', 'Deploys happen on Thursdays  [', '<CR>')
      T.wait('the memory to open', function()
        return vim.api.nvim_buf_get_name(0) == path
      end)

      vim.cmd('enew')
      vim.api.nvim_buf_set_lines(0, 0, -1, false, { 'when are the Thursdays deploys?' })
      vim.api.nvim_win_set_cursor(0, { 1, 14 })
      vim.cmd('MemorydRecall')
      T.wait_view('recall', 'Recall: "Thursdays"')
      T.has(T.text('recall'), 'Deploys happen on Thursdays')

      -- A charwise selection is the query.
      vim.cmd('normal! 0fTv2e\27')
      vim.cmd("'<,'>MemorydRecall")
      T.wait_view('recall', 'Recall: "Thursdays deploys"')

      -- A reply that names no topic is not ranked, and the view says why.
      vim.cmd('MemorydRecall looks good, keep going')
      T.wait_view('recall', 'Recall: "looks good, keep going"')
      T.has(T.text('recall'), 'Not ranked: the query names no topic')
    end,
  },
  {
    'memories: grouped list, history and restore, delete',
    function()
      T.call('memory.write', {
        cwd = repo,
        type = 'user',
        name = 'Deleted from the list',
        description = 'to be deleted',
        body = 'bye',
      })
      local selected = memory_path('feedback_selected_lines.md')
      local original = T.file(selected)
      edit(repo .. '/src/api/users.py')
      vim.cmd('MemorydMemories')
      T.wait_view('memories', 'Deleted from the list')
      local text = T.text('memories')
      T.has(text, 'Instruction files\n  Project\n    CLAUDE.md\n      ↳ docs/style.md')
      T.has(text, 'Memories (4)')
      T.has(text, 'Selected lines — first selected line')

      -- An update through the daemon leaves a version; the list refreshes by itself.
      T.call('memory.write', {
        cwd = repo,
        type = 'feedback',
        name = 'Selected lines',
        description = 'changed',
        body = 'changed body',
        file = 'feedback_selected_lines.md',
      })
      T.wait_view('memories', 'Selected lines — changed')
      T.press_on('memories', 'Selected lines — changed', 'h')
      T.wait_view('history', 'History of Selected lines')
      T.has(T.text('history'), 'overwrite')
      T.answers = { 1 } -- yes, restore
      T.press_on('history', 'overwrite', '<CR>')
      T.wait('the original text back', function()
        return T.file(selected) == original
      end)
      T.wait('the restored message', function()
        return T.message_matching('restored feedback_selected_lines.md')
      end)

      T.answers = { 1 } -- yes, delete
      T.press_on('memories', 'Deleted from the list', 'd')
      T.wait('the memory gone from the list', function()
        return not T.text('memories'):find('Deleted from the list', 1, true)
      end)
      T.truthy(T.message_matching('deleted user_deleted_from_the_list.md'), 'deleted message')
      T.has(T.text('memories'), 'Memories (3)')
    end,
  },
  {
    'status view and status line',
    function()
      edit(repo .. '/src/api/users.py')
      vim.cmd('MemorydStatus')
      T.wait_view('status', '(pid ')
      local text = T.text('status')
      T.has(text, 'socket: ' .. socket)
      T.has(text, 'model: not configured — no model configured')
      T.has(text, 'Team sync for this project\n  off — team sync is not configured')
      memoryd.refresh_status(true)
      T.wait('the status line', function()
        return memoryd.statusline() == 'memoryd up · no model · team off'
      end)
    end,
  },
  {
    'a view opened in one tab page is opened again in the next, not jumped to',
    function()
      -- Found by session 22's hunt: the view's window in the first tab page took the focus,
      -- so :MemorydRules from a second tab page threw the user back to the first, and <CR>
      -- opened the file in a window of that one.
      T.reset()
      edit(repo .. '/src/api/users.py')
      vim.cmd('MemorydRules')
      T.wait_view('rules', 'Rules in effect for src/api/users.py')
      vim.cmd('tabnew')
      local second = vim.api.nvim_get_current_tabpage()
      edit(plain .. '/todo.txt')
      local file_win = vim.api.nvim_get_current_win()
      vim.cmd('MemorydRules')
      T.wait_view('rules', 'Rules in effect for todo.txt') -- the view's window opens then
      T.eq(second, vim.api.nvim_get_current_tabpage(), 'the tab page after :MemorydRules')
      local view = require('memoryd.ui').existing('rules')
      T.eq(view, vim.api.nvim_get_current_buf(), 'the buffer of the current window')
      T.press_on('rules', 'CLAUDE.md', '<CR>')
      T.eq(second, vim.api.nvim_get_current_tabpage(), 'the tab page after <CR>')
      T.eq(file_win, vim.api.nvim_get_current_win(), 'the window <CR> opened the file in')
      T.eq(plain .. '/CLAUDE.md', vim.api.nvim_buf_get_name(0), 'the file <CR> opened')
      vim.cmd('silent! tabonly')
    end,
  },
  {
    ':checkhealth memoryd',
    function()
      vim.cmd('checkhealth memoryd')
      local text = table.concat(vim.api.nvim_buf_get_lines(0, 0, -1, false), '\n')
      T.has(text, 'memoryd')
      T.has(text, 'OK')
      T.has(text, 'answers on ' .. socket)
      T.has(text, 'memctl found')
      T.has(text, 'protocol version 1')
      T.has_not(text, 'ERROR')
    end,
  },
  {
    'an event the daemon does not know (an older one) leaves the others subscribed',
    function()
      local saved = 0
      memoryd.on('memory/saved', function()
        saved = saved + 1
      end)
      memoryd.on('x/newer', function() end) -- as context/changed is to a daemon before it
      T.wait('a subscription without x/newer', function()
        local events = memoryd.client().events
        return type(events) == 'table' and vim.tbl_contains(events, 'memory/saved')
          and not vim.tbl_contains(events, 'x/newer')
      end)
      T.call('memory.write', {
        cwd = repo,
        type = 'project',
        name = 'Told after an unknown event',
        description = 'the subscription kept the known events',
        body = 'kept',
      })
      T.wait('memory/saved', function()
        return saved > 0
      end)
      T.eq(nil, T.message_matching('could not subscribe'), 'a warning')
    end,
  },
})
